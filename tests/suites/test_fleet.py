"""A study across a fleet of hosts on Ray (benchlib.suites.fleet): the study file names each deployment's host; a
fleet study refuses what it cannot run in one line; and on a local 3-node Ray cluster, in a network namespace with
only loopback, one deployment per host runs against the fake server, a node killed mid-study fails its deployment
with Ray's reason while the others finish, a rerun with the host back completes it from the store, and the paper's
reader finds every host there."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from benchlib import cli
from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure.telemetry.clock import ClockOffset
from benchlib.records import store
from benchlib.records.rows import STATUS_OK, RequestRecord
from benchlib.suites import fleet, fleet_load, study
from benchlib.suites.load import fleet_levels

LEVEL_N = 40  # tools/fleet_cluster.py's load deployment: one level of 40 requests at 20 req/s (not imported: ray)


def fake_params(model: str) -> dict:
    return {"server": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": model, "software": "fake"}}


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_a_deployment_names_its_host_which_is_also_its_host_name_unless_the_params_give_one(tmp_path):
    plan = study.load_study(write(tmp_path, {"name": "f", "deployments": [
        {"host": "gpu-box-1", "params": fake_params("a")},
        {"host": "gpu-box-2", "params": {**fake_params("b"), "host": {"name": "rtx3090"}}},
        {"params": {**fake_params("c"), "host": {"name": "here"}}}]}))
    assert [d.host for d in plan.deployments] == ["gpu-box-1", "gpu-box-2", ""]
    assert [d.params.host.name for d in plan.deployments] == ["gpu-box-1", "rtx3090", "here"]
    assert plan.deployments[0].label.endswith("· gpu-box-1")


@pytest.mark.parametrize("entry,expected", [
    ({"host": "box 1"}, "deployments.0.host"),
    ({"host": ""}, "deployments.0.host"),
])
def test_a_bad_host_name_is_one_line(tmp_path, entry, expected):
    with pytest.raises(study.StudyError, match=expected) as caught:
        study.load_study(write(tmp_path, {"name": "f", "deployments": [{"params": fake_params("a"), **entry}]}))
    assert "\n" not in str(caught.value)


def test_a_fleet_study_needs_every_host_named_and_one_store(tmp_path, monkeypatch):
    monkeypatch.delenv(store.ENV, raising=False)
    unnamed = study.load_study(write(tmp_path, {"name": "f", "deployments": [
        {"host": "box1", "params": fake_params("a")}, {"params": {**fake_params("b"), "host": {"name": "b"}}}]}))
    with pytest.raises(study.StudyError, match=r"deployments\[1\].*names no host"):
        fleet.check_hosts(unnamed)
    plan = study.load_study(write(tmp_path, {"name": "f", "deployments": [
        {"host": "box1", "params": fake_params("a")}, {"host": "box2", "params": fake_params("b")}]}))
    with pytest.raises(study.StudyError, match="needs a results store"):
        fleet.fleet_store(plan)
    monkeypatch.setenv(store.ENV, f"file://{tmp_path / 'store'}")
    assert fleet.fleet_store(plan) == f"file://{tmp_path / 'store'}"
    split = study.load_study(write(tmp_path, {"name": "f", "deployments": [
        {"host": "box1", "params": fake_params("a"), "overrides": {"run": {"store": f"file://{tmp_path}/elsewhere"}}},
        {"host": "box2", "params": fake_params("b")}]}))
    with pytest.raises(study.StudyError, match="different results stores"):
        fleet.fleet_store(split)


def test_study_ray_without_a_store_stops_with_one_line_before_joining_any_cluster(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(store.ENV, raising=False)
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(tmp_path / "outputs"))
    path = write(tmp_path, {"name": "f", "deployments": [{"host": "box1", "params": fake_params("a")}]})
    assert cli.main(["study", str(path), "--ray", "127.0.0.1:1", "--no-paper"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "needs a results store" in err and "\n" not in err
    assert not (tmp_path / "outputs" / "studies").exists(), "nothing was started"


def test_a_host_running_other_code_refuses_the_deployment_before_measuring(tmp_path):
    plan = study.load_study(write(tmp_path, {"name": "f", "deployments": [{"host": "box1", "params": fake_params("a")}]}))
    calls = []
    out = fleet.on_host(lambda *args: calls.append(args) or ({}, []), plan.deployments[0], False, plan.settle, [],
                        None, "0123456789ab")
    assert calls == [] and "other code or task files" in out["failed"]["*"]
    out = fleet.on_host(lambda *args: calls.append(args) or ({}, []), plan.deployments[0], False, plan.settle, [],
                        None, plan.deployments[0].params.identity())
    assert len(calls) == 1 and out["failed"] == {} and out["baseline_mb"] > 0


def test_a_level_from_several_nodes_is_flagged_when_the_offsets_are_too_uncertain_for_its_gaps():
    assert fleet_load.clock_flag([0.0005, 0.002], rate_rps=100) == ""  # 4 × 2 ms < 10 ms between arrivals
    flag = fleet_load.clock_flag([0.0005, 0.003], rate_rps=100)  # 4 × 3 ms > 10 ms
    assert "3.00 ms × 4 exceeds the mean gap between arrivals (10.00 ms at 100 req/s)" in flag
    offset = ClockOffset(offset_ns=5_000, uncertainty_ns=100, rtt_ns=200, round_trips=3, at_unix=0.0)
    record = fleet_load.on_caller_clock(RequestRecord(start_ns=1_005_000, scheduled_ns=1_004_000), offset)
    assert (record.start_ns, record.scheduled_ns) == (1_000_000, 999_000), "worker clock − offset = caller clock"
    assert fleet_load.on_caller_clock(RequestRecord(), offset).start_ns == 0, "a request never sent stays unsent"


def test_sweep_nodes_above_one_without_a_ray_address_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(tmp_path / "outputs"))
    params = {**fake_params("a"), "sweep": {"nodes": 2}}
    with pytest.raises(Exception, match="sweep.nodes"):
        study.load_study(write(tmp_path, {"name": "f", "deployments": [{"params": {**params, "sweep": {"nodes": 0}}}]}))
    path = write(tmp_path, {"name": "f", "deployments": [{"host": "box1", "params": params}]})
    plan = study.load_study(path)
    problem = fleet_levels.check_client_nodes(plan.deployments[0].params, None)
    assert "sweep.nodes: 2" in problem and "--ray" in problem and "\n" not in problem
    with_address = fleet_levels.check_client_nodes(plan.deployments[0].params, "127.0.0.1:6379")
    if fleet_levels.ray is None:  # the fleet extra is optional: then the line says how to install it
        assert "needs Ray" in with_address and fleet.INSTALL_HINT in with_address
    else:
        assert with_address == ""
    assert cli.main(["study", str(path), "--no-paper"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "sweep.nodes: 2" in err and "\n" not in err
    assert not (tmp_path / "outputs" / "studies").exists(), "nothing was started"
    one = study.load_study(write(tmp_path, {"name": "f", "deployments": [{"host": "box1", "params": fake_params("a")}]}))
    assert fleet_levels.check_client_nodes(one.deployments[0].params, None) == "", "sweep.nodes: 1 changes nothing"


def test_a_levels_workers_are_recorded_once_per_level_and_a_resend_replaces_them(tmp_path):
    path = tmp_path / fleet_levels.WORKERS_CSV

    def sent(uncertainty_ms: float, flag: str) -> fleet_load.FleetLevel:
        return fleet_load.FleetLevel(rows=[], clock_flag=flag, workers=[
            {"worker": k, "host": f"box{k + 1}", "node": f"n{k}", "n_requests": 20, "offset_ms": 0.01,
             "offset_uncertainty_ms": uncertainty_ms, "offset_rtt_ms": 2 * uncertainty_ms, "lag_p50_ms": 0.5,
             "lag_p99_ms": 0.9} for k in range(2)])

    fleet_levels.record_workers(path, "rate", "r20", sent(0.1, ""))
    fleet_levels.record_workers(path, "concurrency", 2, sent(0.1, ""))
    fleet_levels.record_workers(path, "rate", "r20", sent(5.0, "too uncertain"))
    frame = pd.read_csv(path, dtype=str)
    assert list(frame.columns) == fleet_levels.WORKER_COLUMNS
    assert list(frame["level"]) == ["2", "2", "r20", "r20"] and list(frame["worker"]) == ["0", "1", "0", "1"]
    assert len(frame) == 4 and sorted(frame["task"].unique()) == ["concurrency", "rate"]
    rate = frame[frame["task"] == "rate"]
    assert list(rate["offset_uncertainty_ms"].astype(float)) == [5.0, 5.0] and set(rate["clock_flag"]) == {"too uncertain"}


@pytest.mark.ray
def test_a_fleet_survives_a_node_killed_mid_study_and_a_rerun_completes_it(tmp_path):
    """tools/fleet_cluster.py kill, in a network namespace with only lo (Ray binds the outward interface otherwise)."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    command = f"ip link set lo up && exec {sys.executable} -m tools.fleet_cluster kill {tmp_path}"
    done = subprocess.run(["unshare", "-n", "sh", "-c", command], cwd=PROJECT_ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, f"the cluster script failed (unshare -n: root):\n{done.stderr[-3000:]}"
    report = json.loads((tmp_path / "report.json").read_text())
    label = report["labels"]
    assert report["slow_requests_before_kill"] >= 3, "box2's deployment was running when its node went"
    first = report["first"]
    assert sorted(first["done"]) == sorted([label["box1"], label["box3"]]) and first["skipped"] == []
    why = first["failed"][label["box2"]]
    assert why.split(":")[0] in {"NodeDiedError", "WorkerCrashedError", "ActorDiedError", "OwnerDiedError"} \
        or why.startswith("no live node of the cluster carries host:box2"), why
    record = report["record_after_kill"]
    assert record["box2/fake-box2"]["status"] == "failed" and record["box2/fake-box2"]["reason"] == why
    assert record["box1/fake-box1"]["status"] == record["box3/fake-box3"]["status"] == "done"
    assert report["rows_after_kill"]["box2"]["rows"] < 9, "the killed deployment had not finished"
    assert any(line.startswith("[box2]   ✗") for line in report["progress"])

    second = report["second"]
    assert second["done"] == [label["box2"]] and second["failed"] == {}
    assert sorted(second["skipped"]) == sorted([label["box1"], label["box3"]])
    assert report["rows"] == {host: {"rows": 9, "keys": 9} for host in ("box1", "box2", "box3")}, \
        "every request of every host is in the store exactly once"
    assert report["paper_hosts"] == ["box1", "box2", "box3"]

    level = report["level"]  # one level of 40 requests at 20 req/s, from box1's and box3's nodes at once
    assert level["rows"] == level["keys"] == level["server_received"] == 40, "every raw row back, merged exactly"
    assert level["statuses"] == [STATUS_OK]
    workers = level["workers"]
    assert sorted(w["host"] for w in workers) == ["box1", "box3"] and len({w["node"] for w in workers}) == 2
    assert [w["n_requests"] for w in workers] == [20, 20]
    for w in workers:  # one machine, one monotonic clock: the true offset is 0, inside the measured uncertainty
        assert abs(w["offset_ms"]) <= w["offset_uncertainty_ms"], w
        assert math.isfinite(w["lag_p50_ms"]) and w["lag_p99_ms"] >= w["lag_p50_ms"], w
    worst = max(w["offset_uncertainty_ms"] for w in workers)
    assert level["server_minus_client_start_min_ms"] >= -worst, "on the caller's clock no request arrives before it left"
    assert level["clock_flag"] == fleet_load.clock_flag([w["offset_uncertainty_ms"] / 1000 for w in workers], 20.0)

    third = report["third"]  # the embedded real server on box3 beside the fake's load suite on box1 (sweep.nodes: 2)
    assert sorted(third["done"]) == sorted(report["third_labels"].values()) and third["failed"] == {}, third
    assert report["embedded"]["software"] == "llama-cpp-python" and report["embedded"]["rows"] >= 1
    assert report["embedded"]["statuses"] == [STATUS_OK], report["embedded"]
    merged = report["params_level"]  # the rate level through the params path: every raw row back, merged exactly
    assert merged["rows"] == merged["keys"] == merged["level_n_requests"] == LEVEL_N, merged
    assert merged["server_received"] == LEVEL_N, "the server saw each of the level's requests once"
    assert merged["level_lag_p50_ms"] == pytest.approx(merged["raw_lag_p50_ms"], abs=1e-6), \
        "the level's percentile is the raw rows' percentile"
    rate_workers = [w for w in merged["workers"] if w["task"] == "rate"]
    assert len(rate_workers) == 2 and len({w["node"] for w in rate_workers}) == 2, rate_workers
    assert sum(int(w["n_requests"]) for w in rate_workers) == LEVEL_N
    for w in rate_workers:
        assert abs(float(w["offset_ms"])) <= float(w["offset_uncertainty_ms"]), w
        assert float(w["lag_p99_ms"]) >= float(w["lag_p50_ms"]), w
    assert {w["task"] for w in merged["workers"]} == {"rate", "concurrency"}, "the concurrency level went out too"
