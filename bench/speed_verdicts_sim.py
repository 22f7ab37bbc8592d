"""The speed verdicts and latency bounds at known truths (issue 56 item 6): seeded simulations that print

1. false verdicts at equal speeds: two deployments equally fast on every prompt, five tasks of different speeds and
   spreads (noise sd 0.05–0.6 on the log scale, t-distributed with 3 degrees of freedom: heavy tails), 2, 4 and 10
   prompts a task — the share called faster, slower or mixed (nominal: at most 5 %), beside the old rule's share of
   non-overlapping pooled bootstrap intervals (its "tie" was the rest: no false word, but no word at all);
2. power where one is 25 % faster on every prompt, and the share called "mixed" where it is 50 % faster on two
   tasks and 50 % slower on two others;
3. equivalence: at a true ratio of 1 (and 1.03), with the prompts `required_pairs` sizes for 80 % power, the share
   shown equivalent within ±10 % against the power planned at that n (`equivalence_power`), and at the margin
   itself (ratio 1.10) the share falsely shown equivalent (nominal: at most 5 %);
4. percentile bounds: coverage of the distribution-free 95 % interval of p50, p90, p95, p99 at the smallest n each
   allows and at 1,000, on lognormal, exponential and uniform values, with the exact binomial coverage beside it;
5. the latency plan's stop: coverage of the p90 / p99 interval when the number of requests depends on the data
   (stop at ±10 %, geometric looks), and the requests it used.

    .venv/bin/python bench/speed_verdicts_sim.py [--reps 2000] [--seed 1] [--sections 1,2,3,4,5]

Figures quoted in bench/results/2026-11-29-speed-verdicts.md. Runtime: a few minutes (sections 1–3 call the verdict
itself, a few ms each).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import stats as scipy_stats

from benchlib.analysis import latency_precision, speed_verdicts, stats

TASK_SD = np.array([0.05, 0.1, 0.2, 0.4, 0.6])  # per-prompt log noise of each task: heterogeneous spreads
TASK_LEVEL = np.log([140.0, 90.0, 60.0, 30.0, 100.0])  # each task's own speed (tok/s): heterogeneous levels
TASKS = np.array(["basic_qa", "multilingual", "coding", "reasoning", "summarization"])
WORDS = (speed_verdicts.FASTER, speed_verdicts.SLOWER, speed_verdicts.MIXED)


def prompts(rng: np.random.Generator, per_task: int,
            effect: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tasks, A's and B's decode rates) on the same prompts: a prompt effect shared by both (prompts differ
    tenfold within a task), each deployment's own heavy-tailed noise, and A's true log ratio `effect` per task."""
    tasks = np.repeat(TASKS, per_task)
    index = np.repeat(np.arange(len(TASKS)), per_task)
    prompt = TASK_LEVEL[index] + rng.uniform(-1.15, 1.15, len(index))
    noise = TASK_SD[index] / math.sqrt(3.0)  # t(3) has variance 3
    a = np.exp(prompt + effect[index] + noise * rng.standard_t(3, len(index)))
    b = np.exp(prompt + noise * rng.standard_t(3, len(index)))
    return tasks, a, b


def overlap_rule(a: np.ndarray, b: np.ndarray) -> bool:
    """The old rule: the two pooled 95 % bootstrap intervals of the means do not overlap (a 'faster' or 'slower')."""
    return not stats.overlap(*stats.bootstrap_interval(a), *stats.bootstrap_interval(b))


