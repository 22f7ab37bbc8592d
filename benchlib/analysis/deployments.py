"""Deployments across runs: per-task summaries in the long format that the published reference rows share
(one row per system × task × metric), and one row per deployment with the frontier's axes.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from benchlib.analysis import frontier, paired, stats
from benchlib.config import identity, metrics
from benchlib.records.schema import flag

# The long format's columns: our rows and the published reference rows (paper/reference/*.csv) alike.
LONG_COLUMNS = ["source", "section", "host", "hardware", "model", "quantization", "server", "task",
                "modality", "metric", "value", "value_low", "value_high", "unit", "value_text", "note",
                "seed_table", "seed_row", "seed_col"]

# Summary column -> (reference metric, unit). Shared vocabulary with paper/reference/*.csv.
LONG_METRICS: dict[str, tuple[str, str]] = {
    "decode_tps_mean": ("decode_tps", "tok/s"),
    "decode_tps_sd": ("decode_tps_sd", "tok/s"),
    "prefill_tps_mean": ("prefill_tps", "tok/s"),
    "ttft_s_mean": ("ttft", "s"),
    "ttft_s_sd": ("ttft_sd", "s"),
    "e2e_s_mean": ("e2e_latency", "s"),
    "accuracy": ("accuracy", "share correct"),
    "n_truncated": ("truncated", "requests"),
    "avg_power_w": ("avg_power", "W"),
    "peak_power_w": ("peak_power", "W"),
    "temp_avg_c": ("avg_temp", "C"),
    "temp_peak_c": ("peak_temp", "C"),
    "mem_peak_gb": ("gpu_memory_peak", "GB"),
    "tps_per_w": ("tps_per_w", "tok/s/W"),
    "tokens_per_joule": ("tokens_per_joule", "tok/J"),
}


def to_long(summary: pd.DataFrame, source: str = "this run", section: str = "per-task summary",
            meta: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Summary rows in the reference data's long format (one row per metric), to plot beside the paper.

    host/model/modality/task come from the rows; `meta` fills columns the summary lacks (hardware,
    quantization, server). n_ok goes into note; invalid tasks are flagged there too.
    """
    meta = dict(meta or {})
    rows = []
    for _, row in summary.iterrows():
        for column, (metric, unit) in LONG_METRICS.items():
            if column not in row or pd.isna(row[column]):
                continue
            val = float(row[column])
            entry = {c: "" for c in LONG_COLUMNS}
            entry.update({c: str(meta.get(c, "")) for c in LONG_COLUMNS if c in meta})
            entry.update({c: str(row[c]) for c in ("host", "model", "modality", "task") if c in row and pd.notna(row[c])})
            if "server" not in meta and "server_software" in row:
                entry["server"] = str(row["server_software"])
            valid = row.get("valid", True)
            entry.update(source=source, section=section, metric=metric, value=val, value_low=np.nan,
                         value_high=np.nan, unit=unit, value_text=f"{val:.4g}",
                         note=f"n_ok={int(row.get('n_ok', 0) or 0)}" + ("" if flag(valid) else "; invalid"))
            rows.append(entry)
    out = pd.DataFrame(rows, columns=LONG_COLUMNS)
    for column in ("value", "value_low", "value_high"):
        out[column] = pd.to_numeric(out[column], errors="coerce")
    return out


def _task_value(group: pd.DataFrame, tasks: Sequence[str], column: str) -> float:
    rows = group[group["task"].isin(tasks)] if "task" in group else group.iloc[0:0]
    values = pd.to_numeric(rows[column], errors="coerce").dropna() if column in rows else pd.Series(dtype=float)
    return float(values.mean()) if len(values) else np.nan


def _tokens_per_answer(group: pd.DataFrame, tasks: Sequence[str]) -> float:
    """Mean completion tokens per successful answer over `tasks` (brevity): Σ completion tokens ÷ Σ n_ok."""
    rows = group[group["task"].isin(tasks)] if "task" in group else group.iloc[0:0]
    if "completion_tokens_sum" not in rows or not len(rows):
        return np.nan
    tokens = pd.to_numeric(rows["completion_tokens_sum"], errors="coerce")
    answers = pd.to_numeric(rows["n_ok"], errors="coerce")
    both = tokens.notna() & answers.notna() & (answers > 0)
    return float(tokens[both].sum() / answers[both].sum()) if both.any() else np.nan


def _modality_mean(group: pd.DataFrame, modality: str, column: str) -> float:
    if "modality" not in group or column not in group:
        return np.nan
    values = pd.to_numeric(group.loc[group["modality"] == modality, column], errors="coerce").dropna()
    return float(values.mean()) if len(values) else np.nan


