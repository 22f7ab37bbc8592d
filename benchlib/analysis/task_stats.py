"""Per-suite summaries: requests.csv rows -> per-task statistics with n and intervals -> telemetry and /metrics joins.

Measured rows are the non-warm-up ones. Timing and throughput statistics use status=="ok" rows only;
accuracy is the share passed among ok rows that were scored (passed not empty). error_rate is
failed ÷ (ok + failed): 'unsupported' rows mark a missing capability, not an error.

A row whose server token counts are implausible (benchlib.measure.client.timing.check_counts: its `implausible_counts`,
or, for rows written elsewhere, a completion or prompt count that is not a whole number >= 0, a completion count
above timing.completion_limit or a prompt count above timing.MAX_CONTEXT_TOKENS) is counted in n_implausible and kept out of every figure computed from token counts
(TOKEN_METRICS, completion_tokens_sum); a task where more than max_error_rate of the ok rows have one is invalid.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from benchlib.analysis import stats
from benchlib.config import metrics
from benchlib.measure.client.timing import BUDGET_SLACK, MAX_CONTEXT_TOKENS, PROMPT_FIELDS, TOKENS_PER_DELTA
from benchlib.records.rows import STATUS_FAILED, STATUS_OK, STATUS_UNSUPPORTED
from benchlib.records.schema import flag, json_value, number, numeric_column, optional_flag

# summary.csv's columns; each line's comment is its columns' meaning (docs/columns.md is written from them)
GROUP_KEYS = ("host", "model", "suite", "modality", "task")  # the task the row summarises
STAT_METRICS = metrics.REQUEST_METRICS  # decode_tps, ttft_s, ttfo_s, e2e_s, tpot_s, itl_s, prefill_tps
# every percentile with its distribution-free 95 % interval (stats, PERCENTILE BOUNDS); NaN where n is too small
STATS = ("count", "mean", "mean_lo", "mean_hi", "sd",
         *(f"{name}{part}" for name in stats.PERCENTILES for part in ("", "_lo", "_hi")))
TOKEN_METRICS = ("decode_tps", "tpot_s", "prefill_tps")  # computed from the server's token counts
COUNT_COLUMNS = [
    # measured requests (warm-ups left out), and of them: ok, failed, unsupported, truncated, scored, passed
    "n_requests", "n_ok", "n_failed", "n_unsupported", "n_truncated", "n_scored", "n_passed",
    "n_warmup",  # warm-up requests, left out of every figure
    "n_implausible",  # ok requests whose server token counts are implausible, kept out of the token rates
]
SUMMARY_COLUMNS = (COUNT_COLUMNS
                   # `<metric>_<stat>` for each request metric of benchlib/config/metrics.py (decode_tps, ttft_s,
                   # ttfo_s, e2e_s, tpot_s, prefill_tps over the ok requests; itl_s pooled over every gap of them):
                   # count, mean with its 95 % bootstrap interval (mean_lo, mean_hi), sd, p50 with its interval,
                   # p90 (from 10 samples) and p99 (from 100)
                   + [f"{m}_{s}" for m in STAT_METRICS for s in STATS]
                   + ["checker",  # the task's checker (a graded set's scorer marks a graded set)
                      "completion_tokens_sum",  # completion tokens of the ok requests, summed
                      "accuracy", "accuracy_lo", "accuracy_hi",  # passed ÷ scored, with its 95 % Wilson interval
                      "score_mean",  # the checker's mean score (partial credit kept)
                      "n_echo",  # answers whose copied prompt spans were cut before scoring
                      "error_rate",  # failed ÷ (ok + failed)
                      "valid",  # false when nothing succeeded or the failed share exceeds run.max_error_rate
                      "failures",  # failed requests by error_kind: 'kind: n; …'
                      "percentile_note",  # which percentiles are left out for too few samples, and why
                      "note"])  # why the task is not valid, or how many requests had implausible counts
# The task window's telemetry carried into the summary (several windows of one task, a resumed run's, add up)
WINDOW_COLUMNS = (
    "duration_s", "energy_j", "net_energy_j",  # the task window's length, s; its energy, J; less the idle draw, J
    "avg_power_w", "peak_power_w", "idle_power_w",  # energy ÷ duration, W; the highest sample, W; the idle window's, W
    "temp_avg_c", "temp_peak_c",  # temperature over the window, mean and peak, °C
    "mem_peak_bytes", "mem_delta_bytes",  # memory at its peak; the peak's rise over the window's start
    "throttle_seen",  # throttle reasons or thermal pressure seen inside the window
    "tokens_per_joule",  # completion tokens ÷ energy_j
    "joules_per_token",  # energy_j ÷ completion tokens
    "tps_per_w",  # the mean decode rate ÷ avg_power_w: the paper's tok/s per W, from the same window
    "efficiency_reason",  # why the efficiency figures are empty
    "energy_boundary", "idle_subtracted")  # what the joules cover; false: the idle draw is included
DERIVED_COLUMNS = (
    "joules_per_correct",  # energy_j ÷ n_passed: the energy of one correct answer (scored tasks)
    "mem_peak_gb",  # mem_peak_bytes in GB
)


def _passed(value: Any) -> float:
    """passed as 1.0 / 0.0, NaN when the request was not scored."""
    verdict = optional_flag(value)
    return np.nan if verdict is pd.NA else float(verdict)


def measured(requests: pd.DataFrame) -> pd.DataFrame:
    """The non-warm-up rows (any status)."""
    if "is_warmup" not in requests or requests.empty:
        return requests
    return requests[~requests["is_warmup"].map(flag)]


def describe(values: Iterable[float] | np.ndarray, *, overwrite: bool = False) -> dict[str, float]:
    """count, mean with its 95 % interval (mean_lo, mean_hi; stats.bootstrap_interval), sd (ddof=1), and p50, p90,
    p95, p99 each with its distribution-free 95 % interval (`<p>_lo`, `<p>_hi`; NaN below the values it needs,
    stats.INTERVAL_N) of the non-missing values. No resampling matrix and one copy of the values at most
    (`overwrite=True`: none; the percentiles reorder `values` in place), so memory stays near 8 bytes a value."""
    given = values if isinstance(values, np.ndarray) and values.dtype == float else _numbers(values)
    data = stats.finite_only(given)
    overwrite = overwrite or data is not given  # a filtered copy is ours to reorder
    n = len(data)
    mean_lo, mean_hi = stats.bootstrap_interval(data, "mean")
    row = {"count": float(n), "mean": float(data.mean()) if n else np.nan, "mean_lo": mean_lo, "mean_hi": mean_hi,
           "sd": stats.standard_deviation(data)}
    for name, (value, low, high) in stats.percentile_bounds(data, overwrite=overwrite).items():
        row.update({name: value, f"{name}_lo": low, f"{name}_hi": high})
    return row


def _numbers(values: Iterable[Any]) -> np.ndarray:
    """A column as floats: numbers and numeric text, anything else NaN."""
    series = values if isinstance(values, pd.Series) else pd.Series(list(values), dtype=object)
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)


def _gap_count(value: Any) -> int:
    """How many numbers a row's ITL list holds, without parsing it: a JSON list of numbers has one comma fewer."""
    if isinstance(value, str):
        text = value.strip()
        return 0 if text in ("", "[]") else text.count(",") + 1
    return len(value) if isinstance(value, (list, tuple, np.ndarray)) else 0


