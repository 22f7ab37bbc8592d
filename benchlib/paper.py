"""Everything paper/assemble.ipynb does: load our runs and the published reference data, build the paper's
tables and figures, and write them (CSV + Markdown tables, PNG + SVG figures, report.md) to paper/out/.

Published numbers come from paper/reference/*.csv (benchlib.reference); our runs from
outputs/<host>/<model>/<suite>/ (folders named '<suite>.archived-*' are old runs and skipped). Every table
carries a source: the seed file a published number was transcribed from, or "this run". With no runs the
reference data alone regenerates every table and figure; our panels then say "no runs yet".

Nothing here invents a number: a host without a configured memory bandwidth is shown as "bandwidth unknown",
a run without an energy sensor has empty energy columns with the sensor's reason.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.transforms import Bbox

from benchlib import analysis, frontier, reference, roofline, sweeps
from benchlib.paths import PAPER_OUT_DIR, PROJECT_ROOT, outputs_root
from benchlib.records import STATUS_OK, read_requests

THIS_RUN = "this run"
NO_RUNS = "no runs yet"
# Parameter names of paper/assemble.ipynb -> seed prefixes of benchlib.reference.REFERENCE_FILES.
REFERENCE_SETS = {"paper_000": "000", "heros_001": "001", "bandwidth_002": "002", "quant_004": "004"}
DEFAULT_REGIMES = ("workstation", "edge", "audio", "serving", "all")
THRESHOLD_PRESETS = {"heros_swap": frontier.HEROS_SWAP_THRESHOLDS, "heros_phase1": frontier.HEROS_PHASE1_THRESHOLDS}
ALL_REGIME = frontier.Regime("all", "Every axis at once (the paper's split frontier)", dict(frontier.ALL_AXES),
                             "All regime axes together: no single winner expected", "")

# Paper task order (000 §4-5, §9); tasks the paper lacks follow in task-file order.
PAPER_TASKS = ["basic_qa", "reasoning", "coding", "multilingual", "summarization", "image_description",
               "color_identification", "transcription", "audio_qa", "video_analysis"]
PAPER_TASK_TITLES = {v: k for k, v in reference.PAPER_TASK_IDS.items()}
PAPER_TASK_TITLES["video_analysis"] = "Video description"
SUITE_ORDER = ["text", "vision", "audio", "video", "quality", "load"]

TABLES = ["runs", "setup", "platform", "throughput", "latency_accuracy", "memory_power_thermal",
          "frontier", "frontier_dominance", "frontier_systems", "capability_context", "roofline", "decisions"]
LONG_TABLE = "published_and_runs_long"  # CSV only: every published row plus ours, tidy, with a source column
FIGURES = ["throughput_by_task", "latency", "energy_efficiency", "pareto_frontier", "roofline", "runs_vs_published"]
OPTIONAL_TABLES = ["load_concurrency", "load_context"]
OPTIONAL_FIGURES = ["load_sweeps"]

AXIS_LABELS = {
    "avg_decode_tps": "average decode throughput (tok/s)",
    "modality_count": "input modalities in the deployment",
    "video_support": "video support (1 = yes)",
    "tps_per_w": "tokens/s per watt",
    "peak_temp_c": "peak temperature (°C)",
    "context_window_k": "context window (K tokens)",
    "asr_decode_tps": "ASR (transcription) decode tok/s",
    "short_qa_decode_tps": "short-answer (basic Q&A) decode tok/s",
}
AXIS_FORMATS = {"avg_decode_tps": ".1f", "modality_count": ".0f", "video_support": ".0f", "tps_per_w": ".2f",
                "peak_temp_c": ".0f", "context_window_k": ".3g", "asr_decode_tps": ".1f",
                "short_qa_decode_tps": ".1f"}


# ================================================================================================ settings

@dataclass
class Settings:
    """Resolved notebook parameters."""

    outputs_dir: Path
    out_dir: Path
    reference_sets: list[str] = field(default_factory=lambda: list(REFERENCE_SETS))
    regimes: list[str] = field(default_factory=lambda: list(DEFAULT_REGIMES))
    thresholds: str = "heros_swap"
    figure_formats: list[str] = field(default_factory=lambda: ["png", "svg"])
    dpi: int = 130

    @classmethod
    def from_parameters(cls, outputs_dir: str = "", reference_sets: Sequence[str] | None = None, out_dir: str = "",
                        regimes: Sequence[str] | None = None, thresholds: str = "heros_swap",
                        figure_formats: Sequence[str] | None = None, dpi: int = 130) -> "Settings":
        """Empty outputs_dir -> outputs_root(); empty out_dir -> paper/out; names are checked here."""
        sets = list(reference_sets if reference_sets is not None else REFERENCE_SETS)
        for name in sets:
            _seed_prefix(name)
        keys = list(regimes if regimes is not None else DEFAULT_REGIMES)
        unknown = [k for k in keys if k not in frontier.REGIMES and k != "all"]
        if unknown:
            raise ValueError(f"regimes: unknown {unknown} (known: {', '.join(list(frontier.REGIMES) + ['all'])})")
        if thresholds not in THRESHOLD_PRESETS:
            raise ValueError(f"thresholds: unknown preset {thresholds!r} (known: {', '.join(THRESHOLD_PRESETS)})")
        formats = [f.lower().lstrip(".") for f in (figure_formats or ["png", "svg"])]
        return cls(outputs_dir=Path(outputs_dir).expanduser().resolve() if outputs_dir else outputs_root(),
                   out_dir=Path(out_dir).expanduser().resolve() if out_dir else PAPER_OUT_DIR,
                   reference_sets=sets, regimes=keys, thresholds=thresholds, figure_formats=formats, dpi=int(dpi))

    def describe(self) -> str:
        return (f"outputs: {_shown(self.outputs_dir)} · out: {_shown(self.out_dir)} · reference: "
                f"{', '.join(self.reference_sets)} · regimes: {', '.join(self.regimes)} · "
                f"thresholds: {self.thresholds}")

    def regime_objects(self) -> dict[str, frontier.Regime]:
        return {k: (ALL_REGIME if k == "all" else frontier.REGIMES[k]) for k in self.regimes}


def _seed_prefix(name: str) -> str:
    if name in REFERENCE_SETS:
        return REFERENCE_SETS[name]
    if name in reference.REFERENCE_FILES:
        return name
    raise ValueError(f"reference_sets: unknown set {name!r} (known: {', '.join(REFERENCE_SETS)})")


def _shown(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)


def load_reference_sets(sets: Sequence[str] | None = None) -> pd.DataFrame:
    """The reference rows of the named sets ('paper_000', ... or seed prefixes '000'), numbers as floats."""
    prefixes = [_seed_prefix(s) for s in (sets if sets is not None else REFERENCE_SETS)]
    return reference.load_reference(prefixes)


def _seed_rows(ref: pd.DataFrame, prefix: str) -> pd.DataFrame:
    return ref[ref["source"].str.startswith(prefix)] if len(ref) else ref


def source_label(source: str) -> str:
    """'000_341285de21da4f3a.txt' -> 'seed 000'; 'this run' stays."""
    match = re.match(r"^(\d{3})_", str(source))
    return f"seed {match.group(1)}" if match else str(source)


def column_label(system: str, source: str) -> str:
    return f"{system} [{source_label(source)}]"


# ================================================================================================ our runs

@dataclass
class Runs:
    """Every run under an outputs root: per-task summaries, trimmed request rows, windows, one meta row per
    host × model, and the load sweeps when present."""

    root: Path
    summary: pd.DataFrame
    requests: pd.DataFrame
    windows: pd.DataFrame
    meta: pd.DataFrame
    load: dict[str, pd.DataFrame] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return self.meta.empty

    @property
    def systems(self) -> list[str]:
        return self.meta["system"].tolist() if len(self.meta) else []


META_COLUMNS = ["host", "model", "system", "source", "hardware", "accelerator", "cpu", "memory_gb",
                "memory_bandwidth_gbs", "power_envelope_w", "unified_memory", "server_kind", "server_software",
                "server_version", "quantization", "active_params_b", "total_params_b", "bytes_per_param",
                "context_window", "modalities", "thinking", "suites", "run_ids", "n_requests", "n_ok", "n_failed",
                "n_unsupported", "idle_power_w", "energy_reason", "mem_source", "git_commit", "path"]
REQUEST_KEEP = ["host", "model", "suite", "modality", "task", "variant", "repeat", "status", "is_warmup",
                "decode_tps", "ttft_s", "e2e_s", "completion_tokens", "passed"]


def suite_dirs(root: Path) -> tuple[list[Path], list[str]]:
    """outputs/<host>/<model>/<suite>/ folders holding results, and the archived ones skipped."""
    root = Path(root)
    found, skipped = [], []
    if not root.is_dir():
        return found, skipped
    for path in sorted(p for p in root.glob("*/*/*") if p.is_dir()):
        if ".archived-" in path.name:
            skipped.append(str(path.relative_to(root)))
            continue
        if (path / "requests.csv").is_file() or (path / "summary.csv").is_file() or path.name == "load":
            found.append(path)
    return found, skipped


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        return {}


def _read_csv(path: Path) -> pd.DataFrame:
    if not path.is_file() or path.stat().st_size == 0:
        return pd.DataFrame()
    try:
        return pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, OSError):
        return pd.DataFrame()


def _suite_summary(path: Path, params: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(summary, trimmed requests, windows) of one suite folder, recomputed from requests.csv when it exists."""
    windows = _read_csv(path / "windows.csv")
    run_id = _read_json(path / "run.json").get("run_id")
    requests = read_requests(path / "requests.csv") if (path / "requests.csv").is_file() else pd.DataFrame()
    if len(requests) and run_id and "run_id" in requests and (requests["run_id"] == run_id).any():
        requests = requests[requests["run_id"] == run_id]
    if len(requests):
        max_error = (params.get("run") or {}).get("max_error_rate")
        summary = analysis.summarize_requests(requests, max_error_rate=max_error)
        summary = analysis.join_windows(summary, windows) if len(windows) else summary
    else:
        summary = _read_csv(path / "summary.csv")
    if len(summary) and len(windows) and "energy_reason" in windows and "window" in windows:
        task_windows = windows[windows.get("kind", "task") == "task"] if "kind" in windows else windows
        reasons = (task_windows.dropna(subset=["energy_reason"]).groupby("window")["energy_reason"]
                   .agg(lambda s: "; ".join(sorted(set(map(str, s))))))
        summary["energy_reason"] = summary["task"].map(reasons)
    keep = [c for c in REQUEST_KEEP if c in requests]
    return summary, (requests[keep].copy() if len(requests) else pd.DataFrame(columns=REQUEST_KEEP)), windows


def load_runs(outputs_dir: str | Path | None = None) -> Runs:
    """Load every run under outputs_dir (default outputs_root()); an empty or missing root gives empty frames."""
    root = Path(outputs_dir) if outputs_dir else outputs_root()
    dirs, skipped = suite_dirs(root)
    summaries, requests, windows, load = [], [], [], {"concurrency": [], "context": []}
    per_system: dict[tuple[str, str], dict[str, Any]] = {}
    for path in dirs:
        manifest = _read_json(path / "manifest.json")
        params = manifest.get("params") or {}
        host_p, server_p = params.get("host") or {}, params.get("server") or {}
        host = str(host_p.get("name") or path.parent.parent.name)
        model = str(server_p.get("model") or path.parent.name)
        if path.name == "load":  # sweeps only: concurrency > 1 and long prompts are not per-task speed rows
            for kind in ("concurrency", "context"):
                frame = _read_csv(path / f"sweep_{kind}.csv")
                if len(frame):
                    load[kind].append(frame.assign(host=host, model=model))
            continue
        summary, reqs, wins = _suite_summary(path, params)
        if summary.empty and reqs.empty:
            continue
        for frame in (summary, reqs):
            if len(frame):
                frame["host"], frame["model"] = host, model
                frame["suite"] = frame["suite"] if "suite" in frame else path.name
        summaries.append(summary)
        requests.append(reqs)
        if len(wins):
            windows.append(wins.assign(host=host, model=model, suite=path.name))
        entry = per_system.setdefault((host, model), {"manifest": manifest, "suites": [], "paths": set(),
                                                      "run_ids": set(), "windows": []})
        if manifest and not entry["manifest"]:
            entry["manifest"] = manifest
        entry["suites"].append(path.name)
        entry["paths"].add(str(path.parent))
        if manifest.get("run_id"):
            entry["run_ids"].add(str(manifest["run_id"]))
        if len(wins):
            entry["windows"].append(wins)
    summary = pd.concat([s for s in summaries if len(s)], ignore_index=True) if any(len(s) for s in summaries) \
        else pd.DataFrame(columns=["host", "model", "suite", "modality", "task"] + analysis.SUMMARY_COLUMNS)
    reqs = pd.concat([r for r in requests if len(r)], ignore_index=True) if any(len(r) for r in requests) \
        else pd.DataFrame(columns=REQUEST_KEEP)
    wins = pd.concat(windows, ignore_index=True) if windows else pd.DataFrame()
    meta = pd.DataFrame([_meta_row(host, model, entry, summary) for (host, model), entry in per_system.items()],
                        columns=META_COLUMNS)
    return Runs(root=root, summary=summary, requests=reqs, windows=wins, meta=meta,
                load={k: pd.concat(v, ignore_index=True) for k, v in load.items() if v}, skipped=skipped)


