"""Paired verdicts: two deployments that answered the same items, compared item by item.

Two accuracies measured on the same items are not independent samples: whether their Wilson intervals overlap
says little (both deployments find the same items easy or hard). What tells them apart is the items they disagree
on. For deployments A and B over the n items both answered (an item is task + variant + repeat: a graded set's
items are fixed by its seed, so every deployment gets the same ones):

    both, a_only, b_only, neither    the 2 × 2 table of pass/fail pairs
    difference                       accuracy(A) − accuracy(B) = (a_only − b_only) / n
    difference_lo / _hi              95 % interval of that difference: Newcombe's hybrid score interval for paired
                                     proportions (method 10, Newcombe 1998; recommended by Fagerland, Lydersen &
                                     Laake 2013): the two Wilson intervals combined with the pairs' correlation
    p_value                          exact McNemar test: the discordant pairs under a fair coin
                                     (scipy.stats.binomtest(a_only, a_only + b_only, 0.5), two-sided; 1 without any)
    verdict                          "A beats B" only when the difference's interval excludes 0 and the exact
                                     McNemar test rejects equal accuracy at 5 %; otherwise "undecided" (with
                                     about how many items would decide at the observed split). Both are asked:
                                     on a handful of items the score interval can exclude 0 where the exact test
                                     cannot tell (4 of 4 against 1 of 4: interval above 0, p = 0.25)

ONE BASIS: the verdict between two deployments is the paired comparison over every graded set's first pass, the
items both answered pooled (`verdicts`, basis GRADED). The seeds' smoke tasks (a handful of fixed prompts, repeated)
are compared beside it (basis SMOKE), never pooled into it; a graded set's pass under load is neither. The terminal
(cli), the summary's "On this host" and the frontier's quality axis (benchlib.analysis.frontier, GRADED RULE) all
read the GRADED basis, so they cannot disagree; item_results() builds the long per-item frame from request rows,
with each item's basis.

PLANNED (`planned`): where a pair was compared by a compare plan (params run.quality, benchlib.analysis.sequential),
the plan's group-sequential rule gives the pair's verdict, not the fixed-sample test above: after looks that test
is an uncorrected peek. Decided → the winner (the side with more discordant wins at the last look), at the plan's
alpha; any other stop (pool exhausted, budget) → "undecided", the reason in words in `rule`. The interval and p stay
beside it, informative. The terminal (cli), the summary's "On this host" (analysis.host) and the frontier
(`winner_matrix` with the plans, through the systems' PLAN_COLUMN) all apply it, so they agree.

Accuracy under load (under_load): one deployment's graded set answered twice — one request at a time, and again
with N in flight (the task "<set>@c<N>", benchlib.config.tasks.under_load) — is the same comparison with the two
passes as A and B: "c1 beats c4" means answers got worse under load beyond what chance explains.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from itertools import combinations
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from benchlib.analysis import sequential, stats
from benchlib.config import identity
from benchlib.config.tasks import load_pass
from benchlib.records.schema import flag, optional_flag
from benchlib.scoring.graded import GRADED_CHECKERS

ALPHA = 0.05  # the exact McNemar test's level, matching the 95 % interval
UNDECIDED = "undecided"  # the verdict where neither is shown better (analysis.speed_verdicts' word too)
GRADED, SMOKE, UNDER_LOAD = "graded sets", "smoke tasks", "graded sets under load"  # an item's basis
ITEM_COLUMNS = ["system", "task", "item", "passed", "basis"]
LOAD_COLUMNS = ["system", "task", "concurrency"]  # + PAIR_COLUMNS, a = the first pass, b = the pass under load
PAIR_COLUMNS = ["a", "b", "n", "both", "a_only", "b_only", "neither", "accuracy_a", "accuracy_b", "difference",
                "difference_lo", "difference_hi", "p_value", "verdict"]
PLAN_COLUMN = "quality_plan"  # a systems frame's column: {other system: PlanOutcome of this one against it}


@dataclass(frozen=True)
class PlanOutcome:
    """What a compare plan concluded about its deployment against its baseline: winner +1 (the deployment won),
    −1 (the baseline won), 0 (no verdict), the words saying why, and the graded sets it judged (empty: not known)."""

    winner: int
    words: str
    tasks: frozenset[str] = frozenset()

    def turned(self) -> "PlanOutcome":
        return replace(self, winner=-self.winner)


@dataclass(frozen=True)
class Paired:
    """A against B on their shared items."""

    a: str
    b: str
    n: int
    both: int
    a_only: int
    b_only: int
    neither: int
    accuracy_a: float
    accuracy_b: float
    difference: float
    difference_lo: float
    difference_hi: float
    p_value: float
    verdict: str
    rule: str = ""  # a compare plan's words where its sequential rule gave the verdict (`with_plan`); "" otherwise

    @property
    def winner(self) -> int:
        """+1 when A beats B, −1 when B beats A, 0 when undecided: the interval includes 0, the exact test does not
        reject equality (p ≥ ALPHA), or there are no shared items; under a compare plan (`rule`), its verdict."""
        if self.rule:
            return {f"{self.a} beats {self.b}": 1, f"{self.b} beats {self.a}": -1}.get(self.verdict, 0)
        if not self.n or not (self.difference_lo > 0 or self.difference_hi < 0) or not self.p_value < ALPHA:
            return 0
        return 1 if self.difference_lo > 0 else -1

    def line(self) -> str:
        if not self.n:
            return f"{self.a} vs {self.b}: no shared items"
        if self.winner < 0:  # the figures in the order the sentence names the two: the winner's first
            return replace(self, a=self.b, b=self.a, a_only=self.b_only, b_only=self.a_only,
                           accuracy_a=self.accuracy_b, accuracy_b=self.accuracy_a, difference=-self.difference,
                           difference_lo=-self.difference_hi, difference_hi=-self.difference_lo).line()
        head = self.verdict if self.winner else f"{self.a} vs {self.b}: {UNDECIDED}"
        head += ":"
        if self.rule:  # the plan's words, then the fixed-sample figures, informative only
            head = f"{self.verdict} ({self.rule}) —" if self.winner else f"{self.a} vs {self.b}: {self.rule} —"
        return (f"{head} {self.accuracy_a:.0%} vs {self.accuracy_b:.0%} on the same {self.n} items, difference "
                f"{_signed(self.difference)} [{_signed(self.difference_lo)}, {_signed(self.difference_hi)}] "
                f"({self.a_only} vs {self.b_only} items only one got right; exact McNemar p = {self.p_value:.3g})"
                + ("" if self.winner or self.rule else self.more()))

    def more(self) -> str:
        """'; about N more items would decide at this split' (normal approximation of the McNemar test: its z,
        |a_only − b_only| ÷ √(a_only + b_only), grows as √n), '' where no item told them apart."""
        if self.a_only == self.b_only:
            return ""
        z = abs(self.a_only - self.b_only) / math.sqrt(self.a_only + self.b_only)
        needed = max(self.n + 1, math.ceil(self.n * (scipy_stats.norm.isf(ALPHA / 2) / z) ** 2))
        return f"; about {needed - self.n} more items ({needed} in all) would decide at this split"


def _signed(share: float) -> str:
    """'+20%', '-3%', and '0%' for what rounds to zero either way (never '-0%')."""
    text = f"{share:+.0%}"
    return "0%" if text in ("+0%", "-0%") else text


def newcombe_interval(both: int, a_only: int, b_only: int, neither: int) -> tuple[float, float]:
    """95 % interval of p_A − p_B from a paired 2 × 2 table (Newcombe 1998, method 10)."""
    n = both + a_only + b_only + neither
    if n == 0:
        return math.nan, math.nan
    p1, p2 = (both + a_only) / n, (both + b_only) / n
    l1, u1 = stats.wilson_interval(both + a_only, n)
    l2, u2 = stats.wilson_interval(both + b_only, n)
    margins = (both + a_only) * (b_only + neither) * (both + b_only) * (a_only + neither)
    phi = (both * neither - a_only * b_only) / math.sqrt(margins) if margins > 0 else 0.0
    d1, e2 = p1 - l1, u2 - p2
    d2, e1 = p2 - l2, u1 - p1
    low = (p1 - p2) - math.sqrt(max(d1 ** 2 - 2 * phi * d1 * e2 + e2 ** 2, 0.0))
    high = (p1 - p2) + math.sqrt(max(d2 ** 2 - 2 * phi * d2 * e1 + e1 ** 2, 0.0))
    return max(low, -1.0), min(high, 1.0)


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value on the discordant pairs (1.0 when there are none)."""
    discordant = a_only + b_only
    return float(scipy_stats.binomtest(a_only, discordant, 0.5).pvalue) if discordant else 1.0


