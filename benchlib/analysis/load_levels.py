"""Per-level figures of the load sweeps from their request rows: aggregate throughput, latency
percentiles, failures, the knee rule, context-length rows, and what feeds the frontier."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from benchlib.analysis import stats
from benchlib.analysis.failures import WHAT_IT_DID
from benchlib.config import metrics
from benchlib.measure.selfcheck.client_health import HEALTH_COLUMNS
from benchlib.records.rows import STATUS_FAILED, STATUS_OK
from benchlib.records.schema import flag, number, numeric_column

SUITE = "load"


CONCURRENCY_TASK = "concurrency"


CONTEXT_TASK = "context"


KNEE_GAIN = 0.10  # throughput gain below which adding streams no longer pays ...


KNEE_LATENCY_GROWTH = 1.5  # ... while p50 TTFT or e2e grows at least this much


CONCURRENCY_CSV = "sweep_concurrency.csv"


CONTEXT_CSV = "sweep_context.csv"


# The sweeps' columns; each line's comment is its columns' meaning (docs/columns.md is written from them; a column
# without one means what requests.csv or summary.csv says it means)
CONCURRENCY_COLUMNS = (["run_id", "host", "model", "server_software",
                        "concurrency",  # streams kept in flight at this level
                        "n_requests", "n_ok", "n_failed", "failures",  # the level's requests; ok; failed; by kind
                        "span_s",  # the level's first wire start → its last answer's end, s
                        "completion_tokens",  # the ok requests' completion tokens, summed
                        "throughput_tps",  # completion_tokens ÷ span_s: aggregate output tokens per second
                        "decode_tps_mean",  # the ok requests' mean decode rate
                        # their median decode rate, with its 95 % order-statistic interval (PERCENTILE BOUNDS,
                        # benchlib.analysis.stats: empty below stats.INTERVAL_N values, 6 for a median)
                        "decode_tps_p50", "decode_tps_p50_lo", "decode_tps_p50_hi",
                        # their TTFT, s: median, with its interval (from 6 values)
                        "ttft_s_p50", "ttft_s_p50_lo", "ttft_s_p50_hi",
                        # their TTFT, s: p90 (from 10 values), with its interval (from 36)
                        "ttft_s_p90", "ttft_s_p90_lo", "ttft_s_p90_hi",
                        # their TTFT, s: p99 (from 100 values), with its interval (from 368)
                        "ttft_s_p99", "ttft_s_p99_lo", "ttft_s_p99_hi",
                        # their e2e latency, s: median, with its interval (from 6 values)
                        "e2e_s_p50", "e2e_s_p50_lo", "e2e_s_p50_hi",
                        # their e2e latency, s: p90 (from 10 values), with its interval (from 36)
                        "e2e_s_p90", "e2e_s_p90_lo", "e2e_s_p90_hi",
                        # their e2e latency, s: p99 (from 100 values), with its interval (from 368)
                        "e2e_s_p99", "e2e_s_p99_lo", "e2e_s_p99_hi",
                        "throughput_gain",  # throughput_tps ÷ the previous level's − 1
                        "latency_growth",  # the larger of p50 TTFT's and p50 e2e's ratio to the previous level's
                        # KNEE RULE: the first level after which throughput grows less than 10 % while p50 TTFT or
                        # e2e grows at least 1.5×; the levels above it are saturated
                        "knee", "saturated"]
                       + HEALTH_COLUMNS)


CONTEXT_COLUMNS = (["run_id", "host", "model", "server_software",
                    "target_tokens",  # the prompt length this level aims at, server-counted tokens
                    "requested_tokens",  # the length the params asked for (above the context window: cut to it)
                    # how the prompt was fitted: the server's tokenizer endpoint, or calibrated from characters
                    # per token
                    "method",
                    "template_tokens", "content_tokens",  # tokens the chat template adds; tokens of the text fitted
                    "prompt_tokens",  # the length the server reported
                    "token_error", "exact",  # prompt_tokens − target_tokens; every request hit the target exactly
                    "n_requests", "n_ok", "n_failed", "failures",  # the level's requests; ok; failed; by kind
                    "completion_tokens",  # the ok requests' completion tokens, summed
                    # the ok requests' median TTFT, s, with its 95 % order-statistic interval (PERCENTILE BOUNDS,
                    # benchlib.analysis.stats; empty below 6 values)
                    "ttft_s_p50", "ttft_s_p50_lo", "ttft_s_p50_hi",
                    "ttft_s_min",  # the fastest TTFT, s
                    # their median e2e latency, s, with its 95 % order-statistic interval (empty below 6 values)
                    "e2e_s_p50", "e2e_s_p50_lo", "e2e_s_p50_hi",
                    "decode_tps_mean",  # their mean decode rate
                    # prompt_tokens ÷ ttft_s_p50; the server's own prefill rate, mean
                    "prefill_tps", "server_prefill_tps",
                    "cached_tokens",  # prompt tokens the server took from its cache
                    "note"]  # why a length was cut or left out
                   + HEALTH_COLUMNS)


# ---- shared helpers -----------------------------------------------------------------------------------------
def percentiles(series: pd.Series, prefix: str, names: tuple[str, ...]) -> dict[str, float]:
    """Each named percentile of a column's values with its bounds (stats.percentile_columns)."""
    return stats.percentile_columns(series.to_numpy(dtype=float), prefix, names)


