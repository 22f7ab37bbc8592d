"""Lean HTTP/1.1 streaming for the measurement hot path: each network read is stamped on arrival and parsed
inside the event loop's read callback.

Why not httpx here: the httpx → httpcore → h11 → anyio stack costs several times this module's CPU per
streamed chunk, and the openai SDK more per request it builds; with many streams on one event loop a chunk then
waits behind the other streams' parsing before it is stamped, and TTFT and ITL come out high (the figures, from
bench/measure_accuracy.py against a server logging its own send instants: bench/results/2026-11-22-measure-accuracy.md,
"How the client gets there"). Here the loop's read callback undoes the chunked framing and hands complete lines to the
caller's
`on_line(line, arrival_ns)` at once, with no task switch per chunk.

The stamp: on plain-HTTP connections on Linux, the kernel's own receive timestamp of the read (SO_TIMESTAMPNS,
taken when the packet reached the host's network stack, CLOCK_REALTIME converted to perf_counter_ns at the
read), so a busy client loop no longer delays the stamps — only when one read coalesces several chunks do the
earlier ones carry the last one's arrival (the kernel reports the last segment's time). Elsewhere (https,
other systems) the stamp is perf_counter_ns() in the read callback. Lines that arrived in one read share its
stamp. The kernel stamps segments only while some socket on the host asks it to, switching that on late on a busy
host: the process holds one asking socket for life and waits for a stamped loopback segment before its first
connection (`kernel_stamps_on`); a read that still falls back is kept in `_RawConnection.fallbacks`, with why.

Scope: http:// and https:// (TLS via the ssl module), a keep-alive connection pool (one request per
connection at a time), chunked / Content-Length / close-delimited bodies, identity asked (gzip/deflate
decoded if sent anyway), redirects not followed (http_3xx with the Location), no proxies (callers keep a full HTTP client for URLs a proxy applies to, see `direct_route`).
Failures raise benchlib.measure.http.failures.RequestFailed(kind, message, http_status, retry_after), the type every
HTTP path raises (connect_timeout, connection_refused, dns_failure, connect_error, read_timeout,
deadline_exceeded, response_too_large, stream_cut, bad_response, bad_encoding, not_a_stream, http_<status>).
Every exchange has three limits: the idle read timeout, an overall deadline from the instant the request goes
on the wire, and a byte cap (benchlib.measure.http.http_response.Exchange)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import os
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse
import urllib.request
from typing import Callable, NamedTuple

from benchlib.measure.http.failures import RequestFailed, connect_failure
from benchlib.measure.http.http_response import Exchange, LineHandler
from benchlib.measure.pacing import send_process
from benchlib.measure.pacing.event_loop import OnTime, on_time

# Kernel receive timestamps (struct timespec, CLOCK_REALTIME): SO_TIMESTAMPNS is 35 on Linux (Python does not
# export the constant); the control message has the same type.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)


ANC_SIZE = 64


READ_SIZE = 256 * 1024


def direct_route(url: str) -> bool:
    """True when `url` is http(s) and no proxy from the environment applies to it (then httpx would go
    through the proxy, and so must we: the caller keeps its full client for that case)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    proxies = urllib.request.getproxies()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return True
    try:
        return bool(urllib.request.proxy_bypass(parts.hostname))
    except OSError:
        return False


class _Pooled:
    """What both connection kinds share: reads go to the current exchange; after it, the connection goes back
    to the pool if reusable, else is dropped."""

    def deliver(self, data: bytes, stamp: int) -> None:
        exchange = self.exchange
        if exchange is None:  # bytes nobody asked for: the connection cannot be trusted any more
            self.drop()
            return
        exchange.feed(data, stamp)

    def exchange_done(self, exchange: Exchange) -> None:
        if self.exchange is exchange:
            self.exchange = None
            if exchange.keep_alive and not self.closed:
                self.pool.release(self)
            else:
                self.drop()


class _Connection(_Pooled, asyncio.Protocol):
    """A keep-alive connection; the active exchange gets every read, stamped in the read callback."""

    def __init__(self, pool: "StreamingHTTP"):
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.deliver(data, time.perf_counter_ns())

    def eof_received(self) -> bool:
        return False  # close; connection_lost reports it to the exchange

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            exchange.lost(exc, time.perf_counter_ns())
        self.pool.discard(self)

    def drop(self) -> None:
        self.closed = True
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            exchange.abandon()
        if self.transport is not None:
            self.transport.abort()

    async def send(self, payload: bytes) -> None:
        self.transport.write(payload)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    @property
    def usable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()


