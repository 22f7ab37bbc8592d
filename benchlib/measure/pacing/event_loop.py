"""One background event loop for the process, so sync code (and notebook cells, whose kernel already
runs a loop) can drive the async clients; every client lives on this same loop. Also the loop's own health:
LoopLagSampler (how late it wakes) and quiet_gc (no full garbage collection while streams are read)."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import contextvars
import gc
import heapq
import itertools
import sys
import threading
import time
from array import array
from typing import Any, AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence, TypeVar

import numpy as np

from benchlib.measure.pacing import send_process

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
# The GIL's switch interval while a schedule is paced (CPython's default: 5 ms): the pacing thread, woken at an
# instant, waits at most this long for the loop thread to let go of the GIL
# (bench/results/2026-11-27-sender-cpu-per-request.md, "Less CPU per request in the sender": the sending thread)
PACE_SWITCH_S = 0.00005
# How early the pacer starts a request whose path can hand its write on (paced(lead_ns=...)): the loop builds the
# request and takes its connection in that time, between the response callbacks it is running, and the sending
# process (or the pacing thread) writes it at the instant itself. A loop held up longer than this (preempted on a busy
# box) hands requests over late (bench/results/2026-11-28-sending-process.md); short enough that a request held in
# preparation keeps its connection and slot briefly.
SEND_LEAD_S = 0.050
# The pacing thread's scheduling, where the OS permits: the lowest real-time priority, so at its instant it runs at
# once instead of waiting for a busy core's time slice (bench/results/2026-11-28-real-time-pacing-thread.md). It sleeps
# between instants and works microseconds at each, so it cannot starve the loop or the server (and the kernel caps
# real-time threads at 95 % of a core in any case).
PACER_REALTIME = send_process.REALTIME
# Appended to the pacer's scheduling when the level's writes were made by the sending process (send_process), with
# what that process runs under
BY_SENDING_PROCESS = ", writes by the sending process: "


class _PacingThreads:
    """This process's pacing threads, over every loop that paces: how many schedules pace now (the GIL's switch
    interval is cut while any does and comes back when the last ends), how many pacing threads have started, and
    what the latest ran under. One lock guards them: schedules on several loops start and end at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pacing = 0
        self.switch_s = sys.getswitchinterval()  # the interval to restore when the last schedule ends
        self.started = 0
        self.scheduling = ""

    def begin(self) -> None:
        """A schedule starts pacing: count its thread and cut the switch interval if none was pacing."""
        with self.lock:
            self.started += 1
            if self.pacing == 0:
                self.switch_s = sys.getswitchinterval()
                sys.setswitchinterval(min(self.switch_s, PACE_SWITCH_S))
            self.pacing += 1

    def thread_got(self, scheduling: str) -> None:
        """What the pacing thread that just started runs under (PACER_REALTIME or why not)."""
        with self.lock:
            self.scheduling = scheduling

    def end(self, sender_scheduling: str) -> None:
        """A schedule stops pacing; `sender_scheduling`: what the sending process that made its writes ran under
        ("" when none did)."""
        with self.lock:
            if sender_scheduling and BY_SENDING_PROCESS not in self.scheduling:
                self.scheduling += BY_SENDING_PROCESS + sender_scheduling
            self.pacing -= 1
            if self.pacing == 0:
                sys.setswitchinterval(self.switch_s)


_threads = _PacingThreads()


def pacers_started() -> int:
    """How many pacing threads this process has started: a mark for `pacer_scheduling`."""
    return _threads.started


def pacer_scheduling(since: int = 0) -> str:
    """What the latest pacing thread of this process ran under (PACER_REALTIME or why not), if one started after
    the mark `since` (pacers_started()); "" if none did (a closed-loop level)."""
    return _threads.scheduling if _threads.started > since else ""


