"""A load level sent from several client nodes (sweep.nodes > 1, a fleet study on Ray): the rate sweep's open-loop
levels and the concurrency sweep's levels, when sweep.nodes asks for more than one node, go through
benchlib.suites.fleet_load.send_from_nodes instead of this process's own client.

NODES. The first client node is the one the deployment runs on (its host's node); the others are the cluster's
alive nodes that carry no `host:` resource (client-only nodes) first, then other hosts' nodes, in node-id order.
Actors are pinned by node id: a host's resource is held whole by the deployment running there.

WHERE. The level's requests are dealt by WORKER SPLIT (benchlib.measure.traffic.workers.split_jobs), one worker actor
per node. An open-loop level keeps its schedule (each worker sends its requests at t0 + offset, t0 aligned through the
measured clock offsets); a concurrency level sends every request at t0, each worker holding its share of the
level's streams in flight. Every raw row comes back, its instants on this process's clock, and is scored and
appended here as the level's own rows; the level's figures are then computed from them as for any level.

RECORDED. Each worker's node, host, requests, clock offset, its uncertainty and round trip, lag p50 / p99 and
client health go to WORKERS_CSV (one row per level and worker). The level's client health is the workers' merged
(workers.merged_health); its clock_flag, when the offsets' uncertainty is too large for the level's mean gap
(fleet_load.clock_flag), makes the level client_bound with that reason.

RAY. In a fleet study the deployment's Ray task hands the cluster's address to its suites in RAY_ENV (a notebook
kernel is not a Ray worker and joins the cluster through it). sweep.nodes > 1 anywhere else is refused in one line
before anything is sent (check_client_nodes)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

try:  # the fleet extra is optional (benchlib.suites.fleet says how to install it)
    import ray
except ImportError:
    ray = None

from benchlib.config.params import BenchParams
from benchlib.measure.traffic.workers import merged_health, split_jobs
from benchlib.records.rows import write_csv_atomic
from benchlib.suites import fleet_load
from benchlib.suites.fleet import INSTALL_HINT, RAY_ENV, RESOURCE_PREFIX
from benchlib.suites.runner import Planned, Session

WORKERS_CSV = "load_workers.csv"
WORKER_COLUMNS = [  # each line's comment is its columns' meaning (docs/columns.md is written from them)
    "task", "level",  # the sweep (concurrency, rate) and its level
    "worker", "host", "node",  # the worker's index, the host resource it stood for, the Ray node it ran on
    "n_requests",  # requests it sent
    # its clock's offset from the caller's, ms, with its uncertainty (half the fastest of 30 Ray round trips) and
    # that round trip
    "offset_ms", "offset_uncertainty_ms", "offset_rtt_ms",
    "lag_p50_ms", "lag_p99_ms",  # how late its requests left after their scheduled instants, ms
    "client_cpu_share", "client_cpu_per_request_ms", "loop_lag_p99_ms",  # its own client health
    "clock_flag"]  # the level's: 4 × the largest uncertainty exceeds its mean gap between arrivals


def check_client_nodes(params: BenchParams, ray_address: str | None) -> str:
    """The one-line reason sweep.nodes cannot be honoured ('' when it can or is 1)."""
    nodes = int(params.sweep.nodes)
    if nodes <= 1:
        return ""
    if not ray_address:
        return (f"sweep.nodes: {nodes} sends each load level from {nodes} Ray nodes, which needs a fleet study "
                f"(frontier-bench study FILE --ray ADDRESS); set sweep.nodes: 1 to send from this process")
    if ray is None:
        return f"sweep.nodes: {nodes} needs Ray, which is not installed: {INSTALL_HINT}"
    return ""


def client_nodes(session: Session) -> int:
    """How many nodes this session's load levels are sent from; raises RuntimeError (one line) when
    sweep.nodes > 1 has no Ray cluster to use."""
    nodes = int(session.params.sweep.nodes)
    if nodes <= 1:
        return 1
    address = os.environ.get(RAY_ENV, "") or ("auto" if ray is not None and ray.is_initialized() else "")
    problem = check_client_nodes(session.params, address)
    if problem:
        raise RuntimeError(problem)
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    return nodes


def pick_nodes(count: int) -> list[tuple[str, str]]:
    """(node id, host name or short node id) of `count` client nodes, this process's node first (NODES)."""
    here = ray.get_runtime_context().get_node_id()
    alive = [n for n in ray.nodes() if n.get("Alive")]

    def host(node: dict[str, Any]) -> str:
        names = [r[len(RESOURCE_PREFIX):] for r in node.get("Resources", {}) if r.startswith(RESOURCE_PREFIX)]
        return names[0] if names else node["NodeID"][:8]

    def rank(node: dict[str, Any]) -> tuple[int, int, str]:
        hosted = any(r.startswith(RESOURCE_PREFIX) for r in node.get("Resources", {}))
        return (node["NodeID"] != here, hosted, node["NodeID"])

    ordered = sorted(alive, key=rank)
    if len(ordered) < count:
        raise RuntimeError(f"sweep.nodes: {count} but the Ray cluster has {len(ordered)} alive node(s)")
    return [(n["NodeID"], host(n)) for n in ordered[:count]]


def send_level_from_nodes(session: Session, task: str, level: Any, items: list[Planned], due: list[float] | None,
                          cap: int, rate: float, nodes: int, bar: Any) -> dict[str, Any]:
    """Send one level's pending requests from `nodes` nodes (module docstring); its merged client health. Call
    it inside the level's window."""
    params = session.params
    picked = pick_nodes(nodes)
    jobs = split_jobs(params.server, params.run, [(i.record, i.request) for i in items],
                      due if due is not None else [0.0] * len(items), cap, nodes)
    sent = fleet_load.send_from_nodes(jobs, [h for _, h in picked], rate if due is not None else 0.0,
                                      node_ids=[n for n, _ in picked])
    by_key = {item.record.request_key: item for item in items}
    for record in sent.rows:
        session.after_request(Planned(record, by_key[record.request_key].request), cap)
    session.log.append_many(sent.rows)
    bar.update(len(sent.rows))
    record_workers(session.out_dir / WORKERS_CSV, task, level, sent)
    health = merged_health(sent.workers)
    if sent.clock_flag:
        why = "; ".join(filter(None, [health.get("client_bound_reason", ""), sent.clock_flag]))
        health.update(client_bound=True, client_bound_reason=why)
    return health


def record_workers(path: Path, task: str, level: Any, sent: fleet_load.FleetLevel) -> None:
    """The level's rows of WORKERS_CSV, replacing any an earlier (resumed) send of it wrote."""
    mine = pd.DataFrame([{**{c: w.get(c) for c in WORKER_COLUMNS}, "task": task, "level": str(level),
                          "clock_flag": sent.clock_flag} for w in sent.workers], columns=WORKER_COLUMNS)
    # as written (text): a level or worker read back as a number would come back as "2.0"
    before = pd.read_csv(path, dtype=str, keep_default_na=False) if path.is_file() and path.stat().st_size else \
        pd.DataFrame(columns=WORKER_COLUMNS)
    if len(before):
        before = before[~((before["task"].astype(str) == task) & (before["level"].astype(str) == str(level)))]
    write_csv_atomic(path, pd.concat([before, mine], ignore_index=True) if len(before) else mine)
