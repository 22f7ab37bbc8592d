"""Reading what the paper is built from: our runs under one or several results roots — local folders and
results-store URLs (benchlib.records.store), so one paper covers many hosts (Runs: requests, summaries, windows, sweeps
and manifests of every suite folder) — and the published reference sets. A run found under two roots (same
run id, host, model and suite) is counted once, and reported."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from benchlib.analysis import bandwidth_law, roofline, task_stats, weights
from benchlib.analysis.plan import read_plans
from benchlib.config.graded_run import reduced_note
from benchlib.config.identity import Deployment, short_labels
from benchlib.config.latency_plan import EQUIVALENCE_MARGIN
from benchlib.config.params import NOTEBOOK_ORDER, RunSettings
from benchlib.config.paths import cache_dir, outputs_root
from benchlib.measure.selfcheck import calibration
from benchlib.measure.telemetry import TELEMETRY_CSV
from benchlib.paper.settings import NO_RUNS, REFERENCE_SETS, THIS_RUN, seed_prefix, shown_path
from benchlib.published import reference
from benchlib.records import store
from benchlib.records.run_folder import WINDOWS_CSV, RunFolder, suite_folders
from benchlib.records.schema import number, read_csv
from benchlib.records.secrets import redact_url
from benchlib.suites.latency_looks import LATENCY_PLAN_CSV
from benchlib.suites.quality_looks import QUALITY_PLAN_CSV, compare_plans


def load_reference_sets(sets: Sequence[str] | None = None) -> pd.DataFrame:
    """The reference rows of the named sets ('paper_000', ... or seed prefixes '000'), numbers as floats."""
    prefixes = [seed_prefix(s) for s in (sets if sets is not None else REFERENCE_SETS)]
    return reference.load_reference(prefixes)


def seed_rows(ref: pd.DataFrame, prefix: str) -> pd.DataFrame:
    return ref[ref["source"].str.startswith(prefix)] if len(ref) else ref


def source_label(source: str) -> str:
    """'000_341285de21da4f3a.txt' -> 'seed 000'; 'this run' stays."""
    match = re.match(r"^(\d{3})_", str(source))
    return f"seed {match.group(1)}" if match else str(source)


def column_label(system: str, source: str, server: str = "") -> str:
    """A deployment as a wide table's column: its name, then the server where known and not already named
    ('model @ host · server [source]'; ours: 'model · server · settings · host [this run]')."""
    software = server.split(" ")[0] if server else ""
    named = bool(software) and f" · {software} · " in f" · {system} · "
    return f"{system}{f' · {server}' if server and not named else ''} [{source_label(source)}]"


@dataclass
class Runs:
    """Every run under an outputs root: per-task summaries, trimmed request rows, windows, one meta row per
    host × model (every frame's `system` the deployment's name, config.identity's key), the load sweeps and quantization ladders (outputs/<host>/ladder.json) when present."""

    root: Path
    summary: pd.DataFrame
    requests: pd.DataFrame
    windows: pd.DataFrame
    meta: pd.DataFrame
    load: dict[str, pd.DataFrame] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    ladders: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=bandwidth_law.LADDER_COLUMNS))
    quality_plans: pd.DataFrame = field(default_factory=pd.DataFrame)  # each quality_plan.csv's looks (host, model)
    latency_plans: pd.DataFrame = field(default_factory=pd.DataFrame)  # each latency_plan.csv's looks (host, model)
    # each compare plan's last look, system and against by the deployments' names (quality_looks.compare_plans)
    compare_plans: pd.DataFrame = field(default_factory=pd.DataFrame)
    plan_records: list[dict] = field(default_factory=list)  # outputs/<host>/plan.json's records (plan.read_plans)

    @property
    def empty(self) -> bool:
        return self.meta.empty

    @property
    def systems(self) -> list[str]:
        return self.meta["system"].tolist() if len(self.meta) else []

    @property
    def labels(self) -> dict[str, str]:
        """Each deployment's name → its short label among ours (config.identity's SHORT LABEL RULE): how the
        report's first screen, its summary and its figures name it, beside a key to the full names."""
        return short_labels(self.systems)

    def name(self, host: str, model: str) -> str:
        """The name (config.identity: the deployment's key) of our deployment `model` (model[ [variant]]) on
        `host`, as every frame's `system` column holds it."""
        hit = self.meta[(self.meta["host"] == host) & (self.meta["model"] == model)] if len(self.meta) else self.meta
        return str(hit["system"].iloc[0]) if len(hit) else Deployment(model, host=host).name