def systems_from_summary(summary: pd.DataFrame, context_window_k: Mapping[str, float] | None = None,
                         asr_tasks: Sequence[str] = ("transcription",),
                         short_qa_tasks: Sequence[str] = ("basic_qa",),
                         exclude_suites: Sequence[str] = ("quality",),
                         items: pd.DataFrame | None = None, requests: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per host × model with the columns frontier.REGIMES use (as reference.paper_systems()).

    avg_decode_tps is the mean of per-task means over tasks with ok rows (the quality suite left out,
    as the paper averages its speed tasks); modality_count counts modalities with at least one ok
    request; tps_per_w = avg_decode_tps ÷ mean task-window power; context_window_k comes from the
    mapping keyed by model (params server.context_window ÷ 1000). With per-item results (`items`:
    paired.item_results of the request rows) each quality axis also carries them, so the frontier compares two
    deployments item by item (frontier.quality_columns); with the request rows (`requests`), the speed axes carry
    each deployment's values by prompt, so it compares them prompt by prompt (frontier.speed_columns).
    """
    keys = [k for k in ("host", "model") if k in summary]
    rows = []
    if summary.empty:
        return pd.DataFrame(columns=keys + ["system"])
    accuracy = task_accuracy(summary)  # every suite's scored tasks: the quality suite holds the graded sets
    if "suite" in summary:
        summary = summary[~summary["suite"].isin(exclude_suites)]
    for values, group in summary.groupby(keys, dropna=False, sort=False) if keys else [((), summary)]:
        values = values if isinstance(values, tuple) else (values,)
        ident = dict(zip(keys, values))
        worked = group[pd.to_numeric(group["n_ok"], errors="coerce") > 0]
        tps = pd.to_numeric(worked["decode_tps_mean"], errors="coerce")
        modalities = set(worked["modality"]) if "modality" in worked else set()
        power = pd.to_numeric(worked.get("avg_power_w", pd.Series(dtype=float)), errors="coerce").dropna()
        temps = pd.to_numeric(worked.get("temp_peak_c", pd.Series(dtype=float)), errors="coerce").dropna()
        avg_tps = float(tps.mean()) if tps.notna().any() else np.nan
        rows.append({
            **ident,
            "system": identity.keys(group).iloc[0],
            "avg_decode_tps": avg_tps,
            "avg_power_w": float(power.mean()) if len(power) else np.nan,
            "tps_per_w": metrics.tps_per_watt(avg_tps, float(power.mean()) if len(power) else np.nan),
            "peak_temp_c": float(temps.max()) if len(temps) else np.nan,
            "context_window_k": (context_window_k or {}).get(ident.get("model"), np.nan),
            "modality_count": len(modalities),
            "video_support": float("video" in modalities),
            "vision_decode_tps": _modality_mean(worked, "vision", "decode_tps_mean"),
            "asr_decode_tps": _task_value(worked, asr_tasks, "decode_tps_mean"),
            "short_qa_decode_tps": _task_value(worked, short_qa_tasks, "decode_tps_mean"),
            "short_qa_output_tokens": _tokens_per_answer(worked, short_qa_tasks),
            "asr_e2e_s": _task_value(worked, asr_tasks, "e2e_s_mean"),
            "avg_e2e_s": float(pd.to_numeric(worked["e2e_s_mean"], errors="coerce").mean()) if len(worked) else np.nan,
        })
    systems = frontier.quality_columns(pd.DataFrame(rows), accuracy, items=items)
    return frontier.speed_columns(systems, requests, exclude_suites)


def task_accuracy(summary: pd.DataFrame) -> pd.DataFrame:
    """Per system and task: passed and scored counts measured by our checkers (the long form
    frontier.quality_columns pools per regime). basis: frontier.GRADED for a graded set's first pass (its checker is
    a graded scorer), frontier.UNDER_LOAD for its pass under load (kept off every quality axis), else "measured"."""
    if summary.empty or "n_scored" not in summary:
        return pd.DataFrame(columns=frontier.QUALITY_LONG_COLUMNS)
    system = identity.keys(summary).tolist()
    checkers = summary["checker"] if "checker" in summary else pd.Series("", index=summary.index)
    basis = [{paired.SMOKE: "measured"}.get(b, b) for b in map(paired.basis_of, summary["task"].astype(str), checkers)]
    return pd.DataFrame({"system": system, "task": summary["task"],
                         "passed": pd.to_numeric(summary["n_passed"], errors="coerce"),
                         "scored": pd.to_numeric(summary["n_scored"], errors="coerce"),
                         "basis": basis, "note": "", "modality": summary.get("modality", "text")},
                        columns=frontier.QUALITY_LONG_COLUMNS)


def decision_inputs(summary: pd.DataFrame, model_memory_gb: Mapping[str, float] | None = None,
                    speed_suite: str = "text", tools_task: str = "tool_calling", tool_tests: int = 8,
                    entity_task: str = "entity_extraction", vision_modality: str = "vision",
                    requests: pd.DataFrame | None = None) -> pd.DataFrame:
    """One candidate row per host × model with the columns decisions.decide() judges.

    decode_tps / ttft_ms: mean over the speed suite's tasks (suite column, else modality 'text') of the task
    means; model_memory_gb from the mapping (keyed by model; e.g. the server's reported weights) else the
    peak telemetry memory (an upper bound); tools_passed: the tool task's pass share × tool_tests (her-os
    counts 8 prompts); entity_recall: the entity task's mean checker score; vision_works: a passed request
    in any vision task (False when vision was unsupported). Missing inputs stay NaN (decide(): NO DATA).
    With the request rows (`requests`), decode_tps and ttft_ms carry their 95 % interval (_lo, _hi: the t interval
    of a mean of task means, stats.stratified_mean_interval) and _n, which decisions' THRESHOLD RULE judges.
    """
    keys = [k for k in ("host", "model") if k in summary]
    rows = []
    for values, group in summary.groupby(keys, dropna=False, sort=False) if keys else [((), summary)]:
        values = values if isinstance(values, tuple) else (values,)
        ident = dict(zip(keys, values))
        column = "suite" if "suite" in group else "modality"
        speed = group[(group[column] == speed_suite) & (pd.to_numeric(group["n_ok"], errors="coerce") > 0)]
        memory = (model_memory_gb or {}).get(ident.get("model"), np.nan)
        if np.isnan(memory) and "mem_peak_gb" in group:
            peaks = pd.to_numeric(group["mem_peak_gb"], errors="coerce").dropna()
            memory = float(peaks.max()) if len(peaks) else np.nan
        tools = group[group["task"] == tools_task]
        entities = group[group["task"] == entity_task]
        vision = group[group["modality"] == vision_modality] if "modality" in group else group.iloc[0:0]
        tool_share = pd.to_numeric(tools["accuracy"], errors="coerce").dropna()
        recall = pd.to_numeric(entities["score_mean"], errors="coerce").dropna()
        if len(vision) and vision["n_scored"].sum():
            vision_works: Any = bool((vision["n_passed"] > 0).any())
        elif len(vision) and (vision["n_unsupported"] > 0).all():
            vision_works = False
        else:
            vision_works = np.nan
        rows.append({
            **ident, **_speed_intervals(requests, ident, speed_suite),
            "candidate": identity.keys(group).iloc[0],
            "decode_tps": float(pd.to_numeric(speed["decode_tps_mean"], errors="coerce").mean()) if len(speed) else np.nan,
            "ttft_ms": float(pd.to_numeric(speed["ttft_s_mean"], errors="coerce").mean()) * 1e3 if len(speed) else np.nan,
            "model_memory_gb": memory,
            "tools_passed": float(tool_share.iloc[0]) * tool_tests if len(tool_share) else np.nan,
            "entity_recall": float(recall.iloc[0]) if len(recall) else np.nan,
            "vision_works": vision_works,
        })
    return pd.DataFrame(rows)


def _speed_intervals(requests: pd.DataFrame | None, ident: Mapping[str, Any], suite: str) -> dict[str, float]:
    """decode_tps and ttft_ms's 95 % interval and n from one deployment's measured speed-suite requests ({} when
    there are none to read)."""
    if requests is None or not len(requests) or not {"task", "status"} <= set(requests.columns):
        return {}
    rows = requests[(requests["status"] == "ok")]
    for key, value in ident.items():
        rows = rows[rows[key].astype(str) == str(value)] if key in rows else rows
    if "suite" in rows:
        rows = rows[rows["suite"] == suite]
    if "is_warmup" in rows:
        rows = rows[~rows["is_warmup"].map(flag)]
    out: dict[str, float] = {}
    for column, source, scale in (("decode_tps", "decode_tps", 1.0), ("ttft_ms", "ttft_s", 1e3)):
        values = pd.to_numeric(rows[source], errors="coerce") * scale if source in rows else pd.Series(dtype=float)
        groups = [values[rows["task"] == t].dropna().to_numpy() for t in rows["task"].unique()]
        _, out[f"{column}_lo"], out[f"{column}_hi"] = stats.stratified_mean_interval(groups, floor=0.0)
        out[f"{column}_n"] = float(values.notna().sum())
    return out


FIGURE_COLUMNS = ["deployment", "decode_tps", "decode_tps_lo", "decode_tps_hi", "ttft_ms", "ttft_ms_lo", "ttft_ms_hi",
                  "graded_passed", "graded_scored", "graded_accuracy", "graded_lo", "graded_hi", "smoke_passed",
                  "smoke_scored", "sent", "failed", "tokens_per_joule"]
SPEED_SUITE = "text"  # the suite whose requests say how fast a deployment is (analysis.host reads it too)


def speed_reading(rows: pd.DataFrame, column: str, scale: float) -> tuple[float, float, float]:
    """A deployment's speed figure (decode rate, TTFT, end-to-end latency: `column` × `scale`): the mean of its
    speed-suite tasks' means over its measured requests (warm-ups already left out), with the 95 % t interval of a
    mean of task means (stats.stratified_mean_interval), floored at 0 — the figure and interval its thresholds are
    judged on (decision_inputs, analysis.decisions' THRESHOLD RULE), the first screen and analysis.host show. Tasks
    of one request give the mean alone."""
    rows = rows[rows["suite"] == SPEED_SUITE] if "suite" in rows else rows
    rows = rows[rows["status"] == "ok"] if "status" in rows else rows
    if column not in rows or "task" not in rows:
        return np.nan, np.nan, np.nan
    values = pd.to_numeric(rows[column], errors="coerce") * scale
    groups = [values[rows["task"] == task].dropna().to_numpy() for task in rows["task"].unique()]
    groups = [g for g in groups if len(g)]
    if not groups:
        return np.nan, np.nan, np.nan
    mean, low, high = stats.stratified_mean_interval(groups, floor=0.0)  # a time or a rate: never below 0
    return (float(np.mean([g.mean() for g in groups])), np.nan, np.nan) if np.isnan(mean) else (mean, low, high)


def deployment_figures(summary: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """One row per deployment (FIGURE_COLUMNS; `deployment` is the summaries' `model` and the requests' `system`
    column, in the summaries' order): decode rate and TTFT as the mean of the speed suite's task means with its 95 %
    interval (speed_reading: what the thresholds are judged on); accuracy on the graded sets (passed ÷ scored, 95 % Wilson) and, apart, the seeds' smoke
    tasks' counts (paired.basis_of: never pooled); measured requests sent and failed (warm-ups left out; a request
    the deployment does not take, unsupported, is no failure); tokens per
    joule over the tasks whose windows measured energy (NaN where none did)."""
    rows = []
    for name, group in (summary.groupby("model", sort=False) if len(summary) else []):
        sent = requests[requests["system"] == name] if len(requests) else requests
        sent = sent[~sent["is_warmup"].map(flag)] if "is_warmup" in sent else sent
        checkers = group["checker"] if "checker" in group else pd.Series("", index=group.index)
        basis = pd.Series(list(map(paired.basis_of, group["task"].astype(str), checkers)), index=group.index)

        def count(which: str, column: str) -> int:
            values = pd.to_numeric(group.loc[basis == which].get(column, pd.Series(dtype=float)), errors="coerce")
            return int(values.fillna(0).sum())

        passed, scored = count(paired.GRADED, "n_passed"), count(paired.GRADED, "n_scored")
        low, high = stats.wilson_interval(passed, scored) if scored else (np.nan, np.nan)
        energy = pd.to_numeric(group.get("energy_j", pd.Series(dtype=float)), errors="coerce")
        tokens = pd.to_numeric(group.get("completion_tokens_sum", pd.Series(dtype=float)), errors="coerce")
        both = energy.notna() & tokens.notna() & (energy > 0)
        decode, ttft = speed_reading(sent, "decode_tps", 1.0), speed_reading(sent, "ttft_s", 1000.0)
        rows.append({"deployment": name, "decode_tps": decode[0], "decode_tps_lo": decode[1],
                     "decode_tps_hi": decode[2], "ttft_ms": ttft[0], "ttft_ms_lo": ttft[1], "ttft_ms_hi": ttft[2],
                     "graded_passed": passed, "graded_scored": scored,
                     "graded_accuracy": passed / scored if scored else np.nan, "graded_lo": low, "graded_hi": high,
                     "smoke_passed": count(paired.SMOKE, "n_passed"), "smoke_scored": count(paired.SMOKE, "n_scored"),
                     "sent": len(sent), "failed": int((sent["status"] == "failed").sum()) if "status" in sent else 0,
                     "tokens_per_joule": metrics.tokens_per_joule(tokens[both].sum(), energy[both].sum())
                     if both.any() else np.nan})
    return pd.DataFrame(rows, columns=FIGURE_COLUMNS)
