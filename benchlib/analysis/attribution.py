"""Each request's share of a window's energy under load, split into its prefill and decode phases (docs/energy.md,
"Attribution").

The rule, declared:

1. The idle floor is kept apart: idle power (the idle window's average, same boundary) × each sample interval is the
   idle line, never attributed to a request. What is left of each interval is its dynamic energy D_k (it may be a
   little negative where the node drew less than its idle average; it is split all the same, so the totals add up).
2. A request's phases come from its own stamps: prefill from send to first token (start_ns → + ttft_s), decode from
   first to last token (→ + e2e_s). Within a phase its tokens are taken as processed evenly: prompt_tokens over the
   prefill phase, completion_tokens − 1 over the decode phase (the first token ends prefill).
3. Each sample interval's D_k is split among the requests active in it in proportion to the tokens each processes in
   it, a prompt token weighted by the energy of a prompt token and an output token by that of an output token. Those
   two weights are estimated from the window itself, by non-negative least squares of D_k on the prompt and output
   tokens processed in each interval (a prefill token is parallel work, a decode token a pass over the weights: one
   weight for both would hand decode the energy of prefill). Where the fit cannot tell them apart (too few intervals,
   a weight of zero), both weigh 1 and `weights` says "tokens, unweighted".
4. An interval with dynamic energy and no request active (the server still busy after the last answer, a background
   task) keeps it on its own line, unattributed.

So Σ prefill + Σ decode + unattributed = window energy − idle, exactly. Per request this gives J/request, and
J/prompt token (its prefill joules ÷ its prompt tokens) and J/output token (decode joules ÷ completion tokens); over
the window J/correct answer (attributed joules of all requests ÷ those that passed), each mean with its bootstrap
interval (benchlib.analysis.stats).

Where it fails: a server that runs prefill and decode in the same forward pass (chunked prefill, mixed batches) has
no separate energy per phase to find — the fit still returns two weights, but their split between the phases follows
the token counts, not the hardware; a request's queueing inside the server counts as prefill time (its prompt tokens
are spread over a longer span, so concurrent requests take more of those intervals); and a sample interval much
longer than the phases blurs them (the fit needs intervals in which the mix of prompt and output tokens differs)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from benchlib.analysis.load_levels import level_window
from benchlib.analysis.stats import bootstrap_interval
from benchlib.records.rows import STATUS_OK
from benchlib.records.schema import flag

MIN_FIT_INTERVALS = 6  # fewer sample intervals than this: the two weights are not estimated


@dataclass
class Attribution:
    """One window's attribution: per-request joules (frame), the lines that add up, the rule's weights."""

    requests: pd.DataFrame
    total_j: float
    idle_j: float
    unattributed_j: float
    j_per_prompt_token: float  # the fitted weights (NaN when unweighted)
    j_per_output_token: float
    weights: str
    summary: dict[str, float] = field(default_factory=dict)

    @property
    def attributed_j(self) -> float:
        return float(self.requests["prefill_j"].sum() + self.requests["decode_j"].sum())


def phases(requests: pd.DataFrame) -> pd.DataFrame:
    """Send, first-token and last-token instants (ns) and the tokens of each phase, from requests.csv's columns."""
    start = pd.to_numeric(requests["start_ns"], errors="coerce").astype(float)
    first = start + pd.to_numeric(requests["ttft_s"], errors="coerce") * 1e9
    last = start + pd.to_numeric(requests["e2e_s"], errors="coerce") * 1e9
    prompt = pd.to_numeric(requests["prompt_tokens"], errors="coerce").fillna(0.0)
    completion = pd.to_numeric(requests["completion_tokens"], errors="coerce").fillna(0.0)
    return pd.DataFrame({"send_ns": start, "first_ns": first, "last_ns": last.clip(lower=first),
                         "prompt_tokens": prompt, "decode_tokens": (completion - 1).clip(lower=0),
                         "completion_tokens": completion}, index=requests.index)