META_COLUMNS = ["host", "model", "system", "settings", "source", "hardware", "accelerator", "cpu", "memory_gb",
                "memory_bandwidth_gbs", "bandwidth_source", "power_envelope_w", "unified_memory", "server_kind",
                "server_api", "server_software", "server_version", "quantization", "active_params_b", "total_params_b",
                "bytes_per_param",
                "bytes_per_param_source", "weights_read_gb", "weights_file",
                "context_window", "modalities", "thinking", "weights", "suites", "run_ids", "n_requests", "n_ok", "n_failed",
                "n_unsupported", "idle_power_w", "energy_reason", "mem_source", "git_commit", "path", "thresholds",
                "client_ttft_err_p99_ms", "client_itl_err_p99_ms", "client_error", "graded_reduced", "max_error_rate",
                "equivalence_margin"]


REQUEST_KEEP = ["host", "model", "system", "suite", "modality", "task", "variant", "repeat", "status", "error_kind", "is_warmup",
                "checker", "decode_tps", "ttft_s", "e2e_s", "completion_tokens", "passed", "concurrency", "prompt_tokens",
                "prefill_tps",
                "request_kind", "audio_s", "rtf", "response_text"]  # the audio table's transcripts


def suite_dirs(root: Path) -> tuple[list[Path], list[str]]:
    """outputs/<host>/<model>/<suite>/ folders holding results, and the archived ones skipped."""
    found, skipped = suite_folders(root)
    return [path for path in found if RunFolder(path).has_requests() or RunFolder(path).has_summary()
            or path.name == "load"], skipped


def _read_csv(path: Path) -> pd.DataFrame:
    """A per-suite CSV (summary, sweep levels): typed where declared, numbers inferred elsewhere."""
    try:
        return read_csv(path, label=str(path))
    except OSError:
        return pd.DataFrame()


