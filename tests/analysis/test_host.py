"""On this host (analysis.host): our deployments against each other, axis by axis, each decided by its interval or
the paired verdict, and who dominates whom."""

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import host, paired, stats
from benchlib.analysis.deployments import deployment_figures


def requests(system: str, tps: list[float], ttft_s: list[float], graded: list[bool], smoke: list[bool]) -> pd.DataFrame:
    speed = pd.DataFrame({"system": system, "suite": "text", "task": "basic_qa", "variant": "v",
                          "repeat": range(100, 100 + len(tps)), "status": "ok", "is_warmup": False,
                          "decode_tps": tps, "ttft_s": ttft_s, "passed": None, "checker": "contains"})
    quality = pd.DataFrame({"system": system, "suite": "quality", "task": "arithmetic",
                            "variant": [f"s1-{i:04d}" for i in range(len(graded))], "repeat": range(len(graded)),
                            "status": "ok", "is_warmup": False, "decode_tps": np.nan, "ttft_s": np.nan,
                            "passed": graded, "checker": "reasoning_gym"})
    seeds = pd.DataFrame({"system": system, "suite": "text", "task": "reasoning", "variant": "r",
                          "repeat": range(len(smoke)), "status": "ok", "is_warmup": False, "decode_tps": np.nan,
                          "ttft_s": np.nan, "passed": smoke, "checker": "contains"})
    return pd.concat([speed, quality, seeds], ignore_index=True)


FAST = requests("fast", [40.0, 41.0, 39.0, 40.5, 38.0, 42.0, 40.0, 39.5],
                [0.10, 0.11, 0.09, 0.10, 0.12, 0.08, 0.10, 0.11], [True] * 20 + [False] * 10, [True] * 3)
SLOW = requests("slow", [20.0, 21.0, 19.5, 20.5, 19.0, 21.5, 20.0, 20.5],
                [0.10, 0.12, 0.08, 0.11, 0.11, 0.09, 0.12, 0.10], [False] * 30, [False] * 3)


def test_every_axis_with_the_interval_that_decides_it():
    table = host.head_to_head(pd.concat([FAST, SLOW], ignore_index=True)).set_index("axis")
    speed = table.loc["decode_tps"]
    assert speed["better"] == "fast" and speed["a_value"] == pytest.approx(40.0)
    # decided prompt by prompt: the ratio of decode rates on the same 8 prompts, its interval above 1
    assert speed["paired"] and speed["n"] == 8 and 1.9 < speed["ratio_lo"] < speed["ratio"] < speed["ratio_hi"] < 2.1
    assert speed["note"] == "fast faster" and speed["rule"].startswith("decode rate 1.98× [")
    ttft = table.loc["ttft_ms"]  # 101 ms against 104 ms, the prompts' differences both ways: undecided, not "tie"
    assert ttft["better"] == host.UNDECIDED and "would decide at the observed spread" in ttft["rule"]
    graded = table.loc["graded"]
    verdict = paired.verdicts(paired.item_results(pd.concat([FAST, SLOW]))).set_index("basis").loc[paired.GRADED]
    assert graded["better"] == "fast" and graded["n"] == verdict["n"] == 30
    assert (graded["difference"], graded["p_value"]) == (pytest.approx(verdict["difference"]),
                                                         pytest.approx(verdict["p_value"]))
    assert table.loc["tokens_per_joule", "better"] == host.NOT_MEASURED
    smoke = table.loc["smoke"]  # beside the verdict: 3 against 0 decides nothing on its own
    assert smoke["n"] == 3 and smoke["better"] == host.UNDECIDED


def test_the_pair_is_oriented_whichever_order_the_systems_come_in():
    table = host.head_to_head(pd.concat([SLOW, FAST], ignore_index=True)).set_index("axis")
    graded = table.loc["graded"]
    assert (graded["a"], graded["better"]) == ("slow", "fast")
    assert graded["difference"] < 0 and graded["difference_hi"] < 0
    assert (graded["a_value"], graded["b_value"]) == (0.0, pytest.approx(2 / 3))


