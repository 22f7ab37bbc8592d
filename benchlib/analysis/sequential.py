"""Quality sized to decide: the stopping rule of a quality plan (run.quality, benchlib.config.quality_plan).

The graded sets are sent look by look; between two looks the runner asks `decide` whether to go on. Pure
functions of counts: nothing here sends a request or reads a file.

    fixed       every planned item, no look: the size is chosen before the first answer.
    precision   stop at the first look where the pooled accuracy's Wilson 95 % interval is at most `half_width`
                either side. No alpha correction: no hypothesis is tested, so there is no false verdict to inflate.
                The width depends on the answers only through p(1 − p), the same for p and 1 − p, so stopping on it
                chooses n, not a side; what could suffer is the interval's coverage at the stop, and
                `simulate_precision` measures it (tests/analysis/test_sequential.py: within a point of 95 %).
    compare     a group-sequential two-sided test of equal accuracy against the plan's baseline deployment, on
                the items both answered. At look k (n_k items, information time t_k = n_k / N, N the planned
                items): the exact McNemar test (binomial on the discordant pairs) at the nominal level the
                alpha-spending function allows there. Spending: Lan-DeMets, O'Brien-Fleming type,
                α(t) = 2 − 2 Φ(z_{1−α/2} / √t): almost nothing early, nearly all of α at the end. The boundary c_k
                solves P(no crossing before k, |Z_k| ≥ c_k | equal accuracy) = α(t_k) − α(t_{k−1}) under the
                z-statistics' canonical joint law (Brownian motion in information time), by recursive numerical
                integration on a grid (`boundaries`: the grid's step at most a third of the increment's standard
                deviation, so looks close together are integrated as finely as far ones; at most MAX_LOOKS looks,
                MAX_GRID points); the nominal level is 2 (1 − Φ(c_k)). Looks may fall
                elsewhere than planned (a pool smaller than the plan): the spending function is evaluated at the
                looks that happened, and the last possible look spends what is left (t = 1). Never an
                uncorrected peek: testing at α at every look (`simulate_compare(..., corrected=False)`) inflates
                the false-verdict rate, which the tests show.

Stop reasons: DECIDED (compare: the test rejected), PRECISION (precision reached), EXHAUSTED (no item left in the
pools, or the baseline answered no more), BUDGET (the plan's time budget is spent), FIXED (a fixed plan's end).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import optimize
from scipy import stats as scipy_stats

from benchlib.analysis import stats
from benchlib.config.quality_plan import MAX_LOOKS

DECIDED, PRECISION, EXHAUSTED, BUDGET, FIXED = "decided", "precision reached", "pool exhausted", "budget", "fixed size"
GRID = 241  # grid points per look for the numerical integration (at least): boundaries to ~1e-4 on the z scale
# The grid's step is at most STEP_SD × the next increment's sd: a step as wide as the increment's sd (the fixed 241
# points at a thousand looks and more) integrates the kernel wrongly and the boundaries go wrong without a word.
STEP_SD = 1 / 3
MAX_GRID = 8001  # points of one look's grid: looks closer than this allows are refused (ValueError)
ROWS = 512  # grid rows of the density computed at a time (a 512 × MAX_GRID block is 33 MB)
LOOK_COLUMNS = ["look", "n", "planned_n", "fraction", "plan", "baseline", "passed", "half_width", "a_only",
                "b_only", "p_value", "nominal_alpha", "stop", "reason", "alpha"]


def spending(t: np.ndarray | float, alpha: float) -> np.ndarray:
    """Lan-DeMets O'Brien-Fleming-type two-sided spending: α(t) = 2 − 2 Φ(z_{1−α/2} / √t), α(0) = 0, α(1) = α."""
    t = np.clip(np.asarray(t, dtype=float), 0.0, 1.0)
    z = scipy_stats.norm.isf(alpha / 2)
    with np.errstate(divide="ignore"):
        return np.where(t > 0, 2 * scipy_stats.norm.sf(z / np.sqrt(np.where(t > 0, t, 1.0))), 0.0)