def _suite_summary(path: Path, params: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(summary, trimmed requests, windows) of one suite folder, recomputed from requests.csv when it exists."""
    folder = RunFolder(path)
    windows = _read_csv(folder.windows_path)
    run_id = folder.run_id
    requests = folder.requests() if folder.has_requests() else pd.DataFrame()
    if len(requests) and run_id and "run_id" in requests and (requests["run_id"] == run_id).any():
        requests = requests[requests["run_id"] == run_id]
    if len(requests):
        max_error = (params.get("run") or {}).get("max_error_rate")
        summary = task_stats.summarize_requests(requests, max_error_rate=max_error)
        summary = task_stats.join_windows(summary, windows) if len(windows) else summary
    else:
        summary = _read_csv(folder.summary_path)
    if len(summary) and len(windows) and "energy_reason" in windows and "window" in windows:
        task_windows = windows[windows.get("kind", "task") == "task"] if "kind" in windows else windows
        reasons = (task_windows.dropna(subset=["energy_reason"]).groupby("window")["energy_reason"]
                   .agg(lambda s: "; ".join(sorted(set(map(str, s))))))
        summary["energy_reason"] = summary["task"].map(reasons)
    keep = [c for c in REQUEST_KEEP if c in requests]
    return summary, (requests[keep].copy() if len(requests) else pd.DataFrame(columns=REQUEST_KEEP)), windows


def _local_roots(roots: str | Path | Sequence[str | Path] | None) -> list[tuple[str, Path]]:
    """(as given, local folder) per root: a store URL is brought into its local copy first."""
    if roots is None or (isinstance(roots, (str, Path)) and not str(roots)):
        roots = [outputs_root()]
    elif isinstance(roots, (str, Path)):
        roots = [roots]
    return [(redact_url(str(r)), store.materialize(str(r))) if store.is_url(r) else (str(r), Path(r))
            for r in roots]


def load_runs(roots: str | Path | Sequence[str | Path] | None = None) -> Runs:
    """Load every run under one or several roots (default outputs_root()): folders or store URLs. An empty or
    missing root gives empty frames; a suite folder whose run (run id, host, model, suite) was already read
    from an earlier root is skipped and listed in `duplicates`."""
    local = _local_roots(roots)
    dirs, skipped, duplicates, seen = [], [], [], {}
    for shown, root in local:
        found, archived = suite_dirs(root)
        skipped += archived
        for path in found:
            key = (RunFolder(path).run_id or str(path), *path.relative_to(root).parts)
            if key in seen:
                duplicates.append(f"{'/'.join(key[1:])} (run {key[0]}) in {shown} and {seen[key]}")
                continue
            seen[key] = shown
            dirs.append(path)
    manifests = {path: RunFolder(path).manifest for path in dirs}
    names: dict[tuple[str, str], str] = {}
    for path in sorted(dirs, key=lambda p: not manifests[p]):  # a folder with a manifest names its deployment
        params = manifests[path].get("params") or {}
        host, model = _host_model(path, params)
        names.setdefault((host, model), Deployment.from_recorded(params, host, model).name)

    def name_of(path: Path) -> str:
        params = (manifests.get(path) or RunFolder(path).manifest).get("params") or {}
        host, model = _host_model(path, params)
        return names.get((host, model)) or Deployment.from_recorded(params, host, model).name

    summaries, requests, windows, load = [], [], [], {"concurrency": [], "context": [], "rate": []}
    plans, latency = [], []
    per_system: dict[tuple[str, str], dict[str, Any]] = {}
    for path in dirs:
        manifest = manifests[path]
        params = manifest.get("params") or {}
        host, model = _host_model(path, params)
        ident = {"host": host, "model": model, "system": names[(host, model)]}
        if path.name == "load":  # sweeps only: concurrency > 1 and long prompts are not per-task speed rows
            for kind in ("concurrency", "context", "rate"):
                frame = _read_csv(path / f"sweep_{kind}.csv")
                if len(frame):
                    load[kind].append(frame.assign(**ident))
            continue
        summary, reqs, wins = _suite_summary(path, params)
        looks = _read_csv(path / QUALITY_PLAN_CSV)  # a sized quality plan's looks
        if len(looks):
            plans.append(looks.assign(**ident))
        sized = _read_csv(path / LATENCY_PLAN_CSV)  # a sized latency plan's looks
        if len(sized):
            latency.append(sized.assign(**ident, suite=path.name))
        if summary.empty and reqs.empty:
            continue
        summary, reqs = (frame.copy().assign(**ident, suite=frame["suite"] if "suite" in frame else path.name)
                         if len(frame) else frame for frame in (summary, reqs))  # copy: consolidated, fast to add to
        summaries.append(summary)
        requests.append(reqs)
        if len(wins):
            windows.append(wins.assign(**ident, suite=path.name))
        entry = per_system.setdefault((host, model), {"manifest": manifest, "suites": [], "paths": set(),
                                                      "run_ids": set(), "windows": []})
        if manifest and not entry["manifest"]:
            entry["manifest"] = manifest
        entry["suites"].append(path.name)
        entry["paths"].add(str(path.parent))
        if manifest.get("run_id"):
            entry["run_ids"].add(str(manifest["run_id"]))
        if isinstance(manifest.get("graded"), dict):  # the quality suite's plan of its graded sets
            entry["graded"] = manifest["graded"]
        if len(wins):
            entry["windows"].append(wins)
    summary = pd.concat([s for s in summaries if len(s)], ignore_index=True) if any(len(s) for s in summaries) \
        else pd.DataFrame(columns=["host", "model", "system", "suite", "modality", "task"] + task_stats.SUMMARY_COLUMNS)
    reqs = pd.concat([r for r in requests if len(r)], ignore_index=True) if any(len(r) for r in requests) \
        else pd.DataFrame(columns=REQUEST_KEEP)
    wins = pd.concat(windows, ignore_index=True) if windows else pd.DataFrame()
    meta = pd.DataFrame([_meta_row(host, model, names[(host, model)], entry, summary)
                         for (host, model), entry in per_system.items()],
                        columns=META_COLUMNS)
    ladders = [bandwidth_law.read_ladders(root) for _, root in local]
    found = [frame for frame in ladders if len(frame)]
    return Runs(root=local[0][1], summary=summary, requests=reqs, windows=wins, meta=meta,
                load={k: pd.concat(v, ignore_index=True) for k, v in load.items() if v}, skipped=skipped,
                ladders=pd.concat(found, ignore_index=True) if found else ladders[0],
                roots=[shown for shown, _ in local], duplicates=duplicates,
                quality_plans=pd.concat(plans, ignore_index=True) if plans else pd.DataFrame(),
                latency_plans=pd.concat(latency, ignore_index=True) if latency else pd.DataFrame(),
                compare_plans=compare_plans(dirs, name_of),
                plan_records=[p for _, root in local for p in read_plans(root)])


def _host_model(path: Path, params: Mapping[str, Any]) -> tuple[str, str]:
    """(host, model) of a suite folder as the paper keys it: params host.name and server.model, a study's grid
    point as 'model [variant]' (its own deployment beside the same model's others)."""
    host_p, server_p = params.get("host") or {}, params.get("server") or {}
    host = str(host_p.get("name") or path.parent.parent.name)
    model = str(server_p.get("model") or path.parent.name)
    return host, f"{model} [{server_p['variant']}]" if server_p.get("variant") else model






def _meta_row(host: str, model: str, name: str, entry: Mapping[str, Any], summary: pd.DataFrame) -> dict[str, Any]:
    manifest = entry["manifest"] or {}
    params = manifest.get("params") or {}
    host_p, server_p, run_p = params.get("host") or {}, params.get("server") or {}, params.get("run") or {}
    software = str(server_p.get("software") or server_p.get("kind") or "")
    packages = manifest.get("packages") or {}
    server_info = manifest.get("server") or {}
    version = packages.get(software) or ""
    if not version and isinstance(server_info.get("version"), dict):
        version = str(server_info["version"].get("version", ""))
    elif not version and server_info.get("version"):  # what the server itself answered (vLLM /version)
        version = str(server_info["version"])
    mine = summary[(summary["host"] == host) & (summary["model"] == model)] if len(summary) else summary
    wins = pd.concat(entry["windows"], ignore_index=True) if entry["windows"] else pd.DataFrame()
    idle = wins[wins["kind"] == "idle"] if len(wins) and "kind" in wins else pd.DataFrame()
    idle_power = pd.to_numeric(idle.get("avg_power_w", pd.Series(dtype=float)), errors="coerce").dropna()
    reasons = sorted({str(r) for r in wins.get("energy_reason", pd.Series(dtype=object)).dropna() if str(r)}) \
        if len(wins) else []
    energy = pd.to_numeric(wins.get("energy_j", pd.Series(dtype=float)), errors="coerce").dropna() if len(wins) \
        else pd.Series(dtype=float)
    mem_sources = sorted({str(s) for s in wins.get("mem_source", pd.Series(dtype=object)).dropna() if str(s)}) \
        if len(wins) else []

    def count(column: str) -> int:
        return int(pd.to_numeric(mine.get(column, pd.Series(dtype=float)), errors="coerce").fillna(0).sum())

    return {
        "host": host, "model": model, "system": name,
        "settings": str(server_p.get("variant") or ""), "source": THIS_RUN,
        "hardware": str(host_p.get("hardware") or ""), "accelerator": str(host_p.get("accelerator") or ""),
        "cpu": str(manifest.get("cpu") or ""), "memory_gb": number(host_p.get("memory_gb")),
        "power_envelope_w": number(host_p.get("power_envelope_w")), "unified_memory": bool(host_p.get("unified_memory")),
        "server_kind": str(server_p.get("kind") or ""), "server_api": str(server_p.get("api") or "chat"),
        "server_software": software, "server_version": str(version),
        **roofline.run_inputs(host_p, server_p),
        "bytes_per_param_source": ("declared (server.bytes_per_param)" if server_p.get("bytes_per_param") is not None
                                   else "quantization table (server.quantization)"),
        **_weights_read(server_info["model"] if isinstance(server_info.get("model"), dict) else {}),
        **_bandwidth(host_p, manifest.get("bandwidth") or {}),
        "total_params_b": number(server_p.get("total_params_b")),
        "context_window": number(server_p.get("context_window")),
        "modalities": ", ".join(server_p.get("modalities") or []),
        "thinking": bool(run_p.get("thinking", False)),
        "weights": str(server_p.get("weights") or "trained"),
        "thresholds": json.dumps({k: v for k, v in (params.get("thresholds") or {}).items()
                                  if v not in (None, False)}, sort_keys=True),
        "suites": ", ".join(sorted(entry["suites"], key=lambda s: NOTEBOOK_ORDER.index(s) if s in NOTEBOOK_ORDER else 99)),
        "run_ids": ", ".join(sorted(entry["run_ids"])),
        "n_requests": count("n_requests"), "n_ok": count("n_ok"), "n_failed": count("n_failed"),
        "n_unsupported": count("n_unsupported"),
        "idle_power_w": float(idle_power.mean()) if len(idle_power) else math.nan,
        "energy_reason": "" if len(energy) else ("; ".join(reasons) if reasons else "no telemetry windows recorded"),
        "mem_source": ", ".join(mem_sources),
        "git_commit": str(manifest.get("git_commit") or ""),
        "path": ", ".join(sorted(entry["paths"])),
        **_client_error(manifest.get("client_calibration")),
        "graded_reduced": reduced_note(entry.get("graded")),
        "max_error_rate": number(run_p.get("max_error_rate", RunSettings().max_error_rate)),
        "equivalence_margin": number(run_p.get("equivalence_margin", EQUIVALENCE_MARGIN)),  # speed verdicts' ±m
    }


def _client_error(recorded: Any) -> dict[str, Any]:
    """The client's calibrated TTFT and ITL error (p99 ms, measure/selfcheck/calibration) the run's manifest recorded."""
    recorded = recorded if isinstance(recorded, Mapping) else {}
    return {"client_ttft_err_p99_ms": number((recorded.get("ttft_ms") or {}).get("p99")),
            "client_itl_err_p99_ms": number((recorded.get("itl_ms") or {}).get("p99")),
            "client_error": calibration.error_note(dict(recorded))}


WEIGHTS_CACHE = "weights.json"  # under cache_dir(): GGUF tensor tables read once per file (path, size, mtime)


def _weights_read(model: Mapping[str, Any]) -> dict[str, Any]:
    """GB one decoded token reads, from the tensor table of the GGUF file the run served (its manifest records the
    path and size; benchlib.analysis.weights): what the roofline uses instead of active params × bytes per param.
    NaN where the model was not a GGUF or the file is not on this machine (or no longer the one measured)."""
    path = Path(str(model.get("path") or ""))
    size = number(model.get("size_bytes"))
    if not str(model.get("path") or "").endswith(".gguf") or not path.is_file() or \
            (not math.isnan(size) and path.stat().st_size != size):
        return {"weights_read_gb": math.nan, "weights_file": ""}
    try:
        read = weights.read_cached(path, cache_dir() / WEIGHTS_CACHE)
    except (ValueError, OSError):
        return {"weights_read_gb": math.nan, "weights_file": ""}
    return {"weights_read_gb": read.read_per_token_gb, "weights_file": path.name}


def _bandwidth(host_p: Mapping[str, Any], recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The run's memory bandwidth: the params' figure, else the one its manifest recorded (NVML's theoretical
    figure on a GPU host, the measured read bandwidth on a CPU host; benchlib.measure.capacity.bandwidth), with its source."""
    declared = number(host_p.get("memory_bandwidth_gbs"))
    if not math.isnan(declared):
        return {"memory_bandwidth_gbs": declared, "bandwidth_source": "declared"}
    value = number(recorded.get("ceiling_gbs"))
    return {"memory_bandwidth_gbs": value, "bandwidth_source": "" if math.isnan(value) else
            str(recorded.get("ceiling_source") or "")}


def first_telemetry(runs: Runs) -> tuple[pd.DataFrame | None, pd.DataFrame, str]:
    """The text suite's telemetry.csv and windows of the first run found (others alike; the notebook of each
    run shows its own)."""
    if runs.empty:
        return None, pd.DataFrame(), ""
    for row in runs.meta.itertuples():
        for path in sorted(str(row.path).split(", ")):
            for suite in ("text", *str(row.suites).split(", ")):
                folder = Path(path) / suite
                if (folder / TELEMETRY_CSV).is_file() and (folder / WINDOWS_CSV).is_file():
                    telemetry = pd.read_csv(folder / TELEMETRY_CSV)
                    windows = pd.read_csv(folder / WINDOWS_CSV)
                    if len(telemetry) > 1:
                        return telemetry, windows, f"{row.system}, {suite} suite ({len(windows)} windows)"
    return None, pd.DataFrame(), ""


def runs_text(runs: Runs) -> str:
    """One line per run found (or 'no runs yet')."""
    where = ", ".join(shown_path(r) for r in runs.roots) if runs.roots else shown_path(runs.root)
    if runs.empty:
        return f"{NO_RUNS}: nothing under {where} (published numbers only)"
    lines = [f"{len(runs.meta)} run(s) from {runs.meta['host'].nunique()} host(s) under {where}:"]
    for row in runs.meta.itertuples():
        lines.append(f"  {row.system}: suites {row.suites}; {row.n_ok} ok / {row.n_failed} failed / "
                     f"{row.n_unsupported} unsupported requests")
    if runs.skipped:
        lines.append(f"  skipped (archived): {', '.join(runs.skipped)}")
    for duplicate in runs.duplicates:
        lines.append(f"  counted once (found twice): {duplicate}")
    return "\n".join(lines)
