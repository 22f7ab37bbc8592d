"""Deployments as rows: published systems and our runs side by side (one row per system with the frontier's
axes), per-task metrics in long form, and the roofline's points."""

from __future__ import annotations

import math
from typing import Any, Iterable

import pandas as pd

from benchlib.analysis import deployments, frontier, load_levels, paired, roofline
from benchlib.analysis.failures import graded_outcome, not_ranked
from benchlib.analysis.serving import serving_figures
from benchlib.config import metrics
from benchlib.config.formatting import is_missing
from benchlib.config.identity import Deployment
from benchlib.config.tasks import graded_set_names, load_tasks
from benchlib.measure.capacity import bandwidth
from benchlib.measure.telemetry import boundary
from benchlib.paper.runs import Runs, seed_rows
from benchlib.paper.settings import PAPER_TASK_TITLES, PAPER_TASKS, THIS_RUN
from benchlib.published import reference
from benchlib.records.schema import flag, number

# why a speech model (server.api transcription) is on no frontier and no roofline: the audio table compares it
SPEECH_MODEL = "a speech model: transcripts only (see the Transcription table)"


def task_catalog() -> pd.DataFrame:
    """task -> title, suite, modality (from testdata/tasks), with the paper's titles for its tasks."""
    rows = []
    try:
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


def task_label(task_id: str, catalog: pd.DataFrame) -> str:
    match = catalog.loc[catalog["task_id"] == task_id, "label"]
    return str(match.iloc[0]) if len(match) else str(task_id)


def task_order(task_ids: Iterable[str], catalog: pd.DataFrame) -> list[str]:
    order = {t: i for i, t in enumerate(catalog["task_id"])}
    return sorted(dict.fromkeys(task_ids), key=lambda t: (order.get(t, 10_000), t))


SYSTEM_COLUMNS = ["system", "model", "host", "server", "source", "hardware", "quantization", "memory_bandwidth_gbs",
                  "bandwidth_source", "active_params_b", "bytes_per_param", "avg_decode_tps", "avg_power_w",
                  "peak_power_w", "tps_per_w", "tps_per_w_reported", "tokens_per_joule", "avg_temp_c", "peak_temp_c",
                  "memory_gb", "memory_kind", "context_window_k", "modality_count", "video_support",
                  "vision_decode_tps", "asr_decode_tps", "short_qa_decode_tps", "short_qa_output_tokens", "asr_e2e_s",
                  "avg_e2e_s",
                  "peak_throughput_tps", "max_concurrency_ok", "max_context_ok_k", "knee_concurrency", "goodput_tps",
                  "max_slo_rate_rps", "serving_tps", "serving_basis", "energy_note", "excluded", "client_error",
                  "energy_boundary", "idle_subtracted", "node_tokens_per_joule", "gpu_share_of_node"]
# each regime's quality axis (frontier.quality_columns): accuracy, its interval, basis and task coverage
QUALITY_COLUMNS = [f"{r.quality_axis}{suffix}" for r in [*frontier.REGIMES.values(), frontier.ALL_REGIME]
                   if r.quality_axis
                   for suffix in ("", "_lo", "_hi", "_basis", "_tasks")]
# ... and, for our runs, each deployment's per-item results on it ({(task, item): passed}), which the frontier
# compares item by item (a paired verdict) wherever two deployments answered the same items
QUALITY_ITEM_COLUMNS = [f"{r.quality_axis}_items" for r in [*frontier.REGIMES.values(), frontier.ALL_REGIME]
                        if r.quality_axis]
SYSTEM_COLUMNS += QUALITY_COLUMNS + QUALITY_ITEM_COLUMNS + [paired.PLAN_COLUMN]
TEXT_SYSTEM_COLUMNS = ("system", "model", "host", "server", "source", "hardware", "quantization", "bandwidth_source",
                       "memory_kind", "energy_note", "serving_basis", "excluded", "client_error",
                       "energy_boundary",
                       *[c for c in QUALITY_COLUMNS if c.endswith("_basis")], *QUALITY_ITEM_COLUMNS,
                       paired.PLAN_COLUMN)