def _num(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def _meta_row(host: str, model: str, entry: Mapping[str, Any], summary: pd.DataFrame) -> dict[str, Any]:
    manifest = entry["manifest"] or {}
    params = manifest.get("params") or {}
    host_p, server_p, run_p = params.get("host") or {}, params.get("server") or {}, params.get("run") or {}
    software = str(server_p.get("software") or server_p.get("kind") or "")
    packages = manifest.get("packages") or {}
    server_info = manifest.get("server") or {}
    version = packages.get(software) or ""
    if not version and isinstance(server_info.get("version"), dict):
        version = str(server_info["version"].get("version", ""))
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
        "host": host, "model": model, "system": f"{model} @ {host}", "source": THIS_RUN,
        "hardware": str(host_p.get("hardware") or ""), "accelerator": str(host_p.get("accelerator") or ""),
        "cpu": str(manifest.get("cpu") or ""), "memory_gb": _num(host_p.get("memory_gb")),
        "memory_bandwidth_gbs": _num(host_p.get("memory_bandwidth_gbs")),
        "power_envelope_w": _num(host_p.get("power_envelope_w")), "unified_memory": bool(host_p.get("unified_memory")),
        "server_kind": str(server_p.get("kind") or ""), "server_software": software, "server_version": str(version),
        "quantization": str(server_p.get("quantization") or ""),
        "active_params_b": _num(server_p.get("active_params_b")),
        "total_params_b": _num(server_p.get("total_params_b")),
        "bytes_per_param": _num(server_p.get("bytes_per_param")),
        "context_window": _num(server_p.get("context_window")),
        "modalities": ", ".join(server_p.get("modalities") or []),
        "thinking": bool(run_p.get("thinking", False)),
        "suites": ", ".join(sorted(entry["suites"], key=lambda s: SUITE_ORDER.index(s) if s in SUITE_ORDER else 99)),
        "run_ids": ", ".join(sorted(entry["run_ids"])),
        "n_requests": count("n_requests"), "n_ok": count("n_ok"), "n_failed": count("n_failed"),
        "n_unsupported": count("n_unsupported"),
        "idle_power_w": float(idle_power.mean()) if len(idle_power) else math.nan,
        "energy_reason": "" if len(energy) else ("; ".join(reasons) if reasons else "no telemetry windows recorded"),
        "mem_source": ", ".join(mem_sources),
        "git_commit": str(manifest.get("git_commit") or ""),
        "path": ", ".join(sorted(entry["paths"])),
    }


def runs_text(runs: Runs) -> str:
    """One line per run found (or 'no runs yet')."""
    if runs.empty:
        return f"{NO_RUNS}: nothing under {_shown(runs.root)} (published numbers only)"
    lines = [f"{len(runs.meta)} run(s) under {_shown(runs.root)}:"]
    for row in runs.meta.itertuples():
        lines.append(f"  {row.system}: suites {row.suites}; {row.n_ok} ok / {row.n_failed} failed / "
                     f"{row.n_unsupported} unsupported requests")
    if runs.skipped:
        lines.append(f"  skipped (archived): {', '.join(runs.skipped)}")
    return "\n".join(lines)


# ================================================================================================ tables

@dataclass
class Table:
    """A paper table: `data` is written as CSV (numbers stay numbers), `display` as Markdown."""

    name: str
    title: str
    data: pd.DataFrame
    display: pd.DataFrame | None = None
    caption: str = ""

    def markdown(self) -> str:
        return markdown_table(self.display if self.display is not None else self.data)


def fmt(value: Any, spec: str = ".4g", missing: str = "–") -> str:
    """A number formatted with spec ('.1f', '.0%', ...); NaN/None -> missing; text stays."""
    if value is None:
        return missing
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, float, np.integer, np.floating)):
        if isinstance(value, float) and math.isnan(value):
            return missing
        return format(value, spec)
    text = str(value)
    return text if text and text != "nan" else missing


