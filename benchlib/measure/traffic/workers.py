"""An open-loop level sent from several processes: one client process holds a schedule only up to the rate its
one core can build, send and read requests at (bench/results/, the worker-scaling files), so a level above it is
split across worker processes, each with its own event loop, its own backend (its own HTTP connections, the
same wire path and kernel receive stamps as the single-process sender) and its own loop-lag sampler.

WORKER SPLIT. Request i of a level (its `repeat`, the index in the level's schedule) goes to worker i mod N, so
a resumed level gives each request to the same worker again and the analysis can tell the workers' rows apart.
Every worker sends its requests at the level's common schedule: the parent starts the workers (spawn: the parent
has a background event-loop thread, and fork with threads is unsafe), waits until each has built its client,
then hands all of them one start instant t0 on time.perf_counter_ns — CLOCK_MONOTONIC, one clock for every
process on Linux — and request i is due at t0 + offset_i in whichever worker sends it. The level's cap on
requests in flight is split as evenly as it goes (worker_caps): N workers each hold their share of it.

Each worker times a request as Session.execute does: scheduled_ns (the due instant), queue_wait_s (waiting for
one of its slots), schedule_lag_s (wire start − due − slot wait) and client_stall_ms (its own loop's lag while
the request was in flight). Finished records go back to the parent as they finish (in batches every FLUSH_S),
which scores and appends them (requests.csv stays the parent's alone); at the end each worker returns its client
health (CPU, loop lag). Each worker's schedule lag p50 / p99 comes from the rows (benchlib.analysis.serving,
worker_lag_ms), so a resumed level's figures cover both sessions."""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing
import os
import queue as queue_module
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from benchlib.config.params import RunSettings, ServerParams
from benchlib.measure.client.backends import Backend, ChatRequest, make_backend
from benchlib.measure.pacing.event_loop import (
    SEND_LEAD_S,
    LoopLagSampler,
    paced,
    pacer_scheduling,
    pacers_started,
    quiet_gc,
    slot,
)
from benchlib.measure.selfcheck.client_health import HEALTH_COLUMNS, client_cpu_s, health_figures
from benchlib.records.rows import RequestRecord

SPAWN = multiprocessing.get_context("spawn")


# "auto" starts one worker per this many offered req/s (up to the cores): well inside the rate one process holds
# its schedule at on a shared 2-core box (bench/results/, the worker-scaling files)
AUTO_RPS_PER_WORKER = 250.0


# t0 lies this far after every worker said it was ready: each is asleep on it by then, and hands its first requests
# over a whole event_loop.SEND_LEAD_S ahead of their instants
START_MARGIN_S = 0.05 + SEND_LEAD_S


READY_TIMEOUT_S = 120.0  # a worker that has not built its client by then (imports on a loaded box) is broken


POLL_S = 0.05


FLUSH_S = 0.02  # a worker hands its finished records over in batches this often: one message, not one per row


def resolve_workers(setting: int | str, rate: float, n_requests: int) -> int:
    """Worker processes for an open-loop level: the setting, or for "auto" one per AUTO_RPS_PER_WORKER offered
    req/s up to the cores; never more than the level's requests."""
    if setting == "auto":
        wanted = min(os.cpu_count() or 1, math.ceil(rate / AUTO_RPS_PER_WORKER)) if rate > 0 else 1
    else:
        wanted = int(setting)
    return max(1, min(wanted, max(n_requests, 1)))


def worker_caps(concurrency: int, workers: int) -> list[int]:
    """Each worker's share of the cap on requests in flight (at least one each)."""
    base, extra = divmod(max(concurrency, 1), workers)
    return [max(1, base + (1 if k < extra else 0)) for k in range(workers)]


def worker_of(repeat: int, workers: int) -> int:
    """The worker that sends request `repeat` of a level (WORKER SPLIT)."""
    return int(repeat) % max(int(workers), 1)


@dataclass
class WorkerJob:
    """One worker's share of a level: its requests, their offsets (s) from the common start, its cap."""

    index: int
    server: ServerParams
    run: RunSettings
    records: list[RequestRecord]
    requests: list[ChatRequest]
    offsets: list[float]
    concurrency: int