def published_systems(ref: pd.DataFrame) -> pd.DataFrame:
    """The paper's (000) three systems with the frontier axes, source = the seed file."""
    rows = seed_rows(ref, "000")
    if rows.empty or (rows["model"] != "").sum() == 0:
        return pd.DataFrame(columns=SYSTEM_COLUMNS)
    systems = reference.paper_systems(rows)
    systems["source"] = rows["source"].iloc[0]
    systems["tokens_per_joule"] = float("nan")  # measured by us only: the paper prints tok/s/W, not tokens per J
    systems["memory_gb"] = systems["baseline_memory_gb"]
    systems["memory_kind"] = "observed baseline (paper §6)"
    systems["energy_note"] = "tok/s/W recomputed as average throughput ÷ average inference power (§6)"
    systems["bytes_per_param"] = systems["quantization"].map(roofline.bytes_per_param)
    # what each platform's power figure covers, in the paper's own words (§3 'average GPU draw'); idle is in it
    power_text = {host: str(g.loc[g["metric"] == "avg_power", "value_text"].iloc[0])
                  for host, g in rows[rows["section"].str.startswith("§3")].groupby("host")
                  if (g["metric"] == "avg_power").any()}
    systems["energy_boundary"] = [boundary.published_boundary(power_text.get(h, "")) for h in systems["host"]]
    systems["idle_subtracted"] = [False if b else math.nan for b in systems["energy_boundary"]]
    return systems.reindex(columns=SYSTEM_COLUMNS)


def _sweep_figures(runs: Runs, host: str, model: str) -> dict[str, Any]:
    """What the load notebook measured for one host × model: the frontier's serving figures (NaN if not run).
    serving_tps is the best goodput under the run's SLOs where a rate sweep ran, else the peak aggregate
    throughput of the concurrency sweep; serving_basis says which."""
    mine = {}
    for kind in ("concurrency", "context", "rate"):
        frame = runs.load.get(kind, pd.DataFrame())
        mine[kind] = frame[(frame["host"] == host) & (frame["model"] == model)] if len(frame) else frame
    figures = {**load_levels.frontier_figures(mine["concurrency"], mine["context"]), **serving_figures(mine["rate"])}
    if all(mine[kind].empty for kind in mine):
        figures = {k: math.nan for k in figures}
    goodput = figures["goodput_tps"]
    slos = str(mine["rate"]["slos"].iloc[0]) if len(mine["rate"]) and "slos" in mine["rate"] else ""
    return {"peak_throughput_tps": figures["peak_throughput_tps"], "max_concurrency_ok": figures["max_concurrency_ok"],
            "max_context_ok_k": figures["max_context_ok"] / 1000, "knee_concurrency": figures["knee_concurrency"],
            "goodput_tps": goodput, "max_slo_rate_rps": figures["max_slo_rate_rps"],
            "serving_tps": goodput if goodput == goodput else figures["peak_throughput_tps"],
            "serving_basis": f"goodput under SLOs: {slos}" if goodput == goodput else
            ("peak throughput (no rate sweep)" if figures["peak_throughput_tps"] == figures["peak_throughput_tps"]
             else "")}