def markdown_table(frame: pd.DataFrame) -> str:
    """GitHub Markdown table (no tabulate dependency); NaN -> '–', pipes escaped."""
    if frame is None or frame.empty:
        return "_(no rows)_"
    columns = [str(c) for c in frame.columns]

    def cell(value: Any) -> str:
        text = fmt(value)
        return text.replace("|", "\\|").replace("\n", "<br>")

    numeric = [pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
               and frame[c].notna().any() for c in frame.columns]
    lines = ["| " + " | ".join(c.replace("|", "\\|") for c in columns) + " |",
             "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)


def _task_catalog() -> pd.DataFrame:
    """task -> title, suite, modality (from testdata/tasks), with the paper's titles for its tasks."""
    rows = []
    try:
        from benchlib.tasks import load_tasks

        for task in load_tasks().values():
            rows.append({"task_id": task.name, "title": task.title or task.name, "suite": task.suite,
                         "modality": task.requires})
    except Exception:  # noqa: BLE001 — a broken task file must not stop the paper
        pass
    catalog = pd.DataFrame(rows, columns=["task_id", "title", "suite", "modality"])
    for task_id in PAPER_TASKS:
        if task_id not in set(catalog["task_id"]):
            modality = {"image_description": "vision", "color_identification": "vision", "transcription": "audio",
                        "audio_qa": "audio", "video_analysis": "video"}.get(task_id, "text")
            catalog.loc[len(catalog)] = {"task_id": task_id, "title": task_id, "suite": modality, "modality": modality}
    catalog["label"] = [PAPER_TASK_TITLES.get(t, title) for t, title in zip(catalog["task_id"], catalog["title"])]
    catalog["order"] = [PAPER_TASKS.index(t) if t in PAPER_TASKS else 100 + i for i, t in enumerate(catalog["task_id"])]
    return catalog.sort_values("order").reset_index(drop=True)


def _task_label(task_id: str, catalog: pd.DataFrame) -> str:
    match = catalog.loc[catalog["task_id"] == task_id, "label"]
    return str(match.iloc[0]) if len(match) else str(task_id)


def _task_order(task_ids: Iterable[str], catalog: pd.DataFrame) -> list[str]:
    order = {t: i for i, t in enumerate(catalog["task_id"])}
    return sorted(dict.fromkeys(task_ids), key=lambda t: (order.get(t, 10_000), t))


# ------------------------------------------------------------------------------------------- systems

SYSTEM_COLUMNS = ["system", "model", "host", "source", "hardware", "quantization", "memory_bandwidth_gbs",
                  "active_params_b", "bytes_per_param", "avg_decode_tps", "avg_power_w", "peak_power_w",
                  "tps_per_w", "tps_per_w_reported", "tokens_per_joule", "avg_temp_c", "peak_temp_c",
                  "memory_gb", "memory_kind", "context_window_k", "modality_count", "video_support",
                  "vision_decode_tps", "asr_decode_tps", "short_qa_decode_tps", "avg_e2e_s",
                  "peak_throughput_tps", "max_concurrency_ok", "max_context_ok_k", "knee_concurrency", "energy_note"]


def published_systems(ref: pd.DataFrame) -> pd.DataFrame:
    """The paper's (000) three systems with the frontier axes, source = the seed file."""
    rows = _seed_rows(ref, "000")
    if rows.empty or (rows["model"] != "").sum() == 0:
        return pd.DataFrame(columns=SYSTEM_COLUMNS)
    systems = reference.paper_systems(rows)
    systems["source"] = rows["source"].iloc[0]
    systems["tokens_per_joule"] = systems["tps_per_w"]  # tok/s ÷ W = tok/J; the paper prints no token counts
    systems["memory_gb"] = systems["baseline_memory_gb"]
    systems["memory_kind"] = "observed baseline (paper §6)"
    systems["energy_note"] = "tok/s/W recomputed as average throughput ÷ average inference power (§6)"
    systems["bytes_per_param"] = systems["quantization"].map(roofline.bytes_per_param)
    return systems.reindex(columns=SYSTEM_COLUMNS)


def _sweep_figures(runs: Runs, host: str, model: str) -> dict[str, float]:
    """What the load notebook measured for one host × model: the frontier's serving figures (NaN if not run)."""
    mine = {}
    for kind in ("concurrency", "context"):
        frame = runs.load.get(kind, pd.DataFrame())
        mine[kind] = frame[(frame["host"] == host) & (frame["model"] == model)] if len(frame) else frame
    if mine["concurrency"].empty and mine["context"].empty:
        return {"peak_throughput_tps": math.nan, "max_concurrency_ok": math.nan, "max_context_ok_k": math.nan,
                "knee_concurrency": math.nan}
    figures = sweeps.frontier_figures(mine["concurrency"], mine["context"])
    return {"peak_throughput_tps": figures["peak_throughput_tps"], "max_concurrency_ok": figures["max_concurrency_ok"],
            "max_context_ok_k": figures["max_context_ok"] / 1000, "knee_concurrency": figures["knee_concurrency"]}


def run_systems(runs: Runs) -> pd.DataFrame:
    """Our runs as systems (analysis.systems_from_summary), plus memory, energy and roofline inputs."""
    if runs.empty or runs.summary.empty:
        return pd.DataFrame(columns=SYSTEM_COLUMNS)
    context = {r.model: r.context_window / 1000 for r in runs.meta.itertuples() if not math.isnan(r.context_window)}
    systems = analysis.systems_from_summary(runs.summary, context_window_k=context)
    meta = runs.meta.set_index("system")
    out = []
    for row in systems.to_dict("records"):
        info = meta.loc[row["system"]] if row["system"] in meta.index else pd.Series(dtype=object)
        mine = runs.summary[(runs.summary["host"] == row["host"]) & (runs.summary["model"] == row["model"])]
        mem = pd.to_numeric(mine.get("mem_peak_gb", pd.Series(dtype=float)), errors="coerce").dropna()
        temps = pd.to_numeric(mine.get("temp_avg_c", pd.Series(dtype=float)), errors="coerce").dropna()
        peaks = pd.to_numeric(mine.get("peak_power_w", pd.Series(dtype=float)), errors="coerce").dropna()
        energy = pd.to_numeric(mine.get("energy_j", pd.Series(dtype=float)), errors="coerce")
        tokens = pd.to_numeric(mine.get("completion_tokens_sum", pd.Series(dtype=float)), errors="coerce")
        both = energy.notna() & tokens.notna() & (energy > 0)
        row.update({
            "source": THIS_RUN,
            "hardware": info.get("hardware", "") or info.get("cpu", ""),
            "quantization": info.get("quantization", ""),
            "memory_bandwidth_gbs": info.get("memory_bandwidth_gbs", math.nan),
            "active_params_b": info.get("active_params_b", math.nan),
            "bytes_per_param": (info.get("bytes_per_param", math.nan)
                                if not math.isnan(_num(info.get("bytes_per_param", math.nan)))
                                else roofline.bytes_per_param(info.get("quantization", "") or "") or math.nan),
            "tps_per_w_reported": math.nan,
            "tokens_per_joule": float(tokens[both].sum() / energy[both].sum()) if both.any() else math.nan,
            "avg_temp_c": float(temps.mean()) if len(temps) else math.nan,
            "peak_power_w": float(peaks.max()) if len(peaks) else math.nan,
            "memory_gb": float(mem.max()) if len(mem) else math.nan,
            "memory_kind": _memory_kind(info.get("mem_source", "")),
            "energy_note": (f"no energy: {info.get('energy_reason')}" if info.get("energy_reason") else
                            "tok/s/W = average decode tok/s ÷ mean task-window power; tok/J = tokens ÷ window energy"),
            **_sweep_figures(runs, row["host"], row["model"]),
        })
        out.append(row)
    return pd.DataFrame(out).reindex(columns=SYSTEM_COLUMNS)


def _memory_kind(source: str) -> str:
    text = str(source or "")
    if "server_rss" in text:
        return "server process RSS peak"
    if "nvml" in text:
        return "GPU memory peak (NVML)"
    return text or "not measured"


def all_systems(ref: pd.DataFrame, runs: Runs) -> pd.DataFrame:
    frames = [f for f in (published_systems(ref), run_systems(runs)) if len(f)]
    if not frames:
        return pd.DataFrame(columns=SYSTEM_COLUMNS)
    out = pd.concat(frames, ignore_index=True)
    for column in SYSTEM_COLUMNS:
        if column not in ("system", "model", "host", "source", "hardware", "quantization", "memory_kind",
                          "energy_note"):
            out[column] = pd.to_numeric(out[column], errors="coerce")
    return out


# ------------------------------------------------------------------------------------------- runs table

def runs_table(runs: Runs) -> Table:
    columns = ["system", "host", "model", "suites", "n_requests", "n_ok", "n_failed", "n_unsupported",
               "server_software", "server_version", "run_ids", "git_commit", "path"]
    if runs.empty:
        data = pd.DataFrame([{"system": NO_RUNS, "path": _shown(runs.root)}]).reindex(columns=columns)
    else:
        data = runs.meta.reindex(columns=columns).copy()
        data["path"] = [", ".join(_shown(Path(p)) for p in str(v).split(", ")) for v in data["path"]]
    return Table("runs", "Runs found in outputs/", data,
                 caption=("Our runs (archived folders skipped). " + (f"{NO_RUNS}: every table below is the "
                          "published data alone." if runs.empty else "They appear as 'this run' beside the seeds.")))


# ------------------------------------------------------------------------------------------- setup (§2)

def setup_table(ref: pd.DataFrame, runs: Runs) -> Table:
    rows = []
    paper = _seed_rows(ref, "000")
    s2 = reference.select(paper, "§2") if len(paper) else paper
    for model, group in (s2.groupby("model", sort=False) if len(s2) else []):
        texts = dict(zip(group["metric"], group["value_text"]))
        params = " / ".join(t for t in (texts.get("params_active", ""), texts.get("params_total", "")) if t)
        rows.append({"system": f"{model} @ {group['host'].iloc[0]}", "source": group["source"].iloc[0],
                     "model_id": texts.get("model_id", ""), "parameters": params,
                     "architecture": texts.get("architecture", ""), "context_window": texts.get("context_window", ""),
                     "modalities": texts.get("modalities", ""), "hardware": texts.get("primary_hardware", ""),
                     "quantization": group["quantization"].iloc[0], "server": group["server"].iloc[0] or "not stated",
                     "memory_baseline": texts.get("baseline_memory", ""),
                     "thinking_mode": texts.get("thinking_mode", "")})
    for row in runs.meta.itertuples():
        params = " / ".join(p for p in (
            f"{row.active_params_b:g}B active" if not math.isnan(row.active_params_b) else "",
            f"{row.total_params_b:g}B total" if not math.isnan(row.total_params_b) else "") if p)
        mem = run_systems_memory(runs, row.system)
        rows.append({"system": row.system, "source": THIS_RUN, "model_id": row.model,
                     "parameters": params or "not given in params",
                     "architecture": "not recorded",
                     "context_window": f"{row.context_window:,.0f} tokens" if not math.isnan(row.context_window)
                     else "not given in params",
                     "modalities": row.modalities, "hardware": row.hardware or row.cpu,
                     "quantization": row.quantization or "not given",
                     "server": f"{row.server_software} {row.server_version}".strip() or row.server_kind,
                     "memory_baseline": mem, "thinking_mode": "on" if row.thinking else "off (run.thinking: false)"})
    data = pd.DataFrame(rows, columns=["system", "source", "model_id", "parameters", "architecture",
                                       "context_window", "modalities", "hardware", "quantization", "server",
                                       "memory_baseline", "thinking_mode"])
    display = data.assign(source=data["source"].map(source_label))
    return Table("setup", "Experimental setup (000 §2)", data, display,
                 caption="Model identifiers, parameters, context, modalities and hardware per deployment.")


def run_systems_memory(runs: Runs, system: str) -> str:
    mine = runs.summary[(runs.summary["host"] + "|" + runs.summary["model"]) ==
                        "|".join(reversed(system.split(" @ ", 1)))] if len(runs.summary) else runs.summary
    mem = pd.to_numeric(mine.get("mem_peak_gb", pd.Series(dtype=float)), errors="coerce").dropna()
    if not len(mem):
        return "not measured"
    meta = runs.meta.set_index("system")
    kind = _memory_kind(meta.loc[system, "mem_source"]) if system in meta.index else ""
    return f"{mem.max():.2f} GB ({kind})"


# ------------------------------------------------------------------------------------------- platform (§3)

def platform_table(ref: pd.DataFrame, runs: Runs) -> Table:
    rows = []
    hosts = ref[(ref["host"] != "") & ref["metric"].isin(["memory_bandwidth", "device_memory", "tdp", "idle_power",
                                                            "avg_power", "peak_temp", "gpu_architecture"])] \
        if len(ref) else ref
    for (source, host), group in (hosts.groupby(["source", "host"], sort=False) if len(hosts) else []):
        by = {m: g.iloc[0] for m, g in group.groupby("metric")}

        def val(metric: str) -> float:
            return float(by[metric]["value"]) if metric in by and pd.notna(by[metric]["value"]) else math.nan

        def text(metric: str) -> str:
            return str(by[metric]["value_text"]) if metric in by else ""

        if source.startswith("000"):
            power = by.get("avg_power")
            low, high = (power["value_low"], power["value_high"]) if power is not None else (math.nan, math.nan)
            avg = val("avg_power")
            rows.append({"host": host, "source": source, "hardware": group["hardware"].iloc[0],
                         "architecture": text("gpu_architecture"), "memory": text("device_memory"),
                         "memory_bandwidth_gbs": val("memory_bandwidth"), "tdp_w": val("tdp"),
                         "idle_power_w": val("idle_power"),
                         "inference_power_w": avg if not math.isnan(avg) else (low + high) / 2,
                         "inference_power": text("avg_power"), "peak_temp": text("peak_temp"), "note": ""})
        else:
            rows.append({"host": host, "source": source, "hardware": group["hardware"].iloc[0], "architecture": "",
                         "memory": text("device_memory"), "memory_bandwidth_gbs": val("memory_bandwidth"),
                         "tdp_w": math.nan, "idle_power_w": math.nan, "inference_power_w": math.nan,
                         "inference_power": "", "peak_temp": "", "note": "no power/thermal figures in this seed"})
    for row in runs.meta.drop_duplicates("host").itertuples():
        bandwidth_known = not math.isnan(row.memory_bandwidth_gbs)
        rows.append({"host": row.host, "source": THIS_RUN, "hardware": row.hardware,
                     "architecture": row.accelerator or (f"CPU only: {row.cpu}" if row.cpu else "CPU only"),
                     "memory": f"{row.memory_gb:g} GB" if not math.isnan(row.memory_gb) else "",
                     "memory_bandwidth_gbs": row.memory_bandwidth_gbs, "tdp_w": row.power_envelope_w,
                     "idle_power_w": row.idle_power_w,
                     "inference_power_w": _run_avg_power(runs, row.host),
                     "inference_power": "", "peak_temp": _run_peak_temp(runs, row.host),
                     "note": "; ".join(n for n in (
                         "" if bandwidth_known else "bandwidth unknown (host.memory_bandwidth_gbs not set)",
                         f"no energy: {row.energy_reason}" if row.energy_reason else "") if n)})
    data = pd.DataFrame(rows, columns=["host", "source", "hardware", "architecture", "memory", "memory_bandwidth_gbs",
                                       "tdp_w", "idle_power_w", "inference_power_w", "inference_power", "peak_temp",
                                       "note"])
    display = data.copy()
    display["memory_bandwidth_gbs"] = [
        fmt(v, ".0f") if not math.isnan(v) else ("bandwidth unknown" if s == THIS_RUN else "–")
        for v, s in zip(data["memory_bandwidth_gbs"], data["source"])]
    for column in ("tdp_w", "idle_power_w", "inference_power_w"):
        display[column] = [fmt(v, ".1f") for v in data[column]]
    display["inference_power_w"] = [t if t else fmt(v, ".1f") for t, v in zip(data["inference_power"],
                                                                                data["inference_power_w"])]
    display = display.drop(columns=["inference_power"]).rename(columns={
        "memory_bandwidth_gbs": "memory bandwidth (GB/s)", "tdp_w": "TDP / envelope (W)", "idle_power_w": "idle (W)",
        "inference_power_w": "inference power (W)", "peak_temp": "peak temp (°C)"})
    display["source"] = display["source"].map(source_label)
    return Table("platform", "Hardware platforms (000 §3, 002 and 004 hosts, our hosts)", data, display,
                 caption="Memory bandwidth sets the decode ceiling (see the roofline); power and temperature as "
                         "reported. Our host's bandwidth is shown only when the params file states it.")


def _run_avg_power(runs: Runs, host: str) -> float:
    mine = runs.summary[runs.summary["host"] == host] if len(runs.summary) else runs.summary
    power = pd.to_numeric(mine.get("avg_power_w", pd.Series(dtype=float)), errors="coerce").dropna()
    return float(power.mean()) if len(power) else math.nan


def _run_peak_temp(runs: Runs, host: str) -> str:
    mine = runs.summary[runs.summary["host"] == host] if len(runs.summary) else runs.summary
    temp = pd.to_numeric(mine.get("temp_peak_c", pd.Series(dtype=float)), errors="coerce").dropna()
    return f"{temp.max():.0f} C" if len(temp) else ""


# ------------------------------------------------------------------------------------------- per-task long

TASK_LONG_COLUMNS = ["task_id", "task", "modality", "system", "model", "host", "source", "metric", "value",
                     "value_sd", "n", "status", "value_text"]


def task_metrics_long(ref: pd.DataFrame, runs: Runs, catalog: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per task × system: decode_tps, e2e_latency, accuracy (published from 000 §4/§5/§9, ours from summaries),
    ttft for ours. status: '' | 'not applicable' (published) | 'not supported' | 'invalid: …' (ours)."""
    catalog = _task_catalog() if catalog is None else catalog
    rows = []
    paper = _seed_rows(ref, "000")
    if len(paper):
        sel = paper[(paper["task_id"] != "") & paper["metric"].isin(["decode_tps", "e2e_latency", "accuracy"])
                    & paper["section"].str.match(r"§(4|5|9)")]
        for r in sel.itertuples():
            na = str(r.value_text).lower() in ("not applicable", "n/a")
            rows.append({"task_id": r.task_id, "task": _task_label(r.task_id, catalog), "modality": r.modality,
                         "system": f"{r.model} @ {r.host}", "model": r.model, "host": r.host, "source": r.source,
                         "metric": r.metric, "value": r.value, "value_sd": math.nan, "n": math.nan,
                         "status": "not applicable" if na else "", "value_text": r.value_text})
    for r in runs.summary.to_dict("records") if len(runs.summary) else []:
        n_ok = int(_num(r.get("n_ok")) or 0)
        if n_ok == 0 and _num(r.get("n_unsupported")) > 0 and not _num(r.get("n_failed")):
            status = "not supported"
        elif str(r.get("valid")).lower() in ("false", "0"):
            status = f"invalid: {r.get('note') or 'no ok requests'}"
        else:
            status = ""
        base = {"task_id": r["task"], "task": _task_label(r["task"], catalog), "modality": r.get("modality", ""),
                "system": f"{r['model']} @ {r['host']}", "model": r["model"], "host": r["host"], "source": THIS_RUN,
                "n": n_ok, "status": status, "value_text": ""}
        scored = int(_num(r.get("n_scored")) or 0)
        for metric, column, sd in (("decode_tps", "decode_tps_mean", "decode_tps_sd"),
                                   ("e2e_latency", "e2e_s_mean", "e2e_s_sd"), ("ttft", "ttft_s_p50", None),
                                   ("accuracy", "accuracy", None)):
            rows.append({**base, "metric": metric, "value": _num(r.get(column)),
                         "value_sd": _num(r.get(sd)) if sd else math.nan,
                         "value_text": (f"{int(_num(r.get('n_passed')) or 0)}/{scored}" if metric == "accuracy"
                                        and scored else "")})
    return pd.DataFrame(rows, columns=TASK_LONG_COLUMNS)


def _system_order(systems: pd.DataFrame, long: pd.DataFrame) -> list[tuple[str, str]]:
    """(system, source) pairs: published first (paper order), then ours."""
    pairs = list(dict.fromkeys(zip(systems["system"], systems["source"]))) if len(systems) else []
    for pair in zip(long["system"], long["source"]):
        if pair not in pairs:
            pairs.append(pair)
    return pairs


def _cell(row: pd.Series | None, spec: str, with_sd: bool = False, source: str = THIS_RUN) -> str:
    if row is None:
        return "not run" if source == THIS_RUN else "–"
    if row["status"] == "not applicable":
        return "n/a"
    if row["status"] == "not supported":
        return "not supported"
    if str(row["status"]).startswith("invalid"):
        return str(row["status"])  # e.g. 'invalid: every request failed
    value = row["value"]
    if isinstance(value, float) and math.isnan(value):
        return "–"
    text = format(value, spec)
    if with_sd and row["source"] == THIS_RUN:
        sd = row["value_sd"]
        text += (f" ± {sd:{spec}}" if not math.isnan(sd) else "") + f" (n={int(row['n'])})"
    return text


def throughput_table(long: pd.DataFrame, systems: pd.DataFrame, catalog: pd.DataFrame) -> Table:
    metric = long[long["metric"] == "decode_tps"]
    order = _system_order(systems, metric)
    tasks = _task_order(metric["task_id"], catalog)
    data_rows, display_rows = [], []
    for task in tasks:
        rows = metric[metric["task_id"] == task]
        data = {"task": _task_label(task, catalog), "task_id": task,
                "modality": next((m for m in rows["modality"] if isinstance(m, str) and m), "")}
        shown = dict(data)
        for system, source in order:
            hit = rows[(rows["system"] == system) & (rows["source"] == source)]
            row = hit.iloc[0] if len(hit) else None
            data[column_label(system, source)] = row["value"] if row is not None else math.nan
            shown[column_label(system, source)] = _cell(row, ".1f", with_sd=True, source=source)
        data_rows.append(data)
        display_rows.append(shown)
    data = pd.DataFrame(data_rows)
    display = pd.DataFrame(display_rows).drop(columns=["task_id"], errors="ignore")
    return Table("throughput", "Generation throughput, decode tok/s per task (000 §4, §9 video) beside our runs",
                 data, display,
                 caption="Published: the paper's per-task token rates. This run: mean ± sd over measured requests "
                         "(n = ok requests). 'n/a' = not applicable in that deployment, 'not supported' = the run "
                         "declared no such input, 'not run' = that suite was not executed.")


def latency_accuracy_table(long: pd.DataFrame, systems: pd.DataFrame, catalog: pd.DataFrame,
                           ref: pd.DataFrame) -> Table:
    sub = long[long["metric"].isin(["e2e_latency", "accuracy", "ttft"])]
    order = _system_order(systems, sub)
    tasks = _task_order(sub["task_id"], catalog)
    data_rows, display_rows = [], []
    for task in tasks:
        rows = sub[sub["task_id"] == task]
        data = {"task": _task_label(task, catalog), "task_id": task,
                "modality": next((m for m in rows["modality"] if isinstance(m, str) and m), "")}
        shown = dict(data)
        for system, source in order:
            mine = rows[(rows["system"] == system) & (rows["source"] == source)]
            label = column_label(system, source)
            for metric, name, spec in (("e2e_latency", "e2e s", ".2f"), ("ttft", "TTFT p50 s", ".3f"),
                                       ("accuracy", "accuracy", ".0%")):
                if metric == "ttft" and source != THIS_RUN:
                    continue  # the paper reports no first-token latency (its §10 names it as future work)
                hit = mine[mine["metric"] == metric]
                row = hit.iloc[0] if len(hit) else None
                data[f"{name} · {label}"] = row["value"] if row is not None else math.nan
                if metric == "accuracy" and row is not None and source != THIS_RUN:
                    cell = "reported correct" if row["status"] == "" and row["value"] == 1 else \
                        _cell(row, spec, source=source)
                elif metric == "accuracy" and row is not None and row["value_text"]:
                    cell = f"{_cell(row, spec)} ({row['value_text']})" if not math.isnan(row["value"]) else "not scored"
                elif metric == "accuracy" and row is not None and row["status"] == "" and math.isnan(row["value"]):
                    cell = "not scored"
                else:
                    cell = _cell(row, spec, source=source)
                shown[f"{name} · {label}"] = cell
        data_rows.append(data)
        display_rows.append(shown)
    # the paper's average latency (§5 text) and ours (mean of per-task means, quality suite excluded)
    average = {"task": "All tasks (average)", "task_id": "average", "modality": ""}
    shown_avg = dict(average)
    paper_avg = reference.select(_seed_rows(ref, "000"), "§5", metric="e2e_latency", task="All tasks (average)") \
        if len(ref) else ref
    for system, source in order:
        label = column_label(system, source)
        if source == THIS_RUN:
            s = systems[(systems["system"] == system) & (systems["source"] == source)]
            value = float(s["avg_e2e_s"].iloc[0]) if len(s) else math.nan
        else:
            hit = paper_avg[(paper_avg["model"] + " @ " + paper_avg["host"]) == system] if len(paper_avg) else paper_avg
            value = float(hit["value"].iloc[0]) if len(hit) else math.nan
        average[f"e2e s · {label}"] = value
        shown_avg[f"e2e s · {label}"] = fmt(value, ".2f")
    data_rows.append(average)
    display_rows.append(shown_avg)
    data = pd.DataFrame(data_rows)
    display = pd.DataFrame(display_rows).drop(columns=["task_id"], errors="ignore").fillna("")
    return Table("latency_accuracy", "End-to-end latency and accuracy per task (000 §5) beside our runs", data, display,
                 caption="Published accuracy is the paper's pass/fail summary ('reported correct'); ours is passed ÷ "
                         "scored requests by the task's checker. TTFT appears for our runs only. Our average excludes "
                         "the quality suite, as the paper averages its speed tasks.")


# ------------------------------------------------------------------------------------------- memory/power (§6)

def memory_power_table(systems: pd.DataFrame) -> Table:
    columns = ["system", "source", "memory_gb", "memory_kind", "avg_power_w", "peak_power_w", "avg_temp_c",
               "peak_temp_c", "avg_decode_tps", "tps_per_w", "tps_per_w_reported", "tokens_per_joule", "energy_note"]
    data = systems.reindex(columns=columns).copy()
    display = pd.DataFrame({
        "system": data["system"], "source": data["source"].map(source_label),
        "memory (GB)": [f"{fmt(v, '.1f')} ({k})" if not _isnan(v) else "not measured"
                        for v, k in zip(data["memory_gb"], data["memory_kind"])],
        "avg power (W)": [fmt(v, ".1f", "no energy data") for v in data["avg_power_w"]],
        "peak power (W)": [fmt(v, ".1f") for v in data["peak_power_w"]],
        "avg / peak temp (°C)": [f"{fmt(a, '.1f')} / {fmt(p, '.0f')}" for a, p in zip(data["avg_temp_c"],
                                                                                        data["peak_temp_c"])],
        "avg throughput (tok/s)": [fmt(v, ".1f") for v in data["avg_decode_tps"]],
        "tok/s/W (recomputed)": [fmt(v, ".2f") for v in data["tps_per_w"]],
        "tok/s/W (printed)": [fmt(v, ".2f") for v in data["tps_per_w_reported"]],
        "tokens per joule": [fmt(v, ".2f") for v in data["tokens_per_joule"]],
        "note": data["energy_note"],
    })
    return Table("memory_power_thermal", "Memory, power and thermal efficiency (000 §6) beside our runs", data, display,
                 caption="tok/s/W = average throughput ÷ average inference power, recomputed from the printed "
                         "averages (0.20 / 0.22 / 0.59 as printed). Tokens per joule equals tok/s/W for the paper's "
                         "steady-state figures; for our runs it is completion tokens ÷ measured window energy. "
                         "Energy columns stay empty where the host has no energy sensor, with the reason.")


def _smart(value: Any) -> str:
    """A readable number: whole numbers without decimals, 3 significant digits otherwise (never e-notation)."""
    v = _num(value)
    if math.isnan(v):
        return "–"
    if v.is_integer():
        return f"{v:.0f}"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.3g}"


def _isnan(value: Any) -> bool:
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return False


# ------------------------------------------------------------------------------------------- frontier (§7)

def _axis_text(axis: str, direction: str, value: Any) -> str:
    arrow = "↑" if direction == "max" else "↓"
    return f"{axis} {arrow} {fmt(_num(value), AXIS_FORMATS.get(axis, '.3g'), 'n/a')}"


def frontier_tables(systems: pd.DataFrame, regimes: Mapping[str, frontier.Regime],
                    ref: pd.DataFrame) -> tuple[Table, Table]:
    """(frontier, dominance): per regime × system the axis values, membership and dominators (with the axes
    they are better on); and every dominated/dominator pair."""
    printed = _seed_rows(ref, "000")
    printed = printed[printed["metric"] == "frontier_model"] if len(printed) else printed
    rows, pairs = [], []
    axis_columns = list(dict.fromkeys(a for r in regimes.values() for a in r.axes))
    for key, regime in regimes.items():
        if systems.empty:
            continue
        marked = frontier.pareto_frontier(systems, regime.axes, requires=regime.requires)
        dom = frontier.dominance_pairs(systems[~marked["dominated_by"].str.startswith("not eligible")], regime.axes)
        paper_model = regime.paper_model
        paper_row = printed[printed["task"] == regime.title] if len(printed) else printed
        for row in marked.to_dict("records"):
            entry = {"regime_key": key, "regime": regime.title,
                     "axes_spec": ", ".join(f"{a} {'↑' if d == 'max' else '↓'}" for a, d in regime.axes.items()),
                     "axes": ", ".join(_axis_text(a, d, row[a]) for a, d in regime.axes.items()),
                     "system": row["system"], "source": row["source"], "on_frontier": bool(row["on_frontier"]),
                     "dominated_by": row["dominated_by"],
                     "paper_frontier_model": paper_model,
                     "paper_reason": (str(paper_row["note"].iloc[0]) if len(paper_row) else "")}
            entry.update({a: row[a] if a in regime.axes else math.nan for a in axis_columns})
            if row["source"] != THIS_RUN and paper_model:
                entry["matches_paper"] = bool(row["on_frontier"]) == (row["model"] == paper_model)
            else:
                entry["matches_paper"] = None
            rows.append(entry)
        for p in dom.itertuples():
            pairs.append({"regime_key": key, "regime": regime.title, "dominated": p.dominated,
                          "dominated_by": p.dominated_by, "better_on": ", ".join(p.better_on),
                          "tied_on": ", ".join(p.tied_on)})
    data = pd.DataFrame(rows, columns=["regime_key", "regime", "axes_spec", "system", "source", "on_frontier", "axes",
                                       "dominated_by", "paper_frontier_model", "matches_paper", "paper_reason"]
                        + axis_columns)
    display = pd.DataFrame({
        "regime": data["regime"], "system": data["system"], "source": data["source"].map(source_label),
        "axes (↑ higher / ↓ lower is better)": data["axes"],
        "on frontier": data["on_frontier"].map(lambda v: "**yes**" if v else "no"),
        "dominated by (better on)": data["dominated_by"].replace("", "—"),
        "paper (§7)": [("agrees" if m else "DIFFERS") if m is not None else ("extra system" if s == THIS_RUN else "")
                       for m, s in zip(data["matches_paper"], data["source"])],
    })
    frontier_table = Table("frontier", "Deployment frontier per regime preset (000 §7), our runs as extra systems",
                           data, display,
                           caption="A system is on a regime's frontier when no other system is at least as good on "
                                   "every axis and strictly better on one; a missing value counts as worst. "
                                   "'Every axis at once' reproduces the paper's split frontier (no global winner).")
    dominance = pd.DataFrame(pairs, columns=["regime_key", "regime", "dominated", "dominated_by", "better_on",
                                             "tied_on"])
    return frontier_table, Table("frontier_dominance", "Who dominates whom, on which axes", dominance,
                                 dominance.drop(columns=["regime_key"]),
                                 caption="Every dominated/dominator pair per regime with the axes the dominator is "
                                         "strictly better on and those it ties on.")


def frontier_systems_table(systems: pd.DataFrame) -> Table:
    columns = ["system", "source", "avg_decode_tps", "modality_count", "video_support", "tps_per_w", "peak_temp_c",
               "context_window_k", "asr_decode_tps", "short_qa_decode_tps", "avg_power_w", "avg_e2e_s",
               "peak_throughput_tps", "max_concurrency_ok", "max_context_ok_k", "knee_concurrency"]
    data = systems.reindex(columns=columns)
    display = data.copy()
    display["source"] = display["source"].map(source_label)
    for column in columns[2:]:
        display[column] = [fmt(_num(v), AXIS_FORMATS.get(column, ".3g"), "n/a") for v in data[column]]
    return Table("frontier_systems", "Frontier inputs per system", data, display,
                 caption="The axis values the regimes judge (n/a = not supported or not measured: worst on that axis).")


def frontier_text(table: Table, dominance: Table | None = None) -> str:
    """Plain-text frontier summary: per regime the axes, members, the paper's pick and the dominated systems,
    then the full table."""
    data = table.data
    if data.empty:
        return "deployment frontier: no systems (no reference data and no runs)"
    lines = ["DEPLOYMENT FRONTIER (000 §7 regimes; our runs as extra systems)", ""]
    for key, group in data.groupby("regime_key", sort=False):
        regime = group["regime"].iloc[0]
        lines.append(f"[{key}] {regime}")
        lines.append(f"  axes:      {group['axes_spec'].iloc[0]}")
        members = group.loc[group["on_frontier"], "system"].tolist()
        lines.append(f"  frontier:  {'; '.join(members) if members else '(none)'}")
        paper_model = group["paper_frontier_model"].iloc[0]
        if paper_model:
            published = group[group["source"] != THIS_RUN]
            agrees = bool(published["matches_paper"].all()) if len(published) else False
            lines.append(f"  paper:     {paper_model} — {'reproduced' if agrees else 'NOT reproduced'}")
        for row in group.itertuples():
            excluded = str(row.dominated_by).startswith("not eligible")
            tag = "FRONTIER " if row.on_frontier else ("excluded " if excluded else "dominated")
            src = source_label(row.source)
            detail = f" ({row.dominated_by})" if excluded else (f" by {row.dominated_by}" if row.dominated_by else "")
            lines.append(f"    {tag} {row.system} [{src}]: {row.axes}{detail}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------------------------------- capability (§9)

def capability_table(ref: pd.DataFrame, runs: Runs, long: pd.DataFrame) -> Table:
    rows = []
    paper = _seed_rows(ref, "000")
    s9 = reference.select(paper, "§9") if len(paper) else paper
    for model, group in (s9.groupby("model", sort=False) if len(s9) else []):
        by = {m: g.iloc[0] for m, g in group.groupby("metric")}
        rows.append({"system": f"{model} @ {group['host'].iloc[0]}", "source": group["source"].iloc[0],
                     "video": by["video_support"]["value_text"] if "video_support" in by else "",
                     "video_support": by["video_support"]["value"] if "video_support" in by else math.nan,
                     "video_e2e_s": by["e2e_latency"]["value"] if "e2e_latency" in by else math.nan,
                     "video_decode_tps": by["decode_tps"]["value"] if "decode_tps" in by else math.nan,
                     "context_window_k": by["context_window"]["value"] if "context_window" in by else math.nan,
                     "modalities": ""})
    video = long[(long["task_id"] == "video_analysis") & (long["source"] == THIS_RUN)]
    for meta in runs.meta.itertuples():
        mine = video[video["system"] == meta.system]
        declared = "video" in meta.modalities.split(", ")
        if mine.empty:
            text, support = ("declared, not run" if declared else "not declared; video suite not run"), math.nan
            e2e = tps = math.nan
        else:
            status = mine["status"].iloc[0]
            e2e = float(mine.loc[mine["metric"] == "e2e_latency", "value"].iloc[0])
            tps = float(mine.loc[mine["metric"] == "decode_tps", "value"].iloc[0])
            if status == "not supported":
                text, support = "Not supported in this deployment", 0.0
            elif status.startswith("invalid"):
                text, support = f"failed ({status})", 0.0
            else:
                text, support = "Supported", 1.0
        rows.append({"system": meta.system, "source": THIS_RUN, "video": text, "video_support": support,
                     "video_e2e_s": e2e, "video_decode_tps": tps,
                     "context_window_k": (meta.context_window / 1000 if not math.isnan(meta.context_window)
                                          else math.nan),
                     "modalities": meta.modalities})
    data = pd.DataFrame(rows, columns=["system", "source", "video", "video_support", "video_e2e_s", "video_decode_tps",
                                       "context_window_k", "modalities"])
    display = pd.DataFrame({
        "system": data["system"], "source": data["source"].map(source_label), "video understanding": data["video"],
        "video benchmark": [f"{fmt(e, '.1f')} s, {fmt(t, '.1f')} tok/s" if not _isnan(t) else "not applicable"
                            for e, t in zip(data["video_e2e_s"], data["video_decode_tps"])],
        "max context window": [f"{fmt(v, '.3g')}K" if not _isnan(v) else "not given" for v in data["context_window_k"]],
        "modalities (declared)": data["modalities"].replace("", "—"),
    })
    return Table("capability_context", "Video and context-length capability (000 §9) beside our runs", data, display,
                 caption="Video support from the run's video suite (a request that succeeded); context window as "
                         "configured (server.context_window).")


# ------------------------------------------------------------------------------------------- roofline

ROOFLINE_COLUMNS = ["label", "source", "host", "model", "quantization", "memory_bandwidth_gbs", "active_params_b",
                    "bytes_per_param", "bytes_per_param_source", "bytes_per_token_gb", "decode_tps", "ceiling_tps",
                    "efficiency", "implied_bandwidth_gbs", "note"]


def _active_params(ref: pd.DataFrame, model: str) -> float:
    rows = ref[(ref["model"] == model) & (ref["metric"] == "params_active")] if len(ref) else ref
    values = rows["value"].dropna()
    return float(values.iloc[0]) if len(values) else math.nan


def roofline_points(ref: pd.DataFrame, runs: Runs, systems: pd.DataFrame) -> pd.DataFrame:
    """One row per measured point: the paper's systems (000), 002's Ollama runs, 004's quantizations, our runs."""
    frames = []
    published = systems[systems["source"] != THIS_RUN]
    if len(published):
        frame = pd.DataFrame({
            "label": [f"{m} {q.split(' ')[0]} · {h}" for m, q, h in zip(published["model"], published["quantization"],
                                                                         published["host"])],
            "source": published["source"], "host": published["host"], "model": published["model"],
            "quantization": published["quantization"], "memory_bandwidth_gbs": published["memory_bandwidth_gbs"],
            "active_params_b": published["active_params_b"], "decode_tps": published["avg_decode_tps"],
            "note": "average throughput (§6); parameters as §2 reports them"})
        frames.append(roofline.roofline_table(frame))
    if len(_seed_rows(ref, "002")):
        runs002 = reference.bandwidth_runs(ref)
        frame = pd.DataFrame({
            "label": [f"{m} · {h}" for m, h in zip(runs002["model"], runs002["host"])],
            "source": _seed_rows(ref, "002")["source"].iloc[0], "host": runs002["host"], "model": runs002["model"],
            "quantization": runs002["quantization"], "memory_bandwidth_gbs": runs002["memory_bandwidth_gbs"],
            "active_params_b": [_active_params(ref, m) for m in runs002["model"]],
            "decode_tps": runs002["decode_tps"],
            "note": "Ollama default quantization (not stated in the seed): no ceiling drawn"})
        frames.append(roofline.roofline_table(frame))
    if len(_seed_rows(ref, "004")):
        runs004 = reference.quant_runs(ref)
        frame = pd.DataFrame({
            "label": [f"{m} {q} · {h}" for m, q, h in zip(runs004["model"], runs004["quantization"], runs004["host"])],
            "source": _seed_rows(ref, "004")["source"].iloc[0], "host": runs004["host"], "model": runs004["model"],
            "quantization": runs004["quantization"], "memory_bandwidth_gbs": runs004["memory_bandwidth_gbs"],
            "active_params_b": runs004["active_params_b"], "decode_tps": runs004["decode_tps"],
            "note": "~4B parameters read per token (the blog's figure); 500-token generation"})
        frames.append(roofline.roofline_table(frame))
    ours = systems[systems["source"] == THIS_RUN]
    if len(ours):
        frame = pd.DataFrame({
            "label": [f"{m} · {h}" for m, h in zip(ours["model"], ours["host"])], "source": THIS_RUN,
            "host": ours["host"], "model": ours["model"], "quantization": ours["quantization"],
            "memory_bandwidth_gbs": ours["memory_bandwidth_gbs"], "active_params_b": ours["active_params_b"],
            "bytes_per_param": ours["bytes_per_param"], "decode_tps": ours["avg_decode_tps"], "note": ""})
        table = roofline.roofline_table(frame)
        notes = []
        for row in table.itertuples():
            missing = []
            if _isnan(row.memory_bandwidth_gbs):
                missing.append("bandwidth unknown (host.memory_bandwidth_gbs not set)")
            if _isnan(row.active_params_b):
                missing.append("server.active_params_b not set")
            if _isnan(row.bytes_per_param):
                missing.append("bytes per parameter unknown (server.bytes_per_param / quantization)")
            notes.append("; ".join(missing) if missing else "average decode tok/s over our speed tasks")
        table["note"] = notes
        frames.append(table)
    if not frames:
        return pd.DataFrame(columns=ROOFLINE_COLUMNS)
    out = pd.concat(frames, ignore_index=True)
    out["implied_bandwidth_gbs"] = pd.to_numeric(out["decode_tps"], errors="coerce") * out["bytes_per_token_gb"]
    return out.reindex(columns=ROOFLINE_COLUMNS)


def roofline_table(points: pd.DataFrame) -> Table:
    display = pd.DataFrame({
        "run": points["label"], "source": points["source"].map(source_label),
        "bandwidth (GB/s)": [fmt(v, ".0f") if not _isnan(v) else ("bandwidth unknown" if s == THIS_RUN else "–")
                             for v, s in zip(points["memory_bandwidth_gbs"], points["source"])],
        "active params (B)": [fmt(v, ".3g") for v in points["active_params_b"]],
        "bytes/param": [f"{fmt(v, '.3g')} ({s})" if not _isnan(v) else "unknown"
                        for v, s in zip(points["bytes_per_param"], points["bytes_per_param_source"])],
        "GB read/token": [fmt(v, ".3g") for v in points["bytes_per_token_gb"]],
        "measured tok/s": [fmt(v, ".1f") for v in points["decode_tps"]],
        "ceiling tok/s": [fmt(v, ".1f") for v in points["ceiling_tps"]],
        "measured ÷ ceiling": [fmt(v, ".0%") for v in points["efficiency"]],
        "note": points["note"],
    })
    return Table("roofline", "Bandwidth roofline: decode ceiling = bandwidth ÷ bytes read per token", points, display,
                 caption="Bytes per token = active parameters × bytes per parameter (KV reads ignored, so the ceiling "
                         "is an upper bound). implied_bandwidth_gbs in the CSV = measured tok/s × GB per token: the "
                         "bandwidth a run used at least.")


# ------------------------------------------------------------------------------------------- decisions (001)

def decisions_table(ref: pd.DataFrame, runs: Runs, thresholds: str = "heros_swap") -> Table:
    preset = THRESHOLD_PRESETS[thresholds]
    frames = []
    if len(_seed_rows(ref, "001")):
        cands = reference.heros_decision_candidates(ref)
        cands["source"] = _seed_rows(ref, "001")["source"].iloc[0]
        frames.append(cands)
    if not runs.empty and len(runs.summary):
        ours = analysis.decision_inputs(runs.summary)
        ours["source"], ours["reported_decision"], ours["section"] = THIS_RUN, "", ""
        frames.append(ours)
    columns = ["candidate", "source", "section", "decode_tps", "ttft_ms", "model_memory_gb", "tools_passed",
               "entity_recall", "vision_works", "verdict", "decision", "reported_decision"]
    if not frames:
        return Table("decisions", "Swap decisions", pd.DataFrame(columns=columns))
    cands = pd.concat(frames, ignore_index=True)
    decided = frontier.decide(cands, preset)
    data = cands.merge(decided[["candidate", "verdict", "decision"]], on="candidate", how="left")
    data = data.reindex(columns=columns)
    display = data.copy()
    display["source"] = display["source"].map(source_label)
    for column, spec in (("decode_tps", ".1f"), ("ttft_ms", ".0f"), ("model_memory_gb", ".1f"),
                         ("tools_passed", ".3g"), ("entity_recall", ".2f")):
        display[column] = [fmt(_num(v), spec) for v in data[column]]
    display["vision_works"] = [fmt(v) if isinstance(v, (bool, np.bool_)) else "–" for v in data["vision_works"]]
    limits = ", ".join(f"{k}={v}" for k, v in preset.model_dump().items() if v not in (None, False))
    return Table("decisions", f"Swap decisions under the her-os thresholds ({thresholds}: {limits})", data, display,
                 caption="001's decision tables re-judged by frontier.decide (SWAP = all pass, VERIFY = none fails but "
                         "data missing, WAIT = a threshold fails); our runs judged the same way. Our memory is the "
                         "peak telemetry memory (an upper bound).")


# ------------------------------------------------------------------------------------------- load sweeps

LOAD_DISPLAY = {
    "concurrency": ["system", "concurrency", "n_ok", "n_failed", "throughput_tps", "decode_tps_mean", "ttft_s_p50",
                    "e2e_s_p50", "knee", "saturated", "client_bound"],
    "context": ["system", "target_tokens", "prompt_tokens", "exact", "n_ok", "n_failed", "ttft_s_p50", "prefill_tps",
                "client_bound", "note"],
}


def load_tables(runs: Runs) -> dict[str, Table]:
    """The load suite's sweeps (benchlib.sweeps: sweep_concurrency.csv, sweep_context.csv), when present."""
    out = {}
    for kind, frame in runs.load.items():
        name = f"load_{kind}"
        data = frame.assign(system=frame["model"].astype(str) + " @ " + frame["host"].astype(str))
        data = data[["system"] + [c for c in data.columns if c != "system"]]
        display = data[[c for c in LOAD_DISPLAY[kind] if c in data.columns]].copy()
        for column in display.columns:
            if pd.api.types.is_float_dtype(display[column]):
                display[column] = [_smart(v) for v in display[column]]
        caption = ("Aggregate output tok/s and latency per concurrency level; the knee is the first level after "
                   "which throughput grows < 10 % while p50 latency grows ≥ 1.5×; client_bound marks levels the "
                   "client itself may have paced." if kind == "concurrency" else
                   "TTFT and prefill rate per prompt length (server-counted prompt tokens beside the target).")
        out[name] = Table(name, f"Load sweep: {kind} (our runs)", data, display, caption=caption)
    return out


# ------------------------------------------------------------------------------------------- all tables

def build_tables(ref: pd.DataFrame, runs: Runs, settings: Settings | None = None) -> dict[str, Table]:
    """Every table of the paper, keyed by name (TABLES order), plus load sweeps when present."""
    settings = settings or Settings.from_parameters()
    catalog = _task_catalog()
    systems = all_systems(ref, runs)
    long = task_metrics_long(ref, runs, catalog)
    frontier_table, dominance = frontier_tables(systems, settings.regime_objects(), ref)
    tables = {
        "runs": runs_table(runs),
        "setup": setup_table(ref, runs),
        "platform": platform_table(ref, runs),
        "throughput": throughput_table(long, systems, catalog),
        "latency_accuracy": latency_accuracy_table(long, systems, catalog, ref),
        "memory_power_thermal": memory_power_table(systems),
        "frontier": frontier_table,
        "frontier_dominance": dominance,
        "frontier_systems": frontier_systems_table(systems),
        "capability_context": capability_table(ref, runs, long),
        "roofline": roofline_table(roofline_points(ref, runs, systems)),
        "decisions": decisions_table(ref, runs, settings.thresholds),
    }
    tables.update(load_tables(runs))
    tables[LONG_TABLE] = Table(LONG_TABLE, "Published rows and ours, tidy", published_and_runs_long(ref, runs))
    tables["_task_metrics"] = Table("_task_metrics", "per-task metrics (internal)", long)
    tables["_systems"] = Table("_systems", "systems (internal)", systems)
    return tables


def published_and_runs_long(ref: pd.DataFrame, runs: Runs) -> pd.DataFrame:
    """Every selected reference row (time units harmonized) and our summaries in the same long format."""
    frames = [reference.harmonize_units(ref).drop(columns=["task_id"], errors="ignore")] if len(ref) else []
    for meta in runs.meta.itertuples():
        mine = runs.summary[(runs.summary["host"] == meta.host) & (runs.summary["model"] == meta.model)]
        frames.append(analysis.to_long(mine, source=THIS_RUN, meta={
            "hardware": meta.hardware or meta.cpu, "quantization": meta.quantization,
            "server": f"{meta.server_software} {meta.server_version}".strip()}))
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=reference.REFERENCE_COLUMNS)


# ================================================================================================ figures

PUBLISHED_PALETTE = sns.color_palette("deep", 10)
RUN_PALETTE = sns.color_palette("dark", 10)[3:] + sns.color_palette("dark", 3)


def system_colors(systems: pd.DataFrame) -> dict[str, Any]:
    colors: dict[str, Any] = {}
    pub = [s for s, src in zip(systems["system"], systems["source"]) if src != THIS_RUN]
    ours = [s for s, src in zip(systems["system"], systems["source"]) if src == THIS_RUN]
    for i, name in enumerate(dict.fromkeys(pub)):
        colors[name] = PUBLISHED_PALETTE[i % len(PUBLISHED_PALETTE)]
    for i, name in enumerate(dict.fromkeys(ours)):
        colors[name] = RUN_PALETTE[i % len(RUN_PALETTE)]
    return colors


def _theme() -> None:
    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.95)
    plt.rcParams.update({"axes.titleweight": "bold", "figure.titleweight": "bold", "svg.fonttype": "none"})