def split_jobs(server: ServerParams, run: RunSettings, items: list[tuple[RequestRecord, ChatRequest]],
               offsets: list[float], concurrency: int, workers: int) -> list[WorkerJob]:
    """The level's pending requests dealt to the workers by WORKER SPLIT (a worker may get none)."""
    if len(offsets) != len(items):
        raise ValueError(f"{len(items)} requests but {len(offsets)} send offsets")
    caps = worker_caps(concurrency, workers)
    jobs = [WorkerJob(k, server, run, [], [], [], caps[k]) for k in range(workers)]
    for (record, request), offset in zip(items, offsets):
        job = jobs[worker_of(record.repeat, workers)]
        job.records.append(record)
        job.requests.append(request)
        job.offsets.append(float(offset))
    return jobs


async def send_job(job: WorkerJob, backend: Backend, t0_ns: int, sampler: LoopLagSampler,
                   deliver: Callable[[RequestRecord], None]) -> None:
    """Send a job's requests at t0 + offset each (Session.execute's open-loop timing), delivering each record."""
    gate = asyncio.Semaphore(max(job.concurrency, 1))

    async def one(record: RequestRecord, request: ChatRequest, due_ns: int) -> None:
        async with slot(gate, due_ns) as queued_ns:
            record.scheduled_ns, record.queue_wait_s = due_ns, queued_ns / 1e9
            await backend.execute(request, record)
            if record.start_ns:
                stall = sampler.max_lag_ms(record.start_ns, time.perf_counter_ns())
                record.client_stall_ms = None if stall != stall else round(stall, 3)
                record.schedule_lag_s = (record.start_ns - due_ns - queued_ns) / 1e9
            deliver(record)

    started = await paced(job.offsets, t0_ns,
                          lambda i, due_ns: asyncio.create_task(one(job.records[i], job.requests[i], due_ns)),
                          lead_ns=backend.pacing_lead_ns())
    await asyncio.gather(*started)


async def _worker(job: WorkerJob, results: Any, start: Any) -> None:
    sampler = LoopLagSampler()
    await sampler.astart()
    backend = make_backend(job.server, job.run, job.concurrency)
    try:
        await _worker_send(job, backend, sampler, results, start)
    finally:
        with contextlib.suppress(Exception):
            await backend.aclose()


async def _worker_send(job: WorkerJob, backend: Backend, sampler: LoopLagSampler, results: Any, start: Any) -> None:
    await backend.ready_to_pace()
    results.put(("ready", job.index, None))
    t0_ns = await asyncio.get_running_loop().run_in_executor(None, start.recv)
    cpu0, wall0, mark = client_cpu_s(), time.perf_counter(), pacers_started()
    pending: list[RequestRecord] = []

    def flush() -> None:
        if pending:
            results.put(("rows", job.index, pending[:]))
            pending.clear()

    async def flusher() -> None:
        while True:
            await asyncio.sleep(FLUSH_S)
            flush()

    ticking = asyncio.get_running_loop().create_task(flusher())
    try:
        await send_job(job, backend, t0_ns, sampler, pending.append)
    finally:
        ticking.cancel()
        flush()
    cpu, wall = client_cpu_s() - cpu0, time.perf_counter() - wall0
    figures = health_figures(cpu, wall, len(job.records), await sampler.astop(), pacer_scheduling(mark))
    results.put(("done", job.index, {**figures, "n_requests": len(job.records)}))


def worker_main(job: WorkerJob, results: Any, start: Any) -> None:
    """A worker process's entry point (module level: spawn imports it by name)."""
    try:
        with quiet_gc():
            asyncio.run(_worker(job, results, start))
    except BaseException:  # noqa: BLE001 — the parent raises it; a worker must not die silently
        results.put(("error", job.index, traceback.format_exc()[-4000:]))


