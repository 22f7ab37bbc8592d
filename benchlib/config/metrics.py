"""Derived metrics, each computed here and nowhere else.

Every function takes scalars or array-likes (pandas Series keep their index) and returns NaN — never a
made-up number — where an input is missing or a denominator is not positive.

    decode tok/s      = (completion tokens − 1) ÷ (t_last − t_first)      (the first token closes prefill)
    TPOT              = (t_last − t_first) ÷ (completion tokens − 1)       (its inverse)
    prefill tok/s     = prompt tokens ÷ TTFT
    a server's rate   = tokens ÷ the seconds it reports for them (llama.cpp timings, Ollama durations)
    throughput        = completion tokens of all streams ÷ the wall span they took (aggregate tok/s)
    average power     = energy ÷ duration                                   (never a mean of power samples)
    tokens per joule  = completion tokens ÷ energy                          (the measured efficiency)
    joules per token  = energy ÷ completion tokens
    tok/s per W       = decode tok/s ÷ average power                        (the paper's §6 figure)

The registry below declares every metric once (name, label, unit, direction, how it is computed, which
summaries show it); summary.csv, the paper's tables and axes, the frontier and the explorer read it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

_PLAIN = (int, float, np.integer, np.floating)  # numbers pd.to_numeric would pass through unchanged


def _ratio(num: Any, den: Any, num_positive: bool = False) -> Any:
    """num ÷ den where den > 0 (and num > 0 when asked); NaN elsewhere; Series in → Series out."""
    if isinstance(num, _PLAIN) and isinstance(den, _PLAIN):
        # Two plain numbers (every request's rates, on the sending loop): the same rule in floats, without the two
        # Series the general path builds — ~0.2 ms each, which capped how many requests one process can send.
        n, d = float(num), float(den)
        ok = d > 0 and math.isfinite(d) and math.isfinite(n) and (n > 0 or not num_positive)
        return n / d if ok else float("nan")
    index = num.index if isinstance(num, pd.Series) else den.index if isinstance(den, pd.Series) else None
    n = pd.to_numeric(pd.Series(num) if index is not None else pd.Series([num]), errors="coerce").to_numpy(float)
    d = pd.to_numeric(pd.Series(den) if index is not None else pd.Series([den]), errors="coerce").to_numpy(float)
    ok = (d > 0) & np.isfinite(d) & np.isfinite(n)
    if num_positive:
        ok &= n > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(ok, n / np.where(ok, d, 1.0), np.nan)
    if index is not None:
        return pd.Series(out, index=index)
    return float(out[0])


def _after_first(completion_tokens: Any) -> Any:
    """Tokens after the first one (the first closes prefill); NaN for a missing count."""
    if isinstance(completion_tokens, pd.Series):
        return pd.to_numeric(completion_tokens, errors="coerce") - 1
    return np.nan if completion_tokens is None else completion_tokens - 1


def decode_tps(completion_tokens: Any, decode_s: Any) -> Any:
    """(tokens − 1) ÷ decode time; needs at least two tokens."""
    return _ratio(_after_first(completion_tokens), decode_s, num_positive=True)


def tpot_s(completion_tokens: Any, decode_s: Any) -> Any:
    """Time per output token after the first: decode time ÷ (tokens − 1)."""
    return _ratio(decode_s, _after_first(completion_tokens), num_positive=True)


def rate(count: Any, seconds: Any) -> Any:
    """count ÷ seconds, both positive (a server's own prefill/decode rate, aggregate throughput)."""
    return _ratio(count, seconds, num_positive=True)


def prefill_tps(prompt_tokens: Any, ttft_s: Any) -> Any:
    return _ratio(prompt_tokens, ttft_s, num_positive=True)


def average_power_w(energy_j: Any, duration_s: Any) -> Any:
    return _ratio(energy_j, duration_s)


def tokens_per_joule(tokens: Any, energy_j: Any) -> Any:
    return _ratio(tokens, energy_j, num_positive=True)


def joules_per_token(tokens: Any, energy_j: Any) -> Any:
    """energy ÷ tokens, only where both are positive."""
    return _ratio(energy_j, tokens, num_positive=True)


def joules_per_correct(passed: Any, energy_j: Any) -> Any:
    """energy ÷ correct answers, only where both are positive (a set with no correct answer has no figure)."""
    return _ratio(energy_j, passed, num_positive=True)


def tps_per_watt(tps: Any, power_w: Any) -> Any:
    return _ratio(tps, power_w)


def none_if_nan(value: Any) -> float | None:
    """For record fields that hold None rather than NaN."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


# The percentiles every summary reports, each with its distribution-free interval (analysis.stats)
PERCENTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}


# ============================================================================================= the registry
@dataclass(frozen=True)
class Metric:
    """A metric declared once: its column name, label, unit, direction (higher or lower is better, '' when
    neither), how it is computed, and which summaries show it. Tables, axes, the frontier and the explorer
    take their labels, units and directions from here."""

    name: str
    label: str
    unit: str
    direction: str  # "max" (higher is better) | "min" | ""
    computed: str
    summaries: tuple[str, ...] = ()  # "request" (per-request column summarised per task), "system", "level"
    fmt: str = ".3g"

    def axis_label(self) -> str:
        arrow = {"max": " — higher is better", "min": " — lower is better"}.get(self.direction, "")
        return f"{self.label} ({self.unit}){arrow}" if self.unit else f"{self.label}{arrow}"


METRICS: dict[str, Metric] = {m.name: m for m in (
    # per request, summarised per task (summary.csv: <name>_count/_mean/_mean_lo/_mean_hi/_sd/_p50/... )
    Metric("decode_tps", "decode rate", "tok/s", "max", "(completion tokens − 1) ÷ (t_last − t_first)",
           ("request",), ".1f"),
    Metric("ttft_s", "time to first token", "s", "min", "first content or reasoning delta − wire start",
           ("request",), ".3f"),
    Metric("ttfo_s", "time to first answer output", "s", "min", "first content or tool-call delta − wire start",
           ("request",), ".3f"),
    Metric("e2e_s", "end-to-end latency", "s", "min", "end of stream − wire start", ("request",), ".2f"),
    Metric("tpot_s", "time per output token", "s", "min", "(t_last − t_first) ÷ (completion tokens − 1)",
           ("request",), ".4f"),
    Metric("itl_s", "inter-token latency", "s", "min", "every gap between consecutive deltas, pooled over the "
           "task's requests", ("request",), ".4f"),
    Metric("prefill_tps", "prefill rate", "tok/s", "max", "(prompt tokens − cached tokens) ÷ TTFT, at "
           "concurrency 1 only (at higher concurrency TTFT includes queueing)", ("request",), ".0f"),
    Metric("accuracy", "accuracy", "share", "max", "passed ÷ scored (measured by our checkers; Wilson 95 % "
           "interval)", ("request", "system"), ".0%"),
    # per system (frontier axes)
    Metric("avg_decode_tps", "average decode throughput", "tok/s", "max", "mean of per-task mean decode rates",
           ("system",), ".1f"),
    Metric("modality_count", "input modalities in the deployment", "", "max", "modalities with a successful "
           "request", ("system",), ".0f"),
    Metric("video_support", "video support", "1 = yes", "max", "a video request succeeded", ("system",), ".0f"),
    Metric("tps_per_w", "tokens/s per watt", "tok/s/W", "max", "decode tok/s ÷ average power (the paper's §6 "
           "figure; published values are the paper's)", ("system", "level"), ".2f"),
    Metric("tokens_per_joule", "tokens per joule", "tok/J", "max", "completion tokens ÷ window energy "
           "(measured by us)", ("system", "level"), ".2f"),
    Metric("joules_per_correct", "energy per correct answer", "J", "min", "task-window energy ÷ answers the "
           "checker passed (graded sets; idle not subtracted, the window's energy boundary)", ("task",), ".1f"),
    Metric("peak_temp_c", "peak temperature", "°C", "min", "highest GPU temperature in the task windows",
           ("system",), ".0f"),
    Metric("context_window_k", "context window", "K tokens", "max", "the deployment's context length",
           ("system",), ".3g"),
    Metric("asr_decode_tps", "ASR (transcription) decode rate", "tok/s", "max", "mean decode rate of the "
           "transcription task", ("system",), ".1f"),
    Metric("short_qa_decode_tps", "short-answer (basic Q&A) decode rate", "tok/s", "max", "mean decode rate of "
           "basic Q&A", ("system",), ".1f"),
    Metric("short_qa_output_tokens", "basic Q&A answer length", "tokens", "min", "mean completion tokens per "
           "basic Q&A answer (brevity); published systems: their Basic Q&A tok/s × latency", ("system",), ".0f"),
    Metric("asr_e2e_s", "ASR (transcription) latency", "s", "min", "mean end-to-end latency of the transcription "
           "task", ("system",), ".2f"),
    Metric("avg_e2e_s", "mean end-to-end latency", "s", "min", "mean over tasks of each task's mean latency",
           ("system",), ".2f"),
    Metric("peak_throughput_tps", "peak aggregate throughput", "tok/s", "max", "best concurrency level's "
           "completion tokens ÷ its wall span", ("system", "level"), ".1f"),
    Metric("goodput_tps", "goodput", "tok/s", "max", "output tokens of the requests meeting every SLO ÷ the "
           "level's steady-state window (best rate-sweep level for a system)", ("system", "level"), ".1f"),
    Metric("goodput_rps", "goodput rate", "req/s", "max", "achieved request rate × share of requests meeting "
           "every SLO", ("level",), ".2f"),
    Metric("max_slo_rate_rps", "highest rate meeting the SLOs", "req/s", "max", "largest offered rate whose "
           "level had at least slo.attainment of its requests meet every SLO", ("system",), ".2f"),
    Metric("serving_tps", "serving throughput", "tok/s", "max", "goodput under the run's SLOs where a rate sweep "
           "ran, else peak aggregate throughput (serving_basis says which)", ("system",), ".1f"),
    Metric("max_concurrency_ok", "most concurrent streams without a failure", "streams", "max",
           "largest concurrency level that ran with no failed request", ("system",), ".0f"),
    Metric("max_context_ok_k", "longest prompt without a failure", "K tokens", "max", "largest context length "
           "that ran with no failed request", ("system",), ".3g"),
    Metric("throughput_tps", "aggregate throughput", "tok/s", "max", "completion tokens of all streams ÷ the "
           "level's wall span", ("level",), ".1f"),
)}
REQUEST_METRICS = tuple(m.name for m in METRICS.values() if "request" in m.summaries and m.name != "accuracy")


def metric(name: str) -> Metric:
    """The registry entry of a column; derived columns (e.g. decode_tps_p50, accuracy_workstation) resolve to
    their base metric."""
    if name in METRICS:
        return METRICS[name]
    for base in sorted(METRICS, key=len, reverse=True):
        if name.startswith(base + "_"):
            return METRICS[base]
    raise KeyError(f"metric {name!r} is not declared in benchlib.config.metrics.METRICS")


def label(name: str, with_unit: bool = True) -> str:
    m = metric(name)
    return m.axis_label() if with_unit else m.label


def direction(name: str) -> str:
    return metric(name).direction