def _no_runs_note(ax: plt.Axes, text: str = f"this run: {NO_RUNS} in outputs/", loc: str = "lower right") -> None:
    anchor = {"lower right": (0.98, 0.02, "right", "bottom"), "upper right": (0.98, 0.98, "right", "top"),
              "center": (0.5, 0.5, "center", "center")}[loc]
    ax.text(anchor[0], anchor[1], text, transform=ax.transAxes, ha=anchor[2], va=anchor[3], fontsize=9,
            style="italic", color="0.35", bbox={"boxstyle": "round,pad=0.35", "fc": "white", "ec": "0.75"})


def _wrap(text: str, width: int = 60) -> str:
    return "\n".join(textwrap.wrap(str(text), width)) or str(text)


def _bar_frame(long: pd.DataFrame, metric: str, runs: Runs, request_col: str | None) -> pd.DataFrame:
    """Per task × system values for a bar chart: published single values, ours as request rows (for sd bars)."""
    rows = long[(long["metric"] == metric) & (long["status"] == "")].dropna(subset=["value"])
    frames = [rows[rows["source"] != THIS_RUN][["task_id", "task", "system", "source", "value"]]]
    if request_col and len(runs.requests):
        req = runs.requests
        ok = req[(req["status"] == STATUS_OK) & ~req["is_warmup"].astype(bool)].copy()
        ok["system"] = ok["model"].astype(str) + " @ " + ok["host"].astype(str)
        ok["value"] = pd.to_numeric(ok[request_col], errors="coerce")
        ok = ok.dropna(subset=["value"])
        valid = rows[rows["source"] == THIS_RUN][["task_id", "system"]].drop_duplicates()
        ok = ok.merge(valid, left_on=["task", "system"], right_on=["task_id", "system"])
        ok["source"] = THIS_RUN
        ok["task"] = ok["task_id"].map(dict(zip(long["task_id"], long["task"])))
        frames.append(ok[["task_id", "task", "system", "source", "value"]])
    else:
        frames.append(rows[rows["source"] == THIS_RUN][["task_id", "task", "system", "source", "value"]])
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["task_id", "task", "system",
                                                                                     "source", "value"])


