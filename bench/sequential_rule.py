"""The quality plan's stopping rule at known accuracies (benchlib.analysis.sequential): the false-verdict rate at
equal accuracies, the uncorrected peek beside it, the power and the items used when they differ, and the precision
rule's coverage. Seeded numpy simulations, a few seconds; the tests (tests/analysis/test_sequential.py) hold the
bounds, this prints the figures bench/results/ keeps (the sequential-rule file).

    .venv/bin/python bench/sequential_rule.py [--reps 2000] [--items 300]
"""

from __future__ import annotations

import argparse
import math

from benchlib.analysis import sequential

LOOKS = [0.25, 0.5, 0.75, 1.0]
TEN = [i / 10 for i in range(1, 11)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--items", type=int, default=300)
    args = parser.parse_args()
    reps, n = args.reps, args.items
    print(f"{reps} simulated comparisons of {n} items each")
    for alpha, looks, name in ((0.01, LOOKS, "4 looks"), (0.05, TEN, "10 looks")):
        bound = alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)
        for accuracy in (0.15, 0.5):
            rate, _ = sequential.simulate_compare(accuracy, accuracy, n, looks, alpha, reps, seed=11)
            naive, _ = sequential.simulate_compare(accuracy, accuracy, n, looks, alpha, reps, seed=11,
                                                   corrected=False)
            print(f"  α = {alpha}, {name}, both {accuracy:.0%}: false verdicts {rate:.2%} (alpha spent), "
                  f"{naive:.2%} (uncorrected peek); bound α + 3 SE = {bound:.2%}")
    for a, b in ((0.15, 0.35), (0.15, 0.25), (0.3, 0.4)):
        power, used = sequential.simulate_compare(a, b, n, LOOKS, 0.01, reps, seed=5)
        print(f"  α = 0.01, 4 looks, {a:.0%} against {b:.0%}: power {power:.2%}, {used:.0f} items used on average")
    for accuracy in (0.1, 0.3, 0.5):
        coverage, used = sequential.simulate_precision(accuracy, 2 * n, [i / 12 for i in range(1, 13)], 0.05, reps,
                                                       seed=2)
        print(f"  precision ±5 points, 12 looks of {2 * n} items, accuracy {accuracy:.0%}: coverage {coverage:.2%}, "
              f"{used:.0f} items used on average")


if __name__ == "__main__":
    main()
