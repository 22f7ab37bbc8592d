"""Speed verdicts: two deployments compared on a speed or latency metric (decode rate, time to first token,
end-to-end latency) in one of four words, each earned by its test. The terminal, the report's "On this host", the
frontier's dominance among our deployments and `frontier-bench compare` all say these words, from here.

WORDS
    faster / slower       the 95 % interval of the ratio A ÷ B excludes 1: A is faster (a higher decode rate, a
                          shorter time) or slower
    equivalent within ±m  two one-sided tests at 5 % each: the 90 % interval of the ratio lies inside
                          [1 / (1 + m), 1 + m]; m is params `run.equivalence_margin` (EQUIVALENCE_MARGIN, 10 %). A
                          ratio decided both ways (its 95 % interval excludes 1, its 90 % one inside the margin)
                          reads "faster" or "slower", with "within ±m" beside it
    mixed                 decided in opposite directions on different tasks, each task tested at 5 %/k (k tasks
                          with prompts both answered: Bonferroni, so a false per-task claim among them stays under
                          5 %); the tasks are named
    undecided             none of these; with how many prompts in all a decision would take at the observed
                          spread (`needed`: the half-width shrinks as 1 / √n, normal approximation)

PAIRED RULE (the same prompts): r = log(A ÷ B) of the metric on each prompt — a request key (task, variant,
    repeat) — that both deployments answered. The pooled figure is the mean over tasks of each task's mean r (every
    task weighs the same, as the deployment's figure is its tasks' mean); its exp is the ratio. Test: the sign-flip
    randomization test. With no difference, A and B are exchangeable on each prompt, so each r is as likely negative
    as positive whatever its task's speed or spread: the p-value counts the flips of signs whose weighted sum is at
    least as far from 0 as the one observed, over all 2^n flips for n <= EXACT_N prompts (exact), else FLIPS seeded
    random ones. The 95 % (90 %) interval is every shift δ the test does not reject at 5 % (10 %) for r − δ. A
    rejection needs 6 prompts (2 ÷ 2^5 > 5 %), an equivalence 5. Where the true ratio differs between tasks the
    pooled interval is conservative: the flips' spread then includes the tasks' differences.
UNPAIRED RULE (different prompts: no request key in common, e.g. runs with other prompt sets): Welch's interval on
    the difference of mean log values, per task both ran (tasks weigh the same, Satterthwaite's degrees of freedom),
    and it says "unpaired".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import integrate
from scipy import stats as scipy_stats

from benchlib.config import metrics
from benchlib.config.latency_plan import EQUIVALENCE_MARGIN

FASTER, SLOWER, EQUIVALENT, MIXED, UNDECIDED = "faster", "slower", "equivalent", "mixed", "undecided"
WORDS = (FASTER, SLOWER, EQUIVALENT, MIXED, UNDECIDED)
ALPHA = 0.05  # the directional test's level (95 % interval) and each one-sided equivalence test's (90 % interval)
EXACT_N = 16  # prompts up to which every one of the 2^n sign flips is counted (65,536 at 16)
FLIPS = 20_000  # random sign flips above EXACT_N (fixed seed: a rerun prints the same interval)
FLIP_BATCH = 1 << 20  # signs drawn per batch: memory bounded whatever the number of prompts
SEED = 20261129
MIN_PAIRS = 6  # the fewest prompts with which a sign-flip test can reject at 5 %
KEY = ("task", "variant", "repeat")  # a prompt: the request key the two deployments share


@dataclass(frozen=True)
class TaskVerdict:
    """One task's paired comparison (tested at ALPHA ÷ k; only the direction is asked)."""

    task: str
    word: str
    ratio: float
    ratio_lo: float
    ratio_hi: float
    n: int