def _status_marks(long: pd.DataFrame, metric: str, catalog: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(task label, system) -> 'n/a' / 'not supported' / 'invalid' for the cells a bar chart leaves empty."""
    rows = long[(long["metric"] == metric) & (long["status"] != "")]
    marks = {}
    for row in rows.itertuples():
        mark = ("n/a" if row.status == "not applicable" else "not supported" if row.status == "not supported"
                else "invalid")
        marks[(_task_label(row.task_id, catalog), row.system)] = mark
    return marks


def _hbar(ax: plt.Axes, data: pd.DataFrame, order: list[str], hue_order: list[str], colors: Mapping[str, Any],
          xlabel: str, title: str, marks: Mapping[tuple[str, str], str] | None = None, spec: str = ".1f",
          legend_below: bool = True) -> None:
    """Horizontal grouped bars (task × system): value at each bar end, status marks where a bar is missing,
    our runs hatched with sd whiskers, legend below the axes so it never covers a bar."""
    if data.empty:
        ax.set_axis_off()
        _no_runs_note(ax, "no data", "center")
        return
    sns.barplot(data=data, y="task", x="value", hue="system", order=order, hue_order=hue_order,
                palette={s: colors.get(s, "0.5") for s in hue_order}, errorbar="sd", orient="h", ax=ax,
                err_kws={"linewidth": 1.2}, capsize=0.15, saturation=0.9, width=0.8)
    ours = set(data.loc[data["source"] == THIS_RUN, "system"])
    for container, system in zip(ax.containers, hue_order):
        if system in ours:
            for patch in container.patches if hasattr(container, "patches") else container:
                patch.set_hatch("///")
                patch.set_edgecolor("white")
    stats = data.groupby(["task", "system"])["value"].agg(["mean", "std"])
    top = float((stats["mean"] + stats["std"].fillna(0)).max())
    n = len(hue_order)
    for i, task in enumerate(order):
        for j, system in enumerate(hue_order):
            y = i - 0.4 + 0.8 * (j + 0.5) / n
            if (task, system) in stats.index:
                mean, sd = stats.loc[(task, system)]
                x = mean + (0 if math.isnan(sd) else sd)
                ax.text(x + top * 0.01, y, format(mean, spec), va="center", fontsize=7, color="0.25")
            elif marks and (task, system) in marks:
                ax.text(top * 0.01, y, marks[(task, system)], va="center", fontsize=7, color="0.45", style="italic")
    ax.set_xlim(0, top * 1.12)
    ax.set(xlabel=xlabel, ylabel="", title=title)
    handles, labels = ax.get_legend_handles_labels()
    labels = [f"{lab}  [this run]" if lab in ours else lab for lab in labels]
    if legend_below:
        ax.legend(handles, labels, title="bars = mean; hatched = this run, whiskers = ± sd over requests",
                  fontsize=8, title_fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08),
                  ncol=2 if n > 2 else n, frameon=False)
    else:
        ax.legend(handles, labels, fontsize=8, loc="lower right")


def fig_throughput(tables: Mapping[str, Table], runs: Runs) -> plt.Figure:
    _theme()
    long, systems = tables["_task_metrics"].data, tables["_systems"].data
    catalog = _task_catalog()
    data = _bar_frame(long, "decode_tps", runs, "decode_tps")
    order = [_task_label(t, catalog) for t in _task_order(data["task_id"], catalog)]
    hue = [s for s in dict.fromkeys(list(systems["system"]) + list(data["system"])) if s in set(data["system"])]
    height = max(4.5, 0.2 * len(order) * max(len(hue), 1) + 2.4)
    fig, ax = plt.subplots(figsize=(11, height))
    _hbar(ax, data, order, hue, system_colors(systems), "decode throughput (tokens / s), higher is better",
          "Generation throughput by task and system (000 §4, §9 video; our runs hatched)"
          + (f"\nthis run: {NO_RUNS}" if runs.empty else ""), _status_marks(long, "decode_tps", catalog))
    fig.tight_layout()
    return fig


def fig_latency(tables: Mapping[str, Table], runs: Runs) -> plt.Figure:
    _theme()
    long, systems = tables["_task_metrics"].data, tables["_systems"].data
    catalog = _task_catalog()
    e2e = _bar_frame(long, "e2e_latency", runs, "e2e_s")
    ttft = _bar_frame(long[long["source"] == THIS_RUN], "ttft", runs, "ttft_s")
    order = [_task_label(t, catalog) for t in _task_order(e2e["task_id"], catalog)]
    hue = [s for s in dict.fromkeys(list(systems["system"]) + list(e2e["system"])) if s in set(e2e["system"])]
    height = max(4.5, 0.2 * len(order) * max(len(hue), 1) + 2.4)
    fig, axes = plt.subplots(1, 2, figsize=(16, height), gridspec_kw={"width_ratios": [1.7, 1 if len(ttft) else 0.55]})
    colors = system_colors(systems)
    _hbar(axes[0], e2e, order, hue, colors, "end-to-end latency (s), lower is better",
          "End-to-end latency by task (000 §5; our runs hatched)" + (f"\nthis run: {NO_RUNS}" if runs.empty else ""),
          _status_marks(long, "e2e_latency", catalog), spec=".2f")
    if ttft.empty:
        axes[1].set_axis_off()
        axes[1].set_title("Time to first token (this run)")
        _no_runs_note(axes[1], f"this run: {NO_RUNS}" if runs.empty else "no TTFT measured", "center")
    else:
        ttft_order = [_task_label(t, catalog) for t in _task_order(ttft["task_id"], catalog)]
        ttft = ttft.assign(value=ttft["value"] * 1000)
        ttft_hue = list(dict.fromkeys(ttft["system"]))
        _hbar(axes[1], ttft, ttft_order, ttft_hue, colors, "TTFT (ms), lower is better",
              "Time to first token (this run only;\nthe paper reports none)", spec=".0f")
    fig.tight_layout()
    return fig


def fig_energy(tables: Mapping[str, Table], runs: Runs) -> plt.Figure:
    _theme()
    systems = tables["_systems"].data
    if systems.empty:
        return _empty_figure("Energy efficiency", f"no systems: paper_000 not loaded and {NO_RUNS}")
    colors = system_colors(systems)
    fig, axes = plt.subplots(1, 2, figsize=(14, max(3.8, 0.75 * len(systems) + 2)))
    for ax, column, label, title in (
            (axes[0], "tps_per_w", "tokens/s per watt (higher is better)", "Energy efficiency: tok/s per W"),
            (axes[1], "tokens_per_joule", "tokens per joule (higher is better)", "Energy efficiency: tokens per J")):
        data = systems[["system", "source", column, "energy_note"]].copy()
        data["value"] = pd.to_numeric(data[column], errors="coerce")
        data["label"] = [f"{s}\n[{source_label(src)}]" for s, src in zip(data["system"], data["source"])]
        plotted = data.fillna({"value": 0.0})
        sns.barplot(data=plotted, y="label", x="value", hue="system", palette=colors, legend=False, ax=ax,
                    orient="h", saturation=0.9)
        top = float(data["value"].max()) if data["value"].notna().any() else 1.0
        for i, row in enumerate(data.itertuples()):
            if math.isnan(row.value):
                reason = str(row.energy_note).removeprefix("no energy: ")
                ax.text(top * 0.02, i, _wrap(f"no energy data — {reason}", 70), va="center", fontsize=7.5,
                        color="0.3", style="italic")
            else:
                ax.text(row.value + top * 0.01, i, f"{row.value:.2f}", va="center", fontsize=9)
        ax.set(xlabel=label, ylabel="", title=title, xlim=(0, top * 1.25))
    axes[1].set_yticklabels([])
    note = ("Published: average throughput ÷ average inference power (000 §6), so tok/s/W = tok/J. "
            "This run: decode tok/s ÷ mean window power, and completion tokens ÷ window energy.")
    fig.text(0.01, 0.005, note, fontsize=8, color="0.35")
    if runs.empty:
        _no_runs_note(axes[0], loc="lower right")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


# ---- label placement (greedy, no overlaps with other labels, markers or the axes edge) -----------------

_OFFSETS = [(8, 8, "left", "bottom"), (8, -8, "left", "top"), (-8, 8, "right", "bottom"), (-8, -8, "right", "top"),
            (0, 12, "center", "bottom"), (0, -12, "center", "top"), (14, 0, "left", "center"),
            (-14, 0, "right", "center"), (24, 26, "left", "bottom"), (24, -26, "left", "top"),
            (-24, 26, "right", "bottom"), (-24, -26, "right", "top"), (0, 34, "center", "bottom"),
            (0, -34, "center", "top"), (40, 46, "left", "bottom"), (-40, -46, "right", "top"),
            (40, -46, "left", "top"), (-40, 46, "right", "bottom"), (60, 0, "left", "center"),
            (-60, 0, "right", "center")]


def place_labels(ax: plt.Axes, xs: Sequence[float], ys: Sequence[float], texts: Sequence[str],
                 colors: Sequence[Any] | None = None, fontsize: float = 8.0,
                 obstacles: Sequence[Any] = ()) -> list[Any]:
    """Annotate points choosing, for each, the first offset whose label box overlaps no placed label, no
    marker and stays inside the axes (else the least-overlapping one), with a leader line when moved far."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    pts = ax.transData.transform(np.column_stack([xs, ys])) if len(xs) else np.empty((0, 2))
    marker = [Bbox.from_bounds(px - 5, py - 5, 10, 10) for px, py in pts]
    placed: list[Bbox] = [o.get_window_extent(renderer) if hasattr(o, "get_window_extent") else o for o in obstacles]
    out: list[Any] = [None] * len(texts)
    crowd = [sum(1 for q in pts if np.hypot(*(q - p)) < 60) for p in pts]
    for i in sorted(range(len(texts)), key=lambda k: -crowd[k]):  # crowded points choose first
        text = texts[i]
        best, best_score, best_box = None, math.inf, None
        for dx, dy, ha, va in _OFFSETS:
            far = abs(dx) > 15 or abs(dy) > 15
            ann = ax.annotate(text, (xs[i], ys[i]), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                              fontsize=fontsize, color=(colors[i] if colors is not None else "0.15"),
                              bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.8},
                              arrowprops=({"arrowstyle": "-", "color": "0.55", "lw": 0.7} if far else None),
                              zorder=5)
            box = ann.get_window_extent(renderer).expanded(1.1, 1.2)
            score = sum(_overlap(box, b) for b in placed)
            score += sum(_overlap(box, m) for j, m in enumerate(marker) if j != i)
            outside = box.width * box.height - _overlap(box, axes_box)
            score += outside * 3 + (0.5 if far else 0)
            if score < best_score:
                if best is not None:
                    best.remove()
                best, best_score, best_box = ann, score, box
            else:
                ann.remove()
            if score < 1:
                break
        placed.append(best_box)
        out[i] = best
    return out


