"""One load level sent from several client nodes of a Ray cluster: the level's requests dealt to worker actors as
benchlib.measure.traffic.workers deals them to worker processes (WORKER SPLIT, split_jobs), one actor per job, each pinned
to a node by its host resource (`host:<name>`, benchlib.suites.fleet) or by node id (the load suite's sweep.nodes,
benchlib.suites.load.fleet_levels, from inside a deployment that holds its host's resource whole).

START ALIGNMENT. Each actor's monotonic clock is offset from the caller's: the offset and its uncertainty are
measured as the telemetry code measures a remote agent's (benchlib.measure.telemetry.clock.measure_offset: the
round trip with the smallest RTT out of OFFSET_ROUND_TRIPS calls, uncertainty = half of it), here through Ray calls
to the actor. The caller picks one start instant t0 on its clock, START_MARGIN_S ahead; each actor gets t0 + its
offset, on its own clock, and sends request i at that + offset_i (send_job: the one-box workers' timing, with its
scheduled_ns, queue_wait_s, schedule_lag_s and client_stall_ms per request).

EXACT MERGE. Every request's raw row comes back (no histogram is merged), its two instants (start_ns, scheduled_ns)
moved onto the caller's clock; the level's percentiles are computed from the merged rows. Each worker's record
holds its node, offset, uncertainty, round trip, lag p50 / p99 (from its rows) and client health. The level is
flagged when CLOCK_FLAG_FACTOR times the largest uncertainty exceeds the level's mean gap between arrivals: two
workers' start instants may then sit in the wrong order by more than a gap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

try:  # the fleet extra is optional (benchlib.suites.fleet says how to install it)
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
except ImportError:
    ray = None
    NodeAffinitySchedulingStrategy = None

from benchlib.measure.client.backends import make_backend
from benchlib.measure.pacing.event_loop import LoopLagSampler, pacer_scheduling, pacers_started, quiet_gc
from benchlib.measure.selfcheck.client_health import client_cpu_s, health_figures
from benchlib.measure.telemetry.clock import CLOCK_FLAG_FACTOR, ClockOffset, measure_offset
from benchlib.measure.traffic.workers import WorkerJob, send_job
from benchlib.records.rows import RequestRecord
from benchlib.suites.fleet import host_resource

OFFSET_ROUND_TRIPS = 30
START_MARGIN_S = 1.0  # t0 lies this far ahead: the send call reaches every actor, which builds its client, first


class LoadWorker:
    """One job of a level on one node (a Ray actor)."""

    def __init__(self, job: WorkerJob):
        self.job = job

    def now_ns(self) -> int:
        return time.perf_counter_ns()

    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()

    async def send(self, t0_ns: int) -> dict[str, Any]:
        """Send the job from t0 (this node's clock) on the actor's event loop; its raw rows and client health."""
        with quiet_gc():
            return await self._send(t0_ns)

    async def _send(self, t0_ns: int) -> dict[str, Any]:
        sampler = await LoopLagSampler().astart()
        backend = make_backend(self.job.server, self.job.run, self.job.concurrency)
        await backend.ready_to_pace()  # well inside START_MARGIN_S
        rows: list[RequestRecord] = []
        cpu0, wall0, mark = client_cpu_s(), time.perf_counter(), pacers_started()
        try:
            await send_job(self.job, backend, t0_ns, sampler, rows.append)
        finally:
            await backend.aclose()
        figures = health_figures(client_cpu_s() - cpu0, time.perf_counter() - wall0, len(rows),
                                 await sampler.astop(), pacer_scheduling(mark))
        return {"rows": rows, "health": {**figures, "n_requests": len(rows)}}


_actor = ray.remote(LoadWorker) if ray is not None else None


@dataclass
class FleetLevel:
    """A level sent from several nodes: every raw row (caller's clock), each worker's figures, the level's flag."""

    rows: list[RequestRecord]
    workers: list[dict[str, Any]]
    clock_flag: str = ""
    t0_ns: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def on_caller_clock(record: RequestRecord, offset: ClockOffset) -> RequestRecord:
    """The record's instants moved from the worker's clock onto the caller's."""
    for name in ("start_ns", "scheduled_ns"):
        value = getattr(record, name)
        if value:
            setattr(record, name, offset.to_local(value))
    return record


def lag_figures(rows: list[RequestRecord]) -> dict[str, float]:
    lags = np.array([r.schedule_lag_s for r in rows if r.schedule_lag_s is not None], dtype=float) * 1000
    if not len(lags):
        return {"lag_p50_ms": np.nan, "lag_p99_ms": np.nan}
    return {"lag_p50_ms": float(np.percentile(lags, 50)), "lag_p99_ms": float(np.percentile(lags, 99))}


def clock_flag(uncertainties_s: list[float], rate_rps: float) -> str:
    """Why the level's start alignment cannot be trusted for its timing ('' when it can)."""
    if not uncertainties_s or rate_rps <= 0:
        return ""
    worst, gap = max(uncertainties_s), 1.0 / rate_rps
    if CLOCK_FLAG_FACTOR * worst > gap:
        return (f"clock offset uncertainty {worst * 1000:.2f} ms × {CLOCK_FLAG_FACTOR} exceeds the mean gap between "
                f"arrivals ({gap * 1000:.2f} ms at {rate_rps:g} req/s)")
    return ""


def placement(host: str, node_id: str = "") -> dict[str, Any]:
    """An actor's options: pinned to the node by id, or to a node carrying the host's resource (a sliver of it)."""
    if node_id:
        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False), "num_cpus": 0}
    return {"resources": {host_resource(host): 0.001}, "num_cpus": 0}


def send_from_nodes(jobs: list[WorkerJob], hosts: list[str], rate_rps: float,
                    node_ids: list[str] | None = None) -> FleetLevel:
    """Job k on the node carrying host hosts[k % len(hosts)] (or on node node_ids[k % …] when given: a host whose
    resource a deployment holds whole takes no actor by resource); start aligned, rows merged (module docstring)."""
    pins = node_ids or [""] * len(hosts)
    actors = [_actor.options(**placement(hosts[k % len(hosts)], pins[k % len(pins)])).remote(job)
              for k, job in enumerate(jobs)]
    try:
        nodes = ray.get([a.node.remote() for a in actors])
        offsets = [measure_offset(lambda a=a: ray.get(a.now_ns.remote()), OFFSET_ROUND_TRIPS) for a in actors]
        t0_ns = time.perf_counter_ns() + int(START_MARGIN_S * 1e9)
        results = ray.get([a.send.remote(t0_ns + off.offset_ns) for a, off in zip(actors, offsets)])
    finally:
        for actor in actors:
            ray.kill(actor)
    rows, workers = [], []
    for k, (job, node, off, out) in enumerate(zip(jobs, nodes, offsets, results)):
        mine = [on_caller_clock(r, off) for r in out["rows"]]
        rows += mine
        workers.append({"worker": k, "host": hosts[k % len(hosts)], "node": node, "n_requests": len(mine),
                        "offset_ms": off.offset_ns / 1e6, "offset_uncertainty_ms": off.uncertainty_ns / 1e6,
                        "offset_rtt_ms": off.rtt_ns / 1e6, **lag_figures(mine), **out["health"]})
    flag = clock_flag([w["offset_uncertainty_ms"] / 1000 for w in workers], rate_rps)
    return FleetLevel(rows=rows, workers=workers, clock_flag=flag, t0_ns=t0_ns)