def run_systems(runs: Runs) -> pd.DataFrame:
    """Our runs as systems (deployments.systems_from_summary), plus memory, energy and roofline inputs."""
    if runs.empty or runs.summary.empty:
        return pd.DataFrame(columns=SYSTEM_COLUMNS)
    context = {r.model: r.context_window / 1000 for r in runs.meta.itertuples() if not math.isnan(r.context_window)}
    systems = deployments.systems_from_summary(runs.summary, context_window_k=context,
                                               items=paired.item_results(runs.requests),
                                               requests=runs.requests)
    # the compare plans' verdicts, which the frontier gives those pairs (paired.PLAN_COLUMN)
    systems[paired.PLAN_COLUMN] = systems["system"].map(paired.plans_by_system(paired.plan_pairs(runs.compare_plans)))
    meta = runs.meta.set_index("system")
    outcome = graded_outcome(runs.requests, graded_set_names()).set_index("system")
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
            "server": f"{info.get('server_software', '')} {info.get('server_version', '')}".strip(),
            # a random-weights checkpoint measures payloads and timings, not a deployment anyone would choose
            "excluded": "random weights (timings only)" if info.get("weights") == "random" else
            SPEECH_MODEL if info.get("server_api") == "transcription" else
            not_ranked(outcome.loc[row["system"]] if row["system"] in outcome.index else {},
                       number(info.get("max_error_rate", 0.2))),
            "hardware": info.get("hardware", "") or info.get("cpu", ""),
            "quantization": info.get("quantization", ""),
            "memory_bandwidth_gbs": info.get("memory_bandwidth_gbs", math.nan),
            "bandwidth_source": info.get("bandwidth_source", ""),
            "active_params_b": info.get("active_params_b", math.nan),
            "bytes_per_param": info.get("bytes_per_param", math.nan),
            "tps_per_w_reported": math.nan,
            "tokens_per_joule": metrics.tokens_per_joule(tokens[both].sum(), energy[both].sum()),
            "avg_temp_c": float(temps.mean()) if len(temps) else math.nan,
            "peak_power_w": float(peaks.max()) if len(peaks) else math.nan,
            "memory_gb": float(mem.max()) if len(mem) else math.nan,
            "memory_kind": _memory_kind(info.get("mem_source", "")),
            "energy_note": (f"no energy: {info.get('energy_reason')}" if info.get("energy_reason") else
                            "tok/s/W = average decode tok/s ÷ mean task-window power; tok/J = tokens ÷ window energy"),
            "client_error": info.get("client_error", ""),  # measure/selfcheck/calibration, from the run's manifest
            **_energy_boundary(runs, row["host"], row["model"]),
            **_node_energy(runs, row["host"], row["model"]),
            **_sweep_figures(runs, row["host"], row["model"]),
        })
        out.append(row)
    return pd.DataFrame(out).reindex(columns=SYSTEM_COLUMNS)


def _energy_boundary(runs: Runs, host: str, model: str) -> dict[str, Any]:
    """What the run's task-window joules cover (telemetry/boundary); several at once are listed, joined by ' | '."""
    wins = runs.windows
    if wins.empty or "energy_boundary" not in wins:
        return {"energy_boundary": "", "idle_subtracted": math.nan}
    task = wins["kind"].eq("task") if "kind" in wins else True
    mine = wins[(wins["host"] == host) & (wins["model"] == model) & task]
    found = sorted({str(b) for b in mine["energy_boundary"].dropna() if str(b)})
    return {"energy_boundary": " | ".join(found), "idle_subtracted": False if found else math.nan}


def _node_energy(runs: Runs, host: str, model: str) -> dict[str, Any]:
    """Tokens per joule at the whole node (its BMC, telemetry.bmc) over the task windows that have both, and the GPU
    board's share of the node's joules over the windows measured at both boundaries; NaN without a BMC."""
    wins = runs.windows
    out = {"node_tokens_per_joule": math.nan, "gpu_share_of_node": math.nan}
    if wins.empty or "node_energy_j" not in wins:
        return out
    task = wins["kind"].eq("task") if "kind" in wins else True
    mine = wins[(wins["host"] == host) & (wins["model"] == model) & task]
    node = pd.to_numeric(mine["node_energy_j"], errors="coerce")
    tokens = pd.to_numeric(mine.get("completion_tokens", pd.Series(dtype=float, index=mine.index)), errors="coerce")
    both = node.notna() & tokens.notna() & (node > 0)
    if both.any():
        out["node_tokens_per_joule"] = metrics.tokens_per_joule(tokens[both].sum(), node[both].sum())
    chip = pd.to_numeric(mine["energy_j"], errors="coerce")
    gpu = (mine["energy_boundary"] == boundary.GPU_BOARD) & chip.notna() & node.notna() & (node > 0)
    if gpu.any():
        out["gpu_share_of_node"] = float(chip[gpu].sum() / node[gpu].sum())
    return out


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
        if column not in TEXT_SYSTEM_COLUMNS:
            out[column] = pd.to_numeric(out[column], errors="coerce")
    return out