class WorkerPool:
    """The processes of one level, started (and waited for) outside the level's measurement window; `run` sends."""

    def __init__(self, jobs: list[WorkerJob]):
        self.jobs = jobs
        self.results = SPAWN.Queue()
        self.procs: list[Any] = []
        self.pipes: list[Any] = []
        self.health: dict[int, dict[str, Any]] = {}
        self.t0_ns = 0

    def __enter__(self) -> "WorkerPool":
        try:
            for job in self.jobs:
                receive, send = SPAWN.Pipe(duplex=False)
                proc = SPAWN.Process(target=worker_main, args=(job, self.results, receive), daemon=True,
                                     name=f"benchlib-worker-{job.index}")
                proc.start()
                self.procs.append(proc)
                self.pipes.append(send)
            ready: set[int] = set()
            deadline = time.monotonic() + READY_TIMEOUT_S
            while len(ready) < len(self.jobs):
                kind, index, payload = self._next(deadline)
                if kind == "ready":
                    ready.add(index)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _next(self, deadline: float) -> tuple[str, int, Any]:
        while True:
            try:
                kind, index, payload = self.results.get(timeout=POLL_S)
            except queue_module.Empty:
                dead = [p for p in self.procs if p.exitcode is not None and p.exitcode != 0]
                if dead:
                    raise RuntimeError(f"load worker {dead[0].name} exited with code {dead[0].exitcode}") from None
                if time.monotonic() > deadline:
                    raise TimeoutError("load workers did not get ready in time") from None
                continue
            if kind == "error":
                raise RuntimeError(f"load worker {index} failed:\n{payload}")
            return kind, index, payload

    def run(self, on_rows: Callable[[list[RequestRecord]], None]) -> list[dict[str, Any]]:
        """Start every worker at one instant, hand finished records to `on_rows` in batches as they arrive;
        returns each worker's health figures (worker order)."""
        self.t0_ns = time.perf_counter_ns() + int(START_MARGIN_S * 1e9)
        for pipe in self.pipes:
            pipe.send(self.t0_ns)
        while len(self.health) < len(self.jobs):
            kind, index, payload = self._next(math.inf)
            batch = list(payload) if kind == "rows" else []
            if kind == "done":
                self.health[index] = payload
            while True:  # everything already waiting goes in one append
                try:
                    kind, index, payload = self.results.get_nowait()
                except queue_module.Empty:
                    break
                if kind == "error":
                    raise RuntimeError(f"load worker {index} failed:\n{payload}")
                if kind == "rows":
                    batch.extend(payload)
                elif kind == "done":
                    self.health[index] = payload
            if batch:
                on_rows(batch)
        return [self.health[k] for k in sorted(self.health)]

    def close(self) -> None:
        for pipe in self.pipes:
            with contextlib.suppress(Exception):
                pipe.close()
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        with contextlib.suppress(Exception):
            self.results.close()


def merged_health(per_worker: list[dict[str, Any]]) -> dict[str, Any]:
    """The level's client health from its workers': CPU summed (per request over all), the worst worker's CPU
    share of its core and loop lag, client_bound when any worker was (its reasons named by worker), the pacing
    threads' scheduling (each different one once)."""
    if not per_worker:
        return {}
    n = sum(int(h.get("n_requests", 0)) for h in per_worker)
    cpu = float(sum(h["client_cpu_s"] for h in per_worker))
    reasons = [f"worker {k}: {h['client_bound_reason']}" for k, h in enumerate(per_worker) if h.get("client_bound")]

    def worst(column: str) -> float:
        values = [h.get(column, np.nan) for h in per_worker]
        values = [v for v in values if v == v]
        return float(max(values)) if values else np.nan

    out = {"wall_s": worst("wall_s"), "client_cpu_s": cpu,
           "client_cpu_per_request_ms": cpu / n * 1000 if n else np.nan,
           "client_cpu_share": worst("client_cpu_share"), "loop_lag_p50_ms": worst("loop_lag_p50_ms"),
           "loop_lag_p99_ms": worst("loop_lag_p99_ms"), "loop_lag_max_ms": worst("loop_lag_max_ms"),
           "loop_lag_samples": int(sum(h.get("loop_lag_samples", 0) for h in per_worker)),
           "client_bound": bool(reasons), "client_bound_reason": "; ".join(reasons),
           "pacer": "; ".join(dict.fromkeys(str(h.get("pacer") or "") for h in per_worker if h.get("pacer")))}
    return {c: out[c] for c in HEALTH_COLUMNS}
