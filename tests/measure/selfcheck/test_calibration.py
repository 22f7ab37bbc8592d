"""The client's calibration (benchlib.measure.selfcheck.calibration): measured against the stamping server on this host, cached
per host and client version, recorded in each suite's manifest and quoted beside TTFT/ITL tables and figures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchlib.measure.selfcheck import calibration
from benchlib.paper.runs import load_reference_sets, load_runs
from benchlib.paper.systems import all_systems, task_catalog, task_metrics_long
from benchlib.paper.tables import latency_accuracy_table
from benchlib.suites.runner import run_suite
from benchlib.views import suite_report
from tests.fakes.synthetic_run import write_synthetic_run


def _finite_non_negative(figure: dict) -> None:
    assert figure["n"] > 0
    for key in ("mean", "p99"):
        assert math.isfinite(figure[key]) and figure[key] >= 0, (key, figure)
    assert figure["p99"] >= figure["mean"] or math.isclose(figure["p99"], figure["mean"], abs_tol=1e-3)
    assert math.isfinite(figure["bias"]) and abs(figure["bias"]) <= figure["mean"] + 1e-9


def test_measure_against_the_stamping_server_gives_errors_per_level():
    result = calibration.measure([1, 2], budget_s=600)
    assert set(result["levels"]) == {"1", "2"} and result["skipped_levels"] == []
    for level, figures in result["levels"].items():
        assert figures["ok"] == figures["requests"] == (calibration.FIRST_LEVEL_REQUESTS if level == "1" else 4)
        assert figures["ttft_ms"]["n"] == figures["requests"]  # one TTFT per request, matched by its tag
        # one interval per token after the first, of every request
        assert figures["itl_ms"]["n"] == figures["requests"] * (calibration.REFERENCE["tokens"] - 1)
        _finite_non_negative(figures["ttft_ms"])
        _finite_non_negative(figures["itl_ms"])
    assert result["ttft_ms"]["n"] == 4 + 4
    assert result["ttft_ms"]["p99"] == max(f["ttft_ms"]["p99"] for f in result["levels"].values())
    assert result["client_version"] == calibration.client_version("wire")
    assert calibration.error_note(result).startswith("client error ±")


def test_a_level_past_the_budget_is_left_out_and_listed():
    result = calibration.measure([1, 4], budget_s=0.0)
    assert result["levels"] == {} and result["skipped_levels"] == [1, 4]
    assert result["ttft_ms"]["n"] == 0 and calibration.error_note(result) == ""


def _fake_measure(calls: list):
    def measure(levels, http_client):
        calls.append(list(levels))
        per = {str(level): {"requests": 2, "ok": 2, "ttft_ms": {"mean": 0.1 * level, "p99": 0.5 * level,
                                                                  "bias": 0.05, "n": 2},
                            "itl_ms": {"mean": 0.01, "p99": 0.2, "bias": 0.0, "n": 30}} for level in levels}
        return {"levels": per, "skipped_levels": [], "http_client": http_client, "measured_unix": 1.0}
    return measure


def test_cached_per_host_and_version_and_rerun_when_either_changes(tmp_path):
    calls: list = []
    path = tmp_path / "cal.json"
    first = calibration.for_run([1, 2], host="h1", version="v1", measure_fn=_fake_measure(calls), path=path)
    assert calls == [[1, 2]] and first["cached"] is False
    assert json.loads(path.read_text())["client_version"] == "v1"
    again = calibration.for_run([1, 2], host="h1", version="v1", measure_fn=_fake_measure(calls), path=path)
    assert calls == [[1, 2]] and again["cached"] is True and again["ttft_ms"] == first["ttft_ms"]
    # a level the cache does not hold yet: only it is measured, and merged
    more = calibration.for_run([1, 4], host="h1", version="v1", measure_fn=_fake_measure(calls), path=path)
    assert calls[-1] == [4] and set(more["levels"]) == {"1", "2", "4"}
    assert more["ttft_ms"]["p99"] == 2.0 and more["ttft_ms"]["n"] == 6  # the largest p99, n over the levels
    # another client version, or another host, measures everything again
    calibration.for_run([1, 2], host="h1", version="v2", measure_fn=_fake_measure(calls), path=path)
    assert calls[-1] == [1, 2] and set(json.loads(path.read_text())["levels"]) == {"1", "2"}
    calibration.for_run([1, 2], host="h2", version="v2", measure_fn=_fake_measure(calls), path=path)
    assert calls[-1] == [1, 2] and json.loads(path.read_text())["host"] == "h2"
    assert len(calls) == 4


def test_the_client_version_follows_the_client_code_and_http_client(tmp_path):
    here = Path(calibration.__file__).parents[1]
    for name in calibration.CLIENT_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes((here / name).read_bytes())
    assert calibration.client_version("wire", tmp_path) == calibration.client_version("wire")
    assert calibration.client_version("wire") != calibration.client_version("sdk")
    (tmp_path / "http/wire.py").write_text((here / "http/wire.py").read_text() + "\n# a change to the client\n")
    assert calibration.client_version("wire", tmp_path) != calibration.client_version("wire")


def test_levels_are_one_and_the_runs_levels_capped(params_for):
    params = params_for(sweep={"concurrency": [2, 4, 500]})
    assert calibration.levels_for(params) == [1, 2, 4, params.sweep.rate.max_concurrency, calibration.MAX_LEVEL]
    off = params_for(run={"calibrate_client": False})
    assert calibration.for_params(off) == {"skipped": "run.calibrate_client is false"}


def test_the_manifest_holds_the_calibration_and_the_suite_table_quotes_it(params_for, outputs, tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv("FRONTIER_BENCH_CACHE", str(tmp_path / "cache"))
    params = params_for(tasks=["basic_qa"])
    result = run_suite(params, "text", progress=False)
    manifest = json.loads((result.out_dir / "manifest.json").read_text())
    recorded = manifest["client_calibration"]
    assert recorded["client_version"] == calibration.client_version(params.run.http_client)
    assert set(recorded["levels"]) == {str(level) for level in calibration.levels_for(params)} - \
        {str(level) for level in recorded["skipped_levels"]}
    _finite_non_negative(recorded["ttft_ms"])
    assert (tmp_path / "cache" / "client_calibration").is_dir()
    table = suite_report.summary_table(result.summary, result.out_dir)
    assert table.caption == "TTFT and ITL: " + calibration.error_note(recorded)
    assert "calibrated on this host" in table.caption
    plain = suite_report.summary_table(result.summary)  # no run folder: the plain frame, as before
    assert list(plain.columns) == [c for c in suite_report.SUMMARY_COLUMNS if c in result.summary.columns]


def test_the_papers_latency_table_caption_quotes_each_runs_client_error(tmp_path):
    root = write_synthetic_run(tmp_path / "outputs")
    recorded = {"ttft_ms": {"mean": 0.2, "p99": 1.25, "bias": -0.1, "n": 20},
                "itl_ms": {"mean": 0.05, "p99": 0.4, "bias": 0.0, "n": 300}}
    for manifest_path in root.rglob("manifest.json"):
        manifest = json.loads(manifest_path.read_text())
        manifest_path.write_text(json.dumps({**manifest, "client_calibration": recorded}))
    ref = load_reference_sets()
    runs = load_runs(root)
    systems = all_systems(ref, runs)
    catalog = task_catalog()
    table = latency_accuracy_table(task_metrics_long(ref, runs, catalog), systems, catalog, ref)
    assert "Client error ±1.2 ms TTFT, ±0.40 ms ITL (p99, calibrated on this host)" in table.caption
    mine = runs.meta.iloc[0]
    assert mine["client_ttft_err_p99_ms"] == pytest.approx(1.25) and mine["client_itl_err_p99_ms"] == 0.4
    assert mine["system"] in table.caption
