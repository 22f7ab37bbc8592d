"""A fleet on one machine: a local 3-node Ray cluster (ray.cluster_utils.Cluster), each node a fleet "host" carrying
its resource host:box1 … host:box3, a fake server (tests/fakes/servers.py) every host measures, and a file://
results store they share. Run it inside a network namespace that has only loopback (Ray otherwise binds this
machine's outward address even when told 127.0.0.1, and the traffic must stay on lo):

    unshare -n sh -c 'ip link set lo up && exec .venv/bin/python -m tools.fleet_cluster demo OUT'    (make fleet-demo)

  demo OUT      `frontier-bench study <fleet study> --ray <cluster>` end to end (suite notebooks on every host, the
                paper from the store), then the same study host after host (no --ray), and both wall times.
  kill OUT      tests/suites/test_fleet.py's scenario: the study through benchlib.suites.fleet with the runner in
                process (no notebooks); box2's node removed while its deployment runs; the study marks it failed
                and finishes the rest; a node carrying host:box2 joins again and a rerun completes it. Then one
                load level sent from box1 and box3 at once (benchlib.suites.fleet_load). Writes OUT/report.json
                for the test to check.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray
import yaml
from ray.cluster_utils import Cluster

from benchlib import cli
from benchlib.analysis.serving import RATE_TASK
from benchlib.config.params import BenchParams
from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure.client.backends import ChatRequest
from benchlib.measure.traffic.workers import split_jobs
from benchlib.paper.runs import load_runs
from benchlib.records import store
from benchlib.records.rows import RequestRecord, read_requests
from benchlib.records.schema import read_csv
from benchlib.suites import fleet, fleet_load, study
from benchlib.suites.load.fleet_levels import WORKERS_CSV
from benchlib.suites.load.rate import RATE_INSTRUCTION
from benchlib.suites.load.suite import run_load
from benchlib.suites.runner import run_suite
from tests.fakes.servers import FakeServer

HOSTS = ("box1", "box2", "box3")
SLOW = "box2"  # the host whose deployment is still running when its node goes
# Node death seen in seconds instead of the default ~30 s (health checks every 3 s, 10 misses), with room left for
# a busy machine's late answers: a head node missing its checks under load is marked dead at startup.
SYSTEM_CONFIG = {"health_check_period_ms": 1000, "health_check_failure_threshold": 5, "health_check_timeout_ms": 2000}
# No CPU slots (a deployment's task asks for its host's resource only): no worker is started ahead of one, and no
# log monitor (the driver does not read the workers' output). Each of these is a Python process importing ray
# (~3.5 s of CPU) while the raylet gives its dashboard agent 15 s to start: on a busy machine the node dies.
NODE = {"num_cpus": 0, "object_store_memory": 80 * 1024 * 1024, "include_log_monitor": False}
STARTS = 3  # tries at starting the cluster (a later one finds the imports in the page cache)


def study_file(folder: Path, url: str, repeats: int, slow_ttft: float) -> Path:
    """One deployment per host against the fake server; box2's answers are slower so it is mid-run when killed."""
    def deployment(host: str) -> dict[str, Any]:
        fake = {"ttft": slow_ttft if host == SLOW else 0.05, "itl": 0.01, "tokens": 5}
        return {"host": host, "params": {
            "server": {"kind": "openai", "base_url": f"{url}/v1", "model": f"fake-{host}", "software": "fake",
                       "extra_body": {"fake": fake}},
            "run": {"warmups": 1, "repeats": repeats, "max_tokens": 32, "store_every_s": 0.5},
            "tasks": ["basic_qa", "summarization"],
            "telemetry": {"idle_baseline_s": 0, "loaded_baseline_s": 0, "power_hz": 5}}}
    path = folder / "fleet-study.yaml"
    path.write_text(yaml.safe_dump({"name": "fleet", "notebooks": ["text"], "settle": {"timeout_s": 5},
                                    "deployments": [deployment(h) for h in HOSTS]}, sort_keys=False))
    return path


