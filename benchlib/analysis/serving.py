"""Serving figures of the rate sweep from its request rows: the steady-state window, offered / sent / achieved
rates, throughput, latency percentiles, goodput under the SLOs, scheduling accuracy, the rates between
synchronous and throughput, the highest rate that meets the SLOs, over-saturation, and the search for that rate.

STEADY-STATE RULE. A level's sends span [S, E] (first and last wire start). Its measurement window is
[S + ramp_share × (E − S), E]: the first `ramp_share` of the send period is ramp-up (the server fills its
batch, its queue starts empty) and everything after the last send is drain (no new arrivals, the batch
empties). The level's measured requests are those that went on the wire inside the window; its latency
percentiles and goodput come from them. Rates inside the window:
    sent_rps        (sends in the window − 1) ÷ (last − first send in the window): the arrival rate the server saw
    achieved_rps    requests completed inside the window ÷ window length, each successful request's completion
                    spread evenly over its life (wire start → end): the rate the server completed, free of the
                    bias a count of ends has when a closed loop's requests end in waves
    throughput_tps  the same with each request weighted by its completion tokens (per-token stamps are not kept
                    in requests.csv): output tokens per second the server sustained
A level whose requests all left at once (E = S) has no steady state: its window is the whole level, S to the
last end, and `window_rule` says so.

GOODPUT. A request meets the SLOs when it succeeded and every SLO that is set holds: TTFT ≤ ttft_ms, TPOT ≤
tpot_ms (a one-token answer has no TPOT and meets it), its largest inter-token gap ≤ itl_ms, e2e ≤ e2e_ms.
slo_met_share = measured requests meeting them ÷ measured requests (failures count against it); goodput_rps
= achieved_rps × slo_met_share; goodput_tps = completion tokens of those requests ÷ window length. A level meets
the SLOs when slo_met_share ≥ slo.attainment (default 90 %). The highest SLO-meeting rate is the largest
rate_rps of a level that meets them and is not oversaturated (OVERSATURATION RULE; rate_rps: the offered rate
of an open-loop level, the achieved rate of a closed-loop one, which sends as fast as it completes).

SCHEDULE RULE. An open-loop level is `client_bound` (one client process could not hold its schedule) when its
schedule lag p99 (the maximum below 100 requests) exceeds min(5 ms, half the mean gap between arrivals):
then the server saw a different arrival process than the one asked for. A level sent by several workers
(benchlib.measure.traffic.workers) is judged on the lag of all its requests; `worker_lag_ms` gives each worker's
p50/p99 (p99: the maximum below 100 requests), worker 0 first.

OVERSATURATION RULE. An open-loop level is `oversaturated` (its queue kept growing: run longer, it would fail
any latency SLO) when, over the steady window's successful requests ordered by arrival (the instant each was due;
at least OVERSATURATION_MIN of them), both
    the delay to the first token (queue_wait_s + ttft_s: what an arrival waited for, at the client's slot cap
    or in the server's queue) and
    the in-flight count at each arrival (requests of the level due before it and not yet finished)
rise with arrival time: Kendall's tau > 0 with a one-sided p-value below OVERSATURATION_P (0.01; scipy.stats
.kendalltau, alternative="greater"), and the delay's least-squares line rises across the window by more than
OVERSATURATION_RISE (0.5) × the window's median delay, so a statistically sure but tiny drift on a long level is
not flagged. A level that is not oversaturated can still fail its SLOs; one that is never counts as meeting them
in the highest SLO-meeting rate or the search.

SEARCH RULE (sweep.rate.search). Bisection for the highest offered rate that passes: meets the SLOs and is not
oversaturated. A client_bound level still counts by its outcome (on a shared box the flag often comes from the
loop lag other jobs cause while the arrivals stay close to the schedule: compare its sent_rps with the offered
rate); the flag stays on the level for the reader, and more workers (sweep.rate.workers) lift a real limit.
The bracket is [synchronous rate, throughput rate] from the two closed-loop levels (widened as in SWEEP RATES when
the server gains nothing from concurrency). When the synchronous level itself fails the SLOs (one request at a
time is the best latency a server gives) the search runs no level: no rate meets them. Step 1 offers the top of the bracket; while every level so far
passed (a closed loop can under-measure what the server sustains), the next offers SEARCH_GROW (1.5) × the
highest. Once one failed, each step offers the midpoint of [highest passing rate below the lowest failing one
(or the bracket's bottom), lowest failing rate], rounded to 3 significant figures. The search stops when
failing − passing ≤ precision × failing (the answer is then within `precision` of the limit, relative), when
max_levels levels ran, or when the midpoint rounds to a rate already offered. The answer (`search_rate_rps`) is
that highest passing rate, NaN when none passed; `search_bound_rps` is the lowest failing rate (the limit lies
between them; NaN when none failed: the limit is above the answer); `search_levels` counts the open-loop levels
the search ran. Each search level records its `search_step` (1, 2, …) in sweep_rate.csv.

SWEEP RATES. Like GuideLLM's sweep: `points` rates evenly spaced strictly between the synchronous level's and
the throughput level's achieved request rates. When throughput is under 1.2 × synchronous (a server that
serves one request at a time gains nothing from concurrency) the span is widened to [0.5, 1.2] × throughput,
so the sweep still brackets the rate where the queue starts to grow."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from benchlib.analysis import stats
from benchlib.analysis.load_levels import failure_text, measured_rows
from benchlib.config import metrics
from benchlib.config.params import SloParams
from benchlib.measure.selfcheck.client_health import CLIENT_LAG_P99_MS, HEALTH_COLUMNS
from benchlib.records.rows import STATUS_FAILED, STATUS_OK
from benchlib.records.schema import flag, numeric_column

RATE_TASK = "rate"


RATE_CSV = "sweep_rate.csv"


SYNC, THROUGHPUT = "sync", "throughput"


FLAT_GAIN = 1.2  # throughput below this × synchronous: widen the sweep's span (SWEEP RATES)


SEARCH_GROW = 1.5  # while every searched level passed, the next offers this × the highest (SEARCH RULE)


SCHEDULE_LAG_MS = CLIENT_LAG_P99_MS  # schedule lag p99 above min(this, half the mean gap): client-bound


OVERSATURATION_P = 0.01  # one-sided Kendall p-value both trends must be below (OVERSATURATION RULE)


OVERSATURATION_RISE = 0.5  # the delay's fitted rise across the window, in medians, that counts as a real one


OVERSATURATION_MIN = 20  # fewer requests in the window: no trend test


NS = 1e9


# sweep_rate.csv's columns; each line's comment is its columns' meaning (docs/columns.md is written from them; a column
# without one means what it means in sweep_concurrency.csv or requests.csv; the rules are in the docstring above)
RATE_COLUMNS = (["run_id", "host", "model", "server_software",
                 "level", "mode",  # sync, throughput, r<rate> (an open-loop rate); closed or open loop
                 "offered_rps", "max_concurrency",  # the arrival rate asked for (open loop); the cap in flight
                 "n_requests", "n_ok", "n_failed", "failures",  # the level's requests; ok; failed; failures by kind
                 "window_rule", "window_s", "n_window",  # STEADY-STATE RULE: the window's rule, length, s, and requests
                 "rate_rps",  # the offered rate of an open-loop level, the achieved rate of a closed-loop one
                 "sent_rps",  # the arrival rate the server saw inside the window
                 "achieved_rps",  # requests completed inside the window per second
                 "throughput_tps",  # output tokens per second the server sustained inside the window
                 "completion_tokens",  # the level's ok requests' completion tokens, summed
                 # the window's ok requests' median TTFT, s, with its 95 % order-statistic interval (PERCENTILE
                 # BOUNDS, benchlib.analysis.stats: empty below stats.INTERVAL_N values, 6 for a median)
                 "ttft_s_p50", "ttft_s_p50_lo", "ttft_s_p50_hi",
                 # their TTFT p99, s (from 100 values), with its interval (from 368)
                 "ttft_s_p99", "ttft_s_p99_lo", "ttft_s_p99_hi",
                 "tpot_s_p50", "tpot_s_p50_lo", "tpot_s_p50_hi",  # their median TPOT, s, with its interval
                 "tpot_s_p99", "tpot_s_p99_lo", "tpot_s_p99_hi",  # their TPOT p99, s, with its interval
                 # their inter-token gaps pooled, s: median and p99, each with its interval (n: gaps, not requests)
                 "itl_s_p50", "itl_s_p50_lo", "itl_s_p50_hi", "itl_s_p99", "itl_s_p99_lo", "itl_s_p99_hi",
                 "e2e_s_p50", "e2e_s_p50_lo", "e2e_s_p50_hi",  # their median e2e latency, s, with its interval
                 "e2e_s_p99", "e2e_s_p99_lo", "e2e_s_p99_hi",  # their e2e latency p99, s, with its interval
                 "slos",  # the SLOs set, in words
                 # measured requests meeting every SLO; their share (failures count against)
                 "slo_met", "slo_met_share",
                 # achieved_rps × slo_met_share; output tokens per second of those requests
                 "goodput_rps", "goodput_tps",
                 "meets_slo",  # slo_met_share reached sweep.slo.attainment
                 # how late requests left after their scheduled instants, ms: p50, p99, worst
                 "schedule_lag_p50_ms", "schedule_lag_p99_ms", "schedule_lag_max_ms",
                 "queue_wait_p50_ms", "queue_wait_max_ms",  # waits for a max_concurrency slot, ms
                 "prompt_tokens_mean",  # the ok requests' server-counted prompt length, mean
                 "prompt_exact_share",  # the share whose prompt came out at the drawn length exactly
                 "output_tokens_mean", "cached_tokens_mean",  # completion and cached tokens per request in the window
                 "resumed",  # the level was cut short and finished by a resumed run
                 "workers", "worker_lag_ms",  # client processes that sent it; each worker's schedule lag p50/p99, ms
                 "oversaturated", "oversaturation",  # OVERSATURATION RULE: its queue kept growing; the statistics
                 "search_step"]  # the search's step that ran this level (SEARCH RULE; empty outside a search)
               + HEALTH_COLUMNS)


def level_name(rate: float) -> str:
    """An open-loop level's name: 'r' and its offered rate, 'r2.5' (at most 3 decimals)."""
    return f"r{float(f'{rate:.3f}'):g}"


