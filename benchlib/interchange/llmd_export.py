"""A run folder as llm-d's Benchmark Report v0.2 (llm-d-benchmark's harness-neutral format), validated against the
schema vendored under interchange/data/llm-d/ (its NOTICE.md says from where, and the license).

What goes where: `run` — the run id, the first send and last answer in ISO-8601, the deployment's name;
`scenario.stack` — the inference engine (server software and version, model, the host's accelerator or CPU) and a
`generic` component "frontier-bench" that carries what the schema has no field for: energy (joules, tokens per joule,
its boundary, or why there is none) and quality (each scored task's accuracy with its interval), and, for a run
imported from another tool, that tool; `scenario.load` — the tool that sent the requests, its concurrency and prompt
lengths; `results.request_performance.aggregate` — requests, TTFT, TPOT, ITL (every inter-token gap pooled),
end-to-end latency, per-request decode rate as `output_token_rate`, and the run's request rate;
`results.observability` — average power (W) where a sensor measured it.

Statistics come from the ok, non-warm-up rows of requests.csv; an imported run that has only another tool's
aggregates (no requests.csv) gives what its summary.csv holds. A percentile is given only from as many samples as
the summary would show it from (benchlib.analysis.stats).

Nothing impossible is called validated: the rows (and an aggregates-only summary's figures and times) are held to
the one plausibility rule (benchlib.records.plausible) first, and a value no request can have — a TTFT of −5 s, a
start time of 1e300 — is one line, nothing written. What leaves the machine is `secrets.shareable`: the secrets
rule over every string (a launch command's keys, a URL's user info and query) and no absolute local path (a path
keeps its last part: the tool's tokenizer folder, our model file, the imported files)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import jsonschema
import numpy as np
import pandas as pd

from benchlib.analysis import stats, task_stats
from benchlib.config.identity import Deployment
from benchlib.records import plausible
from benchlib.records.rows import STATUS_FAILED, STATUS_OK, write_atomic
from benchlib.records.run_folder import MANIFEST_JSON, RUN_JSON, RunFolder
from benchlib.records.schema import json_value, number
from benchlib.records.secrets import shareable

SCHEMA_PATH = Path(__file__).parent / "data" / "llm-d" / "br_v0_2_json_schema.json"
REPORT_NAME = "benchmark_report_v0.2.json"
FORMATS = ("llm-d-report",)
# our metric -> (the report's latency field, its unit)
LATENCY = {"ttft_s": ("time_to_first_token", "s"), "tpot_s": ("time_per_output_token", "s/token"),
           "itl_s": ("inter_token_latency", "s/token"), "e2e_s": ("request_latency", "s")}


class ExportError(ValueError):
    """The folder is not a run folder, or the report would not validate: one line, nothing written."""


def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def validate(report: Mapping[str, Any]) -> None:
    """Raise ExportError naming the first place the report breaks the v0.2 schema."""
    validator = jsonschema.Draft202012Validator(schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(report))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top)"
        raise ExportError(f"the report breaks llm-d's v0.2 schema at {where}: {error.message[:200]}")


def statistics(values: Iterable[float], units: str) -> dict[str, Any] | None:
    """The schema's Statistics of a sample (None when it is empty)."""
    data = np.asarray([v for v in (number(x) for x in values) if math.isfinite(v)], dtype=float)
    if not len(data):
        return None
    out: dict[str, Any] = {"units": units, "mean": float(data.mean()), "min": float(data.min()),
                           "max": float(data.max()), "p50": float(np.median(data))}
    if len(data) > 1:
        out["stddev"] = float(data.std(ddof=1))
    for name, q in (("p90", 0.90), ("p95", 0.95), ("p99", 0.99)):
        value = stats.percentile(data, q)
        if math.isfinite(value):
            out[name] = value
    return out