def in_process(params: BenchParams, notebooks: list[str], fresh: bool) -> tuple[dict[str, str], list[Path]]:
    """The suites run in the Ray worker itself (run_suite), not as notebooks: the test's runner."""
    failed, dirs = {}, []
    for suite in notebooks:
        try:
            result = run_load(params, fresh=fresh, progress=False) if suite == "load" else \
                run_suite(params, suite, fresh=fresh, progress=False)
            dirs.append(result.out_dir)
        except Exception as exc:  # noqa: BLE001 — a suite's failure is a row of the study, as the notebook runner's
            failed[suite] = f"{type(exc).__name__}: {exc}"
    return failed, dirs


def add_node(cluster: Cluster, host: str) -> Any:
    for attempt in range(1, STARTS + 1):
        try:
            return cluster.add_node(**NODE, resources={fleet.host_resource(host): 1})
        except Exception as exc:  # noqa: BLE001 — Ray says "timed out during startup" for every cause
            print(f"node {host} did not start (try {attempt} of {STARTS}): {exc}", file=sys.stderr)
            if attempt == STARTS:
                raise
    raise AssertionError("unreachable")


def start_cluster() -> tuple[Cluster, dict[str, Any]]:
    for attempt in range(1, STARTS + 1):
        cluster = Cluster()
        try:
            cluster.add_node(**NODE, resources={fleet.host_resource(HOSTS[0]): 1}, include_dashboard=False,
                             no_monitor=True, _system_config=SYSTEM_CONFIG)
            nodes = {HOSTS[0]: cluster.head_node}
            for host in HOSTS[1:]:
                nodes[host] = add_node(cluster, host)
            cluster.wait_for_nodes()
            return cluster, nodes
        except Exception as exc:  # noqa: BLE001 — Ray says "timed out during startup" for every cause
            cluster.shutdown()
            print(f"the local Ray cluster did not start (try {attempt} of {STARTS}): {exc}", file=sys.stderr)
            if attempt == STARTS:
                raise
    raise AssertionError("unreachable")


def environment(out: Path) -> str:
    """Outputs, staging copies and the store under OUT, and this checkout on the path; the Ray nodes started after
    this inherit it."""
    url = f"file://{out / 'store'}"
    path = [str(Path.cwd()), os.environ.get("PYTHONPATH")]
    os.environ.update({"FRONTIER_BENCH_OUTPUTS": str(out / "outputs"), "FRONTIER_BENCH_CACHE": str(out / "cache"),
                       store.ENV: url, "PYTHONPATH": os.pathsep.join(filter(None, path))})
    return url


def store_rows(url: str, plan: study.Study) -> dict[str, dict[str, Any]]:
    """Per host: the requests the store holds for its deployment (count, distinct keys)."""
    root = store.materialize(url)
    rows = {}
    for dep in plan.deployments:
        path = dep.params.suite_dir("text", root) / "requests.csv"
        frame = read_requests(path) if path.is_file() else None
        rows[dep.host] = {"rows": 0 if frame is None else len(frame),
                          "keys": 0 if frame is None else int(frame["request_key"].nunique())}
    return rows


def two_node_level(server: FakeServer, params: BenchParams, hosts: tuple[str, ...] = ("box1", "box3"),
                   n: int = 40, rate: float = 20.0) -> dict[str, Any]:
    """One open-loop level of n requests at `rate` req/s, split over worker actors on two nodes, checked against
    the server's own log of when each request arrived (one machine: the server stamps on the caller's clock)."""
    items = [(RequestRecord(request_key=f"level-{i}", repeat=i, model=params.server.model, concurrency=n),
              ChatRequest(messages=[{"role": "user", "content": f"level request {i}"}], max_tokens=8))
             for i in range(n)]
    jobs = split_jobs(params.server, params.run, items, [i / rate for i in range(n)], n, len(hosts))
    level = fleet_load.send_from_nodes(jobs, list(hosts), rate)
    arrived = {}  # "level request i" -> when the server read it (its log keeps the messages' JSON, cut at 200)
    for entry in list(server.log):
        found = re.search(r"level request \d+", entry["prompt"])
        if found:
            arrived[found.group(0)] = entry["received_ns"]
    starts = {r.request_key: r.start_ns for r in level.rows}
    lead_ms = [(arrived[f"level request {key.split('-')[1]}"] - start) / 1e6 for key, start in starts.items()
               if f"level request {key.split('-')[1]}" in arrived]
    lags = [r.schedule_lag_s * 1000 for r in level.rows if r.schedule_lag_s is not None]
    return {"rows": len(level.rows), "keys": len({r.request_key for r in level.rows}), "server_received": len(arrived),
            "statuses": sorted({r.status for r in level.rows}), "workers": level.workers, "clock_flag": level.clock_flag,
            "server_minus_client_start_min_ms": min(lead_ms) if lead_ms else None,
            "lag_p50_ms": float(np.percentile(lags, 50)), "lag_p99_ms": float(np.percentile(lags, 99))}


