"""benchlib.measure.http.wire, the lean HTTP/1.1 stream reader: stamps against a server's own send instants, body framings,
lines split across reads, and the stale keep-alive retry.

The stamps are checked against what causality allows, not against a time bound: with kernel receive timestamps
(Linux, plain http) a chunk's stamp is the instant it reached the host's network stack, between the server's
post-write stamps of the chunk before it and of itself, however late the client read it.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

from benchlib.measure.client.backends import ChatRequest, make_backend
from benchlib.measure.http import wire
from benchlib.measure.http.failures import RequestFailed
from benchlib.measure.pacing import event_loop
from benchlib.records.rows import RequestRecord
from tests.helpers import make_params


@pytest.fixture(scope="module")
def fake_process():
    """The fake server in its own process, as bench/measure_accuracy.py runs it (no GIL shared with the client)."""
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve().parents[2] / "fakes" / "servers.py")], stdout=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    assert line.startswith("PORT "), line
    yield f"http://127.0.0.1:{int(line.split()[1])}"
    proc.terminate()
    proc.wait(timeout=10)


def test_stamps_are_arrival_instants_bounded_by_the_servers_sends_at_32_streams(fake_process):
    """64 requests over 32 concurrent streams, every delta's stamp held to what causality allows, so the check
    holds however busy the machine is: a delta cannot arrive before the server finished writing the one before
    it (its send instant, logged right after the write), and — with kernel receive timestamps (Linux, plain
    http), which must then stamp every read — it is not stamped after its own send. A read-callback stamp would
    be, whenever the loop got round to the read late. Deltas one read took together share the read's stamp, the
    arrival of its last segment (the client_stalled case), so each is held to the send of the last delta stamped
    with it; a last delta read with the stream's end has no logged send to be held to. How close the stamps come
    to the sends is bench/measure_accuracy.py's measurement, not a unit test's."""
    params = make_params(fake_process, {"ttft": 0.05, "itl": 0.01, "tokens": 20}, run={"timeout_s": 10})
    stamped_before, reads_before = wire._RawConnection.kernel_stamps_seen, wire._RawConnection.reads_seen

    async def drive():
        backend = make_backend(params.server, params.run, 32)
        records = [RequestRecord(variant=f"w{i}") for i in range(64)]
        gate = asyncio.Semaphore(32)

        async def one(record):
            async with gate:
                message = [{"role": "user", "content": f"[{record.variant}] go"}]
                await backend.execute(ChatRequest(messages=message, max_tokens=64), record)

        await asyncio.gather(*(one(r) for r in records))
        await backend.aclose()
        return records

    records = event_loop.run(drive())
    kernel = sys.platform.startswith("linux")
    stamped = wire._RawConnection.kernel_stamps_seen - stamped_before
    reads = wire._RawConnection.reads_seen - reads_before
    if kernel:
        assert stamped == reads > 0, f"{stamped} of {reads} reads carried the kernel's receive timestamp; the " \
                                     f"last that fell back: {list(wire._RawConnection.fallbacks)[-8:]}"
    slack = 1e6  # ns: converting the kernel's realtime stamp to the monotonic clock
    log = {e["prompt"].split("[", 2)[-1].split("]")[0]: e for e in httpx.get(f"{fake_process}/log").json()}
    for record in records:
        assert record.status == "ok", record.error_message
        entry = log[record.variant]
        sends = np.asarray(entry["sends_ns"], dtype=float)
        gaps = np.asarray(record.itl_s) * 1e9
        stamps = record.start_ns + record.ttft_s * 1e9 + np.concatenate([[0.0], np.cumsum(gaps)])
        assert len(stamps) == len(sends) == 20
        assert (gaps >= 0).all() and stamps[0] >= entry["received_ns"] - slack
        assert (stamps[1:] >= sends[:-1] - slack).all(), "a delta stamped before the one before it was sent"
        if not kernel:
            continue
        shared = np.concatenate([gaps == 0, [False]])  # delta i was read together with delta i + 1
        with_end = record.start_ns + record.e2e_s * 1e9 - stamps[-1] < 1e3  # the last delta came with the end
        last = len(stamps) - 1
        for i in range(len(stamps)):
            j = i
            while shared[j]:
                j += 1
            if j == last and with_end:
                continue
            assert stamps[i] <= sends[j] + slack, f"delta {i} stamped {(stamps[i] - sends[j]) / 1e6:.3f} ms " \
                                                  f"after it was sent: not the kernel's arrival stamp"


class ScriptedServer:
    """Answers each request on a connection with the next scripted list of byte pieces (sent with small gaps);
    `close_after` closes the connection after that many responses without announcing it."""

    def __init__(self, responses: list[list[bytes]], close_after: int | None = None):
        self.responses = responses
        self.close_after = close_after
        self.connections = 0
        self.server: asyncio.AbstractServer | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while self.responses:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0]
                             .split(b":")[1])
                await reader.readexactly(length)
                for piece in self.responses.pop(0):
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.005)
                served += 1
                if self.close_after is not None and served >= self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"


def sse(*chunks: str) -> bytes:
    return "".join(f"data: {c}\r\n\r\n" for c in chunks).encode()


CONTENT = ['{"choices":[{"index":0,"delta":{"content":"hel"}}]}', '{"choices":[{"index":0,"delta":{"content":"lo"}}]}',
           '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}', "[DONE]"]


def collect(url: str, requests: int = 1) -> list[tuple[list[bytes], wire.Exchange]]:
    async def run():
        http = wire.StreamingHTTP(url, connect_timeout=2, read_timeout=2)
        out = []
        for _ in range(requests):
            lines: list[bytes] = []

            def on_line(line: bytes, now: int) -> bool:
                lines.append(line)
                return line == b"data: [DONE]"

            exchange = await http.post_stream("/chat/completions", b"{}", on_line)
            out.append((lines, exchange))
        await http.aclose()
        return out

    return event_loop.run(run())


def serve(script: ScriptedServer) -> str:
    return event_loop.run(script.start())


def test_chunked_lines_split_across_reads_are_reassembled():
    body = sse(*CONTENT)
    framed = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    # split inside the head, inside the chunk-size line, inside a JSON line and between \r and \n
    data = head + framed
    cuts = [10, len(head) + 1, len(head) + 30, data.index(b"\r\n\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo") + 1]
    pieces = [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]
    script = ScriptedServer([pieces])
    (lines, exchange), = collect(serve(script))
    payloads = [l for l in lines if l]
    assert payloads == [f"data: {c}".encode() for c in CONTENT]
    assert exchange.status == 200 and exchange.finished


def test_content_length_and_close_delimited_bodies():
    body = sse(*CONTENT)
    fixed = [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body]
    script = ScriptedServer([fixed])
    (lines, _), = collect(serve(script))
    assert [l for l in lines if l][-1] == b"data: [DONE]"
    no_done = sse(*CONTENT[:3]).rstrip(b"\r\n")  # HTTP/1.0, ends with the connection, last line unterminated
    script = ScriptedServer([[b"HTTP/1.0 200 OK\r\n\r\n", no_done]], close_after=1)
    (lines, exchange), = collect(serve(script))
    assert [l for l in lines if l] == [f"data: {c}".encode() for c in CONTENT[:3]]
    assert exchange.body_complete and not exchange.keep_alive


def test_stale_keep_alive_connection_is_retried_once():
    body = sse(*CONTENT)
    response = [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body]
    # the server silently closes each connection after one response; the pooled one is dead on reuse
    script = ScriptedServer([list(response), list(response)], close_after=1)
    results = collect(serve(script), requests=2)
    assert [r[1].status for r in results] == [200, 200]
    assert script.connections == 2


def test_http_error_carries_the_servers_message():
    error = b'{"error": {"message": "model is loading"}}'
    script = ScriptedServer([[b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\nContent-Length: %d\r\n\r\n"
                              % len(error) + error]])
    with pytest.raises(RequestFailed) as failure:
        collect(serve(script))
    assert failure.value.kind == "http_503" and failure.value.message == "model is loading"
    assert failure.value.retry_after == 2.0


class ClosesIdleOnReuse:
    """A keep-alive server that answers the first request on each connection, then closes that connection as the
    next request on it arrives, before any byte of a response: the race a server's idle keep-alive timeout makes
    (llama-server's cpp-httplib closes after 5 s idle) when the client sends just as the server closes."""

    def __init__(self):
        self.connections = 0
        self.requests = 0
        self.server: asyncio.AbstractServer | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            for answered in (True, False):
                head = await reader.readuntil(b"\r\n\r\n")
                length = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0]
                             .split(b":")[1])
                await reader.readexactly(length)
                self.requests += 1
                if not answered:
                    break
                body = sse(*CONTENT)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n"
                             % len(body) + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"