def _overlap(lo: np.ndarray, hi: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Overlap (ns) of each phase [lo, hi] (rows) with each interval [a, b] (columns)."""
    return np.clip(np.minimum(hi[:, None], b[None, :]) - np.maximum(lo[:, None], a[None, :]), 0, None)


def token_matrices(p: pd.DataFrame, edges_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output tokens each request processes in each interval (requests × intervals)."""
    a, b = edges_ns[:-1].astype(float), edges_ns[1:].astype(float)
    send, first, last = (p[c].to_numpy(float) for c in ("send_ns", "first_ns", "last_ns"))
    pre_len = np.where(first > send, first - send, np.nan)
    dec_len = np.where(last > first, last - first, np.nan)
    prompt, output = p["prompt_tokens"].to_numpy(float)[:, None], p["decode_tokens"].to_numpy(float)[:, None]
    prefill = np.nan_to_num(_overlap(send, first, a, b) / pre_len[:, None] * prompt)
    decode = np.nan_to_num(_overlap(first, last, a, b) / dec_len[:, None] * output)
    return prefill, decode


def attribute(requests: pd.DataFrame, t_ns: np.ndarray, energy_j: np.ndarray, idle_power_w: float,
              t0_ns: int | None = None, t1_ns: int | None = None) -> Attribution:
    """Attribute the energy of [t0, t1] (default: the samples' span) among `requests` (requests.csv rows: start_ns,
    ttft_s, e2e_s, prompt_tokens, completion_tokens, passed) by the rule above. `t_ns`, `energy_j`: a cumulative
    energy series on the requests' clock (a counter, or power integrated), one interval per pair of samples."""
    t = np.asarray(t_ns, dtype=np.int64)
    e = np.asarray(energy_j, dtype=float)
    lo = int(t[0]) if t0_ns is None else int(t0_ns)
    hi = int(t[-1]) if t1_ns is None else int(t1_ns)
    inside = (t > lo) & (t < hi)
    edges = np.concatenate([[lo], t[inside], [hi]])
    rel = (t - t[0]).astype(float)
    cum = np.interp((edges - t[0]).astype(float), rel, e)
    interval_j = np.diff(cum)
    idle = idle_power_w * np.diff(edges) / 1e9
    dynamic = interval_j - idle
    p = phases(requests)
    prefill_tok, decode_tok = token_matrices(p, edges)
    x = np.column_stack([prefill_tok.sum(axis=0), decode_tok.sum(axis=0)])
    w_p = w_d = math.nan
    weights = "tokens, unweighted"
    if len(dynamic) >= MIN_FIT_INTERVALS and np.all(x.sum(axis=0) > 0):
        coef, _ = nnls(x, dynamic)
        if np.all(coef > 0):
            w_p, w_d = float(coef[0]), float(coef[1])
            weights = "tokens weighted by each phase's fitted J/token"
    wp, wd = (1.0, 1.0) if math.isnan(w_p) else (w_p, w_d)
    load_p, load_d = wp * prefill_tok, wd * decode_tok
    load = load_p.sum(axis=0) + load_d.sum(axis=0)
    share = np.divide(dynamic, load, out=np.zeros_like(dynamic), where=load > 0)
    out = requests.copy()
    out["prefill_j"] = (load_p * share[None, :]).sum(axis=1)
    out["decode_j"] = (load_d * share[None, :]).sum(axis=1)
    out["energy_j"] = out["prefill_j"] + out["decode_j"]
    out["j_per_prompt_token"] = out["prefill_j"] / p["prompt_tokens"].where(p["prompt_tokens"] > 0)
    out["j_per_output_token"] = out["decode_j"] / p["completion_tokens"].where(p["completion_tokens"] > 0)
    out["inside"] = (p["send_ns"] >= lo) & (p["last_ns"] <= hi)
    result = Attribution(out, float(interval_j.sum()), float(idle.sum()), float(dynamic[load <= 0].sum()),
                         w_p, w_d, weights)
    result.summary = summarise(result)
    return result


def summarise(result: Attribution) -> dict[str, float]:
    """Means with 95 % bootstrap intervals over the requests wholly inside the window (one cut by an edge has only
    part of its joules here): J/request, J/prompt token, J/output token; J/correct answer (their attributed joules ÷
    those that passed, its interval from the per-request joules' bootstrap)."""
    frame = result.requests
    if "inside" in frame:
        frame = frame[frame["inside"].astype(bool)]
    out: dict[str, float] = {"total_j": result.total_j, "idle_j": result.idle_j,
                             "unattributed_j": result.unattributed_j, "attributed_j": result.attributed_j,
                             "requests": float(len(frame))}
    for name, column in (("j_per_request", "energy_j"), ("j_per_prompt_token", "j_per_prompt_token"),
                         ("j_per_output_token", "j_per_output_token")):
        values = frame[column].to_numpy(float)
        values = values[~np.isnan(values)]
        out[name] = float(values.mean()) if len(values) else math.nan
        out[f"{name}_lo"], out[f"{name}_hi"] = bootstrap_interval(values)
    passed = frame["passed"] if "passed" in frame else pd.Series(dtype=object)
    correct = int((passed == True).sum())  # noqa: E712 — a nullable boolean column: NA is not a pass
    out["correct"] = float(correct)
    if correct:
        per = float(frame["energy_j"].sum()) / correct
        lo, hi = out["j_per_request_lo"], out["j_per_request_hi"]
        scale = len(frame) / correct
        out["j_per_correct"], out["j_per_correct_lo"], out["j_per_correct_hi"] = per, lo * scale, hi * scale
    else:
        out["j_per_correct"] = out["j_per_correct_lo"] = out["j_per_correct_hi"] = math.nan
    return out


# ---- a load level's attribution, from the run's own files ---------------------------------------------------
LEVEL_ATTRIBUTION_COLUMNS = [  # each line's comment is its columns' meaning (docs/columns.md is written from them)
    # the energy boundary the level's joules were attributed at; the J per prompt and output token weights fitted
    # from the window; why there is no attribution
    "attribution_boundary", "attribution_weights", "attribution_reason",
    "idle_j", "unattributed_j",  # the idle floor's share of the window, J; energy with no request active, J
    "j_per_request", "j_per_request_lo", "j_per_request_hi",  # joules per request with its 95 % interval
    # joules per prompt token (prefill) with its 95 % interval
    "j_per_prompt_token", "j_per_prompt_token_lo", "j_per_prompt_token_hi",
    # joules per output token (decode) with its 95 % interval
    "j_per_output_token", "j_per_output_token_lo", "j_per_output_token_hi",
    "j_per_correct", "j_per_correct_lo", "j_per_correct_hi"]  # joules per correct answer with its 95 % interval


COUNTER_COLUMNS = {  # a window's energy_source -> the telemetry.csv column of its counter and the factor to joules
    "nvml_counter": ("energy_mj", 1e-3), "dcgm_counter": ("energy_mj", 1e-3),
    "rapl": ("rapl_energy_uj", 1e-6), "powermetrics": ("soc_energy_uj", 1e-6), "hwmon": ("soc_energy_uj", 1e-6)}


def energy_series(samples: pd.DataFrame, energy_source: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The cumulative joules on the samples' clock for a window's energy_source (telemetry.csv: a GPU counter
    summed over the GPUs, RAPL, the SoC sensor, or GPU power integrated for power_trapezoid); None without one."""
    if samples is None or not len(samples):
        return None
    if energy_source == "power_trapezoid":
        power = samples.groupby("t_ns")["power_w"].sum(min_count=1).dropna()
        if len(power) < 2:
            return None
        t = power.index.to_numpy(np.int64)
        w = power.to_numpy(float)
        return t, np.concatenate([[0.0], np.cumsum((w[1:] + w[:-1]) / 2 * np.diff(t) / 1e9)])
    column, factor = COUNTER_COLUMNS.get(energy_source, ("", 0.0))
    if not column or column not in samples:
        return None
    per_tick = samples.groupby("t_ns")[column]
    # a GPU counter is summed over the GPUs of a tick; a host counter repeats on each GPU row of a tick
    values = (per_tick.sum(min_count=1) if column == "energy_mj" else per_tick.first()).dropna()
    if len(values) < 2:
        return None
    return values.index.to_numpy(np.int64), values.to_numpy(float) * factor


def level_attribution(levels: pd.DataFrame, requests: pd.DataFrame, windows: pd.DataFrame, samples: pd.DataFrame,
                      task: str, key: str) -> pd.DataFrame:
    """Each level's attribution (the rule above) at the chip's boundary, from its level window's energy source: the
    task's ok, non-warm-up requests that overlap the window (the means over those wholly inside it), its samples,
    the idle power of that source. The node's BMC readings are left out: a rolling average places energy up to W
    late, which per-interval attribution cannot undo."""
    out = levels.copy()
    for column in LEVEL_ATTRIBUTION_COLUMNS:
        out[column] = "" if column in ("attribution_boundary", "attribution_weights", "attribution_reason") else np.nan
    if out.empty:
        return out
    wins = windows[windows["kind"] == "level"] if windows is not None and "kind" in windows else pd.DataFrame()
    ok = requests[(requests["task"] == task) & (requests["status"] == STATUS_OK) & ~requests["is_warmup"].map(flag)] \
        if len(requests) else requests
    for i, row in out.iterrows():
        name = level_window(task, row[key])
        mine = wins[wins["window"] == name] if len(wins) else wins
        if not len(mine):
            out.at[i, "attribution_reason"] = f"no telemetry window {name!r}"
            continue
        window = mine.iloc[-1]
        idle = pd.to_numeric(pd.Series([window.get("idle_power_w")]), errors="coerce").iloc[0]
        series = energy_series(samples, str(window.get("energy_source") or ""))
        if series is None or pd.isna(idle):
            out.at[i, "attribution_reason"] = ("no energy samples for the level's window" if series is None else
                                               "no idle power from the same energy source")
            continue
        t0, t1 = int(window["t_start_ns"]), int(window["t_end_ns"])
        start = pd.to_numeric(ok["start_ns"], errors="coerce") if len(ok) else pd.Series(dtype=float)
        end = start + pd.to_numeric(ok["e2e_s"], errors="coerce") * 1e9 if len(ok) else start
        these = ok[(start < t1) & (end > t0)] if len(ok) else ok
        if not len(these):
            out.at[i, "attribution_reason"] = "no ok requests in the level"
            continue
        result = attribute(these, *series, float(idle), t0, t1)
        out.at[i, "attribution_boundary"] = str(window.get("energy_boundary") or "")
        out.at[i, "attribution_weights"] = result.weights
        for column in LEVEL_ATTRIBUTION_COLUMNS[3:]:
            out.at[i, column] = result.summary.get(column, np.nan)
    return out