def slo_text(slo: SloParams) -> str:
    """'ttft ≤ 1000 ms, tpot ≤ 50 ms (90 % of requests)', or 'none set'."""
    limits = slo.set()
    if not limits:
        return "none set (every successful request counts)"
    parts = ", ".join(f"{name.removesuffix('_ms')} ≤ {value:g} ms" for name, value in limits.items())
    return f"{parts} ({slo.attainment * 100:g} % of requests)"


def meets_slo(rows: pd.DataFrame, slo: SloParams) -> pd.Series:
    """Per request: succeeded and every set SLO holds (see GOODPUT)."""
    ok = rows["status"] == STATUS_OK if "status" in rows else pd.Series(False, index=rows.index)
    met = ok.copy()
    limits = slo.set()
    if "ttft_ms" in limits:
        met &= numeric_column(rows, "ttft_s") * 1000 <= limits["ttft_ms"]
    if "tpot_ms" in limits:
        tpot = numeric_column(rows, "tpot_s") * 1000
        met &= tpot.isna() | (tpot <= limits["tpot_ms"])
    if "itl_ms" in limits:
        met &= largest_gap_s(rows) * 1000 <= limits["itl_ms"]
    if "e2e_ms" in limits:
        met &= numeric_column(rows, "e2e_s") * 1000 <= limits["e2e_ms"]
    return met.fillna(False).astype(bool)


