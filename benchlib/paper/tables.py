"""The paper's descriptive tables: runs, setup, platform, throughput, latency & accuracy, memory/power/
thermal, capability/context, roofline, the seeds' arithmetic, load sweeps and the quantization ladder."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from benchlib.analysis import bandwidth_law, roofline, stats
from benchlib.analysis.frontier import node_flips
from benchlib.config.formatting import (
    MISSING,
    bounded_column,
    bracket,
    fmt,
    interval,
    is_missing,
    quantity,
    readable,
)
from benchlib.config.identity import Deployment
from benchlib.measure.capacity import bandwidth
from benchlib.measure.telemetry.boundary import NODE_INPUT
from benchlib.paper.format import Table
from benchlib.paper.runs import Runs, column_label, seed_rows, source_label
from benchlib.paper.settings import NO_RUNS, THIS_RUN, shown_path
from benchlib.paper.systems import (
    run_avg_power,
    run_peak_temp,
    run_systems_memory,
    run_telemetry_source,
    servers_of,
    system_order,
    task_label,
    task_order,
)
from benchlib.published import arithmetic, reference
from benchlib.records.schema import number
from benchlib.views.load_display import BOUNDED


def runs_table(runs: Runs) -> Table:
    columns = ["system", "host", "model", "suites", "n_requests", "n_ok", "n_failed", "n_unsupported",
               "server_software", "server_version", "run_ids", "git_commit", "path"]
    if runs.empty:
        data = pd.DataFrame([{"system": NO_RUNS, "path": shown_path(runs.root)}]).reindex(columns=columns)
    else:
        data = runs.meta.reindex(columns=columns).copy()
        data["path"] = [", ".join(shown_path(Path(p)) for p in str(v).split(", ")) for v in data["path"]]
    return Table("runs", "Runs found in outputs/", data,
                 caption=("Our runs (archived folders skipped). " + (f"{NO_RUNS}: every table below is the "
                          "published data alone." if runs.empty else "They appear as 'this run' beside the seeds.")))


def setup_table(ref: pd.DataFrame, runs: Runs) -> Table:
    rows = []
    paper = seed_rows(ref, "000")
    s2 = reference.select(paper, "§2") if len(paper) else paper
    for model, group in (s2.groupby("model", sort=False) if len(s2) else []):
        texts = dict(zip(group["metric"], group["value_text"]))
        params = " / ".join(t for t in (texts.get("params_active", ""), texts.get("params_total", "")) if t)
        rows.append({"system": Deployment.published(model, group["host"].iloc[0]), "source": group["source"].iloc[0],
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
                     "context_window": quantity(row.context_window, ",.0f", "tokens", "not given in params"),
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


def _published_platform(source: str, host: str, group: pd.DataFrame) -> dict[str, Any]:
    """One published host's platform row from its seed's cells (000 prints power and thermal; 002 and 004 not)."""
    by = {m: g.iloc[0] for m, g in group.groupby("metric")}

    def val(metric: str) -> float:
        return float(by[metric]["value"]) if metric in by and pd.notna(by[metric]["value"]) else math.nan

    def text(metric: str) -> str:
        return str(by[metric]["value_text"]) if metric in by else ""

    if not source.startswith("000"):
        return {"host": host, "source": source, "hardware": group["hardware"].iloc[0], "architecture": "",
                "memory": text("device_memory"), "memory_bandwidth_gbs": val("memory_bandwidth"),
                "tdp_w": math.nan, "idle_power_w": math.nan, "inference_power_w": math.nan,
                "inference_power": "", "peak_temp": "", "note": "no power/thermal figures in this seed"}
    power = by.get("avg_power")
    low, high = (power["value_low"], power["value_high"]) if power is not None else (math.nan, math.nan)
    avg = val("avg_power")
    return {"host": host, "source": source, "hardware": group["hardware"].iloc[0],
            "architecture": text("gpu_architecture"), "memory": text("device_memory"),
            "memory_bandwidth_gbs": val("memory_bandwidth"), "tdp_w": val("tdp"), "idle_power_w": val("idle_power"),
            "inference_power_w": avg if not math.isnan(avg) else (low + high) / 2,
            "inference_power": text("avg_power"), "peak_temp": text("peak_temp"), "note": ""}


def platform_table(ref: pd.DataFrame, runs: Runs) -> Table:
    rows = []
    hosts = ref[(ref["host"] != "") & ref["metric"].isin(["memory_bandwidth", "device_memory", "tdp", "idle_power",
                                                            "avg_power", "peak_temp", "gpu_architecture"])] \
        if len(ref) else ref
    for (source, host), group in (hosts.groupby(["source", "host"], sort=False) if len(hosts) else []):
        rows.append(_published_platform(source, host, group))
    for row in runs.meta.drop_duplicates("host").itertuples():
        bandwidth_known = not math.isnan(row.memory_bandwidth_gbs)
        rows.append({"host": row.host, "source": THIS_RUN, "hardware": row.hardware,
                     "architecture": row.accelerator or (f"CPU only: {row.cpu}" if row.cpu else "CPU only"),
                     "memory": quantity(row.memory_gb, "g", "GB", missing=""),
                     "memory_bandwidth_gbs": row.memory_bandwidth_gbs, "tdp_w": row.power_envelope_w,
                     "idle_power_w": row.idle_power_w,
                     "inference_power_w": run_avg_power(runs, row.host),
                     "inference_power": "", "peak_temp": run_peak_temp(runs, row.host),
                     "telemetry_source": run_telemetry_source(runs, row.host),
                     "note": "; ".join(n for n in (
                         f"bandwidth: {bandwidth.LABELS.get(row.bandwidth_source, row.bandwidth_source)}"
                         if bandwidth_known else "bandwidth unknown (none declared, measured or from NVML)",
                         f"no energy: {row.energy_reason}" if row.energy_reason else "") if n)})
    data = pd.DataFrame(rows, columns=["host", "source", "hardware", "architecture", "memory", "memory_bandwidth_gbs",
                                       "tdp_w", "idle_power_w", "inference_power_w", "inference_power", "peak_temp",
                                       "telemetry_source", "note"])
    data["telemetry_source"] = data["telemetry_source"].fillna("")
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
        "inference_power_w": "inference power (W)", "peak_temp": "peak temp (°C)",
        "telemetry_source": "telemetry source"})
    display["source"] = display["source"].map(source_label)
    return Table("platform", "Hardware platforms (000 §3, 002 and 004 hosts, our hosts)", data, display,
                 caption="Memory bandwidth sets the decode ceiling (see the roofline); power and temperature as "
                         "reported. Our host's bandwidth: the params' figure, else NVML's theoretical one on a GPU, "
                         "else the measured read bandwidth of the machine (the note says which). Telemetry source: "
                         "where our power, temperature and memory were sampled (local: the client's own host; agent "
                         "or exporters: on the server's host; none: the server was elsewhere and nothing sampled it).")


def _cell(row: pd.Series | None, spec: str, with_sd: bool = False, source: str = THIS_RUN) -> str:
    if row is None:
        return "not run" if source == THIS_RUN else "–"
    if row["status"] == "not applicable":
        return "n/a"
    if row["status"] == "not supported":
        return "not supported"
    if str(row["status"]).startswith("invalid"):
        return str(row["status"])  # e.g. 'invalid: every request failed
    if is_missing(row["value"]):
        return MISSING
    ours = row["source"] == THIS_RUN
    text = fmt(row["value"], spec)
    ends = bracket(number(row.get("value_lo")), number(row.get("value_hi")), spec) if ours else ""
    if with_sd and ours:
        sd = row["value_sd"]
        return text + ("" if is_missing(sd) else f" ± {fmt(sd, spec)}") + ends + f" (n={int(row['n'])})"
    return text + ends


def throughput_table(long: pd.DataFrame, systems: pd.DataFrame, catalog: pd.DataFrame) -> Table:
    metric = long[long["metric"] == "decode_tps"]
    order, servers = system_order(systems, metric), servers_of(systems)
    tasks = task_order(metric["task_id"], catalog)
    data_rows, display_rows = [], []
    for task in tasks:
        rows = metric[metric["task_id"] == task]
        data = {"task": task_label(task, catalog), "task_id": task,
                "modality": next((m for m in rows["modality"] if isinstance(m, str) and m), "")}
        shown = dict(data)
        for system, source in order:
            hit = rows[(rows["system"] == system) & (rows["source"] == source)]
            row = hit.iloc[0] if len(hit) else None
            label = column_label(system, source, servers.get((system, source), ""))
            data[label] = row["value"] if row is not None else math.nan
            shown[label] = _cell(row, ".1f", with_sd=True, source=source)
        data_rows.append(data)
        display_rows.append(shown)
    data = pd.DataFrame(data_rows)
    display = pd.DataFrame(display_rows).drop(columns=["task_id"], errors="ignore")
    return Table("throughput", "Generation throughput, decode tok/s per task (000 §4, §9 video) beside our runs",
                 data, display,
                 caption="Published: the paper's per-task token rates. This run: mean ± sd [95 % bootstrap "
                         "interval of the mean] over measured requests (n = ok requests). 'n/a' = not applicable "
                         "in that deployment, 'not supported' = the run declared no such input, 'not run' = that "
                         "suite was not executed.")


def latency_accuracy_table(long: pd.DataFrame, systems: pd.DataFrame, catalog: pd.DataFrame,
                           ref: pd.DataFrame) -> Table:
    sub = long[long["metric"].isin(["e2e_latency", "accuracy", "ttft"])]
    order, servers = system_order(systems, sub), servers_of(systems)
    reported = reference.paper_accuracy(ref) if len(seed_rows(ref, "000")) else pd.DataFrame(columns=["note"])
    truncated = {(r.system, r.task) for r in reported.itertuples() if r.note}
    tasks = task_order(sub["task_id"], catalog)
    data_rows, display_rows = [], []
    for task in tasks:
        rows = sub[sub["task_id"] == task]
        data = {"task": task_label(task, catalog), "task_id": task,
                "modality": next((m for m in rows["modality"] if isinstance(m, str) and m), "")}
        shown = dict(data)
        for system, source in order:
            mine = rows[(rows["system"] == system) & (rows["source"] == source)]
            label = column_label(system, source, servers.get((system, source), ""))
            for metric, name, spec in (("e2e_latency", "e2e s", ".2f"), ("ttft", "TTFT p50 s", ".3f"),
                                       ("accuracy", "accuracy (measured)" if source == THIS_RUN
                                        else "accuracy (reported)", ".0%")):
                if metric == "ttft" and source != THIS_RUN:
                    continue  # the paper reports no first-token latency (its §10 names it as future work)
                hit = mine[mine["metric"] == metric]
                row = hit.iloc[0] if len(hit) else None
                data[f"{name} · {label}"] = row["value"] if row is not None else math.nan
                shown[f"{name} · {label}"] = _latency_accuracy_cell(metric, row, spec, source,
                                                                   (system, task) in truncated)
        data_rows.append(data)
        display_rows.append(shown)
    average, shown_avg = _average_latency_row(order, servers, systems, ref)
    data_rows.append(average)
    display_rows.append(shown_avg)
    data = pd.DataFrame(data_rows)
    display = pd.DataFrame(display_rows).drop(columns=["task_id"], errors="ignore").fillna("")
    return Table("latency_accuracy", "End-to-end latency and accuracy per task (000 §5) beside our runs", data, display,
                 caption="Our cells carry their 95 % interval in brackets (bootstrap for latency, Wilson for "
                         "accuracy). Accuracy (reported) is the paper's pass/fail summary ('reported correct', and "
                         "where the paper says so, that the answer was truncated); accuracy (measured) is passed ÷ "
                         "scored requests by the task's checker, after echoed prompt text is cut. TTFT appears for "
                         "our runs only. Our average excludes the quality suite, as the paper averages its speed "
                         "tasks." + client_error_note(systems))


def client_error_note(systems: pd.DataFrame) -> str:
    """' Client error ±x ms TTFT, ±y ms ITL (p99, calibrated on this host): <system>; …' from each run's manifest
    (measure/selfcheck/calibration); "" when no run recorded one."""
    if "client_error" not in systems:
        return ""
    notes: dict[str, list[str]] = {}
    for row in systems.itertuples():
        if isinstance(row.client_error, str) and row.client_error:
            notes.setdefault(row.client_error, []).append(str(row.system))
    if not notes:
        return ""
    parts = [f"{note[0].upper()}{note[1:]}: {', '.join(names)}" for note, names in notes.items()]
    return " " + "; ".join(parts) + "."


def _latency_accuracy_cell(metric: str, row: pd.Series | None, spec: str, source: str, truncated: bool) -> str:
    """A latency or accuracy cell: the seed's accuracy as its pass/fail summary (and whether the answer was
    truncated), ours with passed/scored, 'not scored' where no checker judged it."""
    if metric == "accuracy" and row is not None and source != THIS_RUN:
        cell = "reported correct" if row["status"] == "" and row["value"] == 1 else _cell(row, spec, source=source)
        return cell + (" (answer truncated)" if truncated else "")
    if metric == "accuracy" and row is not None and row["value_text"]:
        return f"{_cell(row, spec)} ({row['value_text']})" if not math.isnan(row["value"]) else "not scored"
    if metric == "accuracy" and row is not None and row["status"] == "" and math.isnan(row["value"]):
        return "not scored"
    return _cell(row, spec, source=source)


def _average_latency_row(order: list[tuple[str, str]], servers: dict[tuple[str, str], str], systems: pd.DataFrame,
                         ref: pd.DataFrame) -> tuple[dict[str, Any], dict[str, Any]]:
    """(data, display) of the average row: the paper's average latency (§5 text) and ours (mean of per-task means,
    quality suite excluded)."""
    average = {"task": "All tasks (average)", "task_id": "average", "modality": ""}
    shown_avg = dict(average)
    paper_avg = reference.select(seed_rows(ref, "000"), "§5", metric="e2e_latency", task="All tasks (average)") \
        if len(ref) else ref
    for system, source in order:
        label = column_label(system, source, servers.get((system, source), ""))
        if source == THIS_RUN:
            s = systems[(systems["system"] == system) & (systems["source"] == source)]
            value = float(s["avg_e2e_s"].iloc[0]) if len(s) else math.nan
        else:
            hit = paper_avg[[Deployment.published(m, h) == system for m, h in zip(paper_avg["model"], paper_avg["host"])]] \
                if len(paper_avg) else paper_avg
            value = float(hit["value"].iloc[0]) if len(hit) else math.nan
        average[f"e2e s · {label}"] = value
        shown_avg[f"e2e s · {label}"] = fmt(value, ".2f")
    return average, shown_avg


def memory_power_table(systems: pd.DataFrame) -> Table:
    columns = ["system", "source", "memory_gb", "memory_kind", "avg_power_w", "peak_power_w", "avg_temp_c",
               "peak_temp_c", "avg_decode_tps", "tps_per_w", "tps_per_w_reported", "tokens_per_joule", "energy_note",
               "energy_boundary", "idle_subtracted", "node_tokens_per_joule", "gpu_share_of_node"]
    data = systems.reindex(columns=columns).copy()
    display = pd.DataFrame({
        "system": data["system"], "source": data["source"].map(source_label),
        "memory (GB)": [f"{fmt(v, '.1f')} ({k})" if not is_missing(v) else "not measured"
                        for v, k in zip(data["memory_gb"], data["memory_kind"])],
        "avg power (W)": [fmt(v, ".1f", "no energy data") for v in data["avg_power_w"]],
        "peak power (W)": [fmt(v, ".1f") for v in data["peak_power_w"]],
        "avg / peak temp (°C)": [f"{fmt(a, '.1f')} / {fmt(p, '.0f')}" for a, p in zip(data["avg_temp_c"],
                                                                                        data["peak_temp_c"])],
        "avg throughput (tok/s)": [fmt(v, ".1f") for v in data["avg_decode_tps"]],
        "tok/s/W (recomputed)": [fmt(v, ".2f") for v in data["tps_per_w"]],
        "tok/s/W (printed)": [fmt(v, ".2f") for v in data["tps_per_w_reported"]],
        "tokens per joule": [fmt(v, ".2f") for v in data["tokens_per_joule"]],
        "energy boundary": [f"{b}, idle not subtracted" if isinstance(b, str) and b else "—"
                            for b in data["energy_boundary"]],
        f"tokens per joule ({NODE_INPUT})": [fmt(v, ".2f") for v in data["node_tokens_per_joule"]],
        "GPU share of node": [fmt(v, ".0%") for v in data["gpu_share_of_node"]],
        "note": data["energy_note"],
    })
    boundaries = sorted({b for b in data["energy_boundary"] if isinstance(b, str) and b})
    flips = node_flips(data)
    return Table("memory_power_thermal", "Memory, power and thermal efficiency (000 §6) beside our runs", data, display,
                 caption="tok/s/W = average throughput ÷ average inference power, recomputed from the printed "
                         "averages (0.20 / 0.22 / 0.59 as printed). Tokens per joule equals tok/s/W for the paper's "
                         "steady-state figures; for our runs it is completion tokens ÷ measured window energy. "
                         "Energy columns stay empty where the host has no energy sensor, with the reason. Each "
                         "row's energy boundary says what its watts cover (GPU board, CPU package, SoC CPU+GPU+ANE, "
                         "whole board, a rail set); idle is included in every figure. "
                         + ("Rows of different boundaries (" + ", ".join(boundaries) + ") measure different things: "
                            "compare tok/s/W and tokens per joule only between rows of one boundary."
                            if len(boundaries) > 1 else "")
                         + (f" Tokens per joule at the {NODE_INPUT} is its own axis, where a run read the node's "
                            "BMC; the GPU share of node is the GPU board's joules ÷ the node's over the same windows."
                            if data["node_tokens_per_joule"].notna().any() else "")
                         + "".join(f" Would flip if measured at the node: {flip}." for flip in flips))


def capability_table(ref: pd.DataFrame, runs: Runs, long: pd.DataFrame) -> Table:
    rows = []
    paper = seed_rows(ref, "000")
    s9 = reference.select(paper, "§9") if len(paper) else paper
    for model, group in (s9.groupby("model", sort=False) if len(s9) else []):
        by = {m: g.iloc[0] for m, g in group.groupby("metric")}
        rows.append({"system": Deployment.published(model, group["host"].iloc[0]), "source": group["source"].iloc[0],
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
        "video benchmark": [f"{fmt(e, '.1f')} s, {fmt(t, '.1f')} tok/s" if not is_missing(t) else "not applicable"
                            for e, t in zip(data["video_e2e_s"], data["video_decode_tps"])],
        "max context window": [f"{fmt(v, '.3g')}K" if not is_missing(v) else "not given" for v in data["context_window_k"]],
        "modalities (declared)": data["modalities"].replace("", "—"),
    })
    return Table("capability_context", "Video and context-length capability (000 §9) beside our runs", data, display,
                 caption="Video support from the run's video suite (a request that succeeded); context window as "
                         "configured (server.context_window).")


def roofline_table(points: pd.DataFrame) -> Table:
    display = pd.DataFrame({
        "run": points["label"], "source": points["source"].map(source_label),
        "bandwidth (GB/s)": [fmt(v, ".0f") if not is_missing(v) else ("bandwidth unknown" if s == THIS_RUN else "–")
                             for v, s in zip(points["memory_bandwidth_gbs"], points["source"])],
        "active params (B)": [fmt(v, ".3g") for v in points["active_params_b"]],
        "bytes/param": ["— (GB/token from the " + str(s) + ")" if str(s).startswith("GGUF") else
                        f"{fmt(v, '.3g')} ({s})" if not is_missing(v) else "unknown"
                        for v, s in zip(points["bytes_per_param"], points["bytes_per_param_source"])],
        "GB read/token": [fmt(v, ".3g") for v in points["bytes_per_token_gb"]],
        "measured tok/s": [fmt(v, ".1f") for v in points["decode_tps"]],
        "ceiling tok/s": [fmt(v, ".1f") for v in points["ceiling_tps"]],
        "measured ÷ ceiling": [fmt(v, ".0%") for v in points["efficiency"]],
        "note": points["note"],
    })
    return Table("roofline", "Bandwidth roofline: decode ceiling = bandwidth ÷ bytes read per token", points, display,
                 caption="Bytes per token = active parameters × bytes per parameter (declared, or looked up from the "
                         "quantization: the bytes/param column says which), except for a run that served a GGUF "
                         "file found on this machine: there the GB its tensor table says one token reads (every "
                         "tensor once, a tied embedding table in full; benchlib.analysis.weights), as the ladder "
                         "uses. KV reads ignored, so the ceiling is an upper bound. implied_bandwidth_gbs in the CSV = measured tok/s × GB per token: the "
                         "bandwidth a run used at least.")


LOAD_DISPLAY = {
    "concurrency": ["system", "concurrency", "n_ok", "n_failed", "throughput_tps", "decode_tps_mean", "ttft_s_p50",
                    "e2e_s_p50", "energy_j", "tokens_per_joule", "tps_per_w", "j_per_prompt_token",
                    "j_per_output_token", "node_tokens_per_joule", "gpu_share_of_node", "knee", "saturated",
                    "client_bound", "energy_reason"],
    "context": ["system", "target_tokens", "prompt_tokens", "exact", "n_ok", "n_failed", "ttft_s_p50", "prefill_tps",
                "energy_j", "tokens_per_joule", "client_bound", "energy_reason", "note"],
    "rate": ["system", "level", "mode", "offered_rps", "n_window", "achieved_rps", "throughput_tps", "ttft_s_p50",
             "ttft_s_p99", "tpot_s_p50", "itl_s_p99", "slo_met_share", "goodput_rps", "goodput_tps", "meets_slo",
             "schedule_lag_p99_ms", "tokens_per_joule", "client_bound", "slos"],
}


LOAD_BOUNDS_NOTE = (" Each percentile carries its 95 % interval in brackets: distribution-free order-statistic bounds "
                    f"(PERCENTILE BOUNDS, benchlib.analysis.stats); [{MISSING}] where the level had too few values for "
                    f"one: a p50 needs at least {stats.INTERVAL_N['p50']} requests, a p99 at least "
                    f"{stats.INTERVAL_N['p99']}.")


LOAD_CAPTIONS = {
    "concurrency": "Aggregate output tok/s and latency per concurrency level; the knee is the first level after which "
                   "throughput grows < 10 % while p50 latency grows ≥ 1.5×; client_bound marks levels the client "
                   "itself may have paced. J/prompt token and J/output token: each request's prefill and decode "
                   "joules at the chip's boundary, idle apart (docs/energy.md, the attribution rule; intervals in "
                   "the CSV); node tokens per joule: the same tokens over the node's joules from its BMC, a separate "
                   "axis, never mixed with the chip's.",
    "context": "TTFT and prefill rate per prompt length (server-counted prompt tokens beside the target).",
    "rate": "Open-loop rate sweep: per level the offered rate, what the server achieved and its latency in the "
            "steady-state window (ramp-up and drain left out; n_window requests), goodput = achieved rate × share "
            "meeting every SLO (slos). The highest offered rate whose level meets the SLOs is the system's "
            "max_slo_rate_rps on the frontier. ITL percentiles pool every inter-token gap of the window: their n "
            "counts gaps, and their bounds take the gaps as independent.",
}


def load_table(runs: Runs, kind: str) -> Table | None:
    """One of the load suite's sweeps (sweep_concurrency.csv, sweep_context.csv, sweep_rate.csv), when present."""
    if kind not in runs.load:
        return None
    frame, name = runs.load[kind], f"load_{kind}"
    data = frame
    data = data[["system"] + [c for c in data.columns if c != "system"]]
    display = data[[c for c in LOAD_DISPLAY[kind] if c in data.columns]].copy()
    for column in display.columns:
        if column in BOUNDED:
            display[column] = bounded_column(data, column)
        elif pd.api.types.is_float_dtype(display[column]):
            display[column] = [readable(v) for v in display[column]]
    bounded = any(c in BOUNDED for c in display.columns)
    return Table(name, f"Load sweep: {kind} (our runs)", data, display,
                 caption=LOAD_CAPTIONS[kind] + (LOAD_BOUNDS_NOTE if bounded else ""))