@dataclass(frozen=True)
class SpeedVerdict:
    """A against B on one metric. ratio = A ÷ B of the metric itself (decode rate: > 1 is faster; a time: < 1 is
    faster), with its 95 % interval; n: prompts both answered (paired) or the smaller side's requests (unpaired)."""

    metric: str
    a: str
    b: str
    word: str
    ratio: float = math.nan
    ratio_lo: float = math.nan
    ratio_hi: float = math.nan
    n: int = 0
    paired: bool = True
    margin: float = EQUIVALENCE_MARGIN
    within_margin: bool = False  # the 90 % interval inside ±margin (equivalence shown)
    p_value: float = math.nan
    tasks: tuple[TaskVerdict, ...] = ()
    needed: int | None = None  # undecided: prompts (paired) or requests a side (unpaired) a decision would take
    note: str = ""

    @property
    def winner(self) -> int:
        """+1 when A is faster, −1 when B is, 0 otherwise (equivalent, mixed, undecided)."""
        return {FASTER: 1, SLOWER: -1}.get(self.word, 0)

    def turned(self) -> "SpeedVerdict":
        """B against A."""
        flip = {FASTER: SLOWER, SLOWER: FASTER}
        inverse = [1 / v if v and not math.isnan(v) else math.nan for v in (self.ratio, self.ratio_hi, self.ratio_lo)]
        tasks = tuple(replace(t, word=flip.get(t.word, t.word), ratio=1 / t.ratio if t.ratio else math.nan,
                              ratio_lo=1 / t.ratio_hi if t.ratio_hi else math.nan,
                              ratio_hi=1 / t.ratio_lo if t.ratio_lo else math.nan) for t in self.tasks)
        return replace(self, a=self.b, b=self.a, word=flip.get(self.word, self.word), ratio=inverse[0],
                       ratio_lo=inverse[1], ratio_hi=inverse[2], tasks=tasks)

    def phrase(self) -> str:
        """The word as a sentence's verb: 'A faster than B', 'A and B equivalent within ±10 %', 'mixed: …'."""
        if self.word in (FASTER, SLOWER):
            return f"{self.a} {self.word} than {self.b}" + (f" (within ±{self.margin:.0%} too)" if self.within_margin
                                                             else "")
        if self.word == EQUIVALENT:
            return f"{self.a} and {self.b} equivalent within ±{self.margin:.0%}"
        if self.word == MIXED:
            ahead = [t.task for t in self.tasks if t.word == FASTER]
            behind = [t.task for t in self.tasks if t.word == SLOWER]
            return f"mixed: {self.a} faster on {', '.join(ahead)}, slower on {', '.join(behind)}"
        return f"{self.a} vs {self.b} undecided"

    def relative(self) -> str:
        """The word for A relative to B, no names: 'faster', 'equivalent within ±10 %', 'mixed: faster on …, slower
        on …', 'undecided'."""
        if self.word == EQUIVALENT:
            return f"equivalent within ±{self.margin:.0%}"
        if self.word == MIXED:
            return self.phrase().replace(f"{self.a} ", "", 1)
        return self.word

    def outcome(self) -> str:
        """The word as a clause that names the faster one: 'A faster', 'equivalent within ±10 %', 'undecided',
        'mixed: A faster on …, slower on …'."""
        if self.word in (FASTER, SLOWER):
            return f"{self.a if self.word == FASTER else self.b} faster"
        if self.word == EQUIVALENT:
            return f"equivalent within ±{self.margin:.0%}"
        return self.phrase() if self.word == MIXED else self.word

    def evidence(self, per_task: bool | None = None) -> str:
        """The figures behind the word: ratio, interval, n, the rule; per task (where it is mixed, or where asked);
        how many prompts a decision would take where undecided."""
        if not self.n:
            return self.note or "no request both measured"
        unit = metrics.metric(self.metric).label
        # where the word names the faster one, its figure against the other's, so the ratio reads with the word
        # ("B faster — time to first token 0.50× the other's"); else the ratio names its two sides
        shown = self.turned() if self.word == SLOWER else self
        interval = (f" [{_x(shown.ratio_lo)}–{_x(shown.ratio_hi)}]" if not math.isnan(shown.ratio_lo)
                    else " (no finite 95 % interval)")
        ratio = (f"{unit} {_x(shown.ratio)}{interval} the other's" if self.word in (FASTER, SLOWER)
                 else f"{unit} ratio {self.a} ÷ {self.b} {_x(self.ratio)}{interval}")
        how = (f"on the same {self.n} prompts (paired sign-flip test, tasks weighted equally)" if self.paired else
               f"unpaired, {self.n} requests on the smaller side (Welch on log values, by task)")
        text = f"{ratio} {how}"
        if self.tasks and (self.word == MIXED if per_task is None else per_task):
            text += f"; per task ({_per_task_level(len(self.tasks))}): " + ", ".join(
                f"{t.task} {_x(t.ratio)} {t.word} ({t.n})" for t in self.tasks)
        if self.word == UNDECIDED and self.needed:
            more = self.needed - self.n
            text += (f"; about {more} more {'prompt' if self.paired else 'request'}{'s' if more > 1 else ''}"
                     f"{'' if self.paired else ' a side'} ({self.needed} in all) would decide at the observed spread")
        if self.note:
            text += f"; {self.note}"
        return text

    def line(self) -> str:
        return f"{self.phrase()}: {self.evidence(per_task=True)}"