def largest_gap_s(rows: pd.DataFrame) -> pd.Series:
    """Each request's largest inter-token gap (0 when it had one token or none)."""
    gaps = rows["itl_s"] if "itl_s" in rows else pd.Series([[]] * len(rows), index=rows.index)
    return gaps.map(lambda g: max(g) if isinstance(g, list) and g else 0.0).astype(float)


def pooled_gaps(rows: pd.DataFrame) -> np.ndarray:
    gaps = rows["itl_s"] if "itl_s" in rows else []
    return np.asarray([x for g in gaps if isinstance(g, list) for x in g], dtype=float)


def steady_window(rows: pd.DataFrame, ramp_share: float) -> tuple[float, float, str]:
    """(start_ns, end_ns, rule) of a level's measurement window (see STEADY-STATE RULE)."""
    start = numeric_column(rows, "start_ns")
    start = start[start > 0]
    if start.empty:
        return np.nan, np.nan, "no request went on the wire"
    first, last = float(start.min()), float(start.max())
    if last > first:
        return first + ramp_share * (last - first), last, (f"sends after the first {ramp_share * 100:g} % of the "
                                                           f"send period; drain excluded")
    ends = start + numeric_column(rows.loc[start.index], "e2e_s").fillna(0) * NS
    return first, float(ends.max()), "all sent at once: whole level, no steady state"


