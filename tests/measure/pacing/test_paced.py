"""event_loop.paced: an open-loop schedule kept by a pacing thread, each due request handed to the loop."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time

import pytest

from benchlib.measure.pacing import event_loop, send_process


def test_each_request_is_handed_to_the_loop_in_order_never_before_it_is_due_and_the_switch_interval_comes_back():
    before = sys.getswitchinterval()
    fired: list[tuple[int, int, int, str]] = []

    async def main() -> float:
        start = time.perf_counter_ns() + 5_000_000
        seen: list[float] = []

        def fire(i: int, due_ns: int) -> None:
            seen.append(sys.getswitchinterval())
            fired.append((i, due_ns, time.perf_counter_ns(), threading.current_thread().name))

        await event_loop.paced([0.0, 0.002, 0.002, 0.010], start, fire)
        assert [due for _, due, _, _ in fired] == [start, start + 2_000_000, start + 2_000_000, start + 10_000_000]
        return max(seen)

    loop_thread = threading.current_thread().name
    during = asyncio.run(main())
    assert [i for i, _, _, _ in fired] == [0, 1, 2, 3]
    assert all(now >= due for _, due, now, _ in fired), "a request is never handed over before its instant"
    assert {name for _, _, _, name in fired} == {loop_thread}, "fire runs on the loop, not on the pacing thread"
    # CPython keeps the interval in whole microseconds
    assert during == pytest.approx(min(before, event_loop.PACE_SWITCH_S), abs=1e-6)
    assert sys.getswitchinterval() == pytest.approx(before, abs=1e-6)


def test_cancelling_stops_the_pacer_before_the_rest_is_due():
    fired: list[int] = []

    async def main() -> None:
        task = asyncio.ensure_future(event_loop.paced([0.0, 0.5, 1.0], time.perf_counter_ns(),
                                                      lambda i, due: fired.append(i)))
        while not fired:
            await asyncio.sleep(0.001)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        await asyncio.sleep(0.7)  # past the second instant: the thread was told to stop

    asyncio.run(main())
    assert fired == [0]
    assert not any(t.name == "benchlib-pacer" and t.is_alive() for t in threading.enumerate())


def _pacing_thread_policy(monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[str, int, int]:
    """Pace two requests with a lead; in the pacing thread (OnTime.at_due) read that thread's own scheduling policy.
    Returns what pacer_scheduling reported, the policy seen in the thread and the loop thread's policy."""
    seen: list[int] = []

    async def main() -> None:
        mark = event_loop.pacers_started()

        loop = asyncio.get_running_loop()

        def fire(i: int, due_ns: int) -> asyncio.Future:
            written = loop.create_future()

            def write() -> None:  # in the pacing thread, at the instant
                seen.append(os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK)
                loop.call_soon_threadsafe(written.set_result, None)
            event_loop.on_time().at_due(write, lambda: written.set_result(None))
            return written

        await event_loop.paced([0.0, 0.001], time.perf_counter_ns() + 2_000_000, fire, lead_ns=1_000_000)
        main.reported = event_loop.pacer_scheduling(mark)  # type: ignore[attr-defined]
        main.loop_policy = os.sched_getscheduler(0)  # type: ignore[attr-defined]

    asyncio.run(main())
    assert len(seen) == 2
    return main.reported, seen[0], main.loop_policy  # type: ignore[attr-defined]


def _may_be_realtime() -> bool:
    """Whether this process may give a thread SCHED_FIFO, asked of a scratch thread (not the pacer's code)."""
    outcome: list[bool] = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            outcome.append(True)
        except OSError:
            outcome.append(False)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return outcome[0]


def test_the_pacing_thread_runs_at_realtime_priority_where_permitted_and_says_which_the_loop_thread_stays_normal():
    reported, pacer_policy, loop_policy = _pacing_thread_policy()
    if _may_be_realtime():
        assert reported == event_loop.PACER_REALTIME
        assert pacer_policy == os.SCHED_FIFO
    else:  # e.g. an unprivileged user with RLIMIT_RTPRIO 0: the reason is recorded, the pacing goes on
        assert reported.startswith("normal (SCHED_FIFO not permitted")
        assert pacer_policy == os.SCHED_OTHER
    assert loop_policy == os.SCHED_OTHER, "only the pacing thread asks for real-time priority"


def test_where_realtime_is_refused_the_pacer_keeps_the_schedule_at_normal_priority_and_records_why(monkeypatch):
    def refuse(*args: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(send_process.os, "sched_setscheduler", refuse)
    reported, pacer_policy, _ = _pacing_thread_policy()
    assert reported == "normal (SCHED_FIFO not permitted: Operation not permitted)"
    assert pacer_policy == os.SCHED_OTHER


def test_pacer_scheduling_is_empty_when_no_pacing_thread_started_since_the_mark():
    asyncio.run(event_loop.paced([0.0], time.perf_counter_ns(), lambda i, due: None))
    mark = event_loop.pacers_started()
    assert event_loop.pacer_scheduling(mark) == ""  # a closed-loop level after an open-loop one
    assert event_loop.pacer_scheduling(mark - 1) != ""


def test_schedules_paced_at_once_on_two_loops_keep_the_interval_cut_until_the_last_one_ends():
    before = sys.getswitchinterval()
    mark = event_loop.pacers_started()
    short_done = threading.Event()
    long_seen: list[tuple[bool, float]] = []

    def short() -> None:
        asyncio.run(event_loop.paced([0.0, 0.02], time.perf_counter_ns(), lambda i, due: None))
        short_done.set()

    def record(i: int, due: int) -> None:
        long_seen.append((short_done.is_set(), sys.getswitchinterval()))

    other = threading.Thread(target=short)
    other.start()
    asyncio.run(event_loop.paced([0.0, 0.3], time.perf_counter_ns(), record))
    other.join()
    assert event_loop.pacers_started() == mark + 2
    ended_first, during = long_seen[-1]
    assert ended_first, "the short schedule ended before the long one's last instant"
    assert during == pytest.approx(min(before, event_loop.PACE_SWITCH_S), abs=1e-6), \
        "the other loop's schedule ending did not bring the interval back while this one paces"
    assert sys.getswitchinterval() == pytest.approx(before, abs=1e-6)