def boundaries(fractions: Sequence[float], alpha: float) -> np.ndarray:
    """Two-sided z boundaries c_k at increasing information fractions (0, 1], spending α by `spending`:
    P(|Z_j| < c_j for j < k, |Z_k| ≥ c_k) = α(t_k) − α(t_{k−1}) when the accuracies are equal. A look that may
    spend nothing has c = inf."""
    t = np.asarray(fractions, dtype=float)
    if not len(t) or np.any(np.diff(t) <= 0) or t[0] <= 0 or t[-1] > 1 + 1e-12:
        raise ValueError(f"information fractions must increase within (0, 1]: {list(fractions)}")
    if len(t) > MAX_LOOKS:
        raise ValueError(f"{len(t)} looks: at most {MAX_LOOKS} (each look's boundary is a numerical integration)")
    spent = np.diff(np.concatenate([[0.0], spending(t, alpha)]))
    out = np.empty(len(t))
    # B(t) = Z(t) √t has independent N(0, Δt) increments; `weights` is the sub-density of B at the last look on
    # `grid`, restricted to the paths that have not crossed, times the grid step (Simpson's rule).
    grid, weights = np.zeros(1), np.ones(1)
    previous = 0.0
    for k, (tk, target) in enumerate(zip(t, spent)):
        sd = math.sqrt(tk - previous)
        if len(grid) > 1 and grid[1] - grid[0] > sd * STEP_SD * 1.01:
            raise ValueError(f"looks at information {previous:.10g} and {tk:.10g} are closer than a {MAX_GRID}-point "
                             f"grid integrates")

        def crossing(c: float) -> float:
            edge = c * math.sqrt(tk)
            return float(np.sum(weights * (scipy_stats.norm.cdf((-edge - grid) / sd)
                                           + scipy_stats.norm.sf((edge - grid) / sd))))

        alive = float(np.sum(weights))
        if target <= 1e-15 or alive <= 0:
            out[k] = math.inf
        elif crossing(0.0) <= target:
            out[k] = 0.0
        else:
            out[k] = optimize.brentq(lambda c: crossing(c) - target, 0.0, 40.0, xtol=1e-10)
        edge = min(out[k], 12.0) * math.sqrt(tk)
        following = math.sqrt(t[k + 1] - tk) if k + 1 < len(t) else math.inf
        points = GRID if not math.isfinite(following) else \
            max(GRID, 2 * math.ceil(edge / (following * STEP_SD)) + 1)  # odd: Simpson's rule
        new = np.linspace(-edge, edge, min(points, MAX_GRID))
        simpson = np.ones(len(new))
        simpson[1:-1:2], simpson[2:-1:2] = 4, 2
        density = np.concatenate([
            (weights[None, :] * scipy_stats.norm.pdf((new[i:i + ROWS, None] - grid[None, :]) / sd) / sd).sum(axis=1)
            for i in range(0, len(new), ROWS)])
        grid, weights, previous = new, density * simpson * (new[1] - new[0]) / 3, tk
    return out


def nominal_alphas(fractions: Sequence[float], alpha: float) -> np.ndarray:
    """The two-sided p-value each look's test must reach: 2 (1 − Φ(c_k))."""
    return 2 * scipy_stats.norm.sf(boundaries(fractions, alpha))


def mcnemar_exact(a_only: np.ndarray | int, b_only: np.ndarray | int) -> np.ndarray:
    """Two-sided exact McNemar p-values (binomial on the discordant pairs at ½, 1 without any), vectorised;
    the same figures as paired.mcnemar_exact (scipy.stats.binomtest)."""
    a, b = np.asarray(a_only), np.asarray(b_only)
    m, low = a + b, np.minimum(a, b)
    with np.errstate(invalid="ignore"):
        p = np.minimum(1.0, 2 * scipy_stats.binom.cdf(low, m, 0.5))
    return np.where(m > 0, np.where(a == b, 1.0, p), 1.0)


@dataclass(frozen=True)
class Look:
    """One look's figures and what it decided."""

    look: int  # the look's number
    n: int  # items judged so far (compare: shared with the baseline)
    planned_n: int  # the items the plan may send in all
    fraction: float  # n ÷ planned_n: the information time
    plan: str  # fixed, precision or compare
    baseline: str = ""  # compare: the deployment compared against
    passed: int = 0  # this deployment's passes among the n
    half_width: float = math.nan  # the Wilson 95 % interval's larger side
    a_only: int = 0  # compare: items only this deployment got right
    b_only: int = 0  # compare: items only the baseline got right
    p_value: float = math.nan  # compare: the exact McNemar test's p on the discordant items
    nominal_alpha: float = math.nan  # compare: the level alpha spending allows at this look
    stop: bool = False  # the plan stopped here
    reason: str = ""  # why it stopped: decided, precision reached, pool exhausted, budget, fixed size (empty: went on)
    alpha: float = math.nan  # compare: the plan's level over all its looks

    def line(self) -> str:
        """The look in words, for the suite's log and the paper's note."""
        head = f"look {self.look}: {self.n} of {self.planned_n} items"
        if self.plan == "compare":
            body = (f"{self.a_only} vs {self.b_only} discordant against {self.baseline}, exact McNemar "
                    f"p = {self.p_value:.3g} (this look's level {self.nominal_alpha:.3g})")
        else:
            body = f"{self.passed} passed, Wilson 95 % half-width {self.half_width:.3f}"
        return f"{head}; {body}" + (f" — stop: {self.reason}" if self.stop else "")