def failure_text(rows: pd.DataFrame) -> str:
    failed = rows[rows["status"] == STATUS_FAILED]
    if failed.empty:
        return ""
    kinds = failed["error_kind"].fillna("").replace("", "unknown")
    return "; ".join(f"{k}: {n}" + (f" ({WHAT_IT_DID[k]})" if k in WHAT_IT_DID else "")
                     for k, n in kinds.value_counts().sort_index().items())


def warmup_mask(frame: pd.DataFrame) -> pd.Series:
    if "is_warmup" not in frame:
        return pd.Series(False, index=frame.index)
    return frame["is_warmup"].map(flag)


def measured_rows(requests: pd.DataFrame, task: str) -> pd.DataFrame:
    if requests is None or requests.empty or "task" not in requests:
        return pd.DataFrame(columns=list(requests.columns) if requests is not None else [])
    rows = requests[(requests["task"] == task) & ~warmup_mask(requests)]
    return rows


def concurrency_levels(requests: pd.DataFrame, health: dict[int, dict[str, Any]] | None = None,
                       identity: dict[str, Any] | None = None) -> pd.DataFrame:
    """Per-level statistics from requests.csv rows (task 'concurrency'), health columns and the knee."""
    rows = measured_rows(requests, CONCURRENCY_TASK)
    out = []
    for level, group in rows.groupby(numeric_column(rows, "concurrency").astype("Int64"), sort=True):
        ok = group[group["status"] == STATUS_OK]
        start = numeric_column(group, "start_ns")
        end = start + numeric_column(group, "e2e_s").fillna(0) * 1e9
        valid = start > 0
        span = float((end[valid].max() - start[valid].min()) / 1e9) if valid.any() else np.nan
        tokens = float(numeric_column(ok, "completion_tokens").fillna(0).sum())
        row = {**(identity or {}), "concurrency": int(level), "n_requests": len(group), "n_ok": len(ok),
               "n_failed": int((group["status"] == STATUS_FAILED).sum()), "failures": failure_text(group),
               "span_s": span, "completion_tokens": tokens,
               "throughput_tps": metrics.rate(tokens, span) if len(ok) else np.nan,
               "decode_tps_mean": float(numeric_column(ok, "decode_tps").mean()) if len(ok) else np.nan,
               **percentiles(numeric_column(ok, "decode_tps"), "decode_tps", ("p50",))}
        for metric in ("ttft_s", "e2e_s"):
            row.update(percentiles(numeric_column(ok, metric), metric, ("p50", "p90", "p99")))
        row.update({c: np.nan for c in HEALTH_COLUMNS})
        row.update((health or {}).get(int(level), {}))
        out.append(row)
    if not out:
        return pd.DataFrame(columns=CONCURRENCY_COLUMNS)
    frame = mark_knee(pd.DataFrame(out))
    return frame[[c for c in CONCURRENCY_COLUMNS if c in frame]]