def _overlap(a: Bbox, b: Bbox) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def _short(system: str) -> str:
    return system.split(" @ ")[0]


# ---- Pareto scatter -------------------------------------------------------------------------------------------

PARETO_PANELS = [("workstation", "avg_decode_tps", "modality_count"), ("edge", "tps_per_w", "peak_temp_c"),
                 ("audio", "asr_decode_tps", "short_qa_decode_tps"), ("tradeoff", "avg_decode_tps", "tps_per_w")]


def fig_pareto(tables: Mapping[str, Table], runs: Runs, settings: Settings) -> plt.Figure:
    """One panel per regime preset (its first two axes; the frontier drawn over them, membership judged on all
    the regime's axes) plus the paper's headline trade-off, throughput vs tok/s/W."""
    _theme()
    systems = tables["_systems"].data
    colors = system_colors(systems)
    regimes = settings.regime_objects()
    panels = [(k, x, y) for k, x, y in PARETO_PANELS if k in regimes or k == "tradeoff"]
    ncols = 2
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(15, 6.2 * nrows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_axis_off()
    for ax, (key, xcol, ycol) in zip(axes.flat, panels):
        if key == "tradeoff":
            axes_dirs = {"avg_decode_tps": "max", "tps_per_w": "max"}
            title, requires = "Throughput vs energy efficiency (the paper's headline trade-off)", ()
        else:
            axes_dirs = dict(regimes[key].axes)
            title, requires = regimes[key].title, regimes[key].requires
        _pareto_panel(ax, systems, xcol, ycol, axes_dirs, title, colors, requires)
    handles = [Line2D([], [], marker="*", ls="", ms=14, mfc="0.3", mec="black", label="on the regime's frontier"),
               Line2D([], [], marker="o", ls="", ms=8, mfc="white", mec="0.3", label="dominated (label names by whom)"),
               Line2D([], [], marker="D", ls="", ms=8, mfc="0.3", mec="black", label="this run (diamond outline)"),
               Line2D([], [], color="0.2", ls="--", lw=1.2, label="Pareto front of the two plotted axes")]
    fig.legend(handles=handles, loc="lower center", ncol=4, frameon=False, fontsize=9, bbox_to_anchor=(0.5, 0.0))
    fig.suptitle("Deployment frontier: who stays non-dominated in each regime (000 §7)" +
                 ("" if not runs.empty else f" — this run: {NO_RUNS}"), fontsize=14)
    fig.tight_layout(rect=(0, 0.035, 1, 0.97))
    for ax, (key, xcol, ycol) in zip(axes.flat, panels):  # labels last: the layout is final now
        _pareto_labels(ax)
    return fig


def _panel_limits(values: pd.Series, direction: str, has_missing: bool) -> tuple[float, float, float | None,
                                                                               tuple[float, float] | None]:
    """(low, high, where n/a values go, the n/a band) for one axis: finite values with a margin, and when some
    value is missing a band beyond the worst end (low end for 'max' axes, high end for 'min')."""
    finite = values.dropna().astype(float)
    lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
    span = hi - lo or (abs(hi) * 0.5 or 1.0)
    low, high = lo - 0.3 * span, hi + 0.3 * span
    if not has_missing:
        return low, high, None, None
    band = 0.22 * span
    if direction == "max":
        band_range = (low - band, low)
        return low - band, high, low - band / 2, band_range
    band_range = (high, high + band)
    return low, high + band, high + band / 2, band_range


def _pareto_panel(ax: plt.Axes, systems: pd.DataFrame, xcol: str, ycol: str, axes_dirs: Mapping[str, str],
                  title: str, colors: Mapping[str, Any], requires: Sequence[str] = ()) -> None:
    """Scatter of two regime axes. Systems lacking a value sit in a grey 'n/a' band at that axis' worst end
    (a missing value counts as worst, as in the frontier itself), so every system stays visible."""
    xdir, ydir = axes_dirs.get(xcol, "max"), axes_dirs.get(ycol, "max")
    marked = (frontier.pareto_frontier(systems, axes_dirs, requires=requires) if len(systems)
              else systems.assign(on_frontier=[], dominated_by=[]))
    x = pd.to_numeric(marked[xcol], errors="coerce")
    y = pd.to_numeric(marked[ycol], errors="coerce")
    x0, x1, x_na, x_band = _panel_limits(x, xdir, bool(x.isna().any()))
    y0, y1, y_na, y_band = _panel_limits(y, ydir, bool(y.isna().any()))
    px, py = x.fillna(x_na if x_na is not None else np.nan), y.fillna(y_na if y_na is not None else np.nan)
    extra = [a for a in axes_dirs if a not in (xcol, ycol)]
    if x_band:
        ax.axvspan(*x_band, color="0.92", zorder=0, lw=0)
        ax.text(sum(x_band) / 2, 0.99, f"n/a:\nno {xcol.replace('_', ' ')}", transform=ax.get_xaxis_transform(),
                ha="center", va="top", fontsize=7, color="0.4", style="italic")
    if y_band:
        ax.axhspan(*y_band, color="0.92", zorder=0, lw=0)
        ax.text(0.99, sum(y_band) / 2, f"n/a: no {ycol.replace('_', ' ')}", transform=ax.get_yaxis_transform(),
                ha="right", va="center", fontsize=7, color="0.4", style="italic")
    for row, xv, yv in zip(marked.itertuples(), px, py):
        ours = row.source == THIS_RUN
        ax.scatter(xv, yv, s=(320 if row.on_frontier else 90),
                   marker=("*" if row.on_frontier else ("D" if ours else "o")),
                   facecolor=(colors.get(row.system, "0.5") if row.on_frontier else "white"),
                   edgecolor=(colors.get(row.system, "0.5") if not row.on_frontier else "black"),
                   linewidth=(2.0 if not row.on_frontier else 0.8), zorder=4)
        if ours and row.on_frontier:
            ax.scatter(xv, yv, s=520, marker="D", facecolor="none", edgecolor=colors.get(row.system, "0.5"),
                       linewidth=1.5, zorder=3)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_xlabel(f"{AXIS_LABELS.get(xcol, xcol)}  {'→ better' if xdir == 'max' else '← better'}")
    ax.set_ylabel(f"{AXIS_LABELS.get(ycol, ycol)}  ↑ better" + ("  (axis inverted)" if ydir == "min" else ""))
    ax.set_title(_wrap(title, 70), fontsize=11)
    if ycol in ("modality_count",):
        ax.yaxis.get_major_locator().set_params(integer=True)
    if ydir == "min":
        ax.invert_yaxis()
    for band, get, put, limits in ((x_band, ax.get_xticks, ax.set_xticks, (x0, x1)),
                                   (y_band, ax.get_yticks, ax.set_yticks, (y0, y1))):
        if band:  # no numeric tick inside the n/a band: positions there are not values
            put([t for t in get() if not (band[0] - 1e-12 <= t <= band[1] + 1e-12) and limits[0] <= t <= limits[1]])
    if len(marked):  # 2-D Pareto front of the plotted axes (missing = worst), drawn once the limits are final
        front = frontier.pareto_frontier(marked, {xcol: xdir, ycol: ydir})
        on = front["on_frontier"].to_numpy()
        if on.any():
            _draw_front(ax, px[on].astype(float).to_numpy(), py[on].astype(float).to_numpy(), xdir, ydir)
    texts, xs, ys, cols = [], [], [], []
    for row, xv, yv in zip(marked.itertuples(), px, py):
        extra_txt = ", ".join(_extra_axis_text(a, getattr(row, a)) for a in extra)
        label = _short(row.system) + (" [this run]" if row.source == THIS_RUN else "")
        if extra_txt:
            label += f"\n({extra_txt})"
        if not row.on_frontier and row.dominated_by:
            doms = [d.split(" (better on")[0] for d in row.dominated_by.split("; ")]
            label += "\ndominated by " + ", ".join(_short(d) for d in doms)
        texts.append(label)
        xs.append(float(xv))
        ys.append(float(yv))
        cols.append(colors.get(row.system, "0.2"))
    ax._paper_labels = (xs, ys, texts, cols)  # type: ignore[attr-defined]


def _draw_front(ax: plt.Axes, xs: np.ndarray, ys: np.ndarray, xdir: str, ydir: str) -> None:
    """The attainment boundary of the 2-D front: from the worst x edge along the best-y member, down the
    staircase, to the worst y edge (limits must be final)."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    ox = xs if xdir == "max" else -xs
    oy = ys if ydir == "max" else -ys
    order = np.argsort(ox)
    ox, oy = ox[order], oy[order]
    worst_x = min(x0, x1) if xdir == "max" else -max(x0, x1)
    worst_y = min(y0, y1) if ydir == "max" else -max(y0, y1)
    path = [(worst_x, oy[0]), (ox[0], oy[0])]
    for i in range(1, len(ox)):
        path += [(ox[i - 1], oy[i]), (ox[i], oy[i])]
    path.append((ox[-1], worst_y))
    px = np.array([p[0] for p in path]) * (1 if xdir == "max" else -1)
    py = np.array([p[1] for p in path]) * (1 if ydir == "max" else -1)
    ax.plot(px, py, color="0.2", ls="--", lw=1.2, zorder=2)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)


def _extra_axis_text(axis: str, value: Any) -> str:
    v = _num(value)
    if math.isnan(v):
        return f"{axis.replace('_', ' ')} n/a"
    if axis == "context_window_k":
        return f"context {v:.0f}K"
    if axis == "video_support":
        return "video: yes" if v >= 1 else "video: no"
    if axis == "modality_count":
        return f"{v:.0f} modalities"
    return f"{axis.replace('_', ' ')} {fmt(v, AXIS_FORMATS.get(axis, '.3g'))}"


def _pareto_labels(ax: plt.Axes) -> None:
    xs, ys, texts, cols = getattr(ax, "_paper_labels", ([], [], [], []))
    if texts:
        place_labels(ax, xs, ys, texts, cols, fontsize=8)


# ---- roofline -------------------------------------------------------------------------------------------------

def _short_model(model: str) -> str:
    return str(model).replace("Gemma 4 ", "").replace(" Multimodal", "")


def _point_label(row: Any) -> str:
    quant = str(row.quantization).split(" ")[0]
    quant = "" if quant in ("ollama", "") or quant.lower() in str(row.model).lower() else f" {quant}"
    tag = "this run" if row.source == THIS_RUN else source_label(row.source).replace("seed ", "")
    return f"{_short_model(row.model)}{quant} · {row.host} ({tag})"


def fig_roofline(tables: Mapping[str, Table], runs: Runs) -> plt.Figure:
    """Left: decode tok/s against memory bandwidth (log-log); one ceiling line per GB read per token, each point
    coloured like its own ceiling; a run of unknown bandwidth is a horizontal line at its measured rate.
    Right: measured ÷ ceiling where the ceiling is known."""
    _theme()
    points = tables["roofline"].data.copy()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(17, 8.2), gridspec_kw={"width_ratios": [1.8, 1]})
    markers = {"000": "o", "002": "s", "004": "^", THIS_RUN: "D"}
    bw = pd.to_numeric(points["memory_bandwidth_gbs"], errors="coerce")
    tps = pd.to_numeric(points["decode_tps"], errors="coerce")
    known_bw = bw.dropna()
    xmin = float(known_bw.min()) / 1.8 if len(known_bw) else 50.0
    xmax = float(known_bw.max()) * 2.2 if len(known_bw) else 2000.0
    finite_tps = tps.dropna()
    ymin = float(finite_tps.min()) / 2.2 if len(finite_tps) else 5.0
    ymax = max(float(finite_tps.max()) * 3.5 if len(finite_tps) else 300.0, 100.0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(ymin, ymax)
    # one ceiling line per distinct GB/token, its own colour; points take their ceiling's colour
    ceilings = points.dropna(subset=["bytes_per_token_gb"]).copy()
    ceilings["key"] = ceilings["bytes_per_token_gb"].round(3)
    keys = sorted(ceilings["key"].unique())
    line_palette = sns.color_palette("tab10", max(len(keys), 1))
    key_color = {k: line_palette[i % len(line_palette)] for i, k in enumerate(keys)}
    grid = np.geomspace(xmin, xmax, 60)
    line_handles, line_tags = [], []
    for key in keys:
        group = ceilings[ceilings["key"] == key]
        names = ", ".join(dict.fromkeys(
            _short_model(m) + ("" if str(q).split(" ")[0].lower() in str(m).lower() else f" {str(q).split(' ')[0]}")
            + (" (this run)" if s == THIS_RUN else "")
            for m, q, s in zip(group["model"], group["quantization"], group["source"])))
        ours = (group["source"] == THIS_RUN).all()
        if xmax / key < ymin or xmin / key > ymax:
            names += " — off the plotted range"
        (line,) = ax.plot(grid, grid / key, color=key_color[key], lw=1.3, ls=(":" if ours else "-"), alpha=0.8,
                          zorder=1, label=f"ceiling at {key:.3g} GB/token: {names}")
        line_handles.append(line)
        line_tags.append((key, f"{key:.3g} GB/tok", key_color[key]))
    other = {"002": sns.color_palette("dark", 8)[5]}
    xs, ys, texts, cols = [], [], [], []
    unknown_bw = []
    for row, x, y in zip(points.itertuples(), bw, tps):
        if _isnan(y):
            continue
        prefix = row.source[:3] if row.source != THIS_RUN else THIS_RUN
        key = round(float(row.bytes_per_token_gb), 3) if not _isnan(row.bytes_per_token_gb) else None
        color = key_color.get(key, other.get(prefix, "0.35"))
        if _isnan(x):
            unknown_bw.append((row, y, color))
            continue
        ax.scatter(x, y, s=(90 if prefix == THIS_RUN else 70), marker=markers.get(prefix, "o"), color=color,
                   edgecolor="black", linewidth=0.7, zorder=4)
        xs.append(x)
        ys.append(y)
        texts.append(_point_label(row))
        cols.append(color)
    notes, unknown_handles = [], []
    for row, y, color in unknown_bw:  # never a guessed point: the measured rate as a line across all bandwidths
        ax.axhline(y, color=color, ls="--", lw=1.5, zorder=2)
        notes.append(ax.text(0.995, y / 1.04, f"this run: {y:.1f} tok/s\nbandwidth unknown",
                             transform=ax.get_yaxis_transform(), ha="right", va="top", fontsize=8, color=color,
                             bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.9},
                             zorder=6))
        floor = "" if _isnan(row.implied_bandwidth_gbs) else \
            (f";\n  × {row.bytes_per_token_gb:.3g} GB/token = {row.implied_bandwidth_gbs:.1f} GB/s of weight reads "
             "(a lower bound on its bandwidth)")
        unknown_handles.append(Line2D([], [], color=color, ls="--", lw=1.5, label=(
            f"{_point_label(row)}: measured {y:.1f} tok/s, bandwidth unknown\n  (host.memory_bandwidth_gbs not set: "
            f"drawn as a line, not a point){floor}")))
    ax.set_xlabel("memory bandwidth (GB/s, log scale)")
    ax.set_ylabel("decode throughput (tok/s, log scale)")
    ax.set_title("Bandwidth roofline: ceiling = bandwidth ÷ GB read per token"
                 + (f"  (this run: {NO_RUNS})" if runs.empty else ""), fontsize=12)
    sources = list(dict.fromkeys(points["source"]))
    src_handles = [Line2D([], [], marker=markers.get(s[:3] if s != THIS_RUN else THIS_RUN, "o"), ls="", color="0.6",
                          mec="black", ms=8, label=(source_label(s) if s != THIS_RUN else THIS_RUN) +
                          {"000": ": paper 000, average throughput (§6)", "002": ": Ollama on 3 machines, quantization "
                           "not stated (no ceiling)", "004": ": E4B quantizations on DGX Spark"}.get(s[:3], ""))
                   for s in sources]
    ax.legend(handles=src_handles + unknown_handles + line_handles, loc="upper center", bbox_to_anchor=(0.5, -0.09),
              ncol=2, fontsize=8, frameon=False, title="E2B / E4B = Gemma 4 E2B / E4B", title_fontsize=8)
    _efficiency_panel(bx, points, key_color)
    fig.tight_layout()
    fig.canvas.draw()
    _label_ceilings(ax, line_tags, xmin, xmax, ymin, ymax)
    place_labels(ax, xs, ys, texts, cols, fontsize=7.5, obstacles=notes)
    return fig


def _label_ceilings(ax: plt.Axes, labels: list[tuple[float, str, Any]], xmin: float, xmax: float, ymin: float,
                    ymax: float) -> None:
    """A short tag on each ceiling line near where it leaves the plot, rotated along the line (after layout)."""
    renderer = ax.figure.canvas.get_renderer()
    used: list[Bbox] = []
    for key, text, color in labels:
        x_end = min(xmax, ymax * key) / 1.15
        if x_end / 2 < xmin:
            continue
        p0, p1 = ax.transData.transform([(x_end / 2, x_end / 2 / key), (x_end, x_end / key)])
        angle = math.degrees(math.atan2(p1[1] - p0[1], p1[0] - p0[0]))
        for shrink in (1.0, 0.75, 0.55, 0.4):
            x = x_end * shrink
            handle = ax.text(x, x / key * 1.05, text, rotation=angle, rotation_mode="anchor", ha="right",
                             va="bottom", fontsize=8, color=color, zorder=3,
                             bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7})
            box = handle.get_window_extent(renderer)
            if not any(_overlap(box, b) for b in used) and x / key > ymin and x > xmin:
                used.append(box)
                break
            handle.remove()


def _efficiency_panel(ax: plt.Axes, points: pd.DataFrame, key_color: Mapping[float, Any]) -> None:
    known = points.dropna(subset=["efficiency"]).copy()
    unknown = points[points["efficiency"].isna()]
    if known.empty:
        ax.set_axis_off()
        _no_runs_note(ax, "no run with a known ceiling", "center")
    else:
        known["label"] = [_point_label(r) for r in known.itertuples()]
        known = known.sort_values("efficiency", ascending=False)
        colors = {lab: key_color.get(round(float(b), 3), "0.5") for lab, b in zip(known["label"],
                                                                                 known["bytes_per_token_gb"])}
        sns.barplot(data=known, y="label", x="efficiency", hue="label", palette=colors, legend=False, ax=ax,
                    orient="h")
        for i, value in enumerate(known["efficiency"]):
            ax.text(value + 0.01, i, f"{value:.0%}", va="center", fontsize=9)
        ax.set_xlim(0, max(1.08, float(known["efficiency"].max()) + 0.15))
        ax.axvline(1.0, color="0.3", ls="--", lw=1)
        ax.tick_params(axis="y", labelsize=8.5)
        ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0%}"))
        ax.set(xlabel="measured ÷ bandwidth ceiling (dashed line = ceiling)", ylabel="",
               title="Share of the bandwidth ceiling reached")
    if len(unknown):
        reasons: dict[str, list[str]] = {}
        for row in unknown.itertuples():
            why = ("bandwidth unknown" if _isnan(row.memory_bandwidth_gbs) else
                   "quantization not stated" if _isnan(row.bytes_per_param) else "inputs missing")
            reasons.setdefault(why, []).append(_point_label(row))
        text = "No ceiling, not in this panel:\n" + "\n".join(
            f"• {why}: " + _wrap(", ".join(names), 62).replace("\n", "\n   ") for why, names in reasons.items())
        ax.text(0.0, -0.16, text, transform=ax.transAxes, fontsize=7.5, ha="left", va="top", color="0.3")


# ---- our runs beside the published ------------------------------------------------------------------------

def _empty_figure(title: str, note: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(10, 2.5))
    ax.set_axis_off()
    ax.set_title(title)
    _no_runs_note(ax, note, "center")
    return fig


def fig_runs_vs_published(tables: Mapping[str, Table], runs: Runs) -> plt.Figure:
    """Headline numbers per system, published (000) beside this run: average decode tok/s, average end-to-end
    latency, accuracy over scored tasks."""
    _theme()
    systems = tables["_systems"].data.copy()
    if systems.empty:
        return _empty_figure("Our runs beside the published ones", f"no systems: paper_000 not loaded and {NO_RUNS}")
    long = tables["_task_metrics"].data
    acc = long[(long["metric"] == "accuracy") & (long["status"] == "")].dropna(subset=["value"])
    systems["accuracy"] = systems["system"].map(acc.groupby("system")["value"].mean())
    systems["label"] = [f"{s}\n[{source_label(src)}]" for s, src in zip(systems["system"], systems["source"])]
    systems["kind"] = ["this run" if s == THIS_RUN else "published (seed 000)" for s in systems["source"]]
    palette = {"published (seed 000)": sns.color_palette("deep")[0], "this run": sns.color_palette("dark")[3]}
    fig, axes = plt.subplots(1, 3, figsize=(16, max(3.6, 0.8 * len(systems) + 1.8)), sharey=True)
    for ax, column, label, spec in ((axes[0], "avg_decode_tps", "average decode tok/s (higher is better)", ".1f"),
                                    (axes[1], "avg_e2e_s", "average end-to-end latency, s (lower is better)", ".2f"),
                                    (axes[2], "accuracy", "accuracy: share correct (scored tasks)", ".0%")):
        data = systems.assign(value=pd.to_numeric(systems[column], errors="coerce").fillna(0.0))
        sns.barplot(data=data, y="label", x="value", hue="kind", palette=palette, dodge=False, ax=ax, orient="h",
                    legend=(ax is axes[0]))
        top = float(data["value"].max()) or 1.0
        for i, raw in enumerate(pd.to_numeric(systems[column], errors="coerce")):
            ax.text((raw if not math.isnan(raw) else 0) + top * 0.01, i, fmt(raw, spec, "n/a"), va="center", fontsize=9)
        ax.set(xlabel=label, ylabel="", xlim=(0, (1.18 if column == "accuracy" else top * 1.22)))
    handles, labels = axes[0].get_legend_handles_labels()
    axes[0].get_legend().remove()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.93), ncol=2, fontsize=9, frameon=False)
    axes[2].xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0%}"))
    fig.suptitle("Our runs beside the published ones (source: seed 000 vs this run)"
                 + (f" — this run: {NO_RUNS}, published numbers only" if runs.empty else ""), fontsize=13)
    fig.text(0.01, 0.005, "Published accuracy is the paper's pass/fail summary coded 1 = 'reported correct'; ours "
             "is the checker's passed ÷ scored. Different hardware per system: read across rows with care.",
             fontsize=8, color="0.35")
    fig.tight_layout(rect=(0, 0.04, 1, 0.9))
    return fig


LOAD_METRIC_NAMES = {"throughput_tps": "aggregate, all streams", "decode_tps_mean": "per stream (mean)",
                     "ttft_s_p50": "TTFT p50", "e2e_s_p50": "end-to-end p50", "prefill_tps": "prefill rate"}
LOAD_PANELS = [("concurrency", ("concurrency",), ("throughput_tps", "decode_tps_mean"), "output tok/s"),
               ("concurrency", ("concurrency",), ("ttft_s_p50", "e2e_s_p50"), "p50 latency (s)"),
               ("context", ("prompt_tokens", "target_tokens"), ("ttft_s_p50",), "p50 TTFT (s)"),
               ("context", ("prompt_tokens", "target_tokens"), ("prefill_tps",), "prefill tok/s")]


def fig_load(runs: Runs) -> plt.Figure | None:
    """Load sweeps when the load suite wrote them: throughput and latency per concurrency level (knee marked),
    TTFT and prefill rate per prompt length."""
    if not runs.load:
        return None
    _theme()
    fig, axes = plt.subplots(2, 2, figsize=(14, 8.5), squeeze=False)
    for ax, (kind, xs, ys, ylabel) in zip(axes.flat, LOAD_PANELS):
        frame = runs.load.get(kind)
        xcol = next((c for c in xs if frame is not None and c in frame and frame[c].notna().any()), None)
        present = [c for c in ys if frame is not None and c in frame and frame[c].notna().any()]
        if frame is None or xcol is None or not present:
            ax.set_axis_off()
            _no_runs_note(ax, f"no {kind} sweep yet" if frame is None else f"sweep_{kind}.csv: no {ylabel}",
                          "center")
            continue
        data = frame.assign(system=frame["model"].astype(str) + " @ " + frame["host"].astype(str))
        long = data.melt(id_vars=["system", xcol] + (["knee"] if "knee" in data else []), value_vars=present,
                         var_name="metric", value_name="value").dropna(subset=["value"])
        long["metric"] = long["metric"].map(lambda m: LOAD_METRIC_NAMES.get(m, m))
        sns.lineplot(data=long, x=xcol, y="value", hue="system", style="metric", markers=True, dashes=False, ax=ax)
        if "knee" in long:
            knees = long[long["knee"].astype(str).str.lower() == "true"]
            ax.scatter(knees[xcol], knees["value"], s=160, facecolor="none", edgecolor="black", zorder=5,
                       label="knee")
        if kind == "concurrency":
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set(xlabel=xcol.replace("_", " "), ylabel=ylabel, title=f"Load sweep: {ylabel} vs {xcol.replace('_', ' ')}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def build_figures(tables: Mapping[str, Table], runs: Runs, settings: Settings | None = None) -> dict[str, plt.Figure]:
    settings = settings or Settings.from_parameters()
    figures = {
        "throughput_by_task": fig_throughput(tables, runs),
        "latency": fig_latency(tables, runs),
        "energy_efficiency": fig_energy(tables, runs),
        "pareto_frontier": fig_pareto(tables, runs, settings),
        "roofline": fig_roofline(tables, runs),
        "runs_vs_published": fig_runs_vs_published(tables, runs),
    }
    load = fig_load(runs)
    if load is not None:
        figures["load_sweeps"] = load
    return figures


# ================================================================================================ writing

FIGURE_CAPTIONS = {
    "throughput_by_task": "Decode tok/s per task and system; our runs hatched with ± sd whiskers.",
    "latency": "End-to-end latency per task (published and ours) and, for our runs, time to first token.",
    "energy_efficiency": "tok/s per watt and tokens per joule; runs without an energy sensor show the reason.",
    "pareto_frontier": "Regime presets: stars are on the regime's frontier (judged on all its axes), hollow "
                       "markers are dominated and labelled with their dominators; the dashed step is the Pareto "
                       "front of the two plotted axes.",
    "roofline": "Measured decode tok/s against the bandwidth ceiling (bandwidth ÷ GB read per token); 002 and 004 "
                "reference runs and ours. A run whose bandwidth is unknown is a horizontal line, not a point.",
    "runs_vs_published": "Headline numbers of our runs beside the paper's systems.",
    "load_sweeps": "Concurrency and context sweeps of the load suite.",
}

REPORT_SECTIONS = [
    ("Runs", ["runs"], []),
    ("1. Experimental setup (000 §2)", ["setup"], []),
    ("2. Hardware platforms (000 §3)", ["platform"], []),
    ("3. Generation throughput (000 §4)", ["throughput"], ["throughput_by_task"]),
    ("4. Latency and accuracy (000 §5)", ["latency_accuracy"], ["latency"]),
    ("5. Memory, power and thermal efficiency (000 §6)", ["memory_power_thermal"], ["energy_efficiency"]),
    ("6. Deployment frontier (000 §7)", ["frontier", "frontier_dominance", "frontier_systems"], ["pareto_frontier"]),
    ("7. Video and context length (000 §9)", ["capability_context"], []),
    ("8. Bandwidth roofline (002, 004)", ["roofline"], ["roofline"]),
    ("9. Swap decisions (001)", ["decisions"], []),
    ("10. Our runs beside the published ones", [], ["runs_vs_published"]),
    ("11. Load sweeps", ["load_concurrency", "load_context"], ["load_sweeps"]),
]


def _clean_dir(directory: Path, suffixes: Sequence[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.iterdir():
        if path.is_file() and path.suffix.lstrip(".") in suffixes:
            path.unlink()


def write_outputs(out_dir: str | Path, tables: Mapping[str, Table], figures: Mapping[str, plt.Figure],
                  runs: Runs, settings: Settings, frontier_summary: str = "") -> dict[str, list[Path]]:
    """tables/<name>.csv + .md, figures/<name>.<fmt>, report.md. Stale files in tables/ and figures/ go first."""
    out = Path(out_dir)
    table_dir, figure_dir = out / "tables", out / "figures"
    _clean_dir(table_dir, ["csv", "md"])
    _clean_dir(figure_dir, ["png", "svg", "pdf"])
    written: dict[str, list[Path]] = {"tables": [], "figures": [], "report": []}
    for name, table in tables.items():
        if name.startswith("_"):
            continue
        csv_path = table_dir / f"{name}.csv"
        table.data.to_csv(csv_path, index=False)
        written["tables"].append(csv_path)
        if name != LONG_TABLE:
            md_path = table_dir / f"{name}.md"
            md_path.write_text(f"## {table.title}\n\n{table.markdown()}\n\n{table.caption}\n".rstrip() + "\n",
                               encoding="utf-8")
            written["tables"].append(md_path)
    for name, fig in figures.items():
        for ext in settings.figure_formats:
            path = figure_dir / f"{name}.{ext}"
            fig.savefig(path, dpi=settings.dpi, bbox_inches="tight", facecolor="white")
            written["figures"].append(path)
    if frontier_summary:
        path = table_dir / "frontier.txt"
        path.write_text(frontier_summary, encoding="utf-8")
        written["tables"].append(path)
    report = out / "report.md"
    report.write_text(report_markdown(tables, figures, runs, settings, frontier_summary), encoding="utf-8")
    written["report"].append(report)
    return written


def report_markdown(tables: Mapping[str, Table], figures: Mapping[str, Any], runs: Runs, settings: Settings,
                    frontier_summary: str = "") -> str:
    image_ext = "png" if "png" in settings.figure_formats else settings.figure_formats[0]
    sources = ", ".join(f"`paper/reference/{reference.REFERENCE_FILES[_seed_prefix(s)]}`"
                        for s in settings.reference_sets)
    lines = ["# Frontier Bench — deployment frontier report", "",
             f"Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')} by `paper/assemble.ipynb` from "
             f"{sources} and the runs under `{_shown(runs.root)}`.", "",
             ("**This run: " + NO_RUNS + ".** Every table and figure below is regenerated from the published "
              "reference data alone; run `make run` to add a measured system." if runs.empty else
              f"**Runs:** {', '.join(runs.systems)} — shown as *this run* beside the published systems."), "",
             "Sources: *seed 000* = the paper (`000_341285de21da4f3a.txt`), *seed 001* = her-os report, "
             "*seed 002* = bandwidth blog, *seed 004* = quantization blog. CSV versions of every table sit beside "
             "the Markdown in `tables/`; `tables/published_and_runs_long.csv` holds every number in tidy form.", ""]
    for heading, table_names, figure_names in REPORT_SECTIONS:
        present_tables = [t for t in table_names if t in tables]
        present_figures = [f for f in figure_names if f in figures]
        if not present_tables and not present_figures:
            if heading.startswith("11."):
                lines += [f"## {heading}", "", "_No load sweeps in outputs/ yet._", ""]
            continue
        lines += [f"## {heading}", ""]
        for name in present_figures:
            lines += [f"![{name}](figures/{name}.{image_ext})", "",
                      f"*Figure: {FIGURE_CAPTIONS.get(name, name)}* "
                      f"([{'/'.join(settings.figure_formats).upper()}](figures/{name}.{image_ext}))", ""]
        for name in present_tables:
            table = tables[name]
            lines += [f"### {table.title}", "", table.markdown(), ""]
            if table.caption:
                lines += [f"_{table.caption}_", ""]
            lines += [f"[CSV](tables/{name}.csv)", ""]
            if name == "frontier" and frontier_summary:
                lines += ["```text", frontier_summary.rstrip(), "```", ""]
    return "\n".join(lines)


# ================================================================================================ one call

@dataclass
class Paper:
    settings: Settings
    reference: pd.DataFrame
    runs: Runs
    tables: dict[str, Table]
    figures: dict[str, plt.Figure]
    frontier_summary: str
    written: dict[str, list[Path]]


def assemble(outputs_dir: str | Path = "", out_dir: str | Path = "", reference_sets: Sequence[str] | None = None,
             regimes: Sequence[str] | None = None, thresholds: str = "heros_swap",
             figure_formats: Sequence[str] | None = None, close_figures: bool = True) -> Paper:
    """Load, build every table and figure, write them; what the notebook does cell by cell."""
    settings = Settings.from_parameters(str(outputs_dir or ""), reference_sets, str(out_dir or ""), regimes,
                                        thresholds, figure_formats)
    ref = load_reference_sets(settings.reference_sets)
    runs = load_runs(settings.outputs_dir)
    tables = build_tables(ref, runs, settings)
    figures = build_figures(tables, runs, settings)
    summary = frontier_text(tables["frontier"])
    written = write_outputs(settings.out_dir, tables, figures, runs, settings, summary)
    if close_figures:
        for fig in figures.values():
            plt.close(fig)
    return Paper(settings, ref, runs, tables, figures, summary, written)


def show(table: Table) -> Any:
    """Markdown rendering of a table for the notebook (title, table, caption)."""
    from IPython.display import Markdown

    return Markdown(f"### {table.title}\n\n{table.markdown()}\n\n_{table.caption}_" if table.caption else
                    f"### {table.title}\n\n{table.markdown()}")


def expected_files(out_dir: str | Path, figure_formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """The files every assembly writes, runs or not (load sweeps only appear with load data)."""
    out = Path(out_dir)
    files = [out / "report.md", out / "tables" / f"{LONG_TABLE}.csv", out / "tables" / "frontier.txt"]
    for name in TABLES:
        files += [out / "tables" / f"{name}.csv", out / "tables" / f"{name}.md"]
    for name in FIGURES:
        files += [out / "figures" / f"{name}.{ext}" for ext in figure_formats]
    return files
