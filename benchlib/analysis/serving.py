"""Serving figures of the rate sweep from its request rows: the steady-state window, offered / sent / achieved
rates, throughput, latency percentiles, goodput under the SLOs, scheduling accuracy, the rates between
synchronous and throughput, and the highest rate that meets the SLOs.

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
rate_rps of a level that meets them (rate_rps: the offered rate of an open-loop level, the achieved rate of a
closed-loop one, which sends as fast as it completes).

SCHEDULE RULE. An open-loop level is `client_bound` (one client process could not hold its schedule) when its
schedule lag p99 (the maximum below 100 requests) exceeds min(5 ms, half the mean gap between arrivals):
then the server saw a different arrival process than the one asked for.

SWEEP RATES. Like GuideLLM's sweep: `points` rates evenly spaced strictly between the synchronous level's and
the throughput level's achieved request rates. When throughput is under 1.2 × synchronous (a server that
serves one request at a time gains nothing from concurrency) the span is widened to [0.5, 1.2] × throughput,
so the sweep still brackets the rate where the queue starts to grow."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from benchlib.config import metrics
from benchlib.analysis import stats
from benchlib.measure.client_health import CLIENT_LAG_P99_MS, HEALTH_COLUMNS
from benchlib.analysis.load_levels import failure_text, measured_rows
from benchlib.records.schema import numeric_column
from benchlib.config.params import SloParams
from benchlib.records.rows import STATUS_FAILED, STATUS_OK
from benchlib.records.schema import flag

RATE_TASK = "rate"


RATE_CSV = "sweep_rate.csv"


SYNC, THROUGHPUT = "sync", "throughput"


FLAT_GAIN = 1.2  # throughput below this × synchronous: widen the sweep's span (SWEEP RATES)


SCHEDULE_LAG_MS = CLIENT_LAG_P99_MS  # schedule lag p99 above min(this, half the mean gap): client-bound


NS = 1e9


RATE_COLUMNS = (["run_id", "host", "model", "server_software", "level", "mode", "offered_rps", "max_concurrency",
                 "n_requests", "n_ok", "n_failed", "failures", "window_rule", "window_s", "n_window", "rate_rps",
                 "sent_rps", "achieved_rps", "throughput_tps", "completion_tokens", "ttft_s_p50", "ttft_s_p99",
                 "tpot_s_p50", "tpot_s_p99", "itl_s_p50", "itl_s_p99", "e2e_s_p50", "e2e_s_p99", "slos",
                 "slo_met", "slo_met_share", "goodput_rps", "goodput_tps", "meets_slo", "schedule_lag_p50_ms",
                 "schedule_lag_p99_ms", "schedule_lag_max_ms", "queue_wait_p50_ms", "queue_wait_max_ms",
                 "prompt_tokens_mean", "prompt_exact_share", "output_tokens_mean", "cached_tokens_mean",
                 "resumed"] + HEALTH_COLUMNS)


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
           "resumed": bool(plan.get("resumed", False))}
    for metric in ("ttft_s", "tpot_s", "e2e_s"):
        for q in (50, 99):
            row[f"{metric}_p{q}"] = stats.percentile(numeric_column(ok_in, metric).dropna().to_numpy(), q / 100)
    gaps = pooled_gaps(ok_in)
    row["itl_s_p50"], row["itl_s_p99"] = stats.percentile(gaps, 0.5), stats.percentile(gaps, 0.99)
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


def max_slo_rate(levels: pd.DataFrame) -> tuple[float, str]:
    """(rate_rps, level) of the highest-rate level that meets the SLOs; (NaN, '') when none does."""
    if levels is None or levels.empty or "meets_slo" not in levels:
        return np.nan, ""
    good = levels[levels["meets_slo"].map(flag) & numeric_column(levels, "rate_rps").notna()]
    if good.empty:
        return np.nan, ""
    best = good.loc[numeric_column(good, "rate_rps").idxmax()]
    return float(best["rate_rps"]), str(best["level"])


def serving_figures(levels: pd.DataFrame) -> dict[str, float]:
    """What the rate sweep gives the frontier: the highest SLO-meeting rate and the best goodput (tok/s, req/s)."""
    rate, _ = max_slo_rate(levels)
    has = levels is not None and len(levels) > 0
    return {"max_slo_rate_rps": rate,
            "goodput_tps": float(numeric_column(levels, "goodput_tps").max()) if has else np.nan,
            "goodput_rps": float(numeric_column(levels, "goodput_rps").max()) if has else np.nan}
