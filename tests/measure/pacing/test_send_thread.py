"""The timed write of an open-loop level: event_loop.paced with a lead starts each request ahead of its instant,
the loop prepares it on a pooled plain-HTTP connection, and the sending process (send_process) or, where none is up,
the pacing thread writes it at the instant (wire._RawConnection.send_on_time): both writers are checked here.
Checked against the fake server's own receive and send instants (same clock, CLOCK_MONOTONIC, in its own process),
by causality, never by a time bound: a request is on the wire no earlier than
it is due, its start stamp precedes the server's receipt, and its first delta is stamped after the server received
it. Paths the thread cannot write for (the SDK client, a retry) wait for the instant and go from the loop."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from benchlib.measure.client.backends import ChatRequest, make_backend
from benchlib.measure.http import wire
from benchlib.measure.pacing import event_loop, send_process
from benchlib.records.rows import RequestRecord
from tests.helpers import make_params

LEAD_NS = 5_000_000


@pytest.fixture(scope="module")
def fake_process():
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve().parents[2] / "fakes" / "servers.py")],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("PORT "), line
    yield f"http://127.0.0.1:{int(line.split()[1])}"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(params=["process", "thread"])
def writer(request, monkeypatch):
    """Which writer makes the timed writes: this process's sending process (up before the test starts) or the
    pacing thread (no sending process to be had)."""
    if request.param == "process":
        assert send_process.shared().wait_started(), "the sending process did not start"
    else:
        monkeypatch.setattr(send_process, "shared", lambda start=True: None)
    return request.param


@pytest.fixture
def writes(monkeypatch, writer):
    """Which path wrote each request: the timed write (send_on_time; "process": how many of those the sending
    process took) or the loop (send)."""
    seen = {"thread": 0, "loop": 0, "process": 0}
    on_time, send = wire._RawConnection.send_on_time, wire._RawConnection.send
    send_at = send_process.SendingProcess.send_at

    async def by_thread(self, payload, timed):
        seen["thread"] += 1
        return await on_time(self, payload, timed)

    def by_process(self, *args, **kwargs):
        ident = send_at(self, *args, **kwargs)
        seen["process"] += bool(ident)
        return ident

    async def by_loop(self, payload):
        seen["loop"] += 1
        return await send(self, payload)

    monkeypatch.setattr(wire._RawConnection, "send_on_time", by_thread)
    monkeypatch.setattr(wire._RawConnection, "send", by_loop)
    monkeypatch.setattr(send_process.SendingProcess, "send_at", by_process)
    return seen


def paced_level(params, n: int, gap_s: float, lead_ns: int, cap: int = 8) -> list[RequestRecord]:
    """n requests gap_s apart, paced as Session._execute paces them (slot, due instant, schedule lag)."""

    async def drive():
        backend = make_backend(params.server, params.run, cap)
        gate = asyncio.Semaphore(cap)
        records = [RequestRecord(variant=f"t{i}") for i in range(n)]

        async def one(record: RequestRecord, due_ns: int) -> None:
            async with event_loop.slot(gate, due_ns) as waited:
                record.scheduled_ns, record.queue_wait_s = due_ns, waited / 1e9
                message = [{"role": "user", "content": f"[{record.variant}] go"}]
                await backend.execute(ChatRequest(messages=message, max_tokens=16), record)
                record.schedule_lag_s = (record.start_ns - due_ns - waited) / 1e9

        try:
            await event_loop.paced([i * gap_s for i in range(n)], time.perf_counter_ns() + 20_000_000,
                            lambda i, due: asyncio.ensure_future(one(records[i], due)), lead_ns=lead_ns)
        finally:
            await backend.aclose()
        return records

    return event_loop.run(drive())


def server_log(url: str) -> dict[str, dict]:
    return {e["prompt"].split("[", 2)[-1].split("]")[0]: e for e in httpx.get(f"{url}/log").json()}


def test_the_wire_client_asks_for_a_lead_and_the_sdk_client_does_not(fake_process):
    assert make_backend(make_params(fake_process).server, make_params(fake_process).run).pacing_lead_ns() == \
        int(event_loop.SEND_LEAD_S * 1e9) > 0
    sdk = make_params(fake_process, run={"http_client": "sdk"})
    assert make_backend(sdk.server, sdk.run).pacing_lead_ns() == 0
    tls = make_params("https://127.0.0.1:9/v1")
    assert make_backend(tls.server, tls.run).pacing_lead_ns() == 0


def test_each_request_is_written_at_its_instant_and_the_stamps_stay_causal(fake_process, writes, writer):
    params = make_params(fake_process, {"ttft": 0.03, "itl": 0.005, "tokens": 6}, run={"timeout_s": 10})
    mark = event_loop.pacers_started()
    records = paced_level(params, 24, 0.01, LEAD_NS)
    log = server_log(fake_process)
    assert writes["thread"] == 24 and writes["loop"] == 0, writes  # the first on fresh connections, too
    assert writes["process"] == (24 if writer == "process" else 0), writes
    assert (event_loop.BY_SENDING_PROCESS in event_loop.pacer_scheduling(mark)) == (writer == "process")
    slack = 1e6  # ns: a kernel receive stamp converted from the realtime clock
    for record in records:
        assert record.status == "ok", record.error_message
        entry = log[record.variant]
        assert record.start_ns >= record.scheduled_ns, "written before its instant"
        assert entry["received_ns"] >= record.scheduled_ns, "the server had it before it was due"
        assert record.start_ns <= entry["received_ns"], "the wire stamp comes after the server's receipt"
        first = record.start_ns + record.ttft_s * 1e9
        assert first >= entry["received_ns"] - slack, "a first delta stamped before its request was received"
        stamps = first + np.concatenate([[0.0], np.cumsum(np.asarray(record.itl_s) * 1e9)])
        assert len(stamps) == len(entry["sends_ns"]) == 6
        assert (stamps[1:] >= np.asarray(entry["sends_ns"][:-1], dtype=float) - slack).all(), \
            "a delta stamped before the one before it was sent"
        assert record.schedule_lag_s >= 0 and record.queue_wait_s >= 0
        assert 0 <= record.client_prep_s, "preparation ends before the thread's write"
        assert record.e2e_s >= record.ttft_s > 0


def test_a_request_handed_over_after_its_instant_is_written_at_once_and_its_lag_is_kept(fake_process, writes):
    """A loop too busy to prepare the request within the lead (here: blocked past the instant) hands it over
    late: it is written at once, and the record carries the whole lateness as schedule lag."""
    params = make_params(fake_process, {"ttft": 0.01, "itl": 0.002, "tokens": 3}, run={"timeout_s": 10})

    async def drive():
        backend = make_backend(params.server, params.run, 1)
        record = RequestRecord(variant="late0")

        async def one(due_ns: int) -> None:
            time.sleep((due_ns - time.perf_counter_ns()) / 1e9 + 0.02)  # the loop held 20 ms past the instant
            message = [{"role": "user", "content": "[late0] go"}]
            await backend.execute(ChatRequest(messages=message, max_tokens=8), record)
            record.scheduled_ns = due_ns

        try:
            await event_loop.paced([0.0], time.perf_counter_ns() + 10_000_000, lambda i, due: asyncio.ensure_future(one(due)),
                            lead_ns=LEAD_NS)
        finally:
            await backend.aclose()
        return record

    record = event_loop.run(drive())
    entry = server_log(fake_process)["late0"]
    assert record.status == "ok", record.error_message
    assert writes["thread"] == 1
    assert record.start_ns - record.scheduled_ns >= 20_000_000, "the lateness is on the record"
    assert record.start_ns <= entry["received_ns"]


def test_the_sdk_path_started_ahead_waits_for_its_instant_and_sends_from_the_loop(fake_process, writes):
    params = make_params(fake_process, {"ttft": 0.02, "itl": 0.005, "tokens": 3},
                         run={"timeout_s": 10, "http_client": "sdk"})
    records = paced_level(params, 6, 0.01, LEAD_NS)  # a lead forced on a path that cannot use it
    log = server_log(fake_process)
    assert writes == {"thread": 0, "loop": 0, "process": 0}  # the SDK's own httpx client sent them
    for record in records:
        assert record.status == "ok", record.error_message
        assert log[record.variant]["received_ns"] >= record.scheduled_ns, "sent before its instant"
        assert record.start_ns >= record.scheduled_ns


def test_without_a_lead_requests_go_from_the_loop_as_before(fake_process, writes):
    params = make_params(fake_process, {"ttft": 0.02, "itl": 0.005, "tokens": 3}, run={"timeout_s": 10})
    records = paced_level(params, 6, 0.01, 0)
    assert writes["thread"] == 0 and writes["loop"] == 6
    log = server_log(fake_process)
    for record in records:
        assert record.status == "ok", record.error_message
        assert record.start_ns >= record.scheduled_ns and record.start_ns <= log[record.variant]["received_ns"]


def test_the_thread_runs_what_is_handed_to_it_at_its_instant_and_abandons_what_is_left_when_the_pacer_stops():
    ran: list[tuple[str, int, int, str]] = []
    abandoned: list[str] = []

    async def main() -> None:
        start = time.perf_counter_ns() + 20_000_000
        seen: list[event_loop.OnTime | None] = []
        loop = asyncio.get_running_loop()

        def fire(i: int, due_ns: int):
            timed = event_loop.on_time()
            seen.append(timed)
            assert time.perf_counter_ns() >= due_ns - LEAD_NS

            written = loop.create_future()  # the request's task lasts until its write was made, as post_stream's

            def run(name: str, when: int) -> None:
                ran.append((name, when, time.perf_counter_ns(), threading.current_thread().name))
                loop.call_soon_threadsafe(written.set_result, None)

            timed.at_due(lambda: run(f"w{i}", due_ns), lambda: abandoned.append(f"w{i}"))
            # one more, far past the schedule's end: still pending when the pacer stops
            timed.pacer.at(due_ns + 10_000_000_000, lambda: run("never", 0), lambda: abandoned.append(f"late{i}"))
            return written

        await event_loop.paced([0.0, 0.004], start, fire, lead_ns=LEAD_NS)
        assert [t.due_ns for t in seen] == [start, start + 4_000_000]
        await asyncio.sleep(0)

    asyncio.run(main())
    assert [name for name, _, _, _ in ran] == ["w0", "w1"]
    assert all(now >= due for _, due, now, _ in ran), "a write ran before its instant"
    assert {thread for _, _, _, thread in ran} == {"benchlib-pacer"}
    assert sorted(abandoned) == ["late0", "late1"]
    assert event_loop.on_time() is None


def test_a_slot_taken_early_is_not_queue_wait_and_a_full_gate_is_waited_for_only_after_the_instant():
    async def main() -> list[tuple[int, int, int]]:
        gate = asyncio.Semaphore(1)
        out: list[tuple[int, int, int]] = []

        async def one(due_ns: int) -> None:
            async with event_loop.slot(gate, due_ns) as waited:
                out.append((due_ns, time.perf_counter_ns(), waited))
                await asyncio.sleep(0.015)  # holds the only slot past the next instant

        await event_loop.paced([0.0, 0.005], time.perf_counter_ns() + 20_000_000,
                        lambda i, due: asyncio.ensure_future(one(due)), lead_ns=LEAD_NS)
        return out

    (due0, got0, wait0), (due1, got1, wait1) = asyncio.run(main())
    assert wait0 == 0, "a free slot taken before the instant is no wait"
    assert got1 >= due1 and wait1 > 0 and got1 - wait1 >= due1, "queued from its instant, not from its start"


def test_a_request_cancelled_while_the_sending_process_holds_its_write_never_reaches_the_server(fake_process,
                                                                                                   monkeypatch):
    """(The pacing thread's counterpart: a cancelled write's future is cancelled, and write() checks it.)"""
    assert send_process.shared().wait_started()
    handed: list[int] = []
    send_at = send_process.SendingProcess.send_at
    monkeypatch.setattr(send_process.SendingProcess, "send_at", lambda *a: handed.append(send_at(*a)) or handed[-1])
    params = make_params(fake_process, {"ttft": 0.01, "itl": 0.002, "tokens": 3}, run={"timeout_s": 10})
    lead_ns = 400_000_000

    async def drive():
        backend = make_backend(params.server, params.run, 1)
        record = RequestRecord(variant="gone0")
        tasks: list[asyncio.Task] = []

        def fire(i: int, due: int) -> asyncio.Task:
            message = [{"role": "user", "content": "[gone0] go"}]
            tasks.append(asyncio.ensure_future(backend.execute(ChatRequest(messages=message, max_tokens=8), record)))
            asyncio.get_running_loop().call_later(0.1, tasks[0].cancel)  # long before its instant
            return tasks[0]

        try:
            await event_loop.paced([0.0], time.perf_counter_ns() + lead_ns, fire, lead_ns=lead_ns)
        finally:
            await backend.aclose()
        await asyncio.sleep(0.5)  # past the instant it had
        return tasks[0]

    task = event_loop.run(drive())
    assert task.cancelled()
    assert len(handed) == 1 and handed[0] > 0
    assert "gone0" not in server_log(fake_process), "the held write was made after its connection was dropped"