def spread_inside(rows: pd.DataFrame, w0: float, w1: float, weight: str = "") -> float:
    """Completions inside [w0, w1]: each ok request counts 1 (or its `weight` column, e.g. completion tokens),
    spread evenly over its life, wire start → end."""
    ok = rows[rows["status"] == STATUS_OK]
    if ok.empty or not w1 > w0:
        return 0.0
    start = numeric_column(ok, "start_ns")
    end = start + numeric_column(ok, "e2e_s").fillna(0) * NS
    amount = numeric_column(ok, weight).fillna(0) if weight else pd.Series(1.0, index=ok.index)
    life = (end - start).clip(lower=0)
    overlap = (np.minimum(end, w1) - np.maximum(start, w0)).clip(lower=0)
    share = np.where(life > 0, overlap / life.where(life > 0, 1), ((start >= w0) & (start <= w1)).astype(float))
    return float((amount * share).sum())


def schedule_bound(lag_ms: pd.Series, offered_rps: float) -> str:
    """The SCHEDULE RULE's reason ('' when the schedule held or the level is closed loop)."""
    lag = lag_ms.dropna()
    if lag.empty or not offered_rps > 0:
        return ""
    figure, name = (stats.percentile(lag.to_numpy(), 0.99), "p99") if len(lag) >= 100 else (lag.max(), "max")
    limit = min(SCHEDULE_LAG_MS, 500.0 / offered_rps)
    return f"schedule lag {name} {figure:.2f} ms > {limit:.2f} ms" if figure > limit else ""


def oversaturation(rows: pd.DataFrame, w0: float, w1: float) -> str:
    """The OVERSATURATION RULE's reason ('' when the level's queue did not keep growing, or too few requests)."""
    start = numeric_column(rows, "start_ns")
    due = numeric_column(rows, "scheduled_ns") if "scheduled_ns" in rows else pd.Series(np.nan, index=rows.index)
    arrive = due.where(due > 0, start)
    end = start + numeric_column(rows, "e2e_s").fillna(0) * NS
    sent = (start > 0) & arrive.notna()
    if not sent.any() or not w1 == w1:
        return ""
    arrivals, ends = np.sort(arrive[sent].to_numpy(float)), np.sort(end[sent].to_numpy(float))
    ok = sent & (rows["status"] == STATUS_OK) & (start >= w0) & (start <= w1) & numeric_column(rows, "ttft_s").notna()
    if int(ok.sum()) < OVERSATURATION_MIN:
        return ""
    at = arrive[ok].to_numpy(float)
    order = np.argsort(at)
    at = at[order]
    wait = numeric_column(rows.loc[ok], "queue_wait_s").fillna(0).to_numpy(float)
    delay = (numeric_column(rows.loc[ok], "ttft_s").to_numpy(float) + wait)[order]
    in_flight = np.searchsorted(arrivals, at, "right") - np.searchsorted(ends, at, "right")
    t = (at - at[0]) / NS
    if not t[-1] > 0:
        return ""
    tau_d, p_d = scipy_stats.kendalltau(t, delay, alternative="greater")
    tau_f, p_f = scipy_stats.kendalltau(t, in_flight, alternative="greater")
    rise = float(np.polyfit(t, delay, 1)[0] * t[-1])
    median = float(np.median(delay))
    if p_d < OVERSATURATION_P and p_f < OVERSATURATION_P and rise > OVERSATURATION_RISE * median:
        return (f"delay to first token and in-flight count rise through the window (Kendall tau {tau_d:.2f}, "
                f"p {p_d:.1g}; tau {tau_f:.2f}, p {p_f:.1g}; fitted rise {rise * 1000:.0f} ms over a median "
                f"{median * 1000:.0f} ms)")
    return ""