def ladder_points_and_laws(ref: pd.DataFrame, runs: Runs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Our ladders' rungs with their measurements, and the law fitted per host beside 004's published ladder."""
    points = bandwidth_law.ladder_points(runs.ladders, runs.requests) if len(runs.ladders) else pd.DataFrame()
    laws = []
    for host, mine in (points.groupby("host", sort=False) if len(points) else []):
        laws.append({"ladder": f"{mine['model'].iloc[0].rsplit('-', 1)[0]} · {host} ({THIS_RUN})",
                     "bytes per token": "GGUF tensor tables", **bandwidth_law.fit_law(mine)})
    published = reference.quant_runs(ref) if len(seed_rows(ref, "004")) else pd.DataFrame()
    if len(published):
        published = roofline.roofline_table(published)
        laws.append({"ladder": f"Gemma 4 E4B · {published['host'].iloc[0]} (004)",
                     "bytes per token": "nominal: 4 B params × bytes per param",
                     **bandwidth_law.published_law(published)})
    return points, pd.DataFrame(laws)


def ladder_table(points: pd.DataFrame) -> Table | None:
    """The quantization ladder (benchlib.suites.ladder), rung by rung, when a ladder has run."""
    if points.empty:
        return None
    display = pd.DataFrame({
        "rung": points["qtype"], "host": points["host"], "file type": points["file_type"],
        "file (MB)": [fmt(v / 1e6, ".0f") for v in points["size_bytes"]],
        "bits/weight (all tensors)": [fmt(v, ".2f") for v in points["bits_per_weight"]],
        "GB read/token": [fmt(v, ".3f") for v in points["read_per_token_gb"]],
        "decode tok/s [95% CI]": [interval(v, lo, hi, ".1f", n) for v, lo, hi, n in zip(
            points["decode_tps"], points["decode_tps_lo"], points["decode_tps_hi"], points["n_decode"])],
        "ceiling tok/s": [fmt(v, ".1f") for v in points["ceiling_tps"]],
        "share of ceiling": [fmt(v, ".0%") for v in points["share_of_ceiling"]],
        "accuracy [95% CI]": [f"— carries {d}'s information (derived_from)" if d else
                              interval(v, lo, hi, ".0%", n) for v, lo, hi, n, d in zip(
                                  points["accuracy"], points["accuracy_lo"], points["accuracy_hi"],
                                  points["n_scored"], points["derived_from"])],
        "tensor types": points["tensor_types"],
    })
    return Table("ladder", "Quantization ladder of the embedded model: size, bytes read per token, speed, accuracy",
                 points, display,
                 caption="Each rung is the same model quantized on this host by llama.cpp's quantizer (`make "
                         "ladder`). GB read per token from the GGUF tensor table (every tensor once; the tied "
                         "embedding table in full for the logits), not a nominal bits-per-weight. Decode tok/s: "
                         "client-side per-request rates of the text suite, mean with a bootstrap interval. "
                         "Ceiling = measured read bandwidth ÷ GB per token. Accuracy pools every scored request "
                         "(Wilson interval); rungs above the source carry only its information, so theirs is "
                         "not reported.")


def ladder_law_table(points: pd.DataFrame, laws: pd.DataFrame, runs: Runs) -> Table | None:
    """The bandwidth law fitted on each ladder (ours beside 004's), when a ladder has run."""
    if points.empty:
        return None
    law_display = pd.DataFrame({
        "ladder": laws["ladder"], "bytes per token": laws["bytes per token"], "rungs": laws["n_rungs"],
        "slope of log tok/s on log GB/token [95% CI] (law: −1)": [
            interval(v, lo, hi, ".2f", n) for v, lo, hi, n in zip(laws["slope"], laws["slope_lo"], laws["slope_hi"],
                                                                   laws["n_rungs"])],
        "R²": [fmt(v, ".3f") for v in laws["r2"]],
        "effective bandwidth GB/s [95% CI]": [interval(v, lo, hi, ".1f", n) for v, lo, hi, n in zip(
            laws["beff_gbs"], laws["beff_lo"], laws["beff_hi"], laws["n_rungs"])],
        "bandwidth GB/s (ours: measured read; 004: vendor)": [fmt(v, ".1f") for v in laws["read_gbs"]],
        "measured copy GB/s": [fmt(v, ".1f") for v in laws["copy_gbs"]],
        "effective ÷ bandwidth": [fmt(v, ".0%") for v in laws["share_of_read_bandwidth"]],
    })
    method = runs.ladders["bandwidth_method"].iloc[0] if len(runs.ladders) else ""
    return Table("ladder_law", "The bandwidth law fitted on each ladder", laws, law_display,
                 caption="log tok/s = a + b·log GB/token by least squares (interval from the slope's "
                         "standard error); the law predicts b = −1. Effective bandwidth = geometric mean "
                         "of tok/s × GB/token over rungs (b fixed at −1), bootstrap interval over rungs. "
                         f"Our bandwidth: {method}.")


def seed_arithmetic_table(ref: pd.DataFrame) -> Table:
    """The seeds' printed totals, averages and ratios beside their recomputation from the seeds' own cells."""
    data = arithmetic.derivations(ref)
    off = int((~data["agrees"]).sum())
    return Table("seed_arithmetic", "The seeds' printed arithmetic, recomputed from their own cells", data,
                 caption=f"{len(data)} printed figures; {off} do not follow from the cells they summarise (kept as "
                         "printed; paper/reference/README.md says why).")