def test_a_pooled_connection_closed_unanswered_is_resent_once_and_counted():
    script = ClosesIdleOnReuse()
    params = make_params(serve(script), None, "openai")
    records = [RequestRecord(model="m", task="t", suite="s", host="h") for _ in range(3)]

    async def run() -> None:
        backend = make_backend(params.server, params.run)
        try:
            for record in records:
                await backend.execute(ChatRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=4), record)
        finally:
            await backend.aclose()

    event_loop.run(run())
    assert [r.status for r in records] == ["ok", "ok", "ok"], [r.error_message for r in records]
    assert [r.response_text for r in records] == ["hello"] * 3
    # the first request opened a connection; each later one went out on the pooled connection, met the close,
    # and was sent again on a fresh one: counted on its row, not a stream_cut
    assert [r.reconnects for r in records] == [0, 1, 1]
    assert script.connections == 3 and script.requests == 5


def test_the_realtime_offset_of_a_kernel_stamp_survives_a_preemption_between_the_clock_reads(monkeypatch):
    # realtime runs exactly 1e18 ns ahead of the monotonic clock; the first bracket is preempted for 5 ms after
    # its realtime read, which read back to back would shift the offset (and every stamp of that read) by 5 ms
    monotonic = iter([0, 5_000_000, 10_000_000, 10_000_200])
    realtime = iter([1_000_000_000_000_000_000 + 100, 1_000_000_000_000_000_000 + 10_000_100])
    monkeypatch.setattr(wire.time, "perf_counter_ns", lambda: next(monotonic))
    monkeypatch.setattr(wire.time, "time_ns", lambda: next(realtime))
    assert wire._realtime_minus_monotonic() == (1_000_000_000_000_000_000, 101)