def test_each_side_reads_as_its_deployment_figure_everywhere():
    """Decode, TTFT and end-to-end latency beside the verdict are each deployment's figure as the first screen and the
    thresholds read it: the mean of its tasks' means with the stratified t interval (two tasks of different speeds
    here, where a bootstrap over the pooled requests would give another interval)."""
    other = FAST[FAST["task"] == "basic_qa"].assign(task="coding", decode_tps=lambda f: f["decode_tps"] / 4)
    fast = pd.concat([FAST, other], ignore_index=True).assign(e2e_s=lambda f: 1.0 + f["ttft_s"])
    table = host.head_to_head(pd.concat([fast, SLOW.assign(e2e_s=2.0)], ignore_index=True)).set_index("axis")
    figures = deployment_figures(pd.DataFrame({"model": ["fast"], "task": ["basic_qa"]}), fast).iloc[0]
    for axis in ("decode_tps", "ttft_ms"):
        shown = tuple(table.loc[axis, ["a_value", "a_lo", "a_hi"]])
        assert shown == pytest.approx(tuple(figures[[axis, f"{axis}_lo", f"{axis}_hi"]]))
    assert table.loc["decode_tps", "a_value"] == pytest.approx((40.0 + 10.0) / 2)
    e2e = [fast.loc[(fast["task"] == t) & fast["e2e_s"].notna(), "e2e_s"].to_numpy() * 1000 for t in ("basic_qa", "coding")]
    assert tuple(table.loc["e2e_ms", ["a_value", "a_lo", "a_hi"]]) == pytest.approx(
        stats.stratified_mean_interval(e2e, floor=0.0))


def test_dominance_in_words():
    table = host.head_to_head(pd.concat([FAST, SLOW], ignore_index=True))
    (a, b, text), = host.dominance(table)
    assert text == "fast dominates slow (faster decode, better answers; undecided on time to first token)"
    mixed = requests("careful", [10.0, 10.5, 9.5, 10.2, 9.8, 10.1, 10.0, 9.9],
                     [0.3, 0.31, 0.29, 0.3, 0.3, 0.32, 0.28, 0.3], [True] * 30, [True] * 3)
    table = host.head_to_head(pd.concat([FAST, mixed], ignore_index=True))
    (_, _, text), = host.dominance(table)
    assert text.startswith("neither dominates: fast has faster decode, shorter time to first token; careful has "
                           "better answers")
    assert host.ranked(table) == [("fast", 2), ("careful", 1)]


def test_energy_compared_within_one_boundary_only():
    both = pd.concat([FAST, SLOW], ignore_index=True)
    energy = pd.DataFrame({"system": ["fast", "slow"], "tokens_per_joule": [2.0, 1.0],
                           "energy_boundary": ["CPU package", "CPU package"]})
    row = host.head_to_head(both, energy).set_index("axis").loc["tokens_per_joule"]
    assert row["better"] == "fast"
    energy["energy_boundary"] = ["CPU package", "GPU board"]
    row = host.head_to_head(both, energy).set_index("axis").loc["tokens_per_joule"]
    assert row["better"] == host.NOT_MEASURED and "different energy boundaries" in row["note"]


def test_each_deployments_figures_keep_graded_and_smoke_accuracy_apart():
    summary = pd.DataFrame({"model": ["m"] * 3, "suite": ["text", "text", "quality"],
                            "task": ["basic_qa", "reasoning", "arithmetic"],
                            "checker": ["contains", "contains", "reasoning_gym"],
                            "n_scored": [3, 3, 15], "n_passed": [3, 3, 2]})
    requests = pd.DataFrame({"system": ["m"] * 5, "suite": ["text"] * 4 + ["quality"], "is_warmup": [True] + [False] * 4,
                             "task": ["basic_qa", "basic_qa", "basic_qa", "reasoning", "arithmetic"],
                             "status": ["ok", "ok", "ok", "failed", "ok"], "decode_tps": [99.0, 30.0, 40.0, None, 5.0],
                             "ttft_s": [0.5, 0.1, 0.2, None, 0.3]})
    row = deployment_figures(summary, requests).iloc[0]
    assert (row["graded_passed"], row["graded_scored"], row["smoke_passed"], row["smoke_scored"]) == (2, 15, 6, 6)
    assert row["graded_lo"] < 2 / 15 < row["graded_hi"]
    # the text suite's measured requests, the mean of its tasks' means with the interval the thresholds are judged on
    assert row["decode_tps"] == 35.0 and row["ttft_ms"] == pytest.approx(150.0)
    assert row["decode_tps_lo"] < 35.0 < row["decode_tps_hi"]
    assert (row["sent"], row["failed"]) == (4, 1)  # the warm-up is not counted
    assert np.isnan(row["tokens_per_joule"])  # no window measured energy

