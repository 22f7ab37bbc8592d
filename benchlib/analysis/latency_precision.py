"""A latency percentile sized to a precision (params run.latency, plan: precision; suites.latency_looks sends the
requests): the rule asked between looks, and a simulation of it at known distributions.

    PRECISION RULE  at each look, the chosen percentile of the task's measured values and its distribution-free
                    95 % interval (analysis.stats, PERCENTILE BOUNDS); stop when the interval's larger side is at
                    most `relative` × the estimate ("precision reached"), else send more: growth × the requests so
                    far, at least the n the interval needs (stats.INTERVAL_N), never past `max_requests` ("request
                    cap") nor past the plan's time budget ("budget").
    VALID WHEN THE SIZE DEPENDS ON THE DATA: the rule reads the interval's width, never which side of a threshold
                    the estimate lies, so stopping chooses n, not a verdict; what could suffer is the interval's
                    coverage at the stop. `simulate` measures it (bench/speed_verdicts_sim.py): within a point of
                    the nominal 95 % at the sizes a run reaches. Looks are geometric (growth 1.5 by default), so a
                    run of 400 requests looks about 10 times, not 400.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from benchlib.analysis import stats
from benchlib.analysis.sequential import BUDGET, PRECISION

CAPPED = "request cap"
LOOK_COLUMNS = ["task", "look", "n", "metric", "percentile", "estimate", "low", "high", "relative_half_width",
                "target", "max_requests", "stop", "reason"]


@dataclass(frozen=True)
class LatencyLook:
    """One look at one task: the percentile with its interval and what the rule decided."""

    task: str
    look: int
    n: int
    metric: str
    percentile: str
    estimate: float
    low: float
    high: float
    relative_half_width: float  # the interval's larger side ÷ the estimate (inf without an interval)
    target: float
    max_requests: int
    stop: bool = False
    reason: str = ""

    def line(self) -> str:
        head = f"latency plan · {self.task} look {self.look}: {self.n} requests, {self.metric} {self.percentile} "
        if math.isnan(self.estimate):
            body = f"has no interval yet (needs {stats.INTERVAL_N[self.percentile]})"
        else:
            body = (f"{self.estimate:.4g} [{self.low:.4g}–{self.high:.4g}], ±{self.relative_half_width:.1%} "
                    f"(target ±{self.target:.0%})")
        return head + body + (f" — stop: {self.reason}" if self.stop else "")


def relative_half_width(estimate: float, low: float, high: float) -> float:
    """The interval's larger side ÷ |estimate|; inf without an interval (or at an estimate of 0)."""
    if any(math.isnan(v) for v in (estimate, low, high)) or estimate == 0:
        return math.inf
    return max(estimate - low, high - estimate) / abs(estimate)


def look(task: str, number: int, values: np.ndarray, metric: str, percentile: str, target: float,
         max_requests: int, over_budget: bool = False) -> LatencyLook:
    """What look `number` decides from the task's measured values so far (PRECISION RULE)."""
    data = np.asarray(values, dtype=float)
    data = data[np.isfinite(data)]
    estimate, low, high = stats.percentile_bounds(data, {percentile: stats.PERCENTILES[percentile]})[percentile]
    width = relative_half_width(estimate, low, high)
    row = dict(task=task, look=number, n=len(data), metric=metric, percentile=percentile, estimate=estimate, low=low,
               high=high, relative_half_width=width, target=target, max_requests=max_requests)
    if width <= target:
        return LatencyLook(**row, stop=True, reason=PRECISION)
    if len(data) >= max_requests:
        return LatencyLook(**row, stop=True, reason=CAPPED)
    if over_budget:
        return LatencyLook(**row, stop=True, reason=BUDGET)
    return LatencyLook(**row)


def next_size(n: int, percentile: str, growth: float, max_requests: int) -> int:
    """The requests a task has sent after the next look: growth × n, at least the n the interval needs, at least
    one more, at most max_requests."""
    return min(max_requests, max(math.ceil(n * growth), stats.INTERVAL_N[percentile], n + 1))


def simulate(rng: np.random.Generator, draw, true_value: float, percentile: str, target: float, start: int,
             growth: float, max_requests: int, reps: int) -> tuple[float, float, float]:
    """(coverage of the 95 % interval at the stop, share stopped on precision, mean requests used) over `reps` runs
    of the rule on values from `draw(rng, size)`, whose true `percentile` is `true_value`."""
    covered = precise = used = 0
    for _ in range(reps):
        values = draw(rng, max_requests)
        n, number = start, 1
        while True:
            found = look("t", number, values[:n], "x", percentile, target, max_requests)
            if found.stop:
                break
            n, number = next_size(n, percentile, growth, max_requests), number + 1
        covered += found.low <= true_value <= found.high
        precise += found.reason == PRECISION
        used += n
    return covered / reps, precise / reps, used / reps