def _read_with_kernel_stamp(monkeypatch, arrival_after_read_ns: int) -> tuple[int, int, int]:
    """One _RawConnection read whose kernel stamp converts to `arrival_after_read_ns` after the read instant
    (realtime exactly 1e18 ns ahead, every clock bracket 2 µs wide): (delivered stamp, read instant, stamps)."""
    read_at = 5_000_000_000
    offset = 1_000_000_000_000_000_000
    kernel_real = offset + read_at + arrival_after_read_ns
    payload = struct.pack("qq", kernel_real // 1_000_000_000, kernel_real % 1_000_000_000)
    monotonic = iter([read_at, read_at + 10_000, read_at + 12_000])
    monkeypatch.setattr(wire.time, "perf_counter_ns", lambda: next(monotonic))
    monkeypatch.setattr(wire.time, "time_ns", lambda: offset + read_at + 11_000)

    class Socket:
        def recvmsg(self, size, ancillary_size):
            return b"data: {}\n\n", [(socket.SOL_SOCKET, wire.SO_TIMESTAMPNS, payload)], 0, None

    delivered = []
    conn = object.__new__(wire._RawConnection)
    conn.sock, conn.kernel_stamps, conn.reads = Socket(), True, 0
    conn.deliver = lambda data, stamp: delivered.append(stamp)
    before = wire._RawConnection.kernel_stamps_seen
    conn._readable()
    return delivered[0], read_at, wire._RawConnection.kernel_stamps_seen - before


def test_a_kernel_stamp_converted_just_past_the_read_is_the_read_instant_not_a_fallback(monkeypatch):
    # a segment that lands microseconds before the read can convert to a few µs after it (the realtime offset is
    # known to half its bracket): it is the kernel's stamp, held to the read instant
    stamp, read_at, stamped = _read_with_kernel_stamp(monkeypatch, 3_000)
    assert (stamp, stamped) == (read_at, 1)
    stamp, read_at, stamped = _read_with_kernel_stamp(monkeypatch, -40_000)
    assert (stamp, stamped) == (read_at - 40_000, 1)


def test_a_kernel_stamp_after_a_clock_step_falls_back_to_the_read_instant(monkeypatch):
    # realtime stepped back 5 ms between the arrival and the read: the converted stamp lies in the future
    stamp, read_at, stamped = _read_with_kernel_stamp(monkeypatch, 5_000_000)
    assert (stamp, stamped) == (read_at, 0)
    # and the client keeps why, for the diagnosis: the connection's first read, its kernel stamp 5 ms after the
    # read, converted with an offset good to 1,001 ns (half its 2 µs bracket)
    assert wire._RawConnection.fallbacks[-1] == wire.Fallback("after the read", 0, 5_000_000, 1_001, 0)


LINUX = sys.platform.startswith("linux")


@pytest.mark.skipif(not LINUX, reason="kernel receive timestamps are Linux's (elsewhere reads carry their read instant)")
def test_the_first_connection_finds_the_kernel_stamping_and_the_process_keeps_it_on(monkeypatch):
    monkeypatch.setattr(wire, "_stamp_keeper", None)
    monkeypatch.setattr(wire, "stamp_probe", None)
    stamped, reads = wire._RawConnection.kernel_stamps_seen, wire._RawConnection.reads_seen
    body = sse(*CONTENT)
    script = ScriptedServer([[b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body), body]])
    (lines, _), = collect(serve(script))
    assert lines[-1] == b"data: [DONE]"
    keeper = wire._stamp_keeper
    try:
        assert wire.stamp_probe is not None and wire.stamp_probe.stamped, wire.stamp_probe
        # the connection is closed: the process still asks for stamps, so the host's switch stays on
        assert keeper.getsockopt(socket.SOL_SOCKET, wire.SO_TIMESTAMPNS) == 1
        assert wire._RawConnection.kernel_stamps_seen - stamped == wire._RawConnection.reads_seen - reads > 0
    finally:
        keeper.close()


@pytest.mark.skipif(not LINUX, reason="kernel receive timestamps are Linux's")
def test_the_first_connection_waits_while_the_kernel_switches_stamping_on(monkeypatch):
    """The kernel switches receive stamping on for the whole host, late on a busy one, and a test cannot switch it
    off while any process on the machine asks for stamps: the first three probe segments (real loopback segments)
    read as unstamped here, as they arrive before the kernel's deferred switch has run."""
    monkeypatch.setattr(wire, "_stamp_keeper", None)
    monkeypatch.setattr(wire, "stamp_probe", None)
    real, seen = wire._segment_stamped, []

    def switching_on(receiver: socket.socket, sender: socket.socket) -> bool:
        seen.append(real(receiver, sender))
        return seen[-1] and len(seen) > 3

    monkeypatch.setattr(wire, "_segment_stamped", switching_on)
    try:
        probe = wire.kernel_stamps_on()
        assert probe.stamped and probe.probes == len(seen) >= 4, (probe, seen)
        assert probe.waited_ns >= 3_000_000  # a millisecond's pause before each probe after the first
        assert wire.kernel_stamps_on() is probe  # once per process
    finally:
        wire._stamp_keeper.close()