REALTIME_BRACKET_NS = 20_000  # a realtime read whose two monotonic neighbours lie further apart was preempted
# NTP slews CLOCK_REALTIME by up to 500 ppm against the monotonic clock; over the microseconds between a segment's
# arrival and its read that is far below this, while a clock step (what the 60 s window guards against) is not
KERNEL_STAMP_GRACE_NS = 50_000


def _realtime_minus_monotonic() -> tuple[int, int]:
    """CLOCK_REALTIME − the perf_counter clock, now, and the most that figure can be off: the realtime read
    bracketed by two monotonic reads and set at their midpoint, off by at most half the bracket. A pause between
    two back-to-back reads (a busy machine preempting this thread there) would shift a kernel stamp by the pause,
    so a bracket wider than REALTIME_BRACKET_NS is read again (the narrowest of three is kept)."""
    best = None
    for _ in range(3):
        before = time.perf_counter_ns()
        real = time.time_ns()
        after = time.perf_counter_ns()
        if best is None or after - before < best[0]:
            best = (after - before, real - (before + after) // 2)
        if after - before <= REALTIME_BRACKET_NS:
            break
    return best[1], best[0] // 2 + 1


class Fallback(NamedTuple):
    """A read whose kernel stamp was not used (it carries the read instant instead), and why."""

    reason: str  # "no kernel stamp" (none came with the read), "after the read", "clock step"
    read_index: int  # which read of its connection (0: the first, the response head of its first request)
    kernel_minus_read_ns: int | None  # the kernel stamp converted to the monotonic clock, minus the read instant
    error_ns: int | None  # the conversion's own error bound (half the realtime read's monotonic bracket)
    flags: int  # recvmsg's flags (MSG_CTRUNC: the control message did not fit)


class StampProbe(NamedTuple):
    """How this process found the kernel stamping received segments before its first plain-HTTP connection."""

    probes: int  # loopback segments sent until one came back stamped (1: it already did)
    waited_ns: int
    stamped: bool  # False: none did within STAMP_WAIT_S (reads then fall back to their read instants)


STAMP_WAIT_S = 1.0
_stamp_keeper: socket.socket | None = None
stamp_probe: StampProbe | None = None  # diagnostics


def _segment_stamped(receiver: socket.socket, sender: socket.socket) -> bool:
    """One loopback segment sent and read back: did the kernel stamp it on arrival?"""
    sender.send(b".")
    _, ancillary, _, _ = receiver.recvmsg(16, ANC_SIZE)
    return any(level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS for level, kind, _ in ancillary)


def kernel_stamps_on() -> StampProbe | None:
    """Linux stamps a received segment only while some socket on the host asks for stamps, and the first socket to
    ask switches stamping on through a deferred work item (net_enable_timestamp: netstamp_wanted goes from 0 by a
    workqueue that flips a static key). On a busy host that item can run after a new connection's first segments
    arrived — the response head of each of 32 fresh streams read without a stamp — and the last timestamping socket
    to close switches stamping off again, so each run of a long process can lose its first reads.

    So the process keeps one socket asking for stamps for its whole life, and before its first plain-HTTP
    connection sends loopback segments until one comes back stamped (at most STAMP_WAIT_S; the first already is
    wherever stamping was on). Blocking, once per process: nothing of it is on the wire yet. None off Linux."""
    global _stamp_keeper, stamp_probe
    if SO_TIMESTAMPNS is None or _stamp_keeper is not None:
        return stamp_probe
    keeper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        keeper.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        keeper.close()
        return None
    _stamp_keeper = keeper
    started = time.perf_counter_ns()
    probes, stamped = 0, False
    try:
        with socket.create_server(("127.0.0.1", 0)) as listener, \
                socket.create_connection(listener.getsockname(), timeout=STAMP_WAIT_S) as sender:
            receiver, _ = listener.accept()
            with receiver:
                receiver.settimeout(STAMP_WAIT_S)
                receiver.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                while not stamped and (not probes or time.perf_counter_ns() - started < STAMP_WAIT_S * 1e9):
                    if probes:
                        time.sleep(0.001)
                    probes += 1
                    stamped = _segment_stamped(receiver, sender)
    except OSError:  # no loopback here (a namespace without lo): the reads' own stamps will say
        pass
    stamp_probe = StampProbe(probes, time.perf_counter_ns() - started, stamped)
    return stamp_probe


class _RawConnection(_Pooled):
    """A plain-TCP keep-alive connection read with recvmsg in the loop's reader callback; each read carries the
    kernel's receive timestamp when SO_TIMESTAMPNS is on (see the module docstring)."""

    kernel_stamps_seen = 0  # reads stamped by the kernel, over every connection of the process (diagnostics)
    reads_seen = 0  # reads with data, over every connection of the process (diagnostics)
    fallbacks: collections.deque[Fallback] = collections.deque(maxlen=256)  # the latest (diagnostics)

    def __init__(self, pool: "StreamingHTTP", sock: socket.socket, kernel_stamps: bool):
        self.pool = pool
        self.sock = sock
        self.kernel_stamps = kernel_stamps
        self.exchange: Exchange | None = None
        self.closed = False
        self.reads = 0
        self.write_lock = threading.Lock()  # the pacing thread's write against the loop closing the socket
        self.held: tuple[send_process.SendingProcess, int] | None = None  # a write the sending process holds
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            data, ancillary, flags, _ = self.sock.recvmsg(READ_SIZE, ANC_SIZE if self.kernel_stamps else 0)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        now = time.perf_counter_ns()
        if not data:
            self._lost(None)
            return
        stamp = now
        _RawConnection.reads_seen += 1
        self.reads += 1
        fallback = Fallback("no kernel stamp", self.reads - 1, None, None, flags) if self.kernel_stamps else None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= 16:
                seconds, nanos = struct.unpack_from("qq", payload)
                offset, error = _realtime_minus_monotonic()
                kernel = seconds * 1_000_000_000 + nanos - offset
                if now < kernel <= now + error + KERNEL_STAMP_GRACE_NS:
                    # a segment that landed just before the read, converted with the offset's own error: it
                    # arrived no later than the read, so the read instant is its closest possible stamp
                    kernel = now
                if now - 60_000_000_000 < kernel <= now:  # a clock step would put it off: keep the read time
                    stamp, fallback = kernel, None
                    _RawConnection.kernel_stamps_seen += 1
                else:
                    fallback = Fallback("after the read" if kernel > now else "clock step", self.reads - 1,
                                        kernel - now, error, flags)
        if fallback is not None:
            _RawConnection.fallbacks.append(fallback)
        self.deliver(data, stamp)

    def _close_socket(self) -> None:
        if self.closed:
            return
        with self.write_lock:  # a write the pacing thread is making finishes first: its fd stays this socket's
            self.closed = True
        if self.held is not None:  # not to be written after all (it holds its own descriptor of the socket)
            sender, ident = self.held
            sender.cancel(ident)
        try:
            self.loop.remove_reader(self.sock.fileno())
        except (ValueError, OSError):
            pass
        self.sock.close()
        self.pool.discard(self)

    def _lost(self, exc: BaseException | None) -> None:
        exchange, self.exchange = self.exchange, None
        self._close_socket()
        if exchange is not None:
            exchange.lost(exc, time.perf_counter_ns())

    def drop(self) -> None:
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            exchange.abandon()
        self._close_socket()

    async def send(self, payload: bytes) -> None:
        await self.loop.sock_sendall(self.sock, payload)

    async def send_on_time(self, payload: bytes, timed: OnTime) -> int:
        """`payload` written at its due instant (at once if that has passed) with one non-blocking send, stamped
        right before it as `post_stream` stamps a send from the loop; what that send could not take goes out from
        the loop. Returns the stamp. The write is made by this process's sending process (send_process: an
        interpreter of its own, so no GIL between the instant and the wire) once it is up, else by the pacing
        thread. The response is read by the loop as ever (the exchange is installed before this is called): it may
        arrive before the loop hears of the write, and the caller takes the stamp from here before it reads the
        exchange's outcome."""
        written: asyncio.Future = self.loop.create_future()

        def settle(outcome: tuple[int, int] | BaseException) -> None:
            if written.done():
                return
            written.set_exception(outcome) if isinstance(outcome, BaseException) else written.set_result(outcome)

        def tell(outcome: tuple[int, int] | BaseException) -> None:  # from another thread
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                self.loop.call_soon_threadsafe(settle, outcome)

        def reported(stamp: int, sent: int, failure: int) -> None:  # the sending process's report
            if failure == errno.ECANCELED:
                tell(ConnectionResetError(errno.ECONNRESET, "the connection closed before its request was due"))
            elif failure == errno.ECONNABORTED:
                tell(ConnectionAbortedError(errno.ECONNABORTED, "the sending process stopped before the request "
                                                                "was due"))
            else:
                tell(OSError(failure, os.strerror(failure)) if failure else (stamp, sent))

        def write() -> None:  # in the pacing thread
            outcome: tuple[int, int] | BaseException
            with self.write_lock:
                if self.closed or written.cancelled():
                    outcome = ConnectionResetError(errno.ECONNRESET, "the connection closed before its request "
                                                                     "was due")
                else:
                    stamp = time.perf_counter_ns()
                    try:
                        outcome = (stamp, self.sock.send(payload))
                    except (BlockingIOError, InterruptedError):
                        outcome = (stamp, 0)
                    except OSError as exc:
                        outcome = exc
            tell(outcome)

        sender = send_process.shared(start=False)
        ident = sender.send_at(self.sock, payload, timed.due_ns, reported) if sender is not None else 0
        if ident:
            self.held = (sender, ident)
            timed.handed_to(sender)
        else:
            timed.at_due(write, lambda: settle(ConnectionAbortedError(
                errno.ECONNABORTED, "the pacing thread stopped before the request was due")))
        try:
            stamp, sent = await written
        except BaseException:
            if ident:  # cancelled before its instant: not to be written (a write already made reports as made)
                sender.cancel(ident)
            raise
        finally:
            self.held = None
        if sent < len(payload):
            await self.loop.sock_sendall(self.sock, memoryview(payload)[sent:])
        return stamp

    def close(self) -> None:
        self.drop()

    @property
    def usable(self) -> bool:
        return not self.closed


class StreamingHTTP:
    """POST a body and stream the response's lines to a callback; keep-alive pool for one origin."""

    def __init__(self, base_url: str, *, connect_timeout: float, read_timeout: float,
                 headers: dict[str, str] | None = None, deadline_s: float | None = None,
                 max_bytes: int | None = None):
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base_path = parts.path.rstrip("/")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.deadline_s = deadline_s  # per exchange, from the instant the request goes on the wire
        self.max_bytes = max_bytes  # per response, read and decoded
        default_port = (self.scheme == "https" and self.port == 443) or (self.scheme == "http" and self.port == 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if default_port else f"{host}:{self.port}"
        self.headers = {"User-Agent": "frontier-bench", "Accept-Encoding": "identity", "Connection": "keep-alive",
                        **(headers or {})}
        self._ssl: ssl.SSLContext | None = None
        self._addresses: list | None = None
        self.idle: list[_Connection] = []
        self.live: set[_Connection] = set()

    def _ssl_context(self) -> ssl.SSLContext | None:
        if self.scheme != "https":
            return None
        if self._ssl is None:
            try:
                import certifi  # httpx's own CA bundle, so both clients trust the same servers

                self._ssl = ssl.create_default_context(cafile=certifi.where())
            except ImportError:
                self._ssl = ssl.create_default_context()
        return self._ssl

    def request_bytes(self, path: str, body: bytes, content_type: str, accept: str) -> bytes:
        lines = [f"POST {self.base_path}{path} HTTP/1.1", f"Host: {self.host_header}",
                 f"Content-Type: {content_type}", f"Accept: {accept}", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def _connect(self) -> "_Connection | _RawConnection":
        if self.scheme == "http":
            return await self._connect_raw()
        loop = asyncio.get_running_loop()
        context = self._ssl_context()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: _Connection(self), self.host, self.port, ssl=context,
                                       server_hostname=self.host if context else None),
                self.connect_timeout)
        except asyncio.TimeoutError:
            raise RequestFailed("connect_timeout", f"connect to {self.host_header} timed out after "
                                                 f"{self.connect_timeout:g} s") from None
        except ssl.SSLError as exc:
            raise RequestFailed("connect_error", f"TLS handshake with {self.host_header} failed: {exc}") from None
        except OSError as exc:
            raise connect_failure(exc, self.host) from None
        self.live.add(conn)
        return conn

    async def _connect_raw(self) -> _RawConnection:
        """Resolve, then try each address in turn (as create_connection does) within the connect timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.connect_timeout
        infos = self._addresses
        if infos is None:  # resolved once per pool: 64 new streams must not queue 64 lookups in the executor
            try:
                infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
            except (socket.gaierror, UnicodeError):
                try:
                    infos = await asyncio.wait_for(loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM),
                                                   self.connect_timeout)
                except asyncio.TimeoutError:
                    raise RequestFailed("connect_timeout", f"resolving {self.host} timed out after "
                                                         f"{self.connect_timeout:g} s") from None
                except socket.gaierror as exc:
                    raise connect_failure(exc, self.host) from None
            self._addresses = infos
        kernel_stamps_on()
        errors: list[str] = []
        refused = False
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            try:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise asyncio.TimeoutError
                await asyncio.wait_for(loop.sock_connect(sock, address), remaining)
            except asyncio.TimeoutError:
                sock.close()
                raise RequestFailed("connect_timeout", f"connect to {self.host_header} timed out after "
                                                     f"{self.connect_timeout:g} s") from None
            except OSError as exc:
                sock.close()
                refused = refused or exc.errno == errno.ECONNREFUSED or isinstance(exc, ConnectionRefusedError)
                errors.append(f"Connect call failed {address}: {exc.strerror or exc}")
                continue
            except BaseException:
                sock.close()
                raise
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            stamps = False
            if SO_TIMESTAMPNS is not None:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                    stamps = True
                except OSError:
                    pass
            conn = _RawConnection(self, sock, stamps)
            self.live.add(conn)
            return conn
        message = "; ".join(errors) or f"no address for {self.host}"
        raise RequestFailed("connection_refused" if refused else "connect_error", message)

    async def _acquire(self, fresh: bool = False) -> tuple[_Connection, bool]:
        """A pooled connection that still looks open, else a new one; `fresh` skips the pool (a retry after a
        stale connection: the other pooled ones may have been closed by the server at the same moment)."""
        while self.idle and not fresh:
            conn = self.idle.pop()
            if conn.usable:
                return conn, True
        return await self._connect(), False

    def release(self, conn: _Connection) -> None:
        if conn.usable:
            self.idle.append(conn)

    def discard(self, conn: _Connection) -> None:
        self.live.discard(conn)
        if conn in self.idle:
            self.idle.remove(conn)

    async def post_stream(self, path: str, body: bytes, on_line: LineHandler, *,
                          on_wire: Callable[[int, int], None] | None = None, content_type: str = "application/json",
                          accept: str = "text/event-stream") -> Exchange:
        """Send one POST; `on_line(line, arrival_ns)` gets every body line as it arrives (in the read callback:
        keep it short, raise to abort). Returns once on_line returned True or the body ended; a status >= 300
        raises RequestFailed(http_<status>) with the server's message, a 2xx of a Content-Type other than
        `accept` raises not_a_stream. `on_wire(ns, ready_ns)` gets the instant right before
        the request is written to a ready connection (after any connect), again if a stale keep-alive connection
        forced one retry on a fresh connection, and the instant the request was ready to go: the same, except for
        a request of a paced open-loop level (event_loop.on_time), prepared ahead and written at its due instant by
        the sending process (or the pacing thread) — ready_ns is when it was handed over."""
        payload = self.request_bytes(path, body, content_type, accept)
        timed = on_time()  # an open-loop request started ahead of its instant (event_loop.paced's lead)
        for attempt in (0, 1):
            conn, reused = await self._acquire(fresh=attempt > 0)
            # A first try on a plain socket is written at the due instant by the sending process; TLS (its
            # transport's state is the loop's) and a retry go from the loop, never before the instant.
            handed = timed is not None and attempt == 0 and isinstance(conn, _RawConnection)
            if timed is not None and not handed:
                await timed.due()
            # right before the send: connection setup is not the server's time (the writer's own stamp below)
            wire_ns = max(time.perf_counter_ns(), timed.due_ns) if handed else time.perf_counter_ns()
            if on_wire is not None and not handed:
                on_wire(wire_ns, wire_ns)
            exchange = Exchange(conn, on_line, self.read_timeout, wire_ns, expect=accept, deadline_s=self.deadline_s,
                                max_bytes=self.max_bytes)
            conn.exchange = exchange
            try:
                if handed:
                    ready_ns = time.perf_counter_ns()
                    wire_ns = await conn.send_on_time(payload, timed)
                    if on_wire is not None:  # before the exchange's outcome is read: TTFT's origin is this stamp
                        on_wire(wire_ns, ready_ns)
                else:
                    await conn.send(payload)
            except OSError as exc:  # e.g. the server closed this idle connection a moment ago
                failed = exchange.future.done() and not exchange.future.cancelled() and exchange.future.exception()
                conn.drop()
                retry = reused and attempt == 0
                if isinstance(failed, RequestFailed) and not (failed.before_response and retry):
                    raise failed from None  # the exchange ended first (its deadline): that is why
                if retry:
                    continue
                raise RequestFailed("stream_cut", f"sending the request failed: {exc}") from None
            except BaseException:
                if handed:  # cancelled while its writer was to write: the connection's state is unknown
                    conn.drop()
                raise
            try:
                return await exchange.future
            except RequestFailed as failure:
                if failure.before_response and reused and attempt == 0:
                    continue  # the server had closed this idle connection; a fresh one gets the request
                raise
            except BaseException:  # cancelled (e.g. Ctrl-C): the connection's state is unknown, drop it
                conn.drop()
                raise
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        for conn in list(self.live):
            conn.close()
        self.idle.clear()
        self.live.clear()