class _Pacer:
    """The pacing thread's agenda: besides the schedule's hand-offs, callables to run in the thread at an instant
    (`at`), earliest first. What is still pending when the pacer stops is abandoned, never run late."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.cond = threading.Condition()
        self.agenda: list[tuple[int, int, Callable[[], None], Callable[[], None]]] = []
        self.order = itertools.count()
        self.stopped = False
        self.wake_ns = 0  # when the thread wakes next by itself (0: it is running; -1: waiting for work)
        self.sender_scheduling = ""  # set once a write is handed to the sending process: what that process runs under

    def at(self, due_ns: int, run: Callable[[], None], abandon: Callable[[], None]) -> None:
        """run() in the pacing thread at due_ns (at once if it has passed); abandon() on the loop instead if the
        pacer stops first."""
        with self.cond:
            if self.stopped:
                self.loop.call_soon(abandon)
                return
            heapq.heappush(self.agenda, (due_ns, next(self.order), run, abandon))
            if self.wake_ns < 0 or due_ns < self.wake_ns:  # else it wakes in time anyway: no extra wake-up
                self.cond.notify()

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            left, self.agenda = self.agenda, []
            self.cond.notify()
        for _, _, _, abandon in left:
            self.loop.call_soon(abandon)


class OnTime:
    """What an open-loop request started by `paced` (with a lead) carries: its due instant and the pacing thread that
    can write it then. Code on the request's path reads it with `on_time()`; None everywhere else."""

    __slots__ = ("due_ns", "pacer")

    def __init__(self, due_ns: int, pacer: _Pacer):
        self.due_ns, self.pacer = due_ns, pacer

    def at_due(self, run: Callable[[], None], abandon: Callable[[], None]) -> None:
        self.pacer.at(self.due_ns, run, abandon)

    def handed_to(self, sender: send_process.SendingProcess) -> None:
        """Note that the sending process, not the pacing thread, writes this request (the level's health says so)."""
        self.pacer.sender_scheduling = sender.scheduling

    async def due(self) -> None:
        """Returns at the due instant (at once if it has passed), woken by the pacing thread: a path that sends
        from the loop leaves no earlier than it did without the lead."""
        if time.perf_counter_ns() >= self.due_ns:
            return
        loop = self.pacer.loop
        woken: asyncio.Future = loop.create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        def run() -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                loop.call_soon_threadsafe(wake)
        self.at_due(run, wake)
        await woken


_on_time: contextvars.ContextVar[OnTime | None] = contextvars.ContextVar("benchlib_on_time", default=None)


def on_time() -> OnTime | None:
    """The running request's due instant and pacing thread, when `paced` started it ahead of its instant."""
    return _on_time.get()


@contextlib.asynccontextmanager
async def slot(gate: asyncio.Semaphore, due_ns: int = 0) -> AsyncIterator[int]:
    """Hold one of `gate`'s slots; yields queued_ns: how long the request waited for it after it was due (after it
    was started, without a due instant). A request started ahead of its instant takes a free slot at once; with none
    free it first waits for its instant, then queues like a request started then, so no slot is held early while
    due requests wait for one."""
    enter_ns = time.perf_counter_ns()
    early = _on_time.get()
    if early is not None and gate.locked():
        await early.due()
    async with gate:
        yield max(0, time.perf_counter_ns() - max(enter_ns, due_ns))


async def paced(offsets_s: Sequence[float], start_ns: int, fire: Callable[[int, int], Awaitable[Any] | None],
                lead_ns: int = 0) -> list[Awaitable[Any]]:
    """Call fire(i, due_ns) on the running loop at each instant start_ns + offsets_s[i] (perf_counter_ns), or
    `lead_ns` before it; returns the awaitables fire returned, once every one is done (their errors are the
    caller's to raise, e.g. by gathering them).

    The loop's own timer wakes late by up to a whole millisecond (epoll's timeout is in milliseconds, libuv's
    timers too), and later still while it parses streams. A pacing thread sleeps on a clock of microseconds
    (Condition.wait) and hands each due request to the loop through call_soon_threadsafe, whose self-pipe wakes the
    loop's poll at once; meanwhile the loop reads responses. The GIL's switch interval is cut while pacing, so a
    pacer woken while the loop runs Python gets the GIL within PACE_SWITCH_S instead of 5 ms. The thread runs at
    real-time priority where the OS permits (PACER_REALTIME; `pacer_scheduling` says what it got), so a busy core
    does not hold its wake-up back.

    With a lead, fire runs early, inside a context where `on_time()` gives the request's due instant and this
    thread: the loop prepares the request and hands its write on, to the process's sending process (send_process,
    which makes it at the instant with no GIL to wait for) or back to this thread (OnTime.at_due), so the loop's queue
    of ready callbacks no longer sits between the due instant and the wire. A path that cannot hand its write over
    waits for the instant with OnTime.due(). Cancelling stops the thread (what it was still to run is abandoned)."""
    return await _Schedule(offsets_s, start_ns, fire, lead_ns).run()


