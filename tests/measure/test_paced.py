"""event_loop.paced: an open-loop schedule kept by a pacing thread, each due request handed to the loop."""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import pytest

from benchlib.measure import event_loop


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