def worker_lags(rows: pd.DataFrame, workers: int) -> str:
    """Each worker's schedule lag 'p50/p99' ms, worker 0 first (benchlib.measure.traffic.workers WORKER SPLIT: request
    `repeat` went to worker repeat mod workers; p99 is the maximum below 100 requests, as in the SCHEDULE RULE);
    '' for one worker."""
    if workers <= 1 or "repeat" not in rows:
        return ""
    lag_ms = numeric_column(rows, "schedule_lag_s") * 1000
    worker = numeric_column(rows, "repeat").fillna(-1).astype(int) % workers
    parts = []
    for k in range(workers):
        mine = lag_ms[worker == k].dropna().to_numpy()
        top = stats.percentile(mine, 0.99) if len(mine) >= 100 else (mine.max() if len(mine) else np.nan)
        parts.append(f"{stats.percentile(mine, 0.5):.2f}/{top:.2f}" if len(mine) else "-")
    return "; ".join(parts)


def rate_level(rows: pd.DataFrame, plan: dict[str, Any], slo: SloParams, ramp_share: float) -> dict[str, Any]:
    """One level's serving figures from its rows (every request of the level, warm-ups excluded)."""
    w0, w1, rule = steady_window(rows, ramp_share)
    start = numeric_column(rows, "start_ns")
    inside = rows[(start >= w0) & (start <= w1)] if w1 == w1 else rows.iloc[0:0]
    ok_in = inside[inside["status"] == STATUS_OK]
    window_s = (w1 - w0) / NS if w1 == w1 else np.nan
    sends = numeric_column(inside, "start_ns").sort_values()
    sent_rps = (len(sends) - 1) / ((sends.iloc[-1] - sends.iloc[0]) / NS) if len(sends) > 1 and \
        sends.iloc[-1] > sends.iloc[0] else np.nan
    has_window = window_s == window_s and window_s > 0
    achieved = metrics.rate(spread_inside(rows, w0, w1), window_s) if has_window else np.nan
    met = meets_slo(inside, slo)
    share = float(met.mean()) if len(inside) else np.nan
    good_tokens = float(numeric_column(inside[met], "completion_tokens").fillna(0).sum())
    offered = float(plan.get("offered_rps") or np.nan)
    lag_ms = numeric_column(rows, "schedule_lag_s") * 1000
    wait_ms = numeric_column(rows, "queue_wait_s") * 1000
    prompt = numeric_column(rows[rows["status"] == STATUS_OK], "prompt_tokens")
    target = numeric_column(rows[rows["status"] == STATUS_OK], "target_prompt_tokens")
    row = {"level": plan["level"], "mode": plan["mode"], "offered_rps": offered,
           "max_concurrency": plan.get("max_concurrency", np.nan), "n_requests": len(rows),
           "n_ok": int((rows["status"] == STATUS_OK).sum()), "n_failed": int((rows["status"] == STATUS_FAILED).sum()),
           "failures": failure_text(rows), "window_rule": rule, "window_s": window_s, "n_window": len(inside),
           "rate_rps": offered if offered == offered else achieved, "sent_rps": sent_rps, "achieved_rps": achieved,
           "throughput_tps": metrics.rate(spread_inside(rows, w0, w1, "completion_tokens"), window_s) if has_window
           else np.nan,
           "completion_tokens": float(numeric_column(rows[rows["status"] == STATUS_OK], "completion_tokens")
                                      .fillna(0).sum()),
           "slos": slo_text(slo), "slo_met": int(met.sum()), "slo_met_share": share,
           "goodput_rps": achieved * share if len(inside) else np.nan,
           "goodput_tps": metrics.rate(good_tokens, window_s) if has_window else np.nan,
           "meets_slo": bool(len(inside) and share >= slo.attainment),
           "schedule_lag_p50_ms": stats.percentile(lag_ms.dropna().to_numpy(), 0.5),
           "schedule_lag_p99_ms": stats.percentile(lag_ms.dropna().to_numpy(), 0.99),
           "schedule_lag_max_ms": float(lag_ms.max()) if lag_ms.notna().any() else np.nan,
           "queue_wait_p50_ms": stats.percentile(wait_ms.dropna().to_numpy(), 0.5),
           "queue_wait_max_ms": float(wait_ms.max()) if wait_ms.notna().any() else np.nan,
           "prompt_tokens_mean": float(prompt.mean()) if prompt.notna().any() else np.nan,
           "prompt_exact_share": float((prompt == target)[prompt.notna() & target.notna()].mean())
           if (prompt.notna() & target.notna()).any() else np.nan,  # where the server reported prompt tokens
           "output_tokens_mean": float(numeric_column(ok_in, "completion_tokens").mean()) if len(ok_in) else np.nan,
           "cached_tokens_mean": float(numeric_column(ok_in, "cached_tokens").mean()) if len(ok_in) else np.nan,
           "resumed": bool(plan.get("resumed", False)), "workers": int(plan.get("workers") or 1),
           "worker_lag_ms": worker_lags(rows, int(plan.get("workers") or 1)),
           "search_step": plan.get("search_step", np.nan)}
    reason = oversaturation(rows, w0, w1) if offered == offered else ""
    row["oversaturated"], row["oversaturation"] = bool(reason), reason
    for metric in ("ttft_s", "tpot_s", "e2e_s"):
        row.update(stats.percentile_columns(numeric_column(ok_in, metric).to_numpy(), metric, ("p50", "p99")))
    row.update(stats.percentile_columns(pooled_gaps(ok_in), "itl_s", ("p50", "p99")))
    return row