def compare(a: Mapping[object, bool], b: Mapping[object, bool], a_name: str = "A", b_name: str = "B") -> Paired:
    """A and B (item -> passed) over the items both answered."""
    shared = [key for key in a if key in b]
    pairs = [(bool(a[key]), bool(b[key])) for key in shared]
    both = sum(x and y for x, y in pairs)
    a_only = sum(x and not y for x, y in pairs)
    b_only = sum(y and not x for x, y in pairs)
    neither = len(pairs) - both - a_only - b_only
    n = len(pairs)
    low, high = newcombe_interval(both, a_only, b_only, neither)
    result = Paired(a_name, b_name, n, both, a_only, b_only, neither,
                    (both + a_only) / n if n else math.nan, (both + b_only) / n if n else math.nan,
                    (a_only - b_only) / n if n else math.nan, low, high, mcnemar_exact(a_only, b_only), "")
    verdict = {1: f"{a_name} beats {b_name}", -1: f"{b_name} beats {a_name}", 0: UNDECIDED}[result.winner]
    return Paired(**{**asdict(result), "verdict": verdict})


def item_results(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per scored, measured answer: system (the deployment's key, config.identity.keys, as the
    summaries key it), task, item ('<variant>#<repeat>'), passed (bool) and basis (`basis_of`). Warm-ups,
    failed and unscored rows are left out; a key recorded twice keeps its last row."""
    needed = {"task", "variant", "repeat", "passed"} | ({"system"} if "system" in requests else {"model", "host"})
    if requests is None or requests.empty or not needed <= set(requests.columns):
        return pd.DataFrame(columns=ITEM_COLUMNS)
    rows = requests
    if "is_warmup" in rows:
        rows = rows[~rows["is_warmup"].map(flag)]
    if "status" in rows:
        rows = rows[rows["status"] == "ok"]
    passed = rows["passed"].map(optional_flag)
    rows = rows[passed.notna()].assign(passed=passed[passed.notna()].astype(bool))
    system = identity.keys(rows)
    out = pd.DataFrame({"system": system.astype(str),
                        "task": rows["task"].astype(str),
                        "item": rows["variant"].astype(str) + "#" + rows["repeat"].astype(str),
                        "passed": rows["passed"].astype(bool),
                        "basis": [basis_of(t, c) for t, c in zip(rows["task"].astype(str),
                                                                 rows.get("checker", pd.Series("", index=rows.index)))]},
                       columns=ITEM_COLUMNS)
    return out.drop_duplicates(["system", "task", "item"], keep="last").reset_index(drop=True)


def basis_of(task: str, checker: object) -> str:
    """GRADED for a graded set's first pass (its checker is a graded scorer), UNDER_LOAD for its pass under load,
    else SMOKE (the seeds' tasks)."""
    if load_pass(task)[1] > 1:
        return UNDER_LOAD
    return GRADED if checker in GRADED_CHECKERS else SMOKE


def verdicts(items: pd.DataFrame, plans: pd.DataFrame | None = None) -> pd.DataFrame:
    """THE paired verdicts (ONE BASIS): every pair of systems on the graded sets' items both answered, pooled
    (basis GRADED), then beside them on the smoke tasks (basis SMOKE); one row each (PAIR_COLUMNS + basis + rule).
    A graded pair that a compare plan in `plans` compared gets the plan's verdict (`planned`)."""
    frames = []
    for basis in (GRADED, SMOKE):
        mine = items[items["basis"] == basis] if len(items) and "basis" in items else items.iloc[0:0]
        if len(mine):
            frames.append(pairwise(mine).assign(basis=basis))
    table = (pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames)
             else pd.DataFrame(columns=PAIR_COLUMNS + ["basis"]))
    return planned(table, plans)


def plan_outcome(look: Mapping[str, object]) -> PlanOutcome:
    """A compare plan's last look (sequential.LOOK_COLUMNS) as a verdict of its deployment against its baseline;
    `tasks` where the row has it: the sets it judged, comma-separated."""
    n, planned_n, reason = int(look["n"]), int(look["planned_n"]), str(look.get("reason") or "")
    tasks = frozenset(t for t in str(look.get("tasks") or "").split(",") if t and t != "nan")
    if reason == sequential.DECIDED:
        a_only, b_only = int(look["a_only"]), int(look["b_only"])
        alpha = pd.to_numeric(pd.Series([look.get("alpha")]), errors="coerce").iloc[0]
        level = f" at alpha {alpha:.2g}" if not math.isnan(alpha) else ""
        return PlanOutcome((a_only > b_only) - (a_only < b_only),
                           f"decided by its compare plan{level}: look {int(look['look'])}, {n} of {planned_n} "
                           f"items, {a_only} ({look.get('system', 'it')}) vs {b_only} "
                           f"({look.get('against', 'its baseline')}) right where they differ, "
                           f"p = {float(look['p_value']):.3g} within that look's level "
                           f"{float(look['nominal_alpha']):.3g}", tasks)
    a_only, b_only = int(look.get("a_only") or 0), int(look.get("b_only") or 0)
    alpha = pd.to_numeric(pd.Series([look.get("alpha")]), errors="coerce").iloc[0]
    more = ""
    if a_only != b_only and n:  # at the plan's own level: its last look spends about all of alpha
        z = abs(a_only - b_only) / math.sqrt(a_only + b_only)
        level = alpha if not math.isnan(alpha) else ALPHA
        needed = max(n + 1, math.ceil(n * (scipy_stats.norm.isf(level / 2) / z) ** 2))
        more = f"; about {needed - n} more items ({needed} in all) would decide at this split"
    return PlanOutcome(0, f"undecided by its compare plan: {reason or 'not stopped'} at {n} of {planned_n} items"
                          f"{more}; a fixed-sample test after looks is not a verdict", tasks)


def plan_pairs(plans: pd.DataFrame | None) -> dict[tuple[str, str], PlanOutcome]:
    """(deployment, baseline) -> PlanOutcome for every compare plan in `plans`: one row per look or per plan, with
    `system` and `against` (the two names as the verdicts name them) and the look's figures; the last row of a
    pair counts."""
    if plans is None or not len(plans) or not {"system", "against", "plan"} <= set(plans.columns):
        return {}
    rows = plans[(plans["plan"] == "compare") & plans["against"].notna() & (plans["against"].astype(str) != "")]
    return {(str(r["system"]), str(r["against"])): plan_outcome(r)
            for r in rows.groupby(["system", "against"], sort=False).tail(1).to_dict("records")}


def with_plan(result: Paired, pairs: Mapping[tuple[str, str], PlanOutcome],
              tasks: Sequence[str] = ()) -> Paired:
    """`result` with the verdict its pair's compare plan reached, where one compared the two (else as it is).
    `tasks`: the sets `result` compared, where known; a plan that judged none of them (a regime's speech set,
    say, against a plan on the text sets) leaves it as it is."""
    outcome = pairs.get((result.a, result.b)) or (pairs[(result.b, result.a)].turned()
                                                  if (result.b, result.a) in pairs else None)
    if outcome is None or not result.n or (tasks and outcome.tasks and not outcome.tasks & set(tasks)):
        return result
    verdict = {1: f"{result.a} beats {result.b}", -1: f"{result.b} beats {result.a}", 0: UNDECIDED}[outcome.winner]
    return replace(result, verdict=verdict, rule=outcome.words)


def planned(table: pd.DataFrame, plans: pd.DataFrame | None) -> pd.DataFrame:
    """THE verdicts table (`verdicts`) with each graded pair that a compare plan compared given the plan's verdict
    (`with_plan`) and its words in `rule` ("" for the pairs the fixed-sample test decides)."""
    pairs = plan_pairs(plans)
    out = table.assign(rule="") if "rule" not in table else table.fillna({"rule": ""})
    for index, row in out.iterrows():
        if pairs and row["basis"] == GRADED:
            result = with_plan(Paired(**{key: row[key] for key in PAIR_COLUMNS}), pairs)
            out.loc[index, "verdict"], out.loc[index, "rule"] = result.verdict, result.rule
    return out


def plans_by_system(pairs: Mapping[tuple[str, str], PlanOutcome]) -> dict[str, dict[str, PlanOutcome]]:
    """system -> {other: its PlanOutcome against other}, both sides of each plan (a systems frame's PLAN_COLUMN)."""
    out: dict[str, dict[str, PlanOutcome]] = {}
    for (a, b), outcome in pairs.items():
        out.setdefault(a, {})[b] = outcome
        out.setdefault(b, {})[a] = outcome.turned()
    return out


def system_plans(systems: pd.DataFrame) -> dict[tuple[str, str], PlanOutcome]:
    """The plan pairs a systems frame carries in its PLAN_COLUMN (`plans_by_system`), back as plan_pairs gives them."""
    if PLAN_COLUMN not in systems or "system" not in systems:
        return {}
    return {(str(name), other): outcome for name, mine in zip(systems["system"], systems[PLAN_COLUMN])
            if isinstance(mine, dict) for other, outcome in mine.items()}


def outcomes(items: pd.DataFrame, system: str, tasks: Sequence[str] | None = None) -> dict[tuple[str, str], bool]:
    """(task, item) -> passed for one system, over `tasks` when given."""
    rows = items[items["system"] == system] if len(items) else items
    if tasks is not None and len(rows):
        rows = rows[rows["task"].isin(tasks)]
    return {(t, i): bool(p) for t, i, p in zip(rows["task"], rows["item"], rows["passed"])} if len(rows) else {}


def pairwise(items: pd.DataFrame, tasks: Sequence[str] | None = None) -> pd.DataFrame:
    """Every pair of systems in `items` with shared items (over `tasks` when given), one row each (PAIR_COLUMNS)."""
    systems = list(dict.fromkeys(items["system"])) if len(items) else []
    rows = []
    for a, b in combinations(systems, 2):
        result = compare(outcomes(items, a, tasks), outcomes(items, b, tasks), a, b)
        if result.n:
            rows.append(asdict(result))
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def winner_matrix(outcome_maps: Sequence[object], names: Sequence[str] = (),
                  plans: Mapping[tuple[str, str], PlanOutcome] | None = None) -> np.ndarray:
    """[i, j] = +1 when system i beats j on their shared items, −1 when j beats i, 0 undecided, NaN where either has
    no per-item results (a dict (task, item) -> passed; anything else counts as none) or they share no item. With
    the systems' `names` and compare `plans` (plan_pairs), a pair a plan compared gets the plan's verdict."""
    size = len(outcome_maps)
    matrix = np.full((size, size), np.nan)
    for i in range(size):
        for j in range(i + 1, size):
            a, b = outcome_maps[i], outcome_maps[j]
            if not isinstance(a, dict) or not isinstance(b, dict) or not a or not b:
                continue
            result = compare(a, b, names[i], names[j]) if len(names) else compare(a, b)
            if plans and len(names):
                result = with_plan(result, plans, {key[0] for key in a if key in b and isinstance(key, tuple)})
            if result.n:
                matrix[i, j], matrix[j, i] = result.winner, -result.winner
    return matrix


ALL_SETS = "all sets"  # under_load's pooled row: every set the system answered under load, items together


def under_load(items: pd.DataFrame) -> pd.DataFrame:
    """Per system and graded set answered both one at a time and under load ("<set>@c<N>"): the two passes compared
    on their shared items (A = "c1", B = "c<N>"), one row each (LOAD_COLUMNS + PAIR_COLUMNS), then per system and
    concurrency one ALL_SETS row pooling those sets' items (where a single set has too few items to tell)."""
    rows = []
    if not len(items):
        return pd.DataFrame(columns=LOAD_COLUMNS + PAIR_COLUMNS)
    pooled: dict[tuple[str, int], tuple[dict, dict]] = {}
    for (system, task), group in items.groupby(["system", "task"], sort=False):
        base, level = load_pass(str(task))
        if level == 1:
            continue
        first = outcomes(items[items["task"] == base], str(system))
        loaded = {(base, item): ok for (_, item), ok in outcomes(group, str(system)).items()}
        rows.append({"system": system, "task": base, "concurrency": level,
                     **asdict(compare(first, loaded, "c1", f"c{level}"))})
        both = pooled.setdefault((str(system), level), ({}, {}))
        both[0].update(first), both[1].update(loaded)
    for (system, level), (first, loaded) in pooled.items():
        rows.append({"system": system, "task": ALL_SETS, "concurrency": level,
                     **asdict(compare(first, loaded, "c1", f"c{level}"))})
    return pd.DataFrame(rows, columns=LOAD_COLUMNS + PAIR_COLUMNS)