def mark_knee(levels: pd.DataFrame, gain: float = KNEE_GAIN, growth: float = KNEE_LATENCY_GROWTH) -> pd.DataFrame:
    """Add throughput_gain, latency_growth (vs the previous level), knee and saturated (see KNEE RULE above)."""
    frame = levels.sort_values("concurrency").reset_index(drop=True).copy()
    frame["throughput_gain"] = np.nan
    frame["latency_growth"] = np.nan
    frame["knee"] = False
    frame["saturated"] = False
    knee_at = find_knee(frame, gain, growth)
    thr = numeric_column(frame, "throughput_tps")
    ttft, e2e = numeric_column(frame, "ttft_s_p50"), numeric_column(frame, "e2e_s_p50")
    for i in range(1, len(frame)):
        frame.loc[i, "throughput_gain"] = thr[i] / thr[i - 1] - 1 if thr[i - 1] > 0 else np.nan
        ratios = [b / a for a, b in ((ttft[i - 1], ttft[i]), (e2e[i - 1], e2e[i])) if a > 0 and b == b]
        frame.loc[i, "latency_growth"] = max(ratios) if ratios else np.nan
    if knee_at is not None:
        frame["knee"] = frame["concurrency"] == knee_at
        frame["saturated"] = frame["concurrency"] > knee_at
    return frame


def find_knee(levels: pd.DataFrame, gain: float = KNEE_GAIN, growth: float = KNEE_LATENCY_GROWTH) -> int | None:
    """The first level after which aggregate throughput grows < `gain` while p50 TTFT or e2e grows ≥ `growth`×."""
    frame = levels[numeric_column(levels, "n_ok").fillna(0) > 0] if "n_ok" in levels else levels
    frame = frame.sort_values("concurrency").reset_index(drop=True)
    thr = numeric_column(frame, "throughput_tps")
    ttft, e2e = numeric_column(frame, "ttft_s_p50"), numeric_column(frame, "e2e_s_p50")
    for i in range(1, len(frame)):
        if not (thr[i - 1] > 0 and thr[i] == thr[i]):
            continue
        ratios = [b / a for a, b in ((ttft[i - 1], ttft[i]), (e2e[i - 1], e2e[i])) if a > 0 and b == b]
        if thr[i] < (1 + gain) * thr[i - 1] and ratios and max(ratios) >= growth:
            return int(frame.loc[i - 1, "concurrency"])
    return None