def run_systems_memory(runs: Runs, system: str) -> str:
    meta = runs.meta.set_index("system")
    host, model = (meta.loc[system, "host"], meta.loc[system, "model"]) if system in meta.index else ("", "")
    mine = runs.summary[(runs.summary["host"] == host) & (runs.summary["model"] == model)] if len(runs.summary) \
        else runs.summary
    mem = pd.to_numeric(mine.get("mem_peak_gb", pd.Series(dtype=float)), errors="coerce").dropna()
    if not len(mem):
        return "not measured"
    kind = _memory_kind(meta.loc[system, "mem_source"]) if system in meta.index else ""
    return f"{mem.max():.2f} GB ({kind})"


def run_avg_power(runs: Runs, host: str) -> float:
    mine = runs.summary[runs.summary["host"] == host] if len(runs.summary) else runs.summary
    power = pd.to_numeric(mine.get("avg_power_w", pd.Series(dtype=float)), errors="coerce").dropna()
    return float(power.mean()) if len(power) else math.nan


def run_telemetry_source(runs: Runs, host: str) -> str:
    """Where a host's telemetry came from, from its windows: "local", "agent on titan", "exporters on beast", or
    "none (server on X)" when the server was elsewhere and nothing sampled it. Windows from before the source
    was recorded were sampled locally."""
    wins = runs.windows
    mine = wins[wins["host"] == host] if len(wins) and "host" in wins else pd.DataFrame()
    if not len(mine):
        return ""
    labels = []
    for row in mine.drop_duplicates(["telemetry_source", "telemetry_host"]).itertuples() \
            if "telemetry_source" in mine else []:
        reason = str(getattr(row, "energy_reason", "") or "")
        source = str(row.telemetry_source or "") if isinstance(row.telemetry_source, str) else ""
        where = str(row.telemetry_host) if isinstance(row.telemetry_host, str) and row.telemetry_host else ""
        if reason.endswith("no telemetry source for it"):
            labels.append(f"none ({reason.split(':', 1)[0]})")
        elif source and source != "local":
            labels.append(f"{source} on {where}" if where else source)
        else:
            labels.append("local")
    return "; ".join(dict.fromkeys(labels)) or "local"


def run_peak_temp(runs: Runs, host: str) -> str:
    mine = runs.summary[runs.summary["host"] == host] if len(runs.summary) else runs.summary
    temp = pd.to_numeric(mine.get("temp_peak_c", pd.Series(dtype=float)), errors="coerce").dropna()
    return f"{temp.max():.0f} C" if len(temp) else ""


TASK_LONG_COLUMNS = ["task_id", "task", "modality", "system", "model", "host", "source", "metric", "value",
                     "value_sd", "value_lo", "value_hi", "n", "status", "value_text"]


