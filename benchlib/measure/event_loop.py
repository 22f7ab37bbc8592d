"""One background event loop for the process, so sync code (and notebook cells, whose kernel already
runs a loop) can drive the async clients; every client lives on this same loop. Also the loop's own health:
LoopLagSampler (how late it wakes) and quiet_gc (no full garbage collection while streams are read)."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import gc
import sys
import threading
import time
from array import array
from typing import Any, Callable, Coroutine, Iterator, Sequence, TypeVar

import numpy as np

T = TypeVar("T")
_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="benchlib-loop", daemon=True).start()
        return _loop


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion on the background loop; Ctrl-C cancels it and re-raises."""
    future = asyncio.run_coroutine_threadsafe(coro, _background_loop())
    try:
        return future.result()
    except KeyboardInterrupt:
        future.cancel()
        raise


# ---- an open-loop schedule kept by a thread, not by the loop's timer ---------------------------------------
PACE_SWITCH_S = 0.0002  # the GIL's switch interval while a schedule is paced (CPython's default: 5 ms)
_pacing, _switch_s = 0, 0.005


async def paced(offsets_s: Sequence[float], start_ns: int, fire: Callable[[int, int], None]) -> None:
    """Call fire(i, due_ns) on the running loop at each instant start_ns + offsets_s[i] (perf_counter_ns).

    The loop's own timer wakes late by up to a whole millisecond (epoll's timeout is in milliseconds, libuv's
    timers too), and later still while it parses streams. A pacing thread sleeps on a clock of microseconds
    (Event.wait) and hands each due request to the loop through call_soon_threadsafe, whose self-pipe wakes the
    loop's poll at once; meanwhile the loop reads responses. The GIL's switch interval is cut while pacing, so a
    pacer woken while the loop runs Python gets the GIL within PACE_SWITCH_S instead of 5 ms. Returns once the
    last request was handed over; cancelling stops the thread."""
    loop = asyncio.get_running_loop()
    finished: asyncio.Future = loop.create_future()
    stop = threading.Event()

    def settle(exc: BaseException | None) -> None:
        if not finished.done():
            finished.set_exception(exc) if exc is not None else finished.set_result(None)

    def pace() -> None:
        try:
            for i, offset in enumerate(offsets_s):
                due_ns = start_ns + int(offset * 1e9)
                wait_ns = due_ns - time.perf_counter_ns()
                if wait_ns > 0 and stop.wait(wait_ns / 1e9):
                    return
                loop.call_soon_threadsafe(fire, i, due_ns)
            loop.call_soon_threadsafe(settle, None)
        except RuntimeError:  # the loop closed under it: nothing left to hand over
            return
        except BaseException as exc:  # noqa: BLE001 — raised on the loop, where the caller waits
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, exc)

    global _pacing, _switch_s
    with _lock:  # schedules paced at once (several loops of one process) restore the interval when the last ends
        if _pacing == 0:
            _switch_s = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_s, PACE_SWITCH_S))
        _pacing += 1
    thread = threading.Thread(target=pace, name="benchlib-pacer", daemon=True)
    thread.start()
    try:
        await finished
    finally:
        stop.set()
        with _lock:
            _pacing -= 1
            if _pacing == 0:
                sys.setswitchinterval(_switch_s)


# ---- the loop's own health: how late it wakes, and no full collections in the middle of a run --------------
LAG_INTERVAL_S = 0.010


class LoopLagSampler:
    """Event-loop lag: a coroutine sleeps `interval_s` on the client's loop and records how late it woke.

    Idle baseline ≈ 0.1–1 ms (epoll waits in whole milliseconds); a loop busy parsing or blocked by a
    synchronous call (or a thread holding the GIL) shows up as lag of that length. start()/stop() run on the
    background loop above (the one every client uses); astart()/astop() inside a running loop. Samples are kept
    as (wake instant, lag) in two int64 arrays (16 bytes each, ~6 MB an hour), so `max_lag_ms` can say how long
    the loop was held up while one request was in flight."""

    def __init__(self, interval_s: float = LAG_INTERVAL_S):
        self.interval_s = interval_s
        self.wake_ns: array = array("q")
        self.lags_ns: array = array("q")
        self._sleep_from_ns = 0  # when the current sleep began (0: not sleeping)
        self._task: asyncio.Task | None = None
        self._running = False

    async def _run(self) -> None:
        interval_ns = int(self.interval_s * 1e9)
        while self._running:
            self._sleep_from_ns = time.perf_counter_ns()
            await asyncio.sleep(self.interval_s)
            now = time.perf_counter_ns()
            self.wake_ns.append(now)
            self.lags_ns.append(max(0, now - self._sleep_from_ns - interval_ns))

    def max_lag_ms(self, t0_ns: int, t1_ns: int) -> float:
        """The longest the loop woke late during [t0_ns, t1_ns] (perf_counter_ns), a sleep still overdue now
        included (the caller may run before the sampler's late wake-up); NaN without samples."""
        interval_ns = int(self.interval_s * 1e9)
        worst, seen = 0, False
        for i in range(bisect.bisect_left(self.wake_ns, t0_ns), len(self.wake_ns)):
            wake, lag = self.wake_ns[i], self.lags_ns[i]
            if wake - lag - interval_ns > t1_ns:
                break
            worst, seen = max(worst, lag), True
        if self._running and self._sleep_from_ns:
            overdue = time.perf_counter_ns() - self._sleep_from_ns - interval_ns
            if self._sleep_from_ns <= t1_ns:
                worst, seen = max(worst, overdue), True
        return worst / 1e6 if seen else float("nan")

    async def astart(self) -> "LoopLagSampler":
        self.wake_ns, self.lags_ns = array("q"), array("q")
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
        self._sleep_from_ns = 0
        return self.summary()

    def start(self) -> "LoopLagSampler":
        return run(self.astart())

    def stop(self) -> dict[str, float]:
        return run(self.astop())

    def summary(self) -> dict[str, float]:
        lags = np.frombuffer(self.lags_ns, dtype=np.int64).astype(float) / 1e6 if len(self.lags_ns) \
            else np.empty(0)
        if not len(lags):
            return {"loop_lag_p50_ms": np.nan, "loop_lag_p99_ms": np.nan, "loop_lag_max_ms": np.nan,
                    "loop_lag_samples": 0}
        return {"loop_lag_p50_ms": float(np.percentile(lags, 50)), "loop_lag_p99_ms": float(np.percentile(lags, 99)),
                "loop_lag_max_ms": float(lags.max()), "loop_lag_samples": int(len(lags))}


_gc_depth = 0


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """Collect once, then freeze what exists (gc.freeze): collections inside then scan only the objects made
    since, not the notebook's whole heap (pandas, matplotlib), so no full collection (0.1 s here, more on a busy
    box) holds the GIL while a stream is read. Nested blocks leave the outermost one's freeze in place."""
    global _gc_depth
    with _lock:
        outer = _gc_depth == 0
        _gc_depth += 1
    if outer:
        gc.collect()
        gc.freeze()
    try:
        yield
    finally:
        with _lock:
            _gc_depth -= 1
            last = _gc_depth == 0
        if last:
            gc.unfreeze()
