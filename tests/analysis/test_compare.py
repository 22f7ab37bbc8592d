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
    assert "regression: fake-model · fake · test-host · text · decode_tps" in err  # the deployment's one name
    report = (tmp_path / "as" / "compare.md").read_text()
    assert "| **slower (regression: more than 30 %) (paired)** |" in report  # how it was compared, beside the word
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


# ------------------------------------------------------------------------------------------------ read at a glance

def _deployment_root(tmp_path, name, host, model, decode_tps, passed, failed=0):
    """A results root with a text suite (8 measured requests at `decode_tps`, `failed` more that failed, a warm-up)
    and a quality suite (one graded answer per entry of `passed`) of one deployment."""
    rows = [RequestRecord(run_id="r", host=host, model=model, suite="text", task="basic_qa", repeat=i,
                          request_key=f"t{i}", decode_tps=decode_tps * (1 + 0.01 * (i % 3)), ttft_s=0.1,
                          e2e_s=1.0).to_row() for i in range(8)]
    rows += [RequestRecord(run_id="r", host=host, model=model, suite="text", task="basic_qa", repeat=10 + i,
                           request_key=f"f{i}", status="failed", error_kind="http_500").to_row() for i in range(failed)]
    rows.append(RequestRecord(run_id="r", host=host, model=model, suite="text", task="basic_qa", repeat=0,
                              is_warmup=True, request_key="w0", decode_tps=1.0).to_row())
    graded = [RequestRecord(run_id="r", host=host, model=model, suite="quality", task="arithmetic", variant=f"s{i}",
                            repeat=0, request_key=f"q{i}", decode_tps=decode_tps, ttft_s=0.1, e2e_s=1.0,
                            checker="reasoning_gym", passed=ok, score=float(ok)).to_row()
              for i, ok in enumerate(passed)]
    for suite, frame in (("text", rows), ("quality", graded)):
        folder = tmp_path / name / host / model / suite
        folder.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(frame).to_csv(folder / "requests.csv", index=False)
    return tmp_path / name


@pytest.fixture
def two_names(tmp_path):
    """SmolLM2 measured behind a user's server (A: my-server/SmolLM2) and in the default study (B: local-cpu/
    smollm2+demo), B three times slower with 2 of its 10 text requests failed and 5 of 20 graded answers right
    where A had 15; plus a deployment only A has."""
    a = _deployment_root(tmp_path, "a", "my-server", "SmolLM2", 30.0, [True] * 15 + [False] * 5)
    _deployment_root(tmp_path, "a", "my-server", "other-model", 10.0, [True])
    b = _deployment_root(tmp_path, "b", "local-cpu", "smollm2+demo", 10.0, [True] * 5 + [False] * 15, failed=2)
    return a, b