def second_study(folder: Path, url: str) -> Path:
    """The embedded real server (params/embedded.yaml, small) on box3 beside the fake's load suite on box1, whose
    levels go out from two nodes (sweep.nodes: 2): the params path of a fleet study's load."""
    embedded = yaml.safe_load((PROJECT_ROOT / "params" / "embedded.yaml").read_text(encoding="utf-8"))
    embedded["run"].update(warmups=0, repeats=1, max_tokens=8)
    embedded.update(tasks=["basic_qa"], telemetry={"idle_baseline_s": 0, "loaded_baseline_s": 0})
    load = {"server": {"kind": "openai", "base_url": f"{url}/v1", "model": "fake-load", "software": "fake",
                       "extra_body": {"fake": {"ttft": 0.02, "itl": 0.005, "tokens": 4}}},
            "run": {"warmups": 1, "max_tokens": 8, "store_every_s": 0.5},
            "telemetry": {"idle_baseline_s": 0, "loaded_baseline_s": 0, "power_hz": 5},
            "sweep": {"nodes": 2, "concurrency": [2], "requests_per_level": 4, "context_lengths": [64],
                      "max_tokens": 8, "rate": {"rates": [LEVEL_RPS], "duration_s": LEVEL_N / LEVEL_RPS,
                                                "max_concurrency": 8, "output_tokens": {"dist": "fixed", "mean": 4}}}}
    path = folder / "fleet-study-2.yaml"
    path.write_text(yaml.safe_dump({"name": "fleet2", "settle": {"timeout_s": 5}, "deployments": [
        {"host": "box3", "notebooks": ["text"], "params": embedded},
        {"host": "box1", "notebooks": ["load"], "params": load}]}, sort_keys=False), encoding="utf-8")
    return path


LEVEL_RPS, LEVEL_N = 20.0, 40  # the load deployment's one open-loop level


def params_level(url: str, plan: study.Study, server: FakeServer) -> dict[str, Any]:
    """The load deployment's level from two nodes, read back from the store: its raw rows against the merged
    level's row of sweep_rate.csv, and each worker's row of WORKERS_CSV."""
    dep = next(d for d in plan.deployments if "load" in d.notebooks)
    folder = dep.params.suite_dir("load", store.materialize(url))
    rows = read_requests(folder / "requests.csv")
    level = rows[rows["task"] == RATE_TASK]
    frame = read_csv(folder / "sweep_rate.csv")
    merged = frame[frame["level"].astype(str) == str(level["variant"].iloc[0])].iloc[0] if len(level) else None
    lags = level["schedule_lag_s"].astype(float) * 1000
    workers = read_csv(folder / WORKERS_CSV)
    return {"rows": len(level), "keys": int(level["request_key"].nunique()),
            "server_received": sum(RATE_INSTRUCTION in e["prompt"] for e in list(server.log)),  # the level's
            "level_n_requests": None if merged is None else int(merged["n_requests"]),
            "level_lag_p50_ms": None if merged is None else float(merged["schedule_lag_p50_ms"]),
            "raw_lag_p50_ms": float(np.percentile(lags, 50)) if len(lags) else None,
            "raw_lag_p99_ms": float(np.percentile(lags, 99)) if len(lags) else None,
            "client_bound_reason": "" if merged is None or not isinstance(merged.get("client_bound_reason"), str)
            else merged["client_bound_reason"],
            "workers": workers.to_dict(orient="records")}