def rate_levels(requests: pd.DataFrame, plans: list[dict[str, Any]], slo: SloParams, ramp_share: float,
                health: dict[str, dict[str, Any]] | None = None,
                identity: dict[str, Any] | None = None) -> pd.DataFrame:
    """Per-level serving figures in plan order, with client health and the schedule rule applied."""
    rows = measured_rows(requests, RATE_TASK)
    out = []
    for plan in plans:
        mine = rows[rows["variant"].astype(str) == plan["level"]] if len(rows) else rows
        if mine.empty:
            continue
        row = {**(identity or {}), **rate_level(mine, plan, slo, ramp_share)}
        row.update({c: np.nan for c in HEALTH_COLUMNS})
        row.update((health or {}).get(plan["level"], {}))
        reason = schedule_bound(numeric_column(mine, "schedule_lag_s") * 1000, row["offered_rps"])
        if reason:
            row["client_bound"] = True
            row["client_bound_reason"] = "; ".join(r for r in (row.get("client_bound_reason") or "", reason)
                                                   if isinstance(r, str) and r)
        out.append(row)
    return pd.DataFrame(out, columns=RATE_COLUMNS)


def sweep_rates(sync_rps: float, throughput_rps: float, points: int) -> list[float]:
    """Rates between synchronous and throughput (see SWEEP RATES), rounded to 3 significant figures."""
    if points <= 0 or not sync_rps > 0 or not throughput_rps > 0:
        return []
    low, high = sync_rps, throughput_rps
    if high < FLAT_GAIN * low:
        low, high = 0.5 * high, FLAT_GAIN * high
    rates = np.linspace(low, high, points + 2)[1:-1]
    return sorted({float(f"{r:.3g}") for r in rates})


def flags(levels: pd.DataFrame, column: str) -> pd.Series:
    """A boolean column of a levels frame read back from CSV (absent: all False)."""
    if column not in levels:
        return pd.Series(False, index=levels.index)
    return levels[column].map(flag).astype(bool)


def passes(levels: pd.DataFrame) -> pd.Series:
    """Per level: meets the SLOs and is not oversaturated (SEARCH RULE)."""
    return flags(levels, "meets_slo") & ~flags(levels, "oversaturated")


def search_bracket(sync_rps: float, throughput_rps: float) -> tuple[float, float]:
    """(bottom, top) of the search (SEARCH RULE); NaNs without both closed-loop rates."""
    if not (sync_rps > 0 and throughput_rps > 0):
        return np.nan, np.nan
    if throughput_rps < FLAT_GAIN * sync_rps:
        return 0.5 * throughput_rps, FLAT_GAIN * throughput_rps
    return sync_rps, throughput_rps


def search_outcome(tried: list[tuple[float, bool]]) -> tuple[float, float]:
    """(answer, bound): the lowest failing rate offered, and the highest passing one below it (NaN when none)."""
    failing = [rate for rate, ok in tried if not ok]
    bound = min(failing) if failing else np.nan
    passed = [rate for rate, ok in tried if ok and not rate >= bound]
    return (max(passed) if passed else np.nan), bound