def wilson(passed: np.ndarray, n: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """stats.wilson_interval for arrays of counts (the simulation's thousands of runs at once)."""
    n = np.asarray(n, dtype=float)
    z = float(scipy_stats.norm.isf((1 - stats.CONFIDENCE) / 2))
    p = np.asarray(passed) / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return np.maximum(centre - half, 0.0), np.minimum(centre + half, 1.0)


def half_width(passed: int, n: int) -> float:
    """The larger side of the Wilson 95 % interval around passed / n (inf without items)."""
    if n <= 0:
        return math.inf
    low, high = stats.wilson_interval(passed, n)
    p = passed / n
    return max(p - low, high - p)


def decide(plan: str, look: int, n: int, planned_n: int, passed: int, *, a_only: int = 0, b_only: int = 0,
           earlier: Sequence[int] = (), alpha: float = 0.01, target_half_width: float = 0.05,
           baseline: str = "", last: bool = False, over_budget: bool = False) -> Look:
    """What look `look` (1-based) decides, n items judged of planned_n; `earlier`: the n of the looks before (for
    the spending); `last`: no item is left to send (pools or the baseline's answers exhausted)."""
    fraction = 1.0 if last else min(n / planned_n, 1.0) if planned_n else 1.0
    width = half_width(passed, n)
    row = dict(look=look, n=n, planned_n=planned_n, fraction=fraction, plan=plan, baseline=baseline,
               passed=passed, half_width=width)
    if plan == "compare":
        fractions = [min(e / planned_n, 1.0) for e in earlier if planned_n and e < n] + [fraction]
        fractions = [f for i, f in enumerate(fractions) if f > 0 and (i == 0 or f > fractions[i - 1])]
        level = float(nominal_alphas(fractions, alpha)[-1]) if fractions and n else 0.0
        p = float(mcnemar_exact(a_only, b_only))
        row.update(a_only=a_only, b_only=b_only, p_value=p, nominal_alpha=level, alpha=alpha)
        if n and p <= level:
            return Look(**row, stop=True, reason=DECIDED)
    elif plan == "precision" and n and width <= target_half_width:
        return Look(**row, stop=True, reason=PRECISION)
    if last or n >= planned_n:
        return Look(**row, stop=True, reason=FIXED if plan == "fixed" else EXHAUSTED)
    if over_budget:
        return Look(**row, stop=True, reason=BUDGET)
    return Look(**row)


def look_sizes(planned: int, fractions: Sequence[float]) -> list[int]:
    """Items sent by each look: ceil(fraction × planned), increasing, the last one the planned size."""
    sizes = sorted({min(planned, max(1, math.ceil(f * planned - 1e-9))) for f in fractions} | {planned})
    return [s for s in sizes if s > 0]


# ---- simulation: what the rule does at known accuracies --------------------------------------------------------

def simulate_compare(accuracy_a: float, accuracy_b: float, planned_n: int, fractions: Sequence[float],
                     alpha: float, reps: int = 2000, seed: int = 0, corrected: bool = True,
                     ) -> tuple[float, float]:
    """(share of the `reps` comparisons that declared a winner, mean items used) for two deployments of known
    accuracies answering independently; `corrected=False` tests at α at every look instead (the uncorrected peek)."""
    rng = np.random.default_rng(seed)
    a = rng.random((reps, planned_n)) < accuracy_a
    b = rng.random((reps, planned_n)) < accuracy_b
    sizes = look_sizes(planned_n, fractions)
    a_only, b_only = np.cumsum(a & ~b, axis=1), np.cumsum(b & ~a, axis=1)
    levels = nominal_alphas([s / planned_n for s in sizes], alpha) if corrected else np.full(len(sizes), alpha)
    decided, used = np.zeros(reps, bool), np.full(reps, planned_n)
    for size, level in zip(sizes, levels):
        p = mcnemar_exact(a_only[:, size - 1], b_only[:, size - 1])
        now = ~decided & (p <= level)
        used[now], decided = size, decided | now
    return float(decided.mean()), float(used.mean())


def simulate_precision(accuracy: float, planned_n: int, fractions: Sequence[float], target: float,
                       reps: int = 2000, seed: int = 0) -> tuple[float, float]:
    """(coverage of the Wilson 95 % interval at the stop, mean items used) under the precision rule."""
    rng = np.random.default_rng(seed)
    passed = np.cumsum(rng.random((reps, planned_n)) < accuracy, axis=1)
    sizes = look_sizes(planned_n, fractions)
    stop_at = np.full(reps, sizes[-1])
    open_ = np.ones(reps, bool)
    for size in sizes:
        low, high = wilson(passed[:, size - 1], size)
        p = passed[:, size - 1] / size
        now = open_ & (np.maximum(p - low, high - p) <= target)
        stop_at[now], open_ = size, open_ & ~now
    low, high = wilson(passed[np.arange(reps), stop_at - 1], stop_at)
    covered = (low <= accuracy) & (accuracy <= high)
    return float(covered.mean()), float(stop_at.mean())
