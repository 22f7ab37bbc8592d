"""Derived metrics, each computed here and nowhere else.

Every function takes scalars or array-likes (pandas Series keep their index) and returns NaN — never a
made-up number — where an input is missing or a denominator is not positive.

    decode tok/s      = (completion tokens − 1) ÷ (t_last − t_first)      (the first token closes prefill)
    TPOT              = (t_last − t_first) ÷ (completion tokens − 1)       (its inverse)
    prefill tok/s     = prompt tokens ÷ TTFT
    average power     = energy ÷ duration                                   (never a mean of power samples)
    tokens per joule  = completion tokens ÷ energy                          (the measured efficiency)
    joules per token  = energy ÷ completion tokens
    tok/s per W       = decode tok/s ÷ average power                        (the paper's §6 figure)

Imports: nothing from benchlib (the records layer and everything above may use it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def _ratio(num: Any, den: Any, num_positive: bool = False) -> Any:
    """num ÷ den where den > 0 (and num > 0 when asked); NaN elsewhere; Series in → Series out."""
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


def decode_tps(completion_tokens: Any, decode_s: Any) -> Any:
    """(tokens − 1) ÷ decode time; needs at least two tokens."""
    tokens = pd.to_numeric(completion_tokens, errors="coerce") if isinstance(completion_tokens, pd.Series) \
        else completion_tokens
    if isinstance(tokens, pd.Series):
        return _ratio((tokens - 1).where(tokens > 1), decode_s)
    if tokens is None or not tokens or tokens <= 1:
        return np.nan
    return _ratio(tokens - 1, decode_s)


def tpot_s(completion_tokens: Any, decode_s: Any) -> Any:
    """Time per output token after the first: decode time ÷ (tokens − 1)."""
    if isinstance(completion_tokens, pd.Series):
        tokens = pd.to_numeric(completion_tokens, errors="coerce")
        return _ratio(decode_s, (tokens - 1).where(tokens > 1))
    if completion_tokens is None or completion_tokens <= 1:
        return np.nan
    return _ratio(decode_s, completion_tokens - 1, num_positive=True)


def prefill_tps(prompt_tokens: Any, ttft_s: Any) -> Any:
    return _ratio(prompt_tokens, ttft_s, num_positive=True)


def average_power_w(energy_j: Any, duration_s: Any) -> Any:
    return _ratio(energy_j, duration_s)


def tokens_per_joule(tokens: Any, energy_j: Any) -> Any:
    return _ratio(tokens, energy_j, num_positive=True)


def joules_per_token(tokens: Any, energy_j: Any) -> Any:
    """energy ÷ tokens, only where both are positive."""
    per = tokens_per_joule(tokens, energy_j)
    return _ratio(1.0, per) if not isinstance(per, pd.Series) else _ratio(pd.Series(1.0, index=per.index), per)


def tps_per_watt(tps: Any, power_w: Any) -> Any:
    return _ratio(tps, power_w)


def none_if_nan(value: Any) -> float | None:
    """For record fields that hold None rather than NaN."""
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else float(value)
