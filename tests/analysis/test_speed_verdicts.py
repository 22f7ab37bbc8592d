"""Speed verdicts (analysis.speed_verdicts): paired by prompt where the design is paired, four words each earned."""

import math

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import speed_verdicts, stats

# Issue 56's rows: SmolLM2 against Gemma on the same 10 prompts (two a task); basic Q&A, multilingual and reasoning
# as the issue quotes them, coding and summarization in the same proportions.
TASKS = ["basic_qa"] * 2 + ["multilingual"] * 2 + ["reasoning"] * 2 + ["coding"] * 2 + ["summarization"] * 2
SMOL = [140.0, 140.0, 92.0, 140.0, 29.4, 29.9, 120.0, 130.0, 110.0, 100.0]
GEMMA = [33.0, 80.0, 60.0, 64.0, 56.8, 77.7, 60.0, 70.0, 62.0, 66.0]


def frame(system: str, values, tasks=TASKS, metric: str = "decode_tps", repeat0: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"system": system, "task": tasks, "variant": "v",
                         "repeat": range(repeat0, repeat0 + len(values)), metric: values})


def test_the_issues_pair_is_no_tie_but_undecided_with_its_per_task_evidence():
    requests = pd.concat([frame("SmolLM2", SMOL), frame("Gemma", GEMMA)])
    verdict = speed_verdicts.compare(requests, "SmolLM2", "Gemma", "decode_tps")
    assert verdict.paired and verdict.n == 10 and verdict.word == speed_verdicts.UNDECIDED
    assert verdict.ratio_lo < 1 < verdict.ratio_hi
    by_task = {t.task: t for t in verdict.tasks}
    assert by_task["reasoning"].ratio == pytest.approx(math.exp(np.mean(np.log([29.4 / 56.8, 29.9 / 77.7]))))
    assert all(t.word == speed_verdicts.UNDECIDED and t.n == 2 for t in verdict.tasks)  # 2 prompts a task decide nothing
    line = verdict.line()
    assert line.startswith("SmolLM2 vs Gemma undecided: decode rate ratio SmolLM2 ÷ Gemma 1.48× [")
    assert "reasoning 0.45× undecided (2)" in line and "more prompts" in line and "tie" not in line
    # each task's level in words: 5 tasks, Bonferroni
    assert "; per task (each tested at 5 %/5 = 1 %, Bonferroni over 5 tasks): basic_qa " in line


def test_pairing_decides_where_pooled_intervals_overlap():
    """Prompts that differ tenfold in speed, A 25 % faster on every one: the two pooled bootstrap intervals
    overlap (the old rule's "tie"), the paired ratio's interval is far from 1."""
    base = np.geomspace(10, 100, 12)
    noise = np.random.default_rng(4).normal(0, 0.02, 12)
    requests = pd.concat([frame("A", base * 1.25 * np.exp(noise), ["t"] * 12), frame("B", base, ["t"] * 12)])
    a_lo, a_hi = stats.bootstrap_interval(base * 1.25)
    b_lo, b_hi = stats.bootstrap_interval(base)
    assert stats.overlap(a_lo, a_hi, b_lo, b_hi)
    verdict = speed_verdicts.compare(requests, "A", "B", "decode_tps")
    assert verdict.word == speed_verdicts.FASTER and 1.2 < verdict.ratio_lo < verdict.ratio_hi < 1.3
    assert verdict.turned().word == speed_verdicts.SLOWER and verdict.turned().ratio == pytest.approx(1 / verdict.ratio)


def test_a_shorter_time_is_faster():
    ttft = np.linspace(0.1, 0.3, 8)
    requests = pd.concat([frame("A", ttft * 0.5, ["t"] * 8, "ttft_s"), frame("B", ttft, ["t"] * 8, "ttft_s")])
    verdict = speed_verdicts.compare(requests, "A", "B", "ttft_s")
    assert verdict.word == speed_verdicts.FASTER and verdict.ratio == pytest.approx(0.5)
    assert verdict.phrase() == "A faster than B"


def test_mixed_names_the_tasks_decided_each_way():
    rng = np.random.default_rng(2)
    x = np.r_[rng.normal(0.5, 0.1, 12), rng.normal(-0.5, 0.1, 12)]
    verdict = speed_verdicts.paired(["coding"] * 12 + ["reasoning"] * 12, x, "decode_tps", "A", "B")
    assert verdict.word == speed_verdicts.MIXED
    assert verdict.phrase() == "mixed: A faster on coding, slower on reasoning"


def test_equivalent_only_when_proven_within_the_margin():
    rng = np.random.default_rng(1)
    close = rng.normal(0, 0.02, 20)
    tight = speed_verdicts.paired(["t"] * 20, close, "decode_tps", margin=0.10)
    assert tight.word == speed_verdicts.EQUIVALENT and tight.within_margin
    assert 1 / 1.1 < tight.ratio_lo and tight.ratio_hi < 1.1
    wide = speed_verdicts.paired(["t"] * 20, rng.normal(0, 0.5, 20), "decode_tps", margin=0.10)
    assert wide.word == speed_verdicts.UNDECIDED and wide.needed > 20  # no difference seen is not equivalence
    narrow = speed_verdicts.paired(["t"] * 20, close, "decode_tps", margin=0.002)
    assert narrow.word == speed_verdicts.UNDECIDED  # the same data, a margin it cannot prove


def test_the_sign_flip_test_is_exact_and_needs_six_prompts():
    five = speed_verdicts.SignFlips(np.ones(5), np.full(5, 0.2))
    assert five.p_value() == pytest.approx(2 / 32) and five.interval(0.05) == (-math.inf, math.inf)
    six = speed_verdicts.SignFlips(np.linspace(1, 2, 6), np.full(6, 1 / 6))
    assert six.p_value() == pytest.approx(2 / 64)
    low, high = six.interval(0.05)
    assert 1.0 - 1e-9 <= low < 1.5 < high <= 2.0 + 1e-9
    assert six.p_value(low - 1e-9) <= 0.05 < six.p_value(low + 1e-9)


def test_unpaired_comparisons_say_so():
    requests = pd.concat([frame("A", np.linspace(20, 24, 8), ["t"] * 8),
                          frame("B", np.linspace(10, 12, 8), ["t"] * 8, repeat0=100)])
    verdict = speed_verdicts.compare(requests, "A", "B", "decode_tps")
    assert not verdict.paired and verdict.word == speed_verdicts.FASTER and "unpaired" in verdict.evidence()


def test_required_pairs_reaches_the_power_of_the_two_one_sided_t_tests():
    n = speed_verdicts.required_pairs(0.1, 0.10, 0.8)
    assert n == 11 and speed_verdicts.equivalence_power(n, 0.1) >= 0.8 > speed_verdicts.equivalence_power(n - 1, 0.1)
    # the normal approximation, blind to the sample sd's own spread, would promise 80 % at 10
    assert math.ceil(((1.6449 + 1.2816) * 0.1 / math.log(1.1)) ** 2) == 10


def test_a_bound_just_off_1_shows_that_it_is():
    """A decided interval ending at 0.998 is not printed "1.00×", which would read as including 1."""
    assert [speed_verdicts._x(v) for v in (0.998, 1.0, 1.004, 0.81, 1.00004)] == \
        ["0.998×", "1.00×", "1.004×", "0.81×", "1.0000×"]
