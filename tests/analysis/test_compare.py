"""Two studies compared: the same deployment measured twice shows no change beyond the noise; a deliberately
slowed one is flagged, and `frontier-bench compare --fail-on` exits 1 for it (and 0 without the regression)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import compare
from benchlib.cli import main as cli_main
from benchlib.suites.runner import run_suite


def _study(params_for, root, monkeypatch, itl: float):
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(root))
    params = params_for({"ttft": 0.02, "itl": itl, "tokens": 12}, run={"repeats": 6, "warmups": 1},
                        tasks=["basic_qa", "reasoning"])
    run_suite(params, "text", progress=False)
    return root


def test_a_rerun_is_within_noise_and_a_slowed_deployment_is_a_regression(params_for, tmp_path, monkeypatch, capsys):
    a = _study(params_for, tmp_path / "a", monkeypatch, itl=0.01)
    b = _study(params_for, tmp_path / "b", monkeypatch, itl=0.01)
    slow = _study(params_for, tmp_path / "slow", monkeypatch, itl=0.03)

    itself = compare.compare(compare.read_root(str(a)), compare.read_root(str(a)))
    decode = itself[itself["metric"] == "decode_tps"].iloc[0]
    assert decode["n_a"] == decode["n_b"] == 12  # warm-ups left out
    assert decode["change"] == 0 and decode["change_lo"] <= 0 <= decode["change_hi"]
    assert set(itself["verdict"]) == {"within noise"}

    # Two runs of the same deployment differ only by how busy the machine was: never a 30 % regression; the
    # slowed one (3x the inter-token latency) loses about two thirds of its decode rate.
    assert cli_main(["compare", str(a), str(b), "--fail-on", "decode_tps=30", "--out", str(tmp_path / "ab")]) == 0
    assert cli_main(["compare", str(a), str(slow), "--fail-on", "decode_tps=30", "--out", str(tmp_path / "as")]) == 1
    err = capsys.readouterr().err
    assert "regression: fake-model @ test-host · text · decode_tps" in err
    report = (tmp_path / "as" / "compare.md").read_text()
    assert "worse beyond noise (regression: more than 30 %)" in report
    page = (tmp_path / "as" / "compare.html").read_text()
    assert page.startswith("<!doctype html>") and "<script" not in page and "http" not in page
    slowed = compare.compare(compare.read_root(str(a)), compare.read_root(str(slow)))
    row = slowed[slowed["metric"] == "decode_tps"].iloc[0]
    assert row["change_hi"] < -40  # ~3x the inter-token latency: the rate drops by about two thirds


def test_accuracy_difference_uses_a_newcombe_interval_and_missing_sides_are_named():
    def rows(passed, deployment="m"):
        return pd.DataFrame({"host": "h", "deployment": deployment, "suite": "quality", "passed": passed,
                             "decode_tps": np.nan, "ttft_s": np.nan, "e2e_s": np.nan})
    table = compare.compare(rows([True] * 40), pd.concat([rows([True] * 20 + [False] * 20), rows([True], "new")]))
    acc = table[(table["metric"] == "accuracy") & (table["deployment"] == "m")].iloc[0]
    assert acc["change"] == pytest.approx(-50.0) and acc["change_hi"] < 0 and "worse beyond noise" in acc["verdict"]
    assert table[table["deployment"] == "new"].iloc[0]["verdict"] == "only in B"
    assert math.isnan(table[table["deployment"] == "new"].iloc[0]["change"])


@pytest.mark.parametrize("text,expected", [("speed=5", "must be one of"), ("decode_tps=fast", "a number"),
                                           ("decode_tps=-1", "≥ 0")])
def test_a_bad_threshold_is_one_line(text, expected):
    with pytest.raises(compare.CompareError, match=expected):
        compare.parse_threshold(text)


def test_a_root_without_results_is_one_line(tmp_path, capsys):
    assert cli_main(["compare", str(tmp_path), str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