def test_compare_pairs_one_deployment_under_two_names_when_told(two_names, tmp_path, capsys):
    a, b = two_names
    assert cli_main(["compare", str(a), str(b), "--out", str(tmp_path / "apart")]) == 0
    apart = (tmp_path / "apart" / "compare.md").read_text()
    assert "0 metrics on 0 deployment(s) measured in both" in apart and "--same A_NAME=B_NAME pairs them" in apart
    assert cli_main(["compare", str(a), str(b), "--same", "SmolLM2=local-cpu/smollm2+demo",
                     "--out", str(tmp_path / "paired")]) == 0
    report = (tmp_path / "paired" / "compare.md").read_text()
    assert "7 metrics on 1 deployment(s) measured in both" in report  # the text suite has no accuracy
    assert "| SmolLM2 · my-server (B: smollm2+demo · local-cpu) | text | decode rate |" in report
    printed = capsys.readouterr().out
    assert "SmolLM2 · my-server (B: smollm2+demo · local-cpu) · text · decode rate: 30.3 tok/s (n 8) → 10.1 tok/s" in \
        printed  # the changes that go one way, each on a line of its own
    by_label = compare.parse_same(["SmolLM2=smollm2+demo"], compare.read_sent(str(a)), compare.read_sent(str(b)))
    assert compare.parse_same(["SmolLM2 · my-server=smollm2+demo · local-cpu"], compare.read_sent(str(a)),
                              compare.read_sent(str(b))) == by_label  # the names the terminal and the table print
    for wrong in ("nobody=smollm2+demo", "SmolLM2=nobody", "SmolLM2"):
        assert cli_main(["compare", str(a), str(b), "--same", wrong, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and err.startswith(f"error: --same {wrong}"), err


def test_compare_reads_at_a_glance(two_names, tmp_path):
    """Matched rows first, the rest counted after; every value with its unit; accuracy in % beside its change in
    percentage points; failed requests counted; a one-line headline; better and worse said and coloured."""
    a, b = two_names
    sent_a, sent_b = compare.read_sent(str(a)), compare.read_sent(str(b))
    sent_b = compare.same(sent_b, compare.parse_same(["SmolLM2=smollm2+demo"], sent_a, sent_b))
    table = compare.with_requests(compare.compare(compare.measured(sent_a), compare.measured(sent_b)), sent_a, sent_b)
    text = table[(table["suite"] == "text") & (table["deployment"] == "SmolLM2 · my-server")].iloc[0]
    assert (text["sent_a"], text["failed_a"], text["sent_b"], text["failed_b"]) == (8, 0, 10, 2)  # warm-ups left out
    report = compare.to_markdown(table, "A", "B")
    lines = report.splitlines()
    assert lines[2] == ("**B against A: 7 metrics on 1 deployment(s) measured in both — 0 better, 3 worse, 4 with no "
                        "clear change; 7 rows of 1 deployment(s) in one study only, listed after the table.**")
    rows = [line for line in lines if line.startswith("| SmolLM2 · my-server")]
    assert len(rows) == 7 and lines.index(rows[-1]) < lines.index("## In one study only (not compared)")
    assert "- only in A: 7 rows: other-model · my-server (quality, text)" in lines
    decode = next(r for r in rows if "| text | decode rate |" in r).split(" | ")
    assert decode[3:5] == ["30.3 tok/s (n 8)", "10.1 tok/s (n 8)"]
    assert decode[5].startswith("-66.7 % [") and decode[6] == "slower (paired)"  # the analysis's word, compared how
    assert decode[7:] == ["8 sent, 0 failed", "10 sent, 2 failed |"]
    ttft = next(r for r in rows if "| text | time to first token |" in r).split(" | ")
    assert ttft[3] == "100 ms (n 8)"
    accuracy = next(r for r in rows if "| quality | accuracy |" in r).split(" | ")
    assert accuracy[3:5] == ["75.0 % (n 20)", "25.0 % (n 20)"] and accuracy[5].startswith("-50.0 pp [")
    assert accuracy[6] == "worse (paired)"
    page = compare.to_html(table, "A", "B")
    assert "<p class='headline'>B against A: 7 metrics" in page
    assert '<td class="worse">-66.7 % [' in page and '<td class="worse">slower (paired)</td>' in page
    assert page.index("<details><summary>7 rows in one study only") > page.index("</table>")
    assert compare.tone("better beyond noise") == "better" and compare.tone("within noise") == ""
    assert compare.tone("faster (×1.8)") == "better" and compare.tone("slower") == "worse"  # the words to come too


def test_a_paired_change_shows_the_means_of_the_prompts_both_sent():
    """B sent the ten prompts A sent, each faster, and ten slow ones of its own: all of B's requests average slower
    than A's, but the paired change (on the ten both sent) is faster — and the values beside it are those ten's, so
    the two read the same way."""
    def rows(keys, ttft):
        return pd.DataFrame({"host": "h", "deployment": "m", "suite": "text", "task": "t", "request_key": keys,
                             "status": "ok", "passed": np.nan, "decode_tps": np.nan, "ttft_s": ttft,
                             "e2e_s": np.nan})
    shared = [f"p{i}" for i in range(10)]
    a = rows(shared, [0.20 + 0.001 * i for i in range(10)])
    b = pd.concat([rows(shared, [0.15 + 0.001 * i for i in range(10)]),
                   rows([f"q{i}" for i in range(10)], [0.50] * 10)], ignore_index=True)
    assert b["ttft_s"].mean() > a["ttft_s"].mean()
    ttft = compare.compare(a, b).set_index("metric").loc["ttft_s"]
    assert ttft["paired"] and ttft["verdict"].startswith("faster") and ttft["change_hi"] < 0
    assert (ttft["n_a"], ttft["n_b"]) == (10, 10) and ttft["b"] < ttft["a"]


def test_an_accuracy_the_exact_test_cannot_decide_says_so_beside_an_interval_that_excludes_0():
    """4 of 4 against 1 of 4 on the same items: the score interval excludes 0, McNemar's exact test (p = 0.25) does
    not reject, so the verdict is undecided and says which test held it back."""
    def rows(passed):
        return pd.DataFrame({"host": "h", "deployment": "m", "suite": "quality", "task": "set", "status": "ok",
                             "variant": [f"v{i}" for i in range(4)], "repeat": 0, "request_key": [f"k{i}" for i in
                                                                                                 range(4)],
                             "checker": "graded_exact", "passed": passed, "decode_tps": np.nan, "ttft_s": np.nan,
                             "e2e_s": np.nan})
    acc = compare.compare(rows([True] * 4), rows([True, False, False, False])).set_index("metric").loc["accuracy"]
    assert acc["paired"] and acc["change_hi"] < 0
    assert acc["verdict"].startswith("undecided (the interval excludes 0, McNemar's exact p = 0.25")
    assert compare.tone(acc["verdict"]) == ""


def test_same_refuses_to_pool_two_of_bs_deployments(two_names, tmp_path, capsys):
    """One root as both A and B holds both names: mapping one onto the other would pool two deployments' rows."""
    a, b = two_names
    both = tmp_path / "both"
    for root in (a, b):
        for path in root.rglob("requests.csv"):
            target = both / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    assert cli_main(["compare", str(both), str(both), "--same", "SmolLM2=smollm2+demo",
                     "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "would be pooled" in err and "two results folders" in err


def test_same_takes_the_short_label_the_terminal_printed():
    """After `make run` the terminal names SmolLM2 'smollm2-135m' (its short label beside Gemma): --same takes it."""
    def side(*names):
        return pd.DataFrame({"host": "local-cpu", "deployment": list(names),
                             "folder": [f"local-cpu/{n.split(' · ')[0]}_demo" for n in names]})
    b = side("smollm2-135m-instruct-q4_1 · llama-cpp-python · demo · local-cpu",
             "gemma3-270m-q4_k_m · llama-cpp-python · demo · local-cpu")
    a = pd.DataFrame({"host": "my-machine", "deployment": ["smollm2 · llama-cpp-python · my-machine"],
                      "folder": ["my-machine/smollm2"]})
    mapping = compare.parse_same(["smollm2=smollm2-135m"], a, b)
    assert mapping == {("local-cpu", b["deployment"][0]): ("my-machine", a["deployment"][0])}