def words(rng: np.random.Generator, per_task: int, effect: np.ndarray, reps: int, old: bool = False) -> dict:
    """Share of each word over `reps` runs; "old": the overlap rule's share decided, over the first quarter of them
    (two bootstraps a run: the slow part)."""
    counts = {w: 0 for w in (*speed_verdicts.WORDS, "old")}
    for run in range(reps):
        tasks, a, b = prompts(rng, per_task, effect)
        counts[speed_verdicts.paired(tasks, np.log(a / b), "decode_tps").word] += 1
        counts["old"] += old and run < reps // 4 and overlap_rule(a, b)
    return {w: c / (max(1, reps // 4) if w == "old" else reps) for w, c in counts.items()}


def bound(rate: float, reps: int, nominal: float) -> str:
    return f"(nominal {nominal:.1%}, ± {2 * math.sqrt(nominal * (1 - nominal) / reps):.1%} at 2 SE over {reps} runs)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sections", default="1,2,3,4,5", help="which of the five to run (comma-separated)")
    args = parser.parse_args()
    reps, rng = args.reps, np.random.default_rng(args.seed)
    sections = {int(s) for s in args.sections.split(",")}
    for number, section in enumerate((false_verdicts, power_and_mixed, equivalence, percentile_bounds,
                                      latency_stop), 1):
        if number in sections:
            section(rng, reps)


def false_verdicts(rng: np.random.Generator, reps: int) -> None:

    print("1. equal speeds, five heterogeneous tasks (t(3) noise, sd 0.05–0.6): a false faster / slower / mixed")
    for per_task in (2, 4, 10):
        found = words(rng, per_task, np.zeros(5), reps, old=True)
        false = sum(found[w] for w in WORDS)
        print(f"   {per_task:2d} prompts a task ({5 * per_task} in all): {false:.2%} false "
              f"({found[speed_verdicts.FASTER]:.2%} faster, {found[speed_verdicts.SLOWER]:.2%} slower, {found[speed_verdicts.MIXED]:.2%} mixed) "
              f"{bound(false, reps, 0.05)}; old overlap rule: {found['old']:.2%} decided")



def power_and_mixed(rng: np.random.Generator, reps: int) -> None:
    print("2. A faster by 25 % on every prompt: power; A 50 % faster on two tasks, 50 % slower on two: 'mixed'")
    for per_task in (2, 4, 10):
        found = words(rng, per_task, np.full(5, math.log(1.25)), reps // 2, old=True)
        print(f"   {per_task:2d} prompts a task: faster {found[speed_verdicts.FASTER]:.1%} (old overlap rule "
              f"{found['old']:.1%}), undecided {found[speed_verdicts.UNDECIDED]:.1%}")
    effect = np.log([1.5, 1.5, 1.0, 1 / 1.5, 1 / 1.5])
    for per_task in (10, 20):
        found = words(rng, per_task, effect, reps // 4)
        print(f"   {per_task:2d} prompts a task, opposite effects: mixed {found[speed_verdicts.MIXED]:.1%}, "
              f"faster {found[speed_verdicts.FASTER]:.1%}, slower {found[speed_verdicts.SLOWER]:.1%}, undecided {found[speed_verdicts.UNDECIDED]:.1%}")



def equivalence(rng: np.random.Generator, reps: int) -> None:
    print("3. equivalence within ±10 % (one task, normal log ratios), n sized for 80 % power by required_pairs: "
          "the share shown within the margin (the word 'equivalent', or 'faster'/'slower' with 'within ±10 %') "
          "against the power planned at that n (equivalence_power; n is rounded up, so it exceeds 80 %)")
    for sd, ratio in ((0.1, 1.0), (0.2, 1.0), (0.1, 1.03), (0.2, 1.03)):
        n = speed_verdicts.required_pairs(sd, 0.10, 0.8, math.log(ratio))
        planned = speed_verdicts.equivalence_power(n, sd, 0.10, math.log(ratio))
        hits = sum(speed_verdicts.paired(["t"] * n, rng.normal(math.log(ratio), sd, n), "decode_tps").within_margin
                   for _ in range(reps))
        print(f"   sd {sd}, true ratio {ratio}: n = {n}, equivalence shown {hits / reps:.2%} "
              f"{bound(hits / reps, reps, planned).replace('nominal', 'planned')}")
    for sd in (0.1, 0.2):
        n = speed_verdicts.required_pairs(sd, 0.10, 0.8)
        hits = sum(speed_verdicts.paired(["t"] * n, rng.normal(math.log(1.1), sd, n), "decode_tps").within_margin
                   for _ in range(reps))
        print(f"   sd {sd}, true ratio 1.10 (the margin), n = {n}: falsely declared equivalent {hits / reps:.2%} "
              f"{bound(hits / reps, reps, 0.05)}")



def percentile_bounds(rng: np.random.Generator, reps: int) -> None:
    print("4. percentile bounds (order statistics): coverage of the 95 % interval (exact binomial coverage)")
    draws = {"lognormal": (lambda size: rng.lognormal(0.0, 0.5, size),
                           lambda q: math.exp(0.5 * scipy_stats.norm.ppf(q))),
             "exponential": (lambda size: rng.exponential(1.0, size), lambda q: -math.log(1 - q)),
             "uniform": (lambda size: rng.uniform(0.0, 1.0, size), lambda q: q)}
    many = max(reps, 4000)
    for name, q in stats.PERCENTILES.items():
        for n in (stats.INTERVAL_N[name], 1000):
            low, high = stats.order_ranks(n, q)
            exact = scipy_stats.binom.cdf(high - 1, n, q) - scipy_stats.binom.cdf(low - 1, n, q)
            cells = []
            for dist, (draw, truth) in draws.items():
                ordered = np.sort(draw((many, n)), axis=1)
                covered = (ordered[:, low - 1] <= truth(q)) & (truth(q) <= ordered[:, high - 1])
                cells.append(f"{dist} {covered.mean():.2%}")
            print(f"   {name} at n = {n:4d}: {', '.join(cells)} (exact {exact:.2%}; ± "
                  f"{2 * math.sqrt(0.0475 / many):.1%} at 2 SE over {many} runs)")



def latency_stop(rng: np.random.Generator, reps: int) -> None:
    print("5. the latency plan's stop (±10 %, looks ×1.5 from 3 requests): coverage at a data-dependent n")
    for name, cap in (("p90", 400), ("p99", 4000)):
        q = stats.PERCENTILES[name]
        truth = math.exp(0.5 * scipy_stats.norm.ppf(q))
        runs = reps // 4 if name == "p99" else reps
        coverage, precise, used = latency_precision.simulate(
            rng, lambda r, size: r.lognormal(0.0, 0.5, size), truth, name, 0.10, 3, 1.5, cap, runs)
        print(f"   lognormal {name}, cap {cap}: coverage {coverage:.2%} {bound(coverage, runs, 0.95)}, stopped on "
              f"precision {precise:.1%}, {used:.0f} requests on average")


if __name__ == "__main__":
    main()