def context_levels(requests: pd.DataFrame, plans: dict[int, dict] | None = None,
                   health: dict[int, dict[str, Any]] | None = None,
                   identity: dict[str, Any] | None = None) -> pd.DataFrame:
    """Per-length statistics from requests.csv rows (task 'context'), the plan and health of each length."""
    rows = measured_rows(requests, CONTEXT_TASK)
    out = []
    if not rows.empty:
        targets = rows["variant"].astype(str).str.extract(r"^n(\d+)$")[0]
        rows = rows.assign(_target=pd.to_numeric(targets, errors="coerce")).dropna(subset=["_target"])
    for target, group in (rows.groupby("_target", sort=True) if not rows.empty else []):
        target = int(target)
        ok = group[group["status"] == STATUS_OK]
        plan = (plans or {}).get(target, {})
        prompt_tokens = numeric_column(ok, "prompt_tokens")
        actual = float(prompt_tokens.median()) if prompt_tokens.notna().any() else np.nan
        medians = {**percentiles(numeric_column(ok, "ttft_s"), "ttft_s", ("p50",)),
                   **percentiles(numeric_column(ok, "e2e_s"), "e2e_s", ("p50",))}
        ttft = medians["ttft_s_p50"]
        row = {**(identity or {}), "target_tokens": target,
               "requested_tokens": plan.get("requested_tokens", target), "method": plan.get("method", ""),
               "template_tokens": plan.get("template_tokens", np.nan),
               "content_tokens": plan.get("content_tokens", np.nan), "prompt_tokens": actual,
               "token_error": actual - target if actual == actual else np.nan,
               "exact": bool(prompt_tokens.notna().any() and (prompt_tokens.dropna() == target).all()),
               "n_requests": len(group), "n_ok": len(ok), "n_failed": int((group["status"] == STATUS_FAILED).sum()),
               "failures": failure_text(group),
               "completion_tokens": float(numeric_column(ok, "completion_tokens").fillna(0).sum()),
               "decode_tps_mean": float(numeric_column(ok, "decode_tps").mean()) if len(ok) else np.nan,
               **medians, "ttft_s_min": float(numeric_column(ok, "ttft_s").min()) if len(ok) else np.nan,
               "prefill_tps": metrics.prefill_tps(actual, ttft),
               "server_prefill_tps": float(numeric_column(ok, "server_prefill_tps").mean()) if len(ok) else np.nan,
               "cached_tokens": float(numeric_column(ok, "cached_tokens").mean()) if len(ok) else np.nan,
               "note": plan.get("note", "")}
        row.update({c: np.nan for c in HEALTH_COLUMNS})
        row.update((health or {}).get(target, {}))
        out.append(row)
    return pd.DataFrame(out, columns=CONTEXT_COLUMNS)


# ---- frontier figures, summary, figures ---------------------------------------------------------------------
def max_ok(frame: pd.DataFrame, column: str) -> float:
    """The largest level / length that ran with no failures (and at least one success); NaN when none did."""
    if frame is None or frame.empty or column not in frame:
        return np.nan
    clean = frame[(numeric_column(frame, "n_failed").fillna(0) == 0) & (numeric_column(frame, "n_ok").fillna(0) > 0)]
    return float(clean[column].max()) if len(clean) else np.nan


def flag_column(series: pd.Series) -> pd.Series:
    return series.map(flag)


FRONTIER_COLUMNS = (  # the load suite's figures for the frontier, on every row of its summary.csv (frontier_figures)
    "max_concurrency_ok",  # the highest concurrency level that ran with no failure
    "max_context_ok",  # the longest context (target tokens) that ran with no failure
    "knee_concurrency",  # the knee's concurrency (KNEE RULE; empty when throughput kept growing)
    "peak_throughput_tps")  # the concurrency sweep's highest aggregate throughput


def frontier_figures(concurrency: pd.DataFrame, context: pd.DataFrame) -> dict[str, float]:
    """max_concurrency_ok, max_context_ok (target prompt tokens), knee_concurrency, peak throughput."""
    knee = concurrency.loc[flag_column(concurrency["knee"]), "concurrency"] if "knee" in concurrency else []
    return {"max_concurrency_ok": max_ok(concurrency, "concurrency"),
            "max_context_ok": max_ok(context, "target_tokens"),
            "knee_concurrency": float(knee.iloc[0]) if len(knee) else np.nan,
            "peak_throughput_tps": float(numeric_column(concurrency, "throughput_tps").max()) if len(concurrency) else np.nan}


