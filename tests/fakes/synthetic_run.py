"""A synthetic run folder written as a real run writes it: requests.csv from RequestRecord rows, summary,
windows, telemetry, manifest and run.json, plus an archived folder a reader must skip."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from benchlib.analysis import task_stats
from benchlib.config.tasks import load_tasks
from benchlib.records.rows import RequestLog, RequestRecord

SYN_HOST, SYN_MODEL = "synthetic-host", "tiny-model"
SYN_SERVER = "fake-server"
SYN_SYSTEM = f"{SYN_MODEL} · {SYN_SERVER} · {SYN_HOST}"  # how every view names a deployment: model · server · host

# Per-task decode tok/s of the synthetic run (three measured requests each) -> exact means to check.
TEXT_TPS = {"basic_qa": [30.0, 40.0, 50.0], "reasoning": [20.0, 22.0, 24.0]}


def _record(suite: str, modality: str, task: str, variant: str, repeat: int, tps: float | None, start_ns: int,
            warmup: bool = False, status: str = "ok", passed: bool | None = True) -> RequestRecord:
    ok = status == "ok"
    return RequestRecord(
        run_id="synthetic01", host=SYN_HOST, model=SYN_MODEL, server_kind="openai", server_software=SYN_SERVER,
        suite=suite, modality=modality, task=task, variant=variant, repeat=repeat, is_warmup=warmup,
        request_key=f"{suite}/{task}/{variant}/r{repeat}/c1" + ("/warmup" if warmup else ""),
        prompt=f"(ref {repeat:08d})\nprompt for {task}", max_tokens=64, status=status,
        error_kind="" if ok else "modality_not_supported",
        started_at_unix=1_700_000_000.0 + start_ns / 1e9, start_ns=start_ns if ok else 0,
        ttft_s=0.05 if ok else None, ttfo_s=0.05 if ok else None, e2e_s=1.0 if ok else None,
        decode_tps=tps, prompt_tokens=20 if ok else None, completion_tokens=int(tps or 0) if ok else None,
        token_source="usage" if ok else "", finish_reason="stop" if ok else "",
        response_text=f"answer to {task}" if ok else "", checker="contains" if ok and not warmup else "",
        passed=(passed if ok and not warmup else None), score=(1.0 if passed else 0.0) if ok and not warmup else None,
        check_detail="found the expected answer" if passed else "expected answer missing")


def _variant(task: str) -> str:
    return load_tasks()[task].variants[0].id


def write_synthetic_run(root: Path, bandwidth: float | None = None, with_media: bool = True,
                        recorded_bandwidth: dict | None = None, variant: str = "", speed: float = 1.0,
                        text_passed: bool | None = None, model_file: Path | None = None) -> Path:
    """outputs/<host>/<model>/<suite>/ with requests.csv (RequestRecord rows), summary.csv, windows.csv,
    telemetry.csv, manifest.json and run.json, as a run writes them; plus an archived folder to be skipped.
    variant: another deployment of the model (a study's grid point, its own folder <model>+<variant>), decoding at
    `speed` × the base rates, every text answer passed (or failed) when text_passed is given; model_file: the
    model file the manifest records the server as serving (as the embedded server's manifest does)."""
    params = {
        "host": {"name": SYN_HOST, "hardware": "synthetic test box", "accelerator": "",
                 "memory_bandwidth_gbs": bandwidth, "power_envelope_w": None},
        "server": {"kind": "openai", "software": SYN_SERVER, "model": SYN_MODEL, "variant": variant,
                   "modalities": ["text", "vision", "audio", "video"] if with_media else ["text"],
                   "context_window": 4096, "quantization": "q4_k_m", "active_params_b": 0.5, "total_params_b": 0.5,
                   "bytes_per_param": 0.5},
        "run": {"max_error_rate": 0.2, "thinking": False},
    }
    suites: dict[str, list[RequestRecord]] = {"text": []}
    t = 10_000_000_000
    suites["text"].append(_record("text", "text", "basic_qa", _variant("basic_qa"), 0, 99.0, t, warmup=True))
    for task, speeds in TEXT_TPS.items():
        for repeat, tps in enumerate(speeds):
            t += 1_500_000_000
            passed = repeat != 1 if text_passed is None else text_passed
            suites["text"].append(_record("text", "text", task, _variant(task), repeat, tps * speed, t, passed=passed))
    if with_media:
        t += 2_000_000_000
        suites["vision"] = [_record("vision", "vision", "image_description", _variant("image_description"), 0,
                                    25.0, t)]
        t += 2_000_000_000
        suites["audio"] = [_record("audio", "audio", "transcription", _variant("transcription"), 0, 15.0, t)]
        t += 2_000_000_000
        suites["video"] = [_record("video", "video", "video_analysis", _variant("video_analysis"), 0, 0.0, t,
                                   status="unsupported")]
        suites["video"][0].decode_tps = None
    base = root / SYN_HOST / (f"{SYN_MODEL}+{variant}" if variant else SYN_MODEL)
    served = {"model": {"path": str(model_file), "size_bytes": model_file.stat().st_size}} if model_file else {}
    for suite, records in suites.items():
        folder = base / suite
        folder.mkdir(parents=True, exist_ok=True)
        RequestLog(folder / "requests.csv").append_many(records)
        frame = RequestLog(folder / "requests.csv").read()
        task_stats.summarize_requests(frame, max_error_rate=0.2).to_csv(folder / "summary.csv", index=False)
        starts = [r.start_ns for r in records if r.start_ns] or [t]
        windows = pd.DataFrame([
            {"window": "idle", "kind": "idle", "t_start_ns": 0, "t_end_ns": 1_000_000_000, "duration_s": 1.0,
             "energy_reason": "synthetic: no energy sensor"},
            *({"window": task, "kind": "task", "t_start_ns": min(r.start_ns for r in records if r.task == task) - 10,
               "t_end_ns": max(r.start_ns for r in records if r.task == task) + 1_100_000_000,
               "duration_s": 1.0, "mem_peak_bytes": 1.5e9, "mem_source": "server_rss",
               "energy_reason": "synthetic: no energy sensor"}
              for task in dict.fromkeys(r.task for r in records if r.start_ns)),
        ])
        windows.to_csv(folder / "windows.csv", index=False)
        ticks = range(0, max(starts) + 3_000_000_000, 250_000_000)
        pd.DataFrame({"t_ns": list(ticks), "t_unix": [1.7e9 + x / 1e9 for x in ticks],
                      "cpu_percent": [50.0 + (i % 7) for i, _ in enumerate(ticks)],
                      "server_rss_bytes": [1.0e9 + i * 1e6 for i, _ in enumerate(ticks)]}).to_csv(
            folder / "telemetry.csv", index=False)
        (folder / "manifest.json").write_text(json.dumps({"run_id": "synthetic01", "suite": suite, "params": params,
                                                          "cpu": "Synthetic CPU", "packages": {}, "server": served,
                                                          **({"bandwidth": recorded_bandwidth}
                                                             if recorded_bandwidth else {})}))
        (folder / "run.json").write_text(json.dumps({"run_id": "synthetic01", "salt": "abcd"}))
    archived = base / "text.archived-20260101-000000"  # an old run: must never be read
    archived.mkdir(parents=True, exist_ok=True)
    old = _record("text", "text", "basic_qa", _variant("basic_qa"), 0, 5000.0, 1)
    RequestLog(archived / "requests.csv").append(old)
    return root


def write_graded(root: Path, passed: list[bool], variant: str = "", task: str = "arithmetic",
                 plan: list[dict] | None = None, cut: int = 0, seed: str = "s1") -> Path:
    """The quality suite of a synthetic deployment (variant as in write_synthetic_run): one graded item per entry of
    `passed` (the set's first items, scored by its graded checker), then `cut` items whose answers the server cut
    (failed, stream_cut), and `plan` as its quality_plan.csv's looks. Items are named '<seed>-0000', …: seed
    's2024' names the shipped set's own items (their expected answers in its task file)."""
    records = []
    for index, ok in enumerate(passed):
        record = _record("quality", "text", task, f"{seed}-{index:04d}", index, 20.0, 90_000_000_000 + index * 10**9,
                         passed=ok)
        record.checker = "reasoning_gym"
        records.append(record)
    for index in range(len(passed), len(passed) + cut):
        record = _record("quality", "text", task, f"{seed}-{index:04d}", index, None, 0, status="failed", passed=None)
        record.error_kind, record.error_message = "stream_cut", "[DONE] after 1 chunks but no finish_reason"
        records.append(record)
    folder = root / SYN_HOST / (f"{SYN_MODEL}+{variant}" if variant else SYN_MODEL) / "quality"
    folder.mkdir(parents=True, exist_ok=True)
    RequestLog(folder / "requests.csv").append_many(records)
    frame = RequestLog(folder / "requests.csv").read()
    task_stats.summarize_requests(frame, max_error_rate=0.2).to_csv(folder / "summary.csv", index=False)
    text_manifest = json.loads((folder.parent / "text" / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**text_manifest, "suite": "quality"}))
    (folder / "run.json").write_text(json.dumps({"run_id": "synthetic01", "salt": "abcd"}))
    if plan:
        pd.DataFrame(plan).to_csv(folder / "quality_plan.csv", index=False)
    return folder