def _summary_statistics(row: Mapping[str, Any], metric: str, units: str) -> dict[str, Any] | None:
    """Statistics from a summary row's <metric>_mean/_sd/_p50/_p90/_p99 (an aggregates-only import)."""
    mean = number(row.get(f"{metric}_mean"))
    if not math.isfinite(mean):
        return None
    out: dict[str, Any] = {"units": units, "mean": mean}
    for ours, theirs in (("sd", "stddev"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99")):
        value = number(row.get(f"{metric}_{ours}"))
        if math.isfinite(value):
            out[theirs] = value
    return out


def _whole(value: Any) -> int:
    count = number(value)
    return int(count) if math.isfinite(count) and count >= 0 else 0


def _iso(unix: float) -> str:
    return _dt.datetime.fromtimestamp(unix, tz=_dt.timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _clean(value: Any) -> Any:
    """JSON the schema takes: NaN and infinities become null, and a null field is left out (each is optional)."""
    if isinstance(value, dict):
        cleaned = {k: _clean(v) for k, v in value.items()}
        return {k: v for k, v in cleaned.items() if v is not None}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def _energy(summary: pd.DataFrame, windows: pd.DataFrame, tokens: float) -> dict[str, Any]:
    """The run's task-window energy (J), tokens per joule and boundary, or the reason there is none."""
    task = windows[windows["kind"] == "task"] if len(windows) and "kind" in windows else windows
    energy = pd.to_numeric(task.get("energy_j", pd.Series(dtype=float)), errors="coerce").dropna()
    if not len(energy):
        reasons = sorted({str(r) for r in task.get("energy_reason", pd.Series(dtype=object)).dropna() if str(r)})
        return {"measured": False, "reason": "; ".join(reasons) or "no telemetry windows in this run folder"}
    boundary = sorted({str(b) for b in task.get("energy_boundary", pd.Series(dtype=object)).dropna() if str(b)})
    joules = float(energy.sum())
    return {"measured": True, "energy_j": joules, "boundary": " | ".join(boundary),
            "tokens_per_joule": tokens / joules if joules > 0 and math.isfinite(tokens) else None,
            "idle_subtracted": False}


def _quality(summary: pd.DataFrame) -> list[dict[str, Any]]:
    scored = summary[pd.to_numeric(summary.get("n_scored", pd.Series(0, index=summary.index)),
                                   errors="coerce").fillna(0) > 0] if len(summary) else summary
    return [{"task": str(r["task"]), "checker": str(r.get("checker", "") or ""), "n_scored": _whole(r["n_scored"]),
             "n_passed": _whole(r["n_passed"]), "accuracy": number(r["accuracy"]),
             "accuracy_lo": number(r["accuracy_lo"]), "accuracy_hi": number(r["accuracy_hi"])}
            for r in scored.to_dict("records")]


def _wall_starts(rows: pd.DataFrame) -> pd.Series:
    """Each row's wall-clock start; NaN where none was recorded (0: an import from a tool whose file has none)."""
    starts = pd.to_numeric(rows["started_at_unix"], errors="coerce")
    return starts.where(starts > 0)


def _request_part(ok: pd.DataFrame, measured: pd.DataFrame) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(requests, latency, throughput) of the report from the request rows."""
    requests = {"total": int(len(measured)), "failures": int((measured["status"] == STATUS_FAILED).sum()),
                "input_length": statistics(ok["prompt_tokens"], "count"),
                "output_length": statistics(ok["completion_tokens"], "count")}
    latency = {field: statistics(ok[metric] if metric != "itl_s" else
                                 [v for cell in ok["itl_s"] for v in json_value(cell)], units)
               for metric, (field, units) in LATENCY.items()}
    starts = _wall_starts(measured)
    ends = starts + pd.to_numeric(measured["e2e_s"], errors="coerce")
    span = float(ends.max() - starts.min()) if starts.notna().any() and ends.notna().any() else math.nan
    throughput = {"output_token_rate": statistics(ok["decode_tps"], "tokens/s"),
                  "request_rate": ({"units": "queries/s", "mean": len(ok) / span}
                                   if math.isfinite(span) and span > 0 else None)}
    return requests, latency, throughput


def build_report(folder: Path) -> dict[str, Any]:
    """The v0.2 report of one suite folder (outputs/<host>/<model>/<suite>/), not yet validated."""
    folder = Path(folder)
    run = RunFolder(folder)
    manifest, marker = run.manifest, run.marker
    if not marker and not manifest:
        raise ExportError(f"{folder}: not a run folder (no {RUN_JSON} or {MANIFEST_JSON})")
    params = run.params
    host = str((params.get("host") or {}).get("name") or folder.parent.parent.name)
    server = params.get("server") or {}
    run_id = str(run.run_id or manifest.get("run_id") or "")
    rows = run.requests() if run.has_requests() else pd.DataFrame()
    windows = run.windows() if run.windows_path.is_file() else pd.DataFrame()
    if len(rows):
        rows = rows[rows["run_id"] == run_id] if run_id and (rows["run_id"] == run_id).any() else rows
        plausible.check_rows(rows, str(run.requests_path), ExportError)
        measured = task_stats.measured(rows)
        ok = measured[measured["status"] == STATUS_OK]
        summary = task_stats.summarize_requests(rows, max_error_rate=(params.get("run") or {}).get("max_error_rate"))
        summary = task_stats.join_windows(summary, windows) if len(windows) else summary
        requests, latency, throughput = _request_part(ok, measured)
        starts = _wall_starts(measured)
        ends = starts + pd.to_numeric(measured["e2e_s"], errors="coerce")
        start, end = (float(starts.min()), float(ends.max())) if starts.notna().any() else (math.nan, math.nan)
        tokens = float(pd.to_numeric(ok["completion_tokens"], errors="coerce").sum())
        concurrency = int(pd.to_numeric(measured["concurrency"], errors="coerce").max()) if len(measured) else 1
        prompt_mean = number(pd.to_numeric(ok["prompt_tokens"], errors="coerce").mean())
    else:
        summary = run.summary()
        if summary.empty:
            raise ExportError(f"{folder}: neither requests.csv nor summary.csv holds a result")
        row = summary.iloc[0].to_dict()
        for metric in (*LATENCY, "decode_tps"):
            for stat in ("mean", "sd", "p50", "p90", "p99"):
                value = number(row.get(f"{metric}_{stat}"))
                if not math.isnan(value):
                    plausible.check_value(metric, value, f"{run.summary_path}: {stat}", ExportError)
        requests = {"total": _whole(row.get("n_requests")), "failures": _whole(row.get("n_failed"))}
        latency = {field: _summary_statistics(row, metric, units) for metric, (field, units) in LATENCY.items()}
        throughput = {"output_token_rate": _summary_statistics(row, "decode_tps", "tokens/s")}
        start, end = number(manifest.get("started_unix")), number(manifest.get("finished_unix"))
        for stamp in (start, end):
            if not math.isnan(stamp):
                plausible.check_value("started_at_unix", stamp, f"{run.manifest_path}: the run's start or end",
                                      ExportError)
        tokens, concurrency, prompt_mean = number(row.get("completion_tokens_sum")), 1, math.nan
    measured_by = manifest.get("measured_by") or {}
    tool = str(measured_by.get("tool") or "frontier-bench")
    tool_version = str(measured_by.get("version") or (manifest.get("code_version") if tool == "frontier-bench" else "")
                       or "unknown")
    name = Deployment.from_recorded(params, host, folder.parent.name).name
    version = (manifest.get("packages") or {}).get(str(server.get("software") or "")) or \
        (manifest.get("server") or {}).get("version") or "unknown"
    host_p = params.get("host") or {}
    accelerator = str(host_p.get("accelerator") or "")
    energy = _energy(summary, windows, tokens)
    cfg = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:32]
    power = pd.to_numeric(windows[windows["kind"] == "task"].get("avg_power_w", pd.Series(dtype=float))
                          if len(windows) and "kind" in windows else pd.Series(dtype=float), errors="coerce")
    report = {
        "version": "0.2",
        "run": {"uid": hashlib.sha256(f"{run_id}/{folder.name}".encode()).hexdigest()[:32], "eid": run_id or None,
                "time": {"start": _iso(start), "end": _iso(end), "duration": f"PT{end - start:.3f}S"}
                if math.isfinite(start) and math.isfinite(end) else None,
                "description": f"{name} [{folder.name}]"
                               + (f", measured by {tool}" if tool != "frontier-bench" else "")},
        "scenario": {
            "stack": [
                {"metadata": {"label": "server-0", "cfg_id": cfg, "description": name},
                 "standardized": {"kind": "inference_engine", "tool": str(server.get("software") or server.get("kind")
                                                                           or "unknown"),
                                  "tool_version": str(version if not isinstance(version, dict) else
                                                      version.get("version", "unknown")),
                                  "role": "replica", "replicas": 1,
                                  "model": {"name": str(server.get("model") or folder.parent.name)},
                                  "accelerator": {"model": accelerator or f"CPU ({host_p.get('hardware') or host})",
                                                  "count": 1 if accelerator else 0, "parallelism": {}}},
                 "native": {"config": {"server": server, "host": host_p}}},
                {"metadata": {"label": "frontier-bench", "cfg_id": cfg,
                              "description": "Frontier Bench's record of this run: energy and quality, which the "
                                             "v0.2 schema has no fields for"},
                 "standardized": {"kind": "generic", "tool": "frontier-bench",
                                  "tool_version": str(manifest.get("code_version") or "unknown"),
                                  "run_id": run_id, "suite": folder.name, "host": host, "deployment": name,
                                  "energy": energy, "quality": _quality(summary),
                                  "measured_by": measured_by or None,
                                  "cannot_give": manifest.get("cannot_give") or None},
                 "native": {"config": {"git_commit": manifest.get("git_commit"),
                                       "thresholds": params.get("thresholds")}}},
            ],
            "load": {"metadata": {"cfg_id": cfg, "description": f"{folder.name} suite"},
                     "standardized": {"tool": tool, "tool_version": tool_version,
                                      "source": "unknown" if tool != "frontier-bench" else "sampled",
                                      "input_seq_len": {"distribution": "other",
                                                        "value": prompt_mean if math.isfinite(prompt_mean) else 0},
                                      "concurrency": max(concurrency, 1)},
                     "native": {"args": {"command": measured_by.get("command")} if measured_by.get("command") else None,
                                "config": params.get("run")}},
        },
        "results": {
            "request_performance": {"aggregate": {"requests": requests, "latency": latency, "throughput": throughput}},
            "observability": {"components": [{"component_label": "server-0", "aggregate": {
                "power_consumption": statistics(power.dropna(), "Watts")}}]} if power.notna().any() else None,
        },
    }
    return shareable(_clean(report))


def export(folder: Path, out: Path | None = None) -> Path:
    """Build, validate and write (atomically) the report; returns where it went (default: inside the folder)."""
    report = build_report(folder)
    validate(report)
    target = Path(out) if out else Path(folder) / REPORT_NAME
    write_atomic(target, json.dumps(report, indent=2, allow_nan=False))
    return target
