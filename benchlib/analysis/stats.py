"""Uncertainty: every summary figure comes with its n and, where it means something, a 95 % interval.

    mean, median      bootstrap percentile interval (scipy.stats.bootstrap, 2,000 resamples, fixed seed, so a
                      rerun prints the same bounds); needs n >= 3, else no interval
    accuracy          Wilson score interval for passed / scored (sound at 0 %, 100 % and small n)
    percentiles       a q-quantile is reported only from n >= 1 / (1 - q) samples — p90 from 10, p99 from 100 —
                      below that it would be the maximum in disguise; `percentile_note` says so
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np
from scipy import stats as scipy_stats

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 20261123
MIN_BOOTSTRAP_N = 3
PERCENTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99}


def min_samples(q: float) -> int:
    """Samples a q-quantile needs to be more than the sample maximum: ceil(1 / (1 − q)) (p50: 2 → 1 is fine)."""
    return 1 if q <= 0.5 else int(math.ceil(1.0 / (1.0 - q) - 1e-9))


def percentile(values: np.ndarray, q: float) -> float:
    """The q-quantile, NaN when there are fewer than min_samples(q) values."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if len(values) < min_samples(q) or not len(values):
        return math.nan
    return float(np.quantile(values, q))


def percentile_note(n: int) -> str:
    """Which percentiles a sample of n leaves out, in words ('' when none)."""
    missing = [name for name, q in PERCENTILES.items() if n < min_samples(q)]
    if not missing or n == 0:
        return ""
    return f"{'/'.join(missing)} not shown: n={n} (p90 needs 10, p99 needs 100)"


def bootstrap_interval(values: Iterable[float], statistic: str = "mean") -> tuple[float, float]:
    """95 % bootstrap percentile interval of the mean or median; (NaN, NaN) below MIN_BOOTSTRAP_N samples.
    A constant sample has the zero-width interval at its value."""
    data = np.asarray(list(values), dtype=float)
    data = data[~np.isnan(data)]
    if len(data) < MIN_BOOTSTRAP_N:
        return math.nan, math.nan
    if np.all(data == data[0]):
        return float(data[0]), float(data[0])
    func = np.mean if statistic == "mean" else np.median
    result = scipy_stats.bootstrap((data,), func, confidence_level=CONFIDENCE, n_resamples=RESAMPLES,
                                   method="percentile", random_state=np.random.default_rng(SEED), vectorized=True)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def wilson_interval(passed: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a proportion; (NaN, NaN) when n is 0."""
    if n <= 0:
        return math.nan, math.nan
    z = float(scipy_stats.norm.ppf(0.5 + confidence / 2))
    p = passed / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def overlap(a_lo: float, a_hi: float, b_lo: float, b_hi: float) -> bool:
    """Whether two intervals share a point; False when either is missing."""
    if any(math.isnan(x) for x in (a_lo, a_hi, b_lo, b_hi)):
        return False
    return a_lo <= b_hi and b_lo <= a_hi
