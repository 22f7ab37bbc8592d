"""Client self-check for load levels: event-loop lag (a 10 ms sleeper on the client's loop), client CPU per
request and its share of one core; a level is `client_bound` when lag p99 > 5 ms or the client used more
than half a core.

Imports: benchlib.aio."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from typing import Any, Iterator

import numpy as np

from benchlib import aio

LAG_INTERVAL_S = 0.010


CLIENT_LAG_P99_MS = 5.0


CLIENT_CPU_SHARE = 0.5


HEALTH_COLUMNS = ["wall_s", "client_cpu_s", "client_cpu_per_request_ms", "client_cpu_share", "loop_lag_p50_ms",
                  "loop_lag_p99_ms", "loop_lag_max_ms", "loop_lag_samples", "client_bound", "client_bound_reason"]


# ---- client self-check ------------------------------------------------------------------------------------
class LoopLagSampler:
    """Event-loop lag: a coroutine sleeps `interval_s` on the client's loop and records how late it woke.

    Idle baseline ≈ 0.1–1 ms (epoll waits in whole milliseconds); a loop busy parsing or blocked by a
    synchronous call shows up as lag of that length. start()/stop() run on benchlib.aio's background loop
    (the one every client uses); astart()/astop() inside a running loop."""

    def __init__(self, interval_s: float = LAG_INTERVAL_S):
        self.interval_s = interval_s
        self.lags_ns: list[int] = []
        self._task: asyncio.Task | None = None
        self._running = False

    async def _run(self) -> None:
        interval_ns = int(self.interval_s * 1e9)
        while self._running:
            t0 = time.perf_counter_ns()
            await asyncio.sleep(self.interval_s)
            self.lags_ns.append(max(0, time.perf_counter_ns() - t0 - interval_ns))

    async def astart(self) -> "LoopLagSampler":
        self.lags_ns = []
        self._running = True
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def astop(self) -> dict[str, float]:
        self._running = False
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        return self.summary()

    def start(self) -> "LoopLagSampler":
        return aio.run(self.astart())

    def stop(self) -> dict[str, float]:
        return aio.run(self.astop())

    def summary(self) -> dict[str, float]:
        lags = np.asarray(self.lags_ns, dtype=float) / 1e6
        if not len(lags):
            return {"loop_lag_p50_ms": np.nan, "loop_lag_p99_ms": np.nan, "loop_lag_max_ms": np.nan,
                    "loop_lag_samples": 0}
        return {"loop_lag_p50_ms": float(np.percentile(lags, 50)), "loop_lag_p99_ms": float(np.percentile(lags, 99)),
                "loop_lag_max_ms": float(lags.max()), "loop_lag_samples": int(len(lags))}


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """Collect once, then freeze what exists (gc.freeze): a level's collections then scan only the objects it
    creates, not the notebook's whole heap (pandas, matplotlib), so no full collection pauses the loop mid-level."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def health_figures(cpu_s: float, wall_s: float, n_requests: int, lag: dict[str, float]) -> dict[str, Any]:
    """Client health columns of one level; client_bound when lag p99 > 5 ms or CPU > 50 % of one core."""
    share = cpu_s / wall_s if wall_s > 0 else np.nan
    reasons = []
    p99 = lag.get("loop_lag_p99_ms", np.nan)
    if p99 == p99 and p99 > CLIENT_LAG_P99_MS:
        reasons.append(f"loop lag p99 {p99:.1f} ms > {CLIENT_LAG_P99_MS:g} ms")
    if share == share and share > CLIENT_CPU_SHARE:
        reasons.append(f"client CPU {share:.0%} of one core > {CLIENT_CPU_SHARE:.0%}")
    return {"wall_s": wall_s, "client_cpu_s": cpu_s,
            "client_cpu_per_request_ms": cpu_s / n_requests * 1000 if n_requests else np.nan,
            "client_cpu_share": share, **lag, "client_bound": bool(reasons),
            "client_bound_reason": "; ".join(reasons)}


@contextlib.contextmanager
def client_health(n_requests: int, interval_s: float = LAG_INTERVAL_S) -> Iterator[dict[str, Any]]:
    """Measure a block that sends `n_requests` on benchlib's loop; the yielded dict is filled at exit."""
    figures: dict[str, Any] = {}
    sampler = LoopLagSampler(interval_s)
    with quiet_gc():
        sampler.start()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        try:
            yield figures
        finally:
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            lag = sampler.stop()
            figures.update(health_figures(cpu, wall, n_requests, lag))
