"""A latency percentile sized to a precision (params run.latency; suites.latency_looks): a task keeps sending until
its percentile's distribution-free interval is narrow enough, or its request cap; every look and the stopping
reason land in latency_plan.csv."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import latency_precision, sequential, stats
from benchlib.paper.on_this_host import latency_plan_table
from benchlib.paper.runs import load_runs
from benchlib.records.rows import read_requests
from benchlib.suites.latency_looks import LATENCY_PLAN_CSV
from benchlib.suites.runner import run_suite


def _run(params_for, tmp_path, monkeypatch, **latency):
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(tmp_path))
    params = params_for({"ttft": 0.02, "itl": 0.002, "tokens": 4},
                        run={"repeats": 2, "warmups": 0, "latency": {"plan": "precision", "metric": "ttft_s",
                                                                     "percentile": "p50", **latency}},
                        tasks=["basic_qa"])
    return run_suite(params, "text", progress=False)


def test_a_task_sends_until_its_percentile_is_known_to_the_margin(params_for, tmp_path, monkeypatch):
    result = _run(params_for, tmp_path, monkeypatch, relative=0.5, max_requests=40)
    looks = pd.read_csv(result.out_dir / LATENCY_PLAN_CSV)
    # 2 requests bound no median; the next look sends the 6 its interval needs, and ±50 % is reached there
    assert looks["n"].tolist() == [2, 6] and looks["reason"].tolist()[-1] == sequential.PRECISION
    rows = read_requests(result.out_dir / "requests.csv")
    assert len(rows) == 6 and sorted(rows["repeat"]) == list(range(6))
    last = looks.iloc[-1]
    assert last["low"] <= last["estimate"] <= last["high"] and last["relative_half_width"] <= 0.5
    summary = result.summary.set_index("task").loc["basic_qa"]
    assert summary["ttft_s_count"] == 6 and summary["ttft_s_p50_lo"] == last["low"]


def test_the_cap_ends_a_task_that_never_gets_precise_and_says_so(params_for, tmp_path, monkeypatch):
    result = _run(params_for, tmp_path, monkeypatch, relative=1e-6, max_requests=9)
    looks = pd.read_csv(result.out_dir / LATENCY_PLAN_CSV)
    assert looks["n"].tolist() == [2, 6, 9]
    assert looks["reason"].fillna("").tolist() == ["", "", latency_precision.CAPPED]
    assert len(read_requests(result.out_dir / "requests.csv")) == 9


def test_the_rule_grows_geometrically_from_what_the_interval_needs():
    assert latency_precision.next_size(2, "p90", 1.5, 400) == stats.INTERVAL_N["p90"] == 36
    assert latency_precision.next_size(36, "p90", 1.5, 400) == 54
    assert latency_precision.next_size(300, "p90", 1.5, 400) == 400


def test_the_interval_covers_at_the_data_dependent_stop():
    """Stopping on the interval's width chooses n, not a side: coverage at the stop stays near 95 % (the
    benchmark prints it with more runs: bench/speed_verdicts_sim.py)."""
    draw = lambda rng, n: rng.lognormal(0.0, 0.5, n)  # noqa: E731
    true_p90 = float(np.exp(0.5 * 1.2815515655446004))
    coverage, precise, used = latency_precision.simulate(np.random.default_rng(5), draw, true_p90, "p90", 0.1, 3,
                                                         1.5, 400, 400)
    assert coverage == pytest.approx(0.95, abs=0.035) and precise > 0.3 and 36 <= used <= 400


def test_the_paper_says_why_each_task_stopped(params_for, tmp_path, monkeypatch):
    _run(params_for, tmp_path, monkeypatch, relative=0.5, max_requests=40)
    table = latency_plan_table(load_runs(tmp_path))
    row = table.display.iloc[0]
    assert (row["task"], row["percentile"], row["requests (cap)"], row["looks"], row["why it stopped"]) == \
        ("basic_qa", "ttft_s p50", "6 (40)", 2, sequential.PRECISION)
    assert row["value [95% CI]"].count("[") == 1 and row["± (target)"].endswith("(50%)")
