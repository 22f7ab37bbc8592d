"""Uncertainty: every summary figure comes with its n and, where it means something, a 95 % interval.

    mean              bootstrap percentile interval (scipy.stats.bootstrap, 2,000 resamples, fixed seed, so a
                      rerun prints the same bounds), resampled in batches of at most BOOTSTRAP_CELLS values so its
                      memory does not grow with n; above NORMAL_N values the normal interval mean ± z·sd/√n instead
                      (there the two agree to the third digit, and 2,000 passes over 10⁸ ITL gaps would take
                      minutes); needs n >= 3, else no interval
    accuracy          Wilson score interval for passed / scored (sound at 0 %, 100 % and small n)
    percentiles       PERCENTILE BOUNDS: p50, p90, p95, p99 each with a distribution-free 95 % interval between two
                      order statistics (`order_ranks`: the number of values below the true q-quantile is
                      Binomial(n, q), so [X(l), X(u)] covers it with probability >= 95 % for any continuous
                      distribution). No resampling: one in-place selection of a handful of ranks. The interval
                      exists only from INTERVAL_N[q] values — p50 from 6, p90 from 36, p95 from 72, p99 from 368 —
                      below that the sample maximum (or minimum) would be one of its bounds; the summary then shows
                      no percentile, and `percentile_note` says "n too small for p99 (needs 368)".
                      The load tables keep `percentile` (an estimate alone, from n >= 1 / (1 − q)) beside the same
                      bounds (`percentile_columns`): a level's p99 shows from 100 requests, its interval from 368.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np
from scipy import stats as scipy_stats

from benchlib.config.metrics import PERCENTILES

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 20261123
MIN_BOOTSTRAP_N = 3
# values resampled per batch: 2^20, 8 MiB of float64 (and as much of indices) whatever n is; the old 2,000 × n
# matrix was 1.6 GB at 10^5 values
BOOTSTRAP_CELLS = 1 << 20
NORMAL_N = 100_000  # from here the mean's interval is the normal one (module docstring)


def order_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """1-based ranks (l, u) of the order statistics bounding the q-quantile of n values at `confidence`, each
    side missing it with probability at most (1 − confidence) / 2: P(B <= l − 1) <= α/2 and P(B >= u) <= α/2 for
    B ~ Binomial(n, q), the count of values below the quantile. None when n is too small for either bound."""
    if n <= 0:
        return None
    half = (1.0 - confidence) / 2.0
    low = int(scipy_stats.binom.ppf(half, n, q))  # smallest k with P(B <= k) >= α/2, so P(B <= k − 1) < α/2
    high = int(scipy_stats.binom.ppf(1.0 - half, n, q)) + 1
    if low < 1 or high > n:
        return None
    return low, high


def interval_samples(q: float, confidence: float = CONFIDENCE) -> int:
    """The fewest values whose order statistics bound the q-quantile on both sides (p50: 6, p90: 36, p95: 72,
    p99: 368 at 95 %): q^n and (1 − q)^n both at most (1 − confidence) / 2."""
    half = (1.0 - confidence) / 2.0
    n = max(1, int(math.floor(math.log(half) / math.log(max(q, 1 - q)))))
    while order_ranks(n, q, confidence) is None:
        n += 1
    return n


INTERVAL_N = {name: interval_samples(q) for name, q in PERCENTILES.items()}


def percentile_bounds(values: np.ndarray, quantiles: dict[str, float] | None = None, *,
                      overwrite: bool = False) -> dict[str, tuple[float, float, float]]:
    """name -> (estimate, low, high) for each quantile (default PERCENTILES) of the non-missing values: the
    estimate is numpy's linear-interpolation quantile, the bounds the order statistics of `order_ranks`; all NaN
    where n is below INTERVAL_N. One np.partition over every rank needed; `overwrite=True` lets it reorder
    `values` in place instead of copying them (the summary's pooled ITL gaps: no second copy)."""
    quantiles = PERCENTILES if quantiles is None else quantiles
    given = np.asarray(values, dtype=float)
    data = finite_only(given)
    if data is given and (not overwrite or not data.flags.writeable):
        data = data.copy()
    n = len(data)
    wanted: dict[str, tuple[int, int, int, int, float]] = {}
    for name, q in quantiles.items():
        ranks = order_ranks(n, q)
        if ranks is None:
            continue
        position = q * (n - 1)
        below = int(math.floor(position))
        wanted[name] = (below, min(below + 1, n - 1), ranks[0] - 1, ranks[1] - 1, position - below)
    if wanted:
        data.partition(sorted({k for w in wanted.values() for k in w[:4]}))
    out = {}
    for name in quantiles:
        if name not in wanted:
            out[name] = (math.nan, math.nan, math.nan)
            continue
        below, above, low, high, weight = wanted[name]
        estimate = float(data[below] + (data[above] - data[below]) * weight)
        out[name] = (estimate, float(data[low]), float(data[high]))
    return out


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


def percentile_columns(values: np.ndarray, prefix: str, names: Iterable[str]) -> dict[str, float]:
    """`<prefix>_<name>` with `<prefix>_<name>_lo` and `_hi` for each named percentile (PERCENTILES) of the
    non-missing values: the estimate `percentile` gives (from min_samples), the bounds `percentile_bounds` gives
    (from INTERVAL_N), so a level too small for an interval still shows its estimate."""
    data = finite_only(np.asarray(values, dtype=float))
    quantiles = {name: PERCENTILES[name] for name in names}
    bounds = percentile_bounds(data, quantiles)
    out = {}
    for name, q in quantiles.items():
        _, low, high = bounds[name]
        out.update({f"{prefix}_{name}": percentile(data, q), f"{prefix}_{name}_lo": low, f"{prefix}_{name}_hi": high})
    return out


def percentile_note(n: int) -> str:
    """Which percentiles a sample of n is too small to bound, in words ('' when none)."""
    missing = [f"{name} (needs {INTERVAL_N[name]})" for name in PERCENTILES if n < INTERVAL_N[name]]
    if not missing or n == 0:
        return ""
    return f"n={n} too small for " + ", ".join(missing)


CHUNK = 1 << 20  # values per step of a pass that would otherwise make a temporary the size of the data


def finite_only(values: np.ndarray) -> np.ndarray:
    """The non-missing values: `values` itself when none is NaN (no copy), checked a chunk at a time."""
    data = np.asarray(values, dtype=float)
    if any(np.isnan(data[i:i + CHUNK]).any() for i in range(0, len(data), CHUNK)):
        return data[~np.isnan(data)]
    return data


def standard_deviation(data: np.ndarray) -> float:
    """The sample standard deviation (ddof=1) in chunks: numpy's std makes a temporary as large as the data."""
    if len(data) < 2:
        return math.nan
    mean = float(data.mean())
    squares = sum(float(np.square(data[i:i + CHUNK] - mean).sum()) for i in range(0, len(data), CHUNK))
    return math.sqrt(squares / (len(data) - 1))


def bootstrap_interval(values: Iterable[float], statistic: str = "mean") -> tuple[float, float]:
    """95 % bootstrap percentile interval of the mean or median; (NaN, NaN) below MIN_BOOTSTRAP_N samples.
    A constant sample has the zero-width interval at its value. Resampled in batches of at most BOOTSTRAP_CELLS
    values; the mean of more than NORMAL_N values takes the normal interval (module docstring)."""
    data = finite_only(values if isinstance(values, np.ndarray) else np.fromiter(values, dtype=float))
    if len(data) < MIN_BOOTSTRAP_N:
        return math.nan, math.nan
    if data.min() == data.max():
        return float(data[0]), float(data[0])
    if statistic == "mean" and len(data) > NORMAL_N:
        z = float(scipy_stats.norm.isf((1 - CONFIDENCE) / 2))
        half = z * standard_deviation(data) / math.sqrt(len(data))
        mean = float(data.mean())
        return mean - half, mean + half
    func = np.mean if statistic == "mean" else np.median
    result = scipy_stats.bootstrap((data,), func, confidence_level=CONFIDENCE, n_resamples=RESAMPLES,
                                   batch=max(1, BOOTSTRAP_CELLS // len(data)), method="percentile",
                                   random_state=np.random.default_rng(SEED), vectorized=True)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def stratified_mean_interval(groups: Iterable[np.ndarray], floor: float | None = None) -> tuple[float, float, float]:
    """(mean of the group means, low, high): the 95 % t interval of a mean of task means, each task's variance
    from its own requests (Welch–Satterthwaite degrees of freedom) — the interval of a deployment's figure that
    averages its tasks. Groups of fewer than 2 values are left out; no interval without one. `floor`: the least
    the figure can be (0 for a time or a rate): a few requests per task can stretch a t interval below it, and the
    part below holds no value the figure can take, so it is cut there (the interval still covers at 95 %)."""
    kept = [np.asarray(g, dtype=float) for g in groups]
    kept = [g[~np.isnan(g)] for g in kept]
    kept = [g for g in kept if len(g) >= 2]
    if not kept:
        return math.nan, math.nan, math.nan
    k = len(kept)
    mean = float(np.mean([g.mean() for g in kept]))
    parts = [g.var(ddof=1) / len(g) / k ** 2 for g in kept]
    variance = float(sum(parts))
    if variance == 0:
        return mean, mean, mean
    dof = variance ** 2 / sum(p ** 2 / (len(g) - 1) for p, g in zip(parts, kept))
    half = float(scipy_stats.t.isf((1 - CONFIDENCE) / 2, dof)) * math.sqrt(variance)
    low = mean - half if floor is None else max(floor, mean - half)
    return mean, low, mean + half


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