# ---- energy per level ---------------------------------------------------------------------------------------
LEVEL_ENERGY_COLUMNS = [  # each line's comment is its columns' meaning (docs/columns.md is written from them)
    "level_window_s",  # the level's own telemetry window, s
    "energy_j", "avg_power_w", "net_energy_j",  # its energy, J; energy ÷ time, W; less the idle draw, J
    "loaded_power_w", "net_loaded_energy_j",  # the model-loaded baseline's power, W; energy_j less that baseline, J
    "tokens_per_joule",  # the level's completion tokens ÷ energy_j
    "tps_per_w",  # the level's aggregate throughput (concurrency) or its mean decode rate (context) ÷ avg_power_w
    "energy_reason",  # why the energy cells are empty
    # the whole node from its BMC (telemetry.bmc), its own boundary beside the chip's: energy, J, and its error
    # bound, J; completion tokens ÷ node_energy_j; energy_j ÷ node_energy_j where a GPU counter is present
    "node_energy_j", "node_energy_error_j", "node_tokens_per_joule", "gpu_share_of_node"]


def level_window(task: str, level: Any) -> str:
    """The telemetry window of one sweep level: 'concurrency:4', 'context:512', 'rate:r2.5'."""
    return f"{task}:{level if isinstance(level, str) else int(level)}"


def level_energy(levels: pd.DataFrame, windows: pd.DataFrame, task: str, key: str) -> pd.DataFrame:
    """Each level's energy from its own window (warm-ups, calibration and tokenizer probing are outside every
    level window): energy, average power (energy ÷ time), net energy over the idle baseline and over the
    model-loaded baseline, tokens per joule (the level's completion tokens ÷ its energy) and tok/s per W from
    the level's aggregate throughput (concurrency) or its requests' decode rate (context). Without an energy
    sensor the cells stay empty and energy_reason says why."""
    out = levels.copy()
    for column in LEVEL_ENERGY_COLUMNS:
        out[column] = "" if column == "energy_reason" else np.nan
    if out.empty:
        return out
    wins = windows[windows["kind"] == "level"] if windows is not None and "kind" in windows else pd.DataFrame()
    loaded = windows[windows["kind"] == "loaded"] if windows is not None and "kind" in windows else pd.DataFrame()
    loaded_powers = numeric_column(loaded, "avg_power_w").dropna() if len(loaded) else pd.Series(dtype=float)
    loaded_power = float(loaded_powers.iloc[-1]) if len(loaded_powers) else np.nan
    rate_column = "throughput_tps" if "throughput_tps" in out else "decode_tps_mean"
    for i, row in out.iterrows():
        name = level_window(task, row[key])
        mine = wins[wins["window"] == name] if len(wins) else wins
        if not len(mine):
            out.at[i, "energy_reason"] = f"no telemetry window {name!r} (an older run, or telemetry disabled)"
            continue
        window = mine.iloc[-1]
        duration, energy = number(window.get("duration_s")), number(window.get("energy_j"))
        out.at[i, "level_window_s"] = duration
        node = number(window.get("node_energy_j"))
        if node > 0:
            out.at[i, "node_energy_j"] = node
            out.at[i, "node_energy_error_j"] = number(window.get("node_energy_error_j"))
            out.at[i, "node_tokens_per_joule"] = metrics.tokens_per_joule(number(row.get("completion_tokens")), node)
            out.at[i, "gpu_share_of_node"] = number(window.get("gpu_share_of_node"))
        if np.isnan(energy):
            out.at[i, "energy_reason"] = f"no energy: {window.get('energy_reason') or 'not measured'}"
            continue
        power = metrics.average_power_w(energy, duration)
        tokens = number(row.get("completion_tokens"))
        out.at[i, "energy_j"], out.at[i, "avg_power_w"] = energy, power
        out.at[i, "net_energy_j"] = number(window.get("net_energy_j"))
        out.at[i, "loaded_power_w"] = loaded_power
        out.at[i, "net_loaded_energy_j"] = energy - loaded_power * duration if not np.isnan(loaded_power) else np.nan
        out.at[i, "tokens_per_joule"] = metrics.tokens_per_joule(tokens, energy)
        out.at[i, "tps_per_w"] = metrics.tps_per_watt(number(row.get(rate_column)), power)
    return out


