"""Client self-check for load levels: event-loop lag (a 10 ms sleeper on the client's loop), client CPU per
request and its share of one core (the sending process's included), and the scheduling its pacing thread and
sending process got (`pacer`); a level is `client_bound` when lag p99 > 5 ms or the client used more than half a
core."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator

import numpy as np

from benchlib.measure.pacing import send_process
from benchlib.measure.pacing.event_loop import (
    LAG_INTERVAL_S,
    LoopLagSampler,
    pacer_scheduling,
    pacers_started,
    quiet_gc,
)

CLIENT_LAG_P99_MS = 5.0


CLIENT_CPU_SHARE = 0.5


HEALTH_COLUMNS = [  # a level's client health; each line's comment is its columns' meaning (docs/columns.md)
    "wall_s", "client_cpu_s",  # the level's wall time and the client's CPU time over it (its sending process's too), s
    "client_cpu_per_request_ms", "client_cpu_share",  # that CPU per request, ms; as a share of one core
    # how late the client's event loop woke over the level (a 10 ms sleeper), ms: p50, p99, worst; the samples taken
    "loop_lag_p50_ms", "loop_lag_p99_ms", "loop_lag_max_ms", "loop_lag_samples",
    # the client may have been the bottleneck (loop lag p99 above 5 ms, or CPU above half a core), and why
    "client_bound", "client_bound_reason",
    "pacer"]  # what the open-loop pacing thread and the sending process ran under (realtime, or normal and why)


# ---- client self-check (the sampler and quiet_gc live with the loop, in benchlib.measure.pacing.event_loop) -----------------------
def client_cpu_s() -> float:
    """This process's CPU time so far, with its sending process's (send_process), which writes for it."""
    sender = send_process.shared(start=False)
    return time.process_time() + (sender.cpu_s() if sender is not None else 0.0)


def health_figures(cpu_s: float, wall_s: float, n_requests: int, lag: dict[str, float],
                   pacer: str = "") -> dict[str, Any]:
    """Client health columns of one level; client_bound when lag p99 > 5 ms or CPU > 50 % of one core. `pacer`:
    what the open-loop pacing thread ran under, and the sending process where it made the writes
    (event_loop.pacer_scheduling; "" for a closed-loop level)."""
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
            "client_bound_reason": "; ".join(reasons), "pacer": pacer}


@contextlib.contextmanager
def client_health(n_requests: int, interval_s: float = LAG_INTERVAL_S) -> Iterator[dict[str, Any]]:
    """Measure a block that sends `n_requests` on benchlib's loop; the yielded dict is filled at exit."""
    figures: dict[str, Any] = {}
    sampler = LoopLagSampler(interval_s)
    with quiet_gc():
        sampler.start()
        cpu0, wall0, mark = client_cpu_s(), time.perf_counter(), pacers_started()
        try:
            yield figures
        finally:
            cpu, wall = client_cpu_s() - cpu0, time.perf_counter() - wall0
            lag = sampler.stop()
            figures.update(health_figures(cpu, wall, n_requests, lag, pacer_scheduling(mark)))