def _finite_exp(log_bound: float) -> float:
    """A bound of the ratio; NaN where the test leaves that side open (too few prompts to reject any shift)."""
    return math.exp(log_bound) if math.isfinite(log_bound) else math.nan


def _per_task_level(k: int) -> str:
    """The level each task's test is held to, in words: 'each tested at 5 %/5 = 1 %, Bonferroni over 5 tasks'."""
    if k == 1:
        return f"tested at {ALPHA * 100:g} %"
    return f"each tested at {ALPHA * 100:g} %/{k} = {ALPHA * 100 / k:.2g} %, Bonferroni over {k} tasks"


def _x(ratio: float) -> str:
    """A ratio to two decimals; a bound just off 1 gets the decimals that show it is off ("0.998×", not "1.00×",
    beside a verdict its interval decided)."""
    if ratio is None or math.isnan(ratio):
        return "–"
    for places in (2, 3, 4):
        text = f"{ratio:.{places}f}×"
        if ratio == 1 or float(text[:-1]) != 1:
            return text
    return text


# ---- the sign-flip randomization test ------------------------------------------------------------------------

@dataclass
class SignFlips:
    """The randomization distribution of Σ s_i w_i (x_i − δ) over sign vectors s, kept as two sums per vector so
    that any shift δ costs one pass over them: Σ s w x − δ Σ s w."""

    x: np.ndarray
    w: np.ndarray
    sums: np.ndarray = field(init=False)  # Σ s w x per sign vector
    weights: np.ndarray = field(init=False)  # Σ s w per sign vector
    exact: bool = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.x)
        self.exact = n <= EXACT_N
        wx = self.w * self.x
        if self.exact:
            codes = np.arange(2 ** n, dtype=np.int64)[:, None]
            signs = 1.0 - 2.0 * ((codes >> np.arange(n)) & 1)
            self.sums, self.weights = signs @ wx, signs @ self.w
            return
        rng = np.random.default_rng(SEED)
        rows = max(1, FLIP_BATCH // n)
        sums, weights = [], []
        for start in range(0, FLIPS, rows):
            signs = 1.0 - 2.0 * rng.integers(0, 2, (min(rows, FLIPS - start), n))
            sums.append(signs @ wx)
            weights.append(signs @ self.w)
        self.sums, self.weights = np.concatenate(sums), np.concatenate(weights)

    def p_value(self, delta: float = 0.0) -> float:
        observed = abs(float(np.dot(self.w, self.x - delta)))
        extreme = np.abs(self.sums - delta * self.weights) >= observed * (1 - 1e-12) - 1e-15
        count = int(extreme.sum())
        return count / len(self.sums) if self.exact else (1 + count) / (1 + len(self.sums))

    def interval(self, alpha: float) -> tuple[float, float]:
        """The shifts δ not rejected at `alpha` (two-sided), exactly: a flip's sum is at least as far from 0 as the
        observed one, |Σ s w x − δ Σ s w| >= |Σ w x − δ Σ w|, on a closed interval of δ between two roots (the
        observed line is the steeper, |Σ s w| < Σ w), or for every δ (s all one sign). Sweeping those intervals'
        ends gives p(δ) everywhere; the interval is the hull of the shifts where p(δ) > alpha, ±inf where even the
        farthest shift is not rejected (too few prompts)."""
        total, spread = float(np.dot(self.w, self.x)), float(self.w.sum())
        steep = np.abs(self.weights) < spread * (1 - 1e-12)
        always = int((~steep).sum())
        a, c = self.sums[steep], self.weights[steep]
        roots = np.stack([(total - a) / (spread - c), (total + a) / (spread + c)])
        lows, highs = roots.min(axis=0), roots.max(axis=0)
        flips = len(self.sums)
        # p(δ) = (always + active) / flips exactly, (1 + always + active) / (1 + flips) from random flips
        need = alpha * flips - always if self.exact else alpha * (1 + flips) - 1 - always
        if need < 0:
            return -math.inf, math.inf
        coords = np.concatenate([lows, highs])
        steps = np.concatenate([np.ones(len(lows)), -np.ones(len(highs))])
        order = np.lexsort((-steps, coords))  # by δ, an interval opening before one closing at the same δ
        coords, steps = coords[order], steps[order]
        active = np.cumsum(steps)
        above = np.flatnonzero(active > need)
        if not len(above):
            return math.nan, math.nan
        closing = np.flatnonzero((steps < 0) & (active - steps > need))
        return float(coords[above[0]]), float(coords[closing[-1]])


def _task_weights(tasks: np.ndarray) -> np.ndarray:
    """Each prompt's weight: 1 ÷ (tasks × the prompts of its task), so every task weighs the same."""
    names, index, counts = np.unique(tasks, return_inverse=True, return_counts=True)
    return 1.0 / (len(names) * counts[index])


# ---- the comparison ---------------------------------------------------------------------------------------------

def _faster_sign(metric: str) -> int:
    """+1 when a higher value is faster (a rate), −1 when a lower one is (a time)."""
    return 1 if metrics.direction(metric) == "max" else -1


def _word(metric: str, low: float, high: float) -> str:
    """faster / slower from a 95 % interval of log(A ÷ B), else undecided."""
    if low > 0 or high < 0:
        return FASTER if (low > 0) == (_faster_sign(metric) > 0) else SLOWER
    return UNDECIDED


def _needed(n: int, estimate: float, se: float, limit: float) -> int | None:
    """Prompts in all at which the observed estimate would be decided, one way (direction) or the other
    (equivalence within ±limit) — whichever comes first — if the spread stays as observed; None when it cannot be
    said (no spread seen, or an estimate on the margin)."""
    if not se or math.isnan(se) or n < 2:
        return None
    sizes = []
    z95, z90 = scipy_stats.norm.isf(ALPHA / 2), scipy_stats.norm.isf(ALPHA)
    if abs(estimate) > 0:
        sizes.append(max(MIN_PAIRS, math.ceil(n * (z95 * se / abs(estimate)) ** 2)))
    if abs(estimate) < limit:
        sizes.append(max(MIN_PAIRS - 1, math.ceil(n * (z90 * se / (limit - abs(estimate))) ** 2)))
    return max(min(sizes), n + 1) if sizes else None  # undecided now: at least one more


def prompt_values(requests: pd.DataFrame, system: str, metric: str) -> pd.DataFrame:
    """One system's measured values of `metric` by prompt (KEY), positive and finite only (a ratio needs both);
    a key measured twice keeps its last value."""
    rows = requests[requests["system"].astype(str) == system] if "system" in requests else requests.iloc[0:0]
    if metric not in rows or not len(rows):
        return pd.DataFrame(columns=[*KEY, "value"])
    values = pd.to_numeric(rows[metric], errors="coerce")
    keep = values.notna() & np.isfinite(values) & (values > 0)
    out = pd.DataFrame({k: rows[k].astype(str) for k in KEY if k in rows}).assign(value=values)[keep]
    for k in KEY:
        if k not in out:
            out[k] = ""
    return out.drop_duplicates(list(KEY), keep="last").reset_index(drop=True)


def compare(requests: pd.DataFrame, a: str, b: str, metric: str, margin: float = EQUIVALENCE_MARGIN) -> SpeedVerdict:
    """A against B on `metric` over `requests` (measured rows with system, task, variant, repeat and the metric):
    the paired rule on the prompts both answered, the unpaired rule where they share none (module docstring)."""
    mine, theirs = prompt_values(requests, a, metric), prompt_values(requests, b, metric)
    if not len(mine) or not len(theirs):
        return SpeedVerdict(metric, a, b, UNDECIDED, margin=margin, n=0,
                            note=f"no measured {metrics.metric(metric).label} for {a if not len(mine) else b}")
    shared = mine.merge(theirs, on=list(KEY), suffixes=("_a", "_b"))
    if len(shared) >= 2:
        return paired(shared["task"].to_numpy(), np.log(shared["value_a"].to_numpy() / shared["value_b"].to_numpy()),
                      metric, a, b, margin)
    return unpaired(mine, theirs, metric, a, b, margin)


def paired(tasks: Sequence[str] | np.ndarray, log_ratios: np.ndarray, metric: str, a: str = "A", b: str = "B",
           margin: float = EQUIVALENCE_MARGIN) -> SpeedVerdict:
    """The PAIRED RULE on per-prompt log ratios log(A ÷ B) with their tasks."""
    tasks, x = np.asarray(tasks, dtype=str), np.asarray(log_ratios, dtype=float)
    w = _task_weights(tasks)
    flips = SignFlips(x, w)
    estimate = float(np.dot(w, x))
    low, high = flips.interval(ALPHA)
    tost_low, tost_high = flips.interval(2 * ALPHA)
    limit = math.log1p(margin)
    inside = -limit < tost_low and tost_high < limit
    names = list(dict.fromkeys(tasks))
    per_task = []
    for name in names if len(names) > 1 else []:
        mask = tasks == name
        sub = SignFlips(x[mask], np.full(mask.sum(), 1.0 / mask.sum()))
        t_low, t_high = sub.interval(ALPHA / len(names))
        per_task.append(TaskVerdict(name, _word(metric, t_low, t_high), math.exp(float(x[mask].mean())),
                                    _finite_exp(t_low), _finite_exp(t_high), int(mask.sum())))
    directions = {t.word for t in per_task} & {FASTER, SLOWER}
    word = _word(metric, low, high)
    if directions == {FASTER, SLOWER}:
        word = MIXED
    elif word == UNDECIDED and inside:
        word = EQUIVALENT
    se = math.sqrt(float(np.sum((w * (x - estimate)) ** 2)))  # the flips' own spread at the estimate
    return SpeedVerdict(metric, a, b, word, math.exp(estimate), _finite_exp(low), _finite_exp(high), len(x), True,
                        margin, inside, flips.p_value(0.0), tuple(per_task),
                        _needed(len(x), estimate, se, limit) if word == UNDECIDED else None,
                        "" if len(x) >= MIN_PAIRS else f"a sign-flip test needs {MIN_PAIRS} prompts to decide")


def unpaired(mine: pd.DataFrame, theirs: pd.DataFrame, metric: str, a: str = "A", b: str = "B",
             margin: float = EQUIVALENCE_MARGIN) -> SpeedVerdict:
    """The UNPAIRED RULE on two sets of values (columns task, value)."""
    tasks = [t for t in dict.fromkeys(mine["task"]) if t in set(theirs["task"])]
    strata = tasks if tasks else [None]
    estimate, variance, df_terms = 0.0, 0.0, 0.0
    used = []
    for task in strata:
        la = np.log(mine["value"].to_numpy(float) if task is None else mine.loc[mine["task"] == task, "value"]
                    .to_numpy(float))
        lb = np.log(theirs["value"].to_numpy(float) if task is None else theirs.loc[theirs["task"] == task, "value"]
                    .to_numpy(float))
        if len(la) < 2 or len(lb) < 2:
            continue
        used.append((la, lb))
    if not used:
        return SpeedVerdict(metric, a, b, UNDECIDED, n=min(len(mine), len(theirs)), paired=False, margin=margin,
                            note="unpaired, and too few requests a task (2 a side) for an interval")
    weight = 1.0 / len(used)
    for la, lb in used:
        va, vb = la.var(ddof=1) / len(la), lb.var(ddof=1) / len(lb)
        estimate += weight * (la.mean() - lb.mean())
        variance += weight ** 2 * (va + vb)
        df_terms += weight ** 4 * (va ** 2 / (len(la) - 1) + vb ** 2 / (len(lb) - 1))
    se = math.sqrt(variance)
    dof = variance ** 2 / df_terms if df_terms > 0 else math.inf
    t95, t90 = scipy_stats.t.isf(ALPHA / 2, dof), scipy_stats.t.isf(ALPHA, dof)
    low, high = estimate - t95 * se, estimate + t95 * se
    limit = math.log1p(margin)
    inside = se > 0 and -limit < estimate - t90 * se and estimate + t90 * se < limit
    word = _word(metric, low, high)
    if word == UNDECIDED and inside:
        word = EQUIVALENT
    n = min(sum(len(la) for la, _ in used), sum(len(lb) for _, lb in used))
    p = float(2 * scipy_stats.t.sf(abs(estimate) / se, dof)) if se > 0 else math.nan
    return SpeedVerdict(metric, a, b, word, math.exp(estimate), math.exp(low), math.exp(high), n, False, margin,
                        inside, p, (), _needed(n, estimate, se, limit) if word == UNDECIDED else None,
                        "no prompt in common" if tasks else "no prompt or task in common")


def required_pairs(sd: float, margin: float = EQUIVALENCE_MARGIN, power: float = 0.8,
                   true_log_ratio: float = 0.0) -> int:
    """Prompts a paired equivalence test within ±margin needs for `power` when the per-prompt log ratios are normal
    with standard deviation `sd` around `true_log_ratio`: the smallest n whose `equivalence_power` reaches it."""
    if math.log1p(margin) <= abs(true_log_ratio):
        raise ValueError(f"a true log ratio of {true_log_ratio:.3g} is outside the margin ±{margin:.0%}")
    n = MIN_PAIRS - 1
    while equivalence_power(n, sd, margin, true_log_ratio) < power:
        n += 1
    return n


def equivalence_power(n: int, sd: float, margin: float = EQUIVALENCE_MARGIN, true_log_ratio: float = 0.0) -> float:
    """The power of the two one-sided t tests at 5 % each with n prompts: P(|mean − 0| + t_{α, n−1} s / √n < L)
    over the mean's normal law and the sample sd's (s² (n − 1) / sd² is χ² with n − 1 degrees of freedom),
    integrated numerically. The sign-flip test the verdicts use is about as powerful on normal log ratios
    (bench/speed_verdicts_sim.py prints both)."""
    limit, dof = math.log1p(margin), n - 1
    t = scipy_stats.t.isf(ALPHA, dof)
    root_n = math.sqrt(n)

    def given(s: float) -> float:
        room = limit - t * s / root_n  # the mean must lie within ±room
        if room <= 0:
            return 0.0
        scale = sd / root_n
        return float(scipy_stats.norm.cdf((room - true_log_ratio) / scale)
                     - scipy_stats.norm.cdf((-room - true_log_ratio) / scale))

    chi = scipy_stats.chi(dof, scale=sd / math.sqrt(dof))  # the law of the sample sd
    return float(integrate.quad(lambda s: given(s) * chi.pdf(s), 0, chi.ppf(1 - 1e-10), limit=200)[0])