def kill(out: Path) -> dict[str, Any]:
    url = environment(out)
    server = FakeServer().start_thread()
    began = time.monotonic()
    cluster, nodes = start_cluster()
    report: dict[str, Any] = {"cluster_start_s": round(time.monotonic() - began, 1)}
    try:
        plan = study.load_study(study_file(out, server.url, repeats=4, slow_ttft=0.6))
        lines: list[str] = []
        outcome: dict[str, Any] = {}
        started = time.monotonic()
        runner = threading.Thread(target=lambda: outcome.update(
            first=fleet.run_fleet(plan, cluster.address, in_process, progress=lines.append)))
        runner.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and sum(
                e["request"].get("model") == f"fake-{SLOW}" for e in list(server.log)) < 3:
            time.sleep(0.05)
        report["slow_requests_before_kill"] = sum(e["request"].get("model") == f"fake-{SLOW}" for e in server.log)
        report["killed_at_s"] = round(time.monotonic() - started, 1)
        cluster.remove_node(nodes[SLOW], allow_graceful=False)
        runner.join(180)
        report["first_s"] = round(time.monotonic() - started, 1)
        first = outcome["first"]
        report["first"] = {"done": first.done, "failed": first.failed, "skipped": first.skipped}
        report["rows_after_kill"] = store_rows(url, plan)
        report["record_after_kill"] = json.loads((plan.folder / study.STUDY_JSON).read_text())["deployments"]

        add_node(cluster, SLOW)  # the host is back
        cluster.wait_for_nodes()
        started = time.monotonic()
        second = fleet.run_fleet(study.load_study(plan.source), cluster.address, in_process, progress=lines.append)
        report["second_s"] = round(time.monotonic() - started, 1)
        report["second"] = {"done": second.done, "failed": second.failed, "skipped": second.skipped}
        report["rows"] = store_rows(url, plan)
        runs = load_runs([url])  # what the paper reads: every host, from the store
        report["paper_hosts"] = sorted(set(runs.meta["host"])) if len(runs.meta) else []
        report["progress"] = lines
        report["labels"] = {dep.host: dep.label for dep in plan.deployments}
        report["level"] = two_node_level(server, plan.deployments[0].params)

        plan2 = study.load_study(second_study(out, server.url))
        started = time.monotonic()
        third = fleet.run_fleet(plan2, cluster.address, in_process, progress=lines.append)
        report["third_s"] = round(time.monotonic() - started, 1)
        report["third"] = {"done": third.done, "failed": third.failed, "skipped": third.skipped}
        report["third_labels"] = {dep.host: dep.label for dep in plan2.deployments}
        embedded = next(d for d in plan2.deployments if d.host == "box3")
        frame = read_requests(embedded.params.suite_dir("text", store.materialize(url)) / "requests.csv")
        report["embedded"] = {"rows": len(frame), "statuses": sorted(set(frame["status"])) if len(frame) else [],
                              "software": embedded.params.server.software}
        report["params_level"] = params_level(url, plan2, server)
    finally:
        ray.shutdown()
        cluster.shutdown()
        server.stop()
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    return report


def demo(out: Path) -> int:
    url = environment(out)
    server = FakeServer().start_thread()
    cluster, _ = start_cluster()
    try:
        path = study_file(out, server.url, repeats=4, slow_ttft=0.3)
        started = time.monotonic()
        code = cli.main(["study", str(path), "--ray", cluster.address, "--no-paper"])
        fleet_s = time.monotonic() - started
        paper = cli.main(["paper", url])  # one paper, by the caller, from the store every host wrote to
        code = code or paper
        ray.shutdown()
        os.environ[store.ENV] = f"file://{out / 'store-sequential'}"
        os.environ["FRONTIER_BENCH_OUTPUTS"] = str(out / "outputs-sequential")
        started = time.monotonic()
        sequential = cli.main(["study", str(path), "--no-paper", "--quiet"])
        host_after_host_s = time.monotonic() - started
    finally:
        ray.shutdown()
        cluster.shutdown()
        server.stop()
    print(f"\nfleet study on {len(HOSTS)} Ray nodes: {fleet_s:.1f} s · the same study host after host: "
          f"{host_after_host_s:.1f} s (both without the paper) · store {url}")
    return code or sequential


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["demo", "kill"])
    parser.add_argument("out", help="a folder for outputs, staging copies and the store")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.mode == "kill":
        kill(out)
        return 0
    return demo(out)


if __name__ == "__main__":
    sys.exit(main())