def _pooled(column: pd.Series) -> np.ndarray:
    """Every value of a list column (ITL gaps of each request; JSON text as written) in one float array, written
    row by row into one buffer sized by a first count (no Python float per gap, no list of arrays to join)."""
    sizes = np.fromiter((_gap_count(v) for v in column), dtype=np.int64, count=len(column))
    out = np.empty(int(sizes.sum()), dtype=float)
    at = 0
    for value, size in zip(column, sizes):
        if not size:
            continue
        gaps = np.asarray(json_value(value) if isinstance(value, str) else value, dtype=float).ravel()
        if at + len(gaps) > len(out):  # a list the comma count misjudged (not flat numbers): grow, rarely
            grown = np.empty(max(at + len(gaps), len(out) + len(out) // 2), dtype=float)
            grown[:at] = out[:at]
            out = grown
        out[at:at + len(gaps)] = gaps
        at += len(gaps)
    return out[:at]


def _whole(counts: pd.Series, limit: float = math.inf) -> pd.Series:
    """Token counts as a row holds them: whole numbers from 0 to `limit` (NaN: False)."""
    values = counts.to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        return pd.Series(np.isfinite(values) & (values >= 0) & (values <= limit) & (np.floor(values) == values),
                         index=counts.index)


def implausible(rows: pd.DataFrame) -> pd.Series:
    """True for the rows whose server token counts are implausible (the module docstring), column by column (a
    million rows in a second, not a Python call a row)."""
    if rows.empty:
        return pd.Series(False, index=rows.index, dtype=bool)
    flagged = rows["implausible_counts"] if "implausible_counts" in rows else pd.Series("", index=rows.index)
    bad = flagged.map(lambda v: isinstance(v, str) and bool(v.strip())).astype(bool)
    for name in PROMPT_FIELDS:
        prompt = numeric_column(rows, name)
        bad |= prompt.notna() & ~_whole(prompt, MAX_CONTEXT_TOKENS)
    tokens = numeric_column(rows, "completion_tokens")
    # timing.completion_limit, column-wise: a budget or delta count that is no whole number counts as unknown (0)
    budget, deltas = (numeric_column(rows, c) for c in ("max_tokens", "client_deltas"))
    budget, deltas = budget.where(_whole(budget), 0.0), deltas.where(_whole(deltas), 0.0)
    limit = np.maximum(BUDGET_SLACK * budget, TOKENS_PER_DELTA * np.maximum(deltas, 1.0))
    limit = limit.where((budget > 0) | (deltas > 0), math.inf)  # neither known: nothing to judge by
    bad |= tokens.notna() & (~_whole(tokens) | (tokens > limit))
    return bad.astype(bool)


def _keys(frame: pd.DataFrame, by: Sequence[str] | None) -> list[str]:
    return [k for k in (GROUP_KEYS if by is None else by) if k in frame.columns]


def _summarize_group(group: pd.DataFrame, max_error_rate: float | None) -> dict[str, Any]:
    status = group["status"] if "status" in group else pd.Series(STATUS_OK, index=group.index)
    warm = group["is_warmup"].map(flag) if "is_warmup" in group else pd.Series(False, index=group.index)
    meas, status = group[~warm], status[~warm]
    ok = meas[status == STATUS_OK]
    n_ok, n_failed = int((status == STATUS_OK).sum()), int((status == STATUS_FAILED).sum())
    n_unsupported = int((status == STATUS_UNSUPPORTED).sum())
    passed = ok["passed"].map(_passed) if "passed" in ok else pd.Series(dtype=float)
    truncated = ok["truncated"].map(flag) if "truncated" in ok else pd.Series(dtype=bool)
    bad = implausible(ok)
    counted = ok[~bad]  # rows whose token counts figures may be computed from
    row: dict[str, Any] = {
        "n_requests": len(meas), "n_ok": n_ok, "n_failed": n_failed, "n_unsupported": n_unsupported,
        "n_truncated": int(truncated.sum()), "n_scored": int(passed.notna().sum()),
        "n_passed": int((passed == 1.0).sum()), "n_warmup": int(warm.sum()), "n_implausible": int(bad.sum()),
    }
    for metric in STAT_METRICS:
        rows = counted if metric in TOKEN_METRICS else ok
        pooled = metric == "itl_s" and metric in rows
        values = _pooled(rows[metric]) if pooled else (_numbers(rows[metric]) if metric in rows else np.empty(0))
        figures = describe(values, overwrite=True)  # both are this loop's own arrays
        row.update({f"{metric}_{name}": val for name, val in figures.items()})
    tokens = pd.to_numeric(counted["completion_tokens"], errors="coerce").dropna() if "completion_tokens" in counted \
        else pd.Series(dtype=float)
    row["completion_tokens_sum"] = float(tokens.sum()) if len(tokens) else np.nan
    checkers = [c for c in ok["checker"].dropna().astype(str) if c] if "checker" in ok else []
    row["checker"] = checkers[0] if checkers else ""
    row["accuracy"] = row["n_passed"] / row["n_scored"] if row["n_scored"] else np.nan
    row["accuracy_lo"], row["accuracy_hi"] = stats.wilson_interval(row["n_passed"], row["n_scored"])
    row["n_echo"] = int(ok["echo"].map(flag).sum()) if "echo" in ok else 0
    row["percentile_note"] = stats.percentile_note(int(row["decode_tps_count"] or row["ttft_s_count"] or 0))
    scores = pd.to_numeric(ok["score"], errors="coerce").dropna() if "score" in ok else pd.Series(dtype=float)
    row["score_mean"] = float(scores.mean()) if len(scores) else np.nan
    attempted = n_ok + n_failed
    row["error_rate"] = n_failed / attempted if attempted else np.nan
    failed = meas[status == STATUS_FAILED]
    kinds = failed["error_kind"].fillna("").replace("", "unknown") if "error_kind" in failed else \
        pd.Series("unknown", index=failed.index)
    row["failures"] = "; ".join(f"{k}: {n}" for k, n in kinds.value_counts().sort_index().items())
    row["valid"], row["note"] = _validity(row, max_error_rate)
    return row


def _validity(row: Mapping[str, Any], max_error_rate: float | None) -> tuple[bool, str]:
    if row["n_requests"] == 0:
        return False, "no measured requests"
    if row["n_ok"] == 0 and row["n_unsupported"] and not row["n_failed"]:
        return False, "not supported by this deployment"
    if row["n_ok"] == 0:
        return False, "every request failed"
    if max_error_rate is not None and row["error_rate"] > max_error_rate:
        return False, f"error rate {row['error_rate']:.0%} above {max_error_rate:.0%}"
    share = row["n_implausible"] / row["n_ok"]
    if max_error_rate is not None and share > max_error_rate:
        return False, f"implausible server token counts in {share:.0%} of ok requests (above {max_error_rate:.0%})"
    if row["n_implausible"]:
        return True, f"{row['n_implausible']} request(s) with implausible server token counts left out of token rates"
    return True, ""


def summarize_requests(requests: pd.DataFrame, by: Sequence[str] | None = None,
                       max_error_rate: float | None = None) -> pd.DataFrame:
    """Per-group summary (default keys: host, model, suite, modality, task — those present).

    Counts (n_ok, n_failed, n_unsupported, n_truncated, n_scored, n_passed, n_warmup), count/mean/sd and
    p50/p90/p95/p99, each with its 95 % interval (`describe`), of every STAT_METRICS metric over ok rows,
    accuracy, score_mean (checker score, e.g. entity recall), error_rate,
    failures ('kind: n; ...'), valid (False when nothing succeeded or error_rate > max_error_rate) and note.
    Empty input gives an empty frame with these columns.
    """
    keys = _keys(requests, by)
    if requests is None or requests.empty:
        return pd.DataFrame(columns=keys + SUMMARY_COLUMNS)
    rows = []
    for values, group in requests.groupby(keys, dropna=False, sort=False) if keys else [((), requests)]:
        values = values if isinstance(values, tuple) else (values,)
        rows.append({**dict(zip(keys, values)), **_summarize_group(group, max_error_rate)})
    return pd.DataFrame(rows, columns=keys + SUMMARY_COLUMNS)


def join_windows(summary: pd.DataFrame, windows: pd.DataFrame | None, on: Sequence[str] = ()) -> pd.DataFrame:
    """Add task-window telemetry (kind == 'task', window == task) to a summary; columns are optional.

    Several windows of one task (a resumed run) are combined: energy and duration add up, avg_power_w is
    energy ÷ duration, peaks take the maximum. tokens_per_joule and tps_per_w are recomputed from the
    summary when the window lacks them. `on` adds identity columns (e.g. host, model) to match on.
    """
    out = summary.copy()
    if windows is None or windows.empty or "window" not in windows or "task" not in out:
        return out
    win = windows[windows["kind"] == "task"] if "kind" in windows else windows
    if "kind" in windows:  # a task measured only level by level (the context sweep): its levels, summed
        levels = windows[windows["kind"] == "level"].copy()
        levels["window"] = levels["window"].astype(str).str.split(":").str[0]
        win = pd.concat([win, levels[~levels["window"].isin(set(win["window"]))]], ignore_index=True)
    keys = [k for k in on if k in win and k in out]
    rows = []
    for values, group in win.groupby(keys + ["window"], dropna=False, sort=False):
        values = values if isinstance(values, tuple) else (values,)
        rows.append({**dict(zip(keys + ["task"], values)), **_combine_windows(group)})
    combined = pd.DataFrame(rows)
    if combined.empty:
        return out
    out = out.drop(columns=[c for c in combined.columns if c in out and c not in keys + ["task"]])
    out = out.merge(combined, on=keys + ["task"], how="left")
    return _efficiency(out)


SERVER_SUMMARY_COLUMNS = [  # the task's windows in server_metrics.csv (several windows: counts add, peaks the maximum)
    "server_ttft_mean_ms",  # the server's mean TTFT, ms
    "ttft_client_minus_server_ms",  # client mean TTFT − the server's: what the network and the client add, ms
    "server_decode_tok_s",  # the server's own decode rate
    "server_generation_tokens", "client_completion_tokens",  # tokens the server says it generated; the rows' sum
    "token_delta_mismatch",  # those two disagree
    # peaks of the server's gauges: requests running, requests waiting, KV-cache usage (0–1); requests preempted
    "server_running_peak", "server_waiting_peak", "server_kv_usage_peak", "server_preemptions"]


def join_server_metrics(summary: pd.DataFrame, server: pd.DataFrame | None) -> pd.DataFrame:
    """Add each task window's server-side figures (server_metrics.csv, kind == 'task', window == task) to a
    summary. Several windows of one task (a resumed run): counts add up, peaks take the maximum, means are
    weighted by the server's request count; a mismatch in any window is a mismatch."""
    out = summary.copy()
    if server is None or server.empty or "task" not in out:
        return out
    win = server[server["kind"] == "task"]
    rows = []
    for task, group in win.groupby("window", sort=False):
        def num(column: str) -> pd.Series:
            return pd.to_numeric(group[column], errors="coerce") if column in group else pd.Series(dtype=float)

        weights = num("server_requests").fillna(0)
        ttft = num("server_ttft_mean_s")
        gap = num("ttft_client_minus_server_ms")
        ok = ttft.notna() & (weights > 0)
        row: dict[str, Any] = {"task": task}
        row["server_ttft_mean_ms"] = float(np.average(ttft[ok], weights=weights[ok]) * 1e3) if ok.any() else np.nan
        both = ok & gap.notna()
        row["ttft_client_minus_server_ms"] = (float(np.average(gap[both], weights=weights[both])) if both.any()
                                              else np.nan)
        decode = num("server_decode_tok_s").dropna()
        row["server_decode_tok_s"] = float(decode.mean()) if len(decode) else np.nan
        for column in ("server_generation_tokens", "client_completion_tokens", "server_preemptions"):
            values = num(column).dropna()
            row[column] = float(values.sum()) if len(values) else np.nan
        for column in ("server_running_peak", "server_waiting_peak", "server_kv_usage_peak"):
            values = num(column).dropna()
            row[column] = float(values.max()) if len(values) else np.nan
        known = [v for v in group.get("token_delta_mismatch", pd.Series(dtype=object)).map(optional_flag)
                 if v is not pd.NA]
        row["token_delta_mismatch"] = any(known) if known else None
        rows.append(row)
    combined = pd.DataFrame(rows, columns=["task"] + SERVER_SUMMARY_COLUMNS)
    out = out.drop(columns=[c for c in SERVER_SUMMARY_COLUMNS if c in out])
    return out.merge(combined, on="task", how="left")


def _combine_windows(group: pd.DataFrame) -> dict[str, Any]:
    def num(column: str) -> pd.Series:
        return pd.to_numeric(group[column], errors="coerce") if column in group else pd.Series(dtype=float)

    def total(column: str) -> float:
        values = num(column).dropna()
        return float(values.sum()) if len(values) else np.nan

    def peak(column: str) -> float:
        values = num(column).dropna()
        return float(values.max()) if len(values) else np.nan

    row: dict[str, Any] = {"duration_s": total("duration_s"), "energy_j": total("energy_j"),
                           "net_energy_j": total("net_energy_j")}
    if len(group) == 1:
        row["avg_power_w"] = peak("avg_power_w")
    else:
        power = metrics.average_power_w(row["energy_j"], row["duration_s"])
        row["avg_power_w"] = power if not np.isnan(power) else peak("avg_power_w")
    for column in ("peak_power_w", "temp_peak_c", "mem_peak_bytes", "mem_delta_bytes"):
        row[column] = peak(column)
    for column in ("idle_power_w", "temp_avg_c"):
        values = num(column).dropna()
        row[column] = float(values.mean()) if len(values) else np.nan
    if "throttle_seen" in group:
        row["throttle_seen"] = "; ".join(sorted({str(v) for v in group["throttle_seen"].dropna() if str(v)}))
    if "energy_boundary" in group:  # what the joules cover (telemetry/boundary); two at once stay visible as such
        row["energy_boundary"] = " | ".join(sorted({str(v) for v in group["energy_boundary"].dropna() if str(v)}))
        row["idle_subtracted"] = False if not np.isnan(row["energy_j"]) else pd.NA  # energy_j is gross
    if len(group) == 1:
        for column in ("tokens_per_joule", "joules_per_token", "tps_per_w"):
            row[column] = peak(column)
    if "efficiency_reason" in group:
        row["efficiency_reason"] = "; ".join(sorted({str(v) for v in group["efficiency_reason"].dropna() if str(v)}))
    return row


def _efficiency(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    for column in ("tokens_per_joule", "joules_per_token", "joules_per_correct", "tps_per_w"):
        if column not in out:
            out[column] = np.nan
    energy = pd.to_numeric(out.get("energy_j"), errors="coerce")
    power = pd.to_numeric(out.get("avg_power_w"), errors="coerce")
    tokens = pd.to_numeric(out.get("completion_tokens_sum"), errors="coerce") if "completion_tokens_sum" in out \
        else pd.Series(np.nan, index=out.index)
    tps = pd.to_numeric(out.get("decode_tps_mean"), errors="coerce") if "decode_tps_mean" in out \
        else pd.Series(np.nan, index=out.index)
    out["tokens_per_joule"] = out["tokens_per_joule"].fillna(metrics.tokens_per_joule(tokens, energy))
    out["joules_per_token"] = out["joules_per_token"].fillna(metrics.joules_per_token(tokens, energy))
    out["tps_per_w"] = out["tps_per_w"].fillna(metrics.tps_per_watt(tps, power))
    if "n_passed" in out:
        passed = pd.to_numeric(out["n_passed"], errors="coerce")
        out["joules_per_correct"] = out["joules_per_correct"].fillna(metrics.joules_per_correct(passed, energy))
    if "mem_peak_bytes" in out:
        out["mem_peak_gb"] = pd.to_numeric(out["mem_peak_bytes"], errors="coerce") / 1e9
    return out


EFFICIENCY_COLUMNS = [  # windows.csv's columns beside the telemetry's (docs/columns.md is written from these comments)
    "n_requests", "completion_tokens",  # the task's measured ok requests inside the window, and their completion tokens
    "tokens_per_joule", "joules_per_token",  # completion_tokens ÷ energy_j, and its inverse
    "decode_tps_mean",  # those requests' mean decode rate
    "tps_per_w",  # decode_tps_mean ÷ avg_power_w: the paper's tok/s per W
    "efficiency_reason",  # why the efficiency figures are empty
    "node_tokens_per_joule"]  # completion_tokens ÷ the whole node's energy (node_energy_j, from its BMC)


def add_token_efficiency(windows: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """Tokens per joule for each task window, beside the paper's tok/s per W from the same window.

    A task window counts the non-warm-up, status=="ok" requests of the task named like the window that ran
    inside it (start_ns/e2e_s, or wall time when start_ns is missing). tps_per_w is the mean decode_tps of
    those requests ÷ the window's avg_power_w (energy ÷ duration), so both views share one power figure; where
    requests ran concurrently it is the window's aggregate rate (tokens ÷ duration) ÷ avg_power_w instead.
    Without energy every ratio is NaN and efficiency_reason carries energy_reason.
    """
    out = windows.copy()
    for column in EFFICIENCY_COLUMNS:
        out[column] = "" if column == "efficiency_reason" else np.nan
    out["efficiency_reason"] = out["efficiency_reason"].astype(object)
    if requests is None or not len(requests):
        mask = out["kind"] == "task"
        out.loc[mask, "efficiency_reason"] = "no requests"
        out.loc[~mask, "efficiency_reason"] = "not a task window"
        return out
    req = requests.copy()
    ok = (req["status"] == STATUS_OK) & ~req["is_warmup"].map(flag)
    req = req[ok]
    # a missing stamp reads 0 here: "no nanosecond stamp" selects the wall-clock rule below
    start_ns, e2e, unix = (numeric_column(req, c).fillna(0.0) for c in ("start_ns", "e2e_s", "started_at_unix"))
    slack = 0.05  # s: stamps are taken a few µs apart on either side of the window edge
    for i, w in out.iterrows():
        if w["kind"] != "task":
            out.at[i, "efficiency_reason"] = "not a task window"
            continue
        t0, t1 = float(w["t_start_ns"]), float(w["t_end_ns"])
        by_ns = (start_ns > 0) & (start_ns >= t0 - slack * 1e9) & (start_ns + e2e * 1e9 <= t1 + slack * 1e9)
        by_unix = (start_ns <= 0) & _isnum_series(w.get("t_start_unix")) & \
            (unix >= float(w.get("t_start_unix") or 0) - slack) & \
            (unix + e2e <= float(w.get("t_end_unix") or 0) + slack)
        mine = req[(req["task"] == w["window"]) & (by_ns | by_unix)]
        tokens = pd.to_numeric(mine["completion_tokens"], errors="coerce")
        out.at[i, "n_requests"] = len(mine)
        out.at[i, "completion_tokens"] = float(tokens.sum()) if tokens.notna().any() else np.nan
        tps = pd.to_numeric(mine["decode_tps"], errors="coerce").dropna()
        out.at[i, "decode_tps_mean"] = float(tps.mean()) if len(tps) else np.nan
        energy = pd.to_numeric(pd.Series([w.get("energy_j")]), errors="coerce").iloc[0]
        power = pd.to_numeric(pd.Series([w.get("avg_power_w")]), errors="coerce").iloc[0]
        reasons = []
        if not len(mine):
            reasons.append("no ok non-warm-up requests of this task inside the window")
        if pd.isna(energy) or pd.isna(power) or power <= 0:
            reasons.append(f"no energy: {w.get('energy_reason') or 'not measured'}")
        else:
            total = out.at[i, "completion_tokens"]
            if number(total) > 0:
                out.at[i, "tokens_per_joule"] = metrics.tokens_per_joule(total, energy)
                out.at[i, "joules_per_token"] = metrics.joules_per_token(total, energy)
            elif len(mine):
                reasons.append("no completion tokens counted")
            concurrent = pd.to_numeric(mine.get("concurrency", pd.Series(dtype=float)), errors="coerce").max() > 1
            if concurrent:  # streams overlap: the window's aggregate rate, not one stream's, is what the W bought
                rate = metrics.rate(out.at[i, "completion_tokens"], number(w.get("duration_s")))
                out.at[i, "tps_per_w"] = metrics.tps_per_watt(rate, power)
            elif len(tps):
                out.at[i, "tps_per_w"] = metrics.tps_per_watt(float(tps.mean()), power)
        node = number(w.get("node_energy_j"))
        if node > 0 and number(out.at[i, "completion_tokens"]) > 0:  # the node's own axis: never mixed with the chip's
            out.at[i, "node_tokens_per_joule"] = metrics.tokens_per_joule(out.at[i, "completion_tokens"], node)
        out.at[i, "efficiency_reason"] = "; ".join(reasons)
    return out


def _isnum_series(value: Any) -> bool:
    return not np.isnan(number(value))