# ---- the server's own view of each level ---------------------------------------------------------------------
LEVEL_SERVER_COLUMNS = ["server_ttft_mean_ms",  # the server's mean TTFT over the level's window, ms
                        "server_running_peak", "server_waiting_peak", "server_kv_usage_peak", "server_preemptions",
                        "server_generation_tokens"]


def level_server_metrics(levels: pd.DataFrame, server: pd.DataFrame | None, task: str, key: str) -> pd.DataFrame:
    """Each level's figures from the server's /metrics (benchlib.measure.servers.prometheus), from the window of the same
    name: mean TTFT the server measured, peak requests running and waiting, peak KV-cache usage, preemptions
    and generation tokens. Empty cells where the server has no /metrics."""
    out = levels.copy()
    for column in LEVEL_SERVER_COLUMNS:
        out[column] = np.nan
    if out.empty or server is None or server.empty:
        return out
    wins = server[server["kind"] == "level"]
    for i, row in out.iterrows():
        mine = wins[wins["window"] == level_window(task, row[key])]
        if not len(mine):
            continue
        window = mine.iloc[-1]
        out.at[i, "server_ttft_mean_ms"] = number(window.get("server_ttft_mean_s")) * 1e3
        for column in LEVEL_SERVER_COLUMNS[1:]:
            out.at[i, column] = number(window.get(column))
    return out


# ---- steady-state energy per level ---------------------------------------------------------------------------
STEADY_COLUMNS = [  # each line's comment is its columns' meaning (docs/columns.md is written from them)
    # STEADY RULE: from the first instant the requests in flight reach the level's concurrency to the last instant
    # they drop below it (an open-loop level: the first send after the ramp → the last send); its length, s
    "steady_s",
    "steady_energy_j", "steady_tokens",  # the energy inside it, J, and the tokens whose own stamps fall inside it
    "steady_tokens_per_joule",  # steady_tokens ÷ steady_energy_j
    "steady_reason"]  # why the steady cells are empty
STEADY_KIND = "steady"  # the telemetry window kind of a level's steady part (never summed into its task)