def search_next(sync_rps: float, throughput_rps: float, tried: list[tuple[float, bool]], precision: float,
                max_levels: int, sync_passes: bool = True) -> dict[str, Any]:
    """The search's state after the levels `tried` ((offered rate, passed) in the order run): the next rate to
    offer (None when it stops), the bracket, the answer so far and why it stopped (SEARCH RULE)."""
    low, top = search_bracket(sync_rps, throughput_rps)
    answer, bound = search_outcome(tried)
    low = max(low, answer) if answer == answer else low
    state = {"next": None, "low": low, "high": bound, "answer": answer, "levels": len(tried), "reason": ""}
    if low != low:
        return {**state, "reason": "no synchronous and throughput rates to bracket the search"}
    if not sync_passes:
        return {**state, "reason": "the synchronous level fails the SLOs: no offered rate can meet them"}
    if len(tried) >= max_levels:
        return {**state, "reason": f"max_levels ({max_levels}) levels ran"}
    if not tried:
        return {**state, "next": float(f"{top:.3g}")}
    if bound != bound:  # every level passed: the limit lies above them
        return {**state, "next": float(f"{max(r for r, _ in tried) * SEARCH_GROW:.3g}")}
    if bound - low <= precision * bound:
        return {**state, "reason": f"bracket within precision: {low:g}–{bound:g} req/s"}
    rate = float(f"{(low + bound) / 2:.3g}")
    if any(rate == r for r, _ in tried) or not low < rate < bound:
        return {**state, "reason": f"the next midpoint rounds to a rate already bracketed ({low:g}–{bound:g} req/s)"}
    return {**state, "next": rate}


def search_figures(levels: pd.DataFrame) -> dict[str, float]:
    """search_rate_rps and search_bound_rps (search_outcome over the searched levels) and search_levels; NaNs
    when the sweep did not search."""
    none = {"search_rate_rps": np.nan, "search_bound_rps": np.nan, "search_levels": np.nan}
    if levels is None or levels.empty or "search_step" not in levels:
        return none
    searched = levels[numeric_column(levels, "search_step").notna()]
    if searched.empty:
        return none
    answer, bound = search_outcome(list(zip(numeric_column(searched, "rate_rps"), passes(searched))))
    return {"search_rate_rps": answer, "search_bound_rps": bound, "search_levels": float(len(searched))}


def max_slo_rate(levels: pd.DataFrame) -> tuple[float, str]:
    """(rate_rps, level) of the highest-rate level that meets the SLOs and is not oversaturated; (NaN, '') when
    none does."""
    if levels is None or levels.empty or "meets_slo" not in levels:
        return np.nan, ""
    good = levels[levels["meets_slo"].map(flag) & ~flags(levels, "oversaturated")
                  & numeric_column(levels, "rate_rps").notna()]
    if good.empty:
        return np.nan, ""
    best = good.loc[numeric_column(good, "rate_rps").idxmax()]
    return float(best["rate_rps"]), str(best["level"])


SERVING_COLUMNS = (  # the rate sweep's figures for the frontier, on every row of the load suite's summary.csv
    "max_slo_rate_rps",  # the highest rate that met the SLOs and was not oversaturated
    "goodput_tps", "goodput_rps",  # the sweep's best goodput, tok/s and req/s
    # the search's answer (the highest passing rate), the lowest failing rate, and the levels it ran (SEARCH RULE)
    "search_rate_rps", "search_bound_rps", "search_levels")


def serving_figures(levels: pd.DataFrame) -> dict[str, float]:
    """What the rate sweep gives the frontier: the highest SLO-meeting rate and the best goodput (tok/s, req/s),
    and the search's answer when it ran (search_figures)."""
    rate, _ = max_slo_rate(levels)
    has = levels is not None and len(levels) > 0
    return {"max_slo_rate_rps": rate,
            "goodput_tps": float(numeric_column(levels, "goodput_tps").max()) if has else np.nan,
            "goodput_rps": float(numeric_column(levels, "goodput_rps").max()) if has else np.nan,
            **search_figures(levels)}