def task_metrics_long(ref: pd.DataFrame, runs: Runs, catalog: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per task × system: decode_tps, e2e_latency, accuracy (published from 000 §4/§5/§9, ours from summaries),
    ttft for ours. status: '' | 'not applicable' (published) | 'not supported' | 'invalid: …' (ours)."""
    catalog = task_catalog() if catalog is None else catalog
    rows = []
    paper = seed_rows(ref, "000")
    if len(paper):
        sel = paper[(paper["task_id"] != "") & paper["metric"].isin(["decode_tps", "e2e_latency", "accuracy"])
                    & paper["section"].str.match(r"§(4|5|9)")]
        for r in sel.itertuples():
            na = str(r.value_text).lower() in ("not applicable", "n/a")
            rows.append({"task_id": r.task_id, "task": task_label(r.task_id, catalog), "modality": r.modality,
                         "system": Deployment.published(r.model, r.host), "model": r.model, "host": r.host, "source": r.source,
                         "metric": r.metric, "value": r.value, "value_sd": math.nan, "value_lo": math.nan,
                         "value_hi": math.nan, "n": math.nan,
                         "status": "not applicable" if na else "", "value_text": r.value_text})
    for r in runs.summary.to_dict("records") if len(runs.summary) else []:
        n_ok = int(number(r.get("n_ok")) or 0)
        if n_ok == 0 and number(r.get("n_unsupported")) > 0 and not number(r.get("n_failed")):
            status = "not supported"
        elif not flag(r.get("valid", True)):
            status = f"invalid: {r.get('note') or 'no ok requests'}"
        else:
            status = ""
        base = {"task_id": r["task"], "task": task_label(r["task"], catalog), "modality": r.get("modality", ""),
                "system": r["system"], "model": r["model"], "host": r["host"], "source": THIS_RUN,
                "n": n_ok, "status": status, "value_text": ""}
        scored = int(number(r.get("n_scored")) or 0)
        for metric, column, sd in (("decode_tps", "decode_tps_mean", "decode_tps_sd"),
                                   ("e2e_latency", "e2e_s_mean", "e2e_s_sd"), ("ttft", "ttft_s_p50", None),
                                   ("accuracy", "accuracy", None)):
            rows.append({**base, "metric": metric, "value": number(r.get(column)),
                         "value_sd": number(r.get(sd)) if sd else math.nan,
                         "value_lo": number(r.get(f"{column}_lo")), "value_hi": number(r.get(f"{column}_hi")),
                         "value_text": (f"{int(number(r.get('n_passed')) or 0)}/{scored}" if metric == "accuracy"
                                        and scored else "")})
    return pd.DataFrame(rows, columns=TASK_LONG_COLUMNS)


def system_order(systems: pd.DataFrame, long: pd.DataFrame) -> list[tuple[str, str]]:
    """(system, source) pairs: published first (paper order), then ours."""
    pairs = list(dict.fromkeys(zip(systems["system"], systems["source"]))) if len(systems) else []
    for pair in zip(long["system"], long["source"]):
        if pair not in pairs:
            pairs.append(pair)
    return pairs


# what names a deployment beyond its label: the host it ran on and the server it ran behind
DEPLOYMENT_FIELDS = ("host", "server")
# the columns that name a deployment in the paper's tables; each gets the host and the server beside it
DEPLOYMENT_KEYS = {"system": "", "dominated": "dominated_"}


def deployments_of(systems: pd.DataFrame) -> dict[tuple[str, str], dict[str, str]]:
    """(system, source) → where and behind what the deployment ran: {"host": …, "server": 'vllm 0.32.0' / the
    paper's 'vLLM'}, '' where unknown."""
    if systems.empty:
        return {}
    fields = [f for f in DEPLOYMENT_FIELDS if f in systems]
    return {(str(r["system"]), str(r["source"])): {f: "" if is_missing(r[f]) else str(r[f]) for f in fields}
            for r in systems.to_dict("records")}


def servers_of(systems: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(system, source) → the server the deployment ran behind, '' unknown."""
    return {key: found.get("server", "") for key, found in deployments_of(systems).items()}


def with_deployment(frame: pd.DataFrame, deployments: dict[tuple[str, str], dict[str, str]]) -> pd.DataFrame:
    """`frame` with the host and the server beside every column that names a deployment (DEPLOYMENT_KEYS): a
    reader can sort, filter or facet any table by host, and two servers of one model on one host are two
    deployments. Matched on (system, source), on the system alone where the frame has no source; a column the
    frame already has (`host`, or its server as `server` / `server_software`) is left alone."""
    by_system: dict[str, dict[str, str]] = {}
    for (system, _), found in deployments.items():
        by_system.setdefault(system, found)
    out = frame
    for key, prefix in DEPLOYMENT_KEYS.items():
        if key not in out.columns:
            continue
        if "source" in out.columns:
            found = [deployments.get((str(s), str(src)), by_system.get(str(s), {}))
                     for s, src in zip(out[key], out["source"])]
        else:
            found = [by_system.get(str(s), {}) for s in out[key]]
        at = out.columns.get_loc(key) + 1
        for field in DEPLOYMENT_FIELDS:
            column = prefix + field
            if column in out.columns or (field == "server" and "server_software" in out.columns):
                continue
            out = out.copy()
            out.insert(at, column, [f.get(field, "") for f in found])
            at += 1
    return out


ROOFLINE_COLUMNS = ["label", "source", "host", "model", "quantization", "memory_bandwidth_gbs", "active_params_b",
                    "bytes_per_param", "bytes_per_param_source", "bytes_per_token_gb", "decode_tps", "ceiling_tps",
                    "efficiency", "implied_bandwidth_gbs", "ladder", "note"]


def _active_params(ref: pd.DataFrame, model: str) -> float:
    rows = ref[(ref["model"] == model) & (ref["metric"] == "params_active")] if len(ref) else ref
    values = rows["value"].dropna()
    return float(values.iloc[0]) if len(values) else math.nan


def roofline_points(ref: pd.DataFrame, runs: Runs, systems: pd.DataFrame) -> pd.DataFrame:
    """One row per measured point: the paper's systems (000), 002's Ollama runs, 004's quantizations, our runs."""
    published, ours = systems[systems["source"] != THIS_RUN], systems[systems["source"] == THIS_RUN]
    frames = []
    if len(published):
        frames.append(_paper_points(published))
    if len(seed_rows(ref, "002")):
        frames.append(_bandwidth_blog_points(ref))
    if len(seed_rows(ref, "004")):
        frames.append(_quantization_blog_points(ref))
    ours = ours[ours["excluded"].astype(str) != SPEECH_MODEL]  # it decodes no tokens: no point on a roofline
    if len(ours):
        frames.append(_our_points(ours, runs))
    if not frames:
        return pd.DataFrame(columns=ROOFLINE_COLUMNS)
    out = pd.concat(frames, ignore_index=True)
    out["implied_bandwidth_gbs"] = pd.to_numeric(out["decode_tps"], errors="coerce") * out["bytes_per_token_gb"]
    return out.reindex(columns=ROOFLINE_COLUMNS)


def _paper_points(published: pd.DataFrame) -> pd.DataFrame:
    """The paper's systems (000 §6 average throughput, §2 parameters)."""
    frame = pd.DataFrame({
        "label": [f"{m} {q.split(' ')[0]} · {h}" for m, q, h in zip(published["model"], published["quantization"],
                                                                     published["host"])],
        "source": published["source"], "host": published["host"], "model": published["model"],
        "quantization": published["quantization"], "memory_bandwidth_gbs": published["memory_bandwidth_gbs"],
        "active_params_b": published["active_params_b"], "decode_tps": published["avg_decode_tps"],
        "note": "average throughput (§6); parameters as §2 reports them"})
    return roofline.roofline_table(frame)


def _bandwidth_blog_points(ref: pd.DataFrame) -> pd.DataFrame:
    """002's Ollama runs: quantization not stated, so no ceiling."""
    runs002 = reference.bandwidth_runs(ref)
    frame = pd.DataFrame({
        "label": [f"{m} · {h}" for m, h in zip(runs002["model"], runs002["host"])],
        "source": seed_rows(ref, "002")["source"].iloc[0], "host": runs002["host"], "model": runs002["model"],
        "quantization": runs002["quantization"], "memory_bandwidth_gbs": runs002["memory_bandwidth_gbs"],
        "active_params_b": [_active_params(ref, m) for m in runs002["model"]],
        "decode_tps": runs002["decode_tps"],
        "note": "Ollama default quantization (not stated in the seed): no ceiling drawn"})
    return roofline.roofline_table(frame)


def _quantization_blog_points(ref: pd.DataFrame) -> pd.DataFrame:
    """004's quantizations of E4B on the DGX Spark."""
    runs004 = reference.quant_runs(ref)
    frame = pd.DataFrame({
        "label": [f"{m} {q} · {h}" for m, q, h in zip(runs004["model"], runs004["quantization"], runs004["host"])],
        "source": seed_rows(ref, "004")["source"].iloc[0], "host": runs004["host"], "model": runs004["model"],
        "quantization": runs004["quantization"], "memory_bandwidth_gbs": runs004["memory_bandwidth_gbs"],
        "active_params_b": runs004["active_params_b"], "decode_tps": runs004["decode_tps"],
        "note": "~4B parameters read per token (the blog's figure); 500-token generation"})
    return roofline.roofline_table(frame)


def _our_points(ours: pd.DataFrame, runs: Runs) -> pd.DataFrame:
    """Our runs, each with a note of what its ceiling rests on or lacks. Bytes per token: from the tensor table of
    the GGUF the run served (a quantization ladder's rung, or any run whose manifest names a GGUF on this machine),
    else active params × bytes per param as declared (or looked up from the quantization), labelled as such.
    A ladder's rungs: the host's measured read bandwidth (unless one is declared)."""
    ours = ours.merge(runs.ladders[["host", "model", "read_gbs", "read_per_token_gb"]], on=["host", "model"],
                      how="left")
    ours = ours.merge(runs.meta[["system", "weights_read_gb", "weights_file", "bytes_per_param_source"]],
                      on="system", how="left")
    recorded = pd.to_numeric(ours["memory_bandwidth_gbs"], errors="coerce")
    declared = recorded.where(ours["bandwidth_source"].eq("declared"))
    rung = pd.to_numeric(ours["read_gbs"], errors="coerce").notna()
    read = pd.to_numeric(ours["read_per_token_gb"], errors="coerce").fillna(
        pd.to_numeric(ours["weights_read_gb"], errors="coerce"))
    frame = pd.DataFrame({
        "label": ours["system"], "source": THIS_RUN,
        "host": ours["host"], "model": ours["model"], "quantization": ours["quantization"],
        "memory_bandwidth_gbs": declared.fillna(pd.to_numeric(ours["read_gbs"], errors="coerce")).fillna(recorded),
        "active_params_b": ours["active_params_b"], "bytes_per_param": ours["bytes_per_param"],
        "decode_tps": ours["avg_decode_tps"], "note": "", "weights_read_gb": read, "ladder": rung})
    table = roofline.roofline_table(frame)
    files = ours["weights_file"].fillna("").astype(str)
    table["bytes_per_param_source"] = [
        f"GGUF tensor table{f' ({f})' if f else ''}" if not is_missing(r) else str(s or "unknown")
        for r, f, s in zip(read, files, ours["bytes_per_param_source"])]
    sources = ours["bandwidth_source"].fillna("").astype(str)
    table["note"] = [_our_note(row, bw_measured, source)
                     for row, bw_measured, source in zip(table.itertuples(), declared.isna() & rung, sources)]
    return table


def _our_note(row: Any, bw_measured: bool, source: str) -> str:
    """What one of our points lacks for a ceiling, else what it rests on, with where its bandwidth came from."""
    missing = ["quantization ladder rung; bandwidth = the host's measured read bandwidth"] if bw_measured else []
    if is_missing(row.memory_bandwidth_gbs):
        missing.append("bandwidth unknown (none declared, measured or from NVML)")
    source_note = f"bandwidth {bandwidth.LABELS.get(source, source)}" \
        if source and not bw_measured and not is_missing(row.memory_bandwidth_gbs) else ""
    from_file = str(row.bytes_per_param_source).startswith("GGUF")
    if is_missing(row.active_params_b) and not from_file:
        missing.append("server.active_params_b not set")
    if is_missing(row.bytes_per_param) and not from_file:
        missing.append("bytes per parameter unknown (server.bytes_per_param / quantization)")
    basis = ("GB/token from the GGUF tensor table (every tensor once; a tied embedding table read whole)"
             if from_file else f"GB/token = active params × bytes/param, {row.bytes_per_param_source}")
    above = roofline.above_ceiling(row.efficiency)
    return ("; ".join(filter(None, missing + [source_note, basis])) if missing else
            "; ".join(filter(None, ["average decode tok/s over our speed tasks", basis, source_note, above])))


def published_and_runs_long(ref: pd.DataFrame, runs: Runs) -> pd.DataFrame:
    """Every selected reference row (time units harmonized) and our summaries in the same long format."""
    frames = [reference.harmonize_units(ref).drop(columns=["task_id"], errors="ignore")] if len(ref) else []
    for meta in runs.meta.itertuples():
        mine = runs.summary[(runs.summary["host"] == meta.host) & (runs.summary["model"] == meta.model)]
        frames.append(deployments.to_long(mine, source=THIS_RUN, meta={
            "hardware": meta.hardware or meta.cpu, "quantization": meta.quantization,
            "server": f"{meta.server_software} {meta.server_version}".strip()}))
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=reference.REFERENCE_COLUMNS)