def spans(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) in ns of every request of a level that went on the wire (failed ones were in flight too)."""
    start = numeric_column(rows, "start_ns")
    end = start + numeric_column(rows, "e2e_s").fillna(0) * 1e9
    keep = (start > 0).to_numpy()
    return start.to_numpy(dtype=float)[keep], end.to_numpy(dtype=float)[keep]


def steady_window(starts: np.ndarray, ends: np.ndarray, target: int) -> tuple[int, int] | None:
    """STEADY RULE (ML.ENERGY's steady state of a load level): from the first instant the number of requests in
    flight reaches `target` to the last instant it drops below it (after which the level only drains). A request
    ending at the instant another starts counts as gone first, so a closed loop's hand-over is no dip that reaches
    the target early. None when the count never reaches the target."""
    events = sorted([(float(t), -1) for t in ends] + [(float(t), 1) for t in starts])
    count, t0, t1 = 0, None, None
    for when, step in events:
        before, count = count, count + step
        if t0 is None and count >= target:
            t0 = when
        elif t0 is not None and before >= target > count:
            t1 = when
    return (int(t0), int(t1)) if t0 is not None and t1 is not None and t1 > t0 else None


def open_loop_window(starts: np.ndarray, ramp_share: float) -> tuple[int, int] | None:
    """An open-loop level has no concurrency to reach: its steady part runs from the first send after the ramp
    (the share of sends rate_level leaves out) to the last send, when arrivals stop and it starts to drain."""
    ordered = np.sort(starts)
    if len(ordered) < 2:
        return None
    first = ordered[min(int(len(ordered) * ramp_share), len(ordered) - 2)]
    return (int(first), int(ordered[-1])) if ordered[-1] > first else None


def tokens_between(rows: pd.DataFrame, t0: int, t1: int) -> float:
    """Completion tokens received inside [t0, t1]: each token's own stamp (start + TTFT + the ITLs) where the row
    kept them, else its tokens spread evenly between its first token and its end."""
    total = 0.0
    for row in rows[rows["status"] == STATUS_OK].itertuples():
        start, ttft, e2e, n = number(row.start_ns), number(row.ttft_s), number(row.e2e_s), number(
            getattr(row, "completion_tokens", np.nan))
        if np.isnan(start) or np.isnan(ttft) or np.isnan(n) or n <= 0:
            continue
        first = start + ttft * 1e9
        itl = getattr(row, "itl_s", None)
        if isinstance(itl, (list, tuple)) and len(itl) == int(n) - 1:
            stamps = first + np.concatenate([[0.0], np.cumsum(np.asarray(itl, dtype=float))]) * 1e9
            total += float(((stamps >= t0) & (stamps <= t1)).sum())
            continue
        end = start + e2e * 1e9 if not np.isnan(e2e) else first
        if end <= first:
            total += n if t0 <= first <= t1 else 0.0
        else:
            total += n * max(0.0, min(end, t1) - max(first, t0)) / (end - first)
    return total


def _target(row: pd.Series, key: str) -> int | None:
    """The level's concurrency: the concurrency sweep's level; a rate level's cap when it is closed-loop."""
    if key == "concurrency":
        return int(row[key])
    mode = str(row.get("mode", ""))
    if mode == "synchronous":
        return 1
    if mode == "throughput":
        return int(number(row.get("max_concurrency")))
    return None


def level_steady(levels: pd.DataFrame, requests: pd.DataFrame, task: str, key: str, telemetry: Any = None,
                 ramp_share: float = 0.0) -> pd.DataFrame:
    """Each level's steady-state window (STEADY RULE; open_loop_window for an open-loop rate level), its energy
    from the telemetry samples in it (telemetry.measure: the window arithmetic every window uses, recorded as a
    STEADY_KIND window '<level window>:steady'; one recorded earlier — a resumed run — is reused), its tokens
    (tokens_between) and tokens per joule: steady_s, steady_energy_j, steady_tokens, steady_tokens_per_joule,
    beside the whole level's figures; steady_reason says why a cell is empty."""
    out = levels.copy()
    for column in STEADY_COLUMNS:
        out[column] = "" if column == "steady_reason" else np.nan
    rows = measured_rows(requests, task)
    if out.empty or rows.empty:
        return out
    column = "concurrency" if key == "concurrency" else "variant"
    known = telemetry.windows_frame() if telemetry is not None else pd.DataFrame()
    for i, level in out.iterrows():
        mine = rows[rows[column].astype(str) == str(level[key])]
        starts, ends = spans(mine)
        target = _target(level, key)
        window = steady_window(starts, ends, target) if target else open_loop_window(starts, ramp_share)
        if window is None:
            out.at[i, "steady_reason"] = (f"in-flight requests never reached {target}" if target
                                          else "fewer than two sends")
            continue
        t0, t1 = window
        out.at[i, "steady_s"] = (t1 - t0) / 1e9
        tokens = tokens_between(mine, t0, t1)
        out.at[i, "steady_tokens"] = tokens
        name = f"{level_window(task, level[key])}:steady"
        found = known[(known["window"] == name) & (known["kind"] == STEADY_KIND)] if len(known) else known
        same = found[(numeric_column(found, "t_start_ns") == t0) & (numeric_column(found, "t_end_ns") == t1)] \
            if len(found) else found
        if len(same):
            measured = same.iloc[-1].to_dict()
        elif telemetry is not None:
            measured = telemetry.measure(name, STEADY_KIND, t0, t1)
        else:
            out.at[i, "steady_reason"] = "no telemetry"
            continue
        energy = number(measured.get("energy_j"))
        if np.isnan(energy):
            out.at[i, "steady_reason"] = f"no energy: {measured.get('energy_reason') or 'not measured'}"
            continue
        out.at[i, "steady_energy_j"] = energy
        out.at[i, "steady_tokens_per_joule"] = metrics.tokens_per_joule(tokens, energy)
    return out
