"""The quality plan's stopping rule (benchlib.analysis.sequential): alpha spending, the look decision, and by
simulation at known accuracies its false-verdict rate, power and the precision rule's coverage."""

import math

import numpy as np
import pytest

from benchlib.analysis import paired, sequential

LOOKS = [0.25, 0.5, 0.75, 1.0]
REPS = 2000


def test_spending_starts_at_zero_and_ends_at_alpha():
    values = sequential.spending([0.0, 0.25, 0.5, 1.0], 0.05)
    assert values[0] == 0 and values[-1] == pytest.approx(0.05)
    assert np.all(np.diff(values) > 0)
    assert values[1] < 0.001  # O'Brien-Fleming type: almost nothing at the first quarter


def test_one_look_is_the_fixed_test():
    assert sequential.boundaries([1.0], 0.05)[0] == pytest.approx(1.959964, abs=1e-4)


def test_boundaries_spend_what_the_function_allows_look_by_look():
    """Brownian motion at the looks, 400,000 paths: the share first crossing at each look is that look's spending
    (the recursion's numerical integration, checked by brute force)."""
    t = np.array([0.2, 0.4, 0.6, 0.8, 1.0])
    c = sequential.boundaries(t, 0.05)
    assert np.all(np.diff(c) < 0)  # stricter early
    rng = np.random.default_rng(7)
    paths = np.cumsum(rng.standard_normal((400_000, len(t))) * np.sqrt(np.diff(np.r_[0.0, t])), axis=1)
    z = np.abs(paths / np.sqrt(t))
    alive, first = np.ones(len(z), bool), []
    for k in range(len(t)):
        hit = alive & (z[:, k] >= c[k])
        first.append(hit.mean())
        alive &= ~hit
    expected = np.diff(np.r_[0.0, sequential.spending(t, 0.05)])
    assert np.abs(np.array(first) - expected).max() < 0.0015
    assert sum(first) == pytest.approx(0.05, abs=0.002)


def test_many_or_close_looks_give_the_continuous_limit_or_a_refusal():
    """The grid follows the looks: at 100 looks the last boundary approaches continuous monitoring's (for a
    two-sided level α, about z_{1−α/4}: each side crossed with probability α/2 over [0, 1]) from below and grows
    with the looks; two looks 10^-4 apart are integrated as finely as far ones (the boundary stays finite and
    between the neighbours'); 2,000 looks — whose fixed grid gave z = 12.4 — and looks closer than the largest
    grid integrates are refused with one line."""
    limit = float(sequential.scipy_stats.norm.isf(0.01 / 4))
    finals = [sequential.boundaries([i / n for i in range(1, n + 1)], 0.01)[-1] for n in (10, 50, 100)]
    assert finals[0] < finals[1] < finals[2] < limit and limit - finals[2] < 0.04
    close = sequential.boundaries([0.25, 0.5, 0.5001, 1.0], 0.01)
    assert math.isfinite(close[2]) and close[1] < close[2] < close[0] and close[3] < close[1]
    with pytest.raises(ValueError, match=r"^2000 looks: at most 100 "):
        sequential.boundaries([i / 2000 for i in range(1, 2001)], 0.01)
    with pytest.raises(ValueError, match=r"closer than a 8001-point grid integrates"):
        sequential.boundaries([0.5, 0.5 + 1e-8, 1.0], 0.01)


def test_fractions_must_increase():
    with pytest.raises(ValueError, match="increase"):
        sequential.boundaries([0.5, 0.5, 1.0], 0.05)


def test_vectorised_mcnemar_matches_the_scalar_one():
    for a, b in [(0, 0), (3, 0), (2, 0), (7, 3), (3, 7), (15, 1), (5, 5)]:
        assert float(sequential.mcnemar_exact(a, b)) == pytest.approx(paired.mcnemar_exact(a, b))


def test_compare_stops_when_decided_and_not_on_an_early_lucky_streak():
    # 12 vs 0 discordant at the first quarter of 400: p = 0.00049, far above the first look's spent level
    early = sequential.decide("compare", 1, 100, 400, 30, a_only=12, b_only=0, alpha=0.01, baseline="B")
    assert not early.stop and early.p_value < 0.001 and early.nominal_alpha < 1e-5
    final = sequential.decide("compare", 4, 400, 400, 120, a_only=40, b_only=12, earlier=[100, 200, 300],
                              alpha=0.01, baseline="B")
    assert final.stop and final.reason == sequential.DECIDED
    assert "40 vs 12 discordant against B" in final.line()


def test_compare_runs_out_of_pool_undecided():
    look = sequential.decide("compare", 2, 180, 400, 50, a_only=6, b_only=5, earlier=[100], alpha=0.01,
                             last=True)
    assert look.stop and look.reason == sequential.EXHAUSTED
    assert look.fraction == 1.0  # the last possible look spends what is left
    assert look.nominal_alpha == pytest.approx(float(sequential.nominal_alphas([100 / 400, 1.0], 0.01)[-1]))


def test_precision_and_budget_and_fixed():
    wide = sequential.decide("precision", 1, 50, 400, 25, target_half_width=0.05)
    assert not wide.stop and wide.half_width > 0.1
    narrow = sequential.decide("precision", 3, 300, 400, 15, target_half_width=0.05)
    assert narrow.stop and narrow.reason == sequential.PRECISION
    spent = sequential.decide("precision", 1, 50, 400, 25, target_half_width=0.05, over_budget=True)
    assert spent.stop and spent.reason == sequential.BUDGET
    fixed = sequential.decide("fixed", 1, 15, 15, 3)
    assert fixed.stop and fixed.reason == sequential.FIXED


def test_look_sizes():
    assert sequential.look_sizes(10, LOOKS) == [3, 5, 8, 10]
    assert sequential.look_sizes(3, LOOKS) == [1, 2, 3]


@pytest.mark.parametrize("accuracy", [0.15, 0.5])
def test_false_verdict_rate_at_equal_accuracies_stays_at_alpha(accuracy):
    """2,000 comparisons of two deployments of equal accuracy, 300 items, four looks: the share that declared a
    winner is at most alpha + 3 standard errors."""
    alpha = 0.01
    rate, used = sequential.simulate_compare(accuracy, accuracy, 300, LOOKS, alpha, REPS, seed=11)
    assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / REPS)
    assert used > 290  # nothing to decide: nearly every comparison runs to the pool's end


def test_the_uncorrected_peek_is_what_the_spending_prevents():
    """Testing at alpha at each of ten looks inflates the false-verdict rate beyond alpha + 3 SE; the spent
    levels on the same simulated answers do not."""
    alpha, looks = 0.05, [i / 10 for i in range(1, 11)]
    bound = alpha + 3 * math.sqrt(alpha * (1 - alpha) / REPS)
    naive, _ = sequential.simulate_compare(0.5, 0.5, 300, looks, alpha, REPS, seed=3, corrected=False)
    spent, _ = sequential.simulate_compare(0.5, 0.5, 300, looks, alpha, REPS, seed=3)
    assert naive > bound
    assert spent <= bound


def test_power_when_accuracies_differ_and_it_stops_early():
    rate, used = sequential.simulate_compare(0.15, 0.35, 300, LOOKS, 0.01, REPS, seed=5)
    assert rate >= 0.95
    assert used < 250  # decided before the pool's end, most of the time


def test_precision_rule_keeps_its_coverage():
    coverage, used = sequential.simulate_precision(0.3, 600, [i / 12 for i in range(1, 13)], 0.05, REPS, seed=2)
    assert coverage >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / REPS)
    assert used < 600  # it stopped where the interval was narrow enough