class _Schedule:
    """One `paced` call: the instants to hand over, the pacing thread that hands each to the loop (and runs the
    writes put on its agenda), and the awaitables `fire` started there. next_i is the pacing thread's alone; finished
    and started are touched only on the loop."""

    def __init__(self, offsets_s: Sequence[float], start_ns: int, fire: Callable[[int, int], Awaitable[Any] | None],
                 lead_ns: int):
        self.offsets_s, self.start_ns, self.fire, self.lead_ns = offsets_s, start_ns, fire, lead_ns
        self.loop = asyncio.get_running_loop()
        self.pacer = _Pacer(self.loop)
        self.finished: asyncio.Future = self.loop.create_future()  # every instant handed over, or the thread failed
        self.started: list[Awaitable[Any]] = []
        self.next_i = 0  # the next instant to hand over

    async def run(self) -> list[Awaitable[Any]]:
        _threads.begin()
        if not self.offsets_s:
            self.settle(None)
        threading.Thread(target=self.pace, name="benchlib-pacer", daemon=True).start()
        try:
            await self.finished
            if self.started:  # the thread stays for their writes
                await asyncio.gather(*self.started, return_exceptions=True)
            return self.started
        finally:
            self.pacer.stop()
            _threads.end(self.pacer.sender_scheduling)

    # ---- on the loop
    def settle(self, exc: BaseException | None) -> None:
        if not self.finished.done():
            self.finished.set_exception(exc) if exc is not None else self.finished.set_result(None)

    def start(self, i: int, due_ns: int) -> None:
        begun = self.fire(i, due_ns)
        if begun is not None:
            self.started.append(begun)

    # ---- in the pacing thread
    def pace(self) -> None:
        _threads.thread_got(send_process.realtime())
        try:
            while True:
                with self.pacer.cond:
                    soonest = self.wait_until_due()
                    if soonest is None:
                        return
                    agenda = self.pacer.agenda
                    write = heapq.heappop(agenda) if agenda and agenda[0][0] <= soonest else None
                if write is not None:  # a write at its instant goes first: it is what the instant is for
                    try:
                        write[2]()
                    except Exception:  # noqa: BLE001 — its waiter hears of it; the thread goes on pacing
                        self.loop.call_soon_threadsafe(write[3])
                    continue
                self.hand_next()
        except RuntimeError:  # the loop closed under it: nothing left to hand over
            return
        except BaseException as exc:  # noqa: BLE001 — raised on the loop, where the caller waits
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.settle, exc)

    def wait_until_due(self) -> int | None:
        """With the pacer's lock held: sleep until the next hand-over (lead_ns before its instant) or agenda write
        is due; that instant, or None once the pacer stopped."""
        pacer, cond, n = self.pacer, self.pacer.cond, len(self.offsets_s)
        while not pacer.stopped:
            agenda = pacer.agenda  # stop() replaces it
            next_hand = self.start_ns + int(self.offsets_s[self.next_i] * 1e9) - self.lead_ns \
                if self.next_i < n else None
            next_run = agenda[0][0] if agenda else None
            pending = [t for t in (next_hand, next_run) if t is not None]
            if not pending:
                pacer.wake_ns = -1
                cond.wait()
                continue
            soonest = min(pending)
            wait_ns = soonest - time.perf_counter_ns()
            if wait_ns <= 0:
                pacer.wake_ns = 0
                return soonest
            pacer.wake_ns = soonest
            cond.wait(wait_ns / 1e9)
        return None

    def hand_next(self) -> None:
        """Hand the next instant's request to the loop: with a lead, inside a context where on_time() gives its due
        instant and this thread."""
        i = self.next_i
        due_ns = self.start_ns + int(self.offsets_s[i] * 1e9)
        if self.lead_ns <= 0:
            self.loop.call_soon_threadsafe(self.start, i, due_ns)
        else:
            context = contextvars.Context()
            context.run(_on_time.set, OnTime(due_ns, self.pacer))
            self.loop.call_soon_threadsafe(self.start, i, due_ns, context=context)
        self.next_i = i + 1
        if self.next_i == len(self.offsets_s):
            self.loop.call_soon_threadsafe(self.settle, None)


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
