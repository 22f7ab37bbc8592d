"""Two studies compared: the same deployment measured twice shows no change beyond the noise; a deliberately
slowed one is flagged, and `frontier-bench compare --fail-on` exits 1 for it (and 0 without the regression)."""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import compare
from benchlib.cli import main as cli_main
from benchlib.records import plausible
from benchlib.records.rows import RequestRecord
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
    # the same requests twice: paired, every ratio 1, equivalence shown within ±10 % (not merely "no difference")
    verdicts = dict(zip(itself["metric"], itself["verdict"]))
    assert verdicts == {"decode_tps": "equivalent within ±10%", "ttft_s": "equivalent within ±10%",
                        "e2e_s": "equivalent within ±10%", "accuracy": "undecided"} and itself["paired"].all()

    # Two runs of the same deployment differ only by how busy the machine was: never a 30 % regression; the
    # slowed one (3x the inter-token latency) loses about two thirds of its decode rate.
    assert cli_main(["compare", str(a), str(b), "--fail-on", "decode_tps=30", "--out", str(tmp_path / "ab")]) == 0
    assert cli_main(["compare", str(a), str(slow), "--fail-on", "decode_tps=30", "--out", str(tmp_path / "as")]) == 1
    err = capsys.readouterr().err
    assert "regression: fake-model @ test-host · text · decode_tps" in err
    report = (tmp_path / "as" / "compare.md").read_text()
    assert "slower (regression: more than 30 %)" in report and "| paired |" in report
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
    assert acc["change"] == pytest.approx(-50.0) and acc["change_hi"] < 0 and acc["verdict"] == "worse"
    assert not acc["paired"]  # rows without items: the two shares as independent samples
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


def _root(tmp_path, name, decode_tps, n=6):
    """A results root with one suite whose n measured requests all decode at `decode_tps`."""
    rows = [RequestRecord(run_id="r", host="h", model="m", suite="text", task="basic_qa", repeat=i,
                          request_key=f"k{i}", decode_tps=decode_tps, ttft_s=0.1, e2e_s=1.0).to_row()
            for i in range(n)]
    folder = tmp_path / name / "h" / "m" / "text"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(folder / "requests.csv", index=False)
    return tmp_path / name


def _refused(tmp_path, capsys, a, b):
    code = cli_main(["compare", str(a), str(b), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("value,shown", [(math.inf, "inf"), (1e308, "1e+308"), (-1e9, "-1e+09")])
def test_a_value_no_request_can_have_is_one_line_naming_the_file_and_the_value(tmp_path, capsys, value, shown):
    """decode tok/s of inf or 1e308 ended in an IndexError traceback, −1e9 in a −1.9e9 % regression."""
    a, b = _root(tmp_path, "a", 10.0), _root(tmp_path, "b", value)
    err = _refused(tmp_path, capsys, a, b)
    assert f"{b / 'h' / 'm' / 'text' / 'requests.csv'}: decode_tps {shown} " in err
    assert "at most 1e+06" in err
    edge = _root(tmp_path, "edge", plausible.MAX_RATE)  # the ceiling itself is a value a request may have
    assert len(compare.read_root(str(edge))) == 6


@pytest.mark.parametrize("make,says", [
    (os.mkfifo, "a FIFO, not a requests.csv"),
    (lambda path: path.symlink_to("/dev/zero"), "a device, not a requests.csv"),
    (lambda path: path.write_text("a,b,c\n1,2,3\n"), "its header has no request_key or status"),
], ids=["fifo", "dev-zero", "other-header"])
def test_a_requests_csv_that_is_a_fifo_a_device_or_another_table_is_named(tmp_path, capsys, make, says):
    """Each was reported as "no requests.csv under …"; a FIFO would block a read, /dev/zero never end one."""
    a = _root(tmp_path, "a", 10.0)
    csv = tmp_path / "b" / "h" / "m" / "text" / "requests.csv"
    csv.parent.mkdir(parents=True)
    make(csv)
    assert _refused(tmp_path, capsys, a, tmp_path / "b").startswith(f"error: {csv}: {says}")
