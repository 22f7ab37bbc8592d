"""Lean HTTP/1.1 streaming for the measurement hot path: each network read is stamped on arrival and parsed
inside the event loop's read callback.

Why not httpx here: on the 2-core CI box the httpx → httpcore → h11 → anyio stack costs ~100 µs of CPU per
streamed chunk and the openai SDK ~1 ms per request it builds; at 64 streams × 50 chunks/s one event loop
was ~40 % busy and a chunk waited behind the other streams' parsing before it was stamped (bench/
measure_accuracy.py against a server logging its own send instants: TTFT +4.6 ms p50 / +24 ms p99, ITL
+1 %). Here the loop's read callback undoes the chunked framing and hands complete lines to the caller's
`on_line(line, arrival_ns)` at once: ~30 µs per chunk, no task switch per chunk.

The stamp: on plain-HTTP connections on Linux, the kernel's own receive timestamp of the read (SO_TIMESTAMPNS,
taken when the packet reached the host's network stack, CLOCK_REALTIME converted to perf_counter_ns at the
read), so a busy client loop no longer delays the stamps — only when one read coalesces several chunks do the
earlier ones carry the last one's arrival (the kernel reports the last segment's time). Elsewhere (https,
other systems) the stamp is perf_counter_ns() in the read callback. Lines that arrived in one read share its
stamp.

Scope: http:// and https:// (TLS via the ssl module), a keep-alive connection pool (one request per
connection at a time), chunked / Content-Length / close-delimited bodies, no compression (Accept-Encoding:
identity), no proxies (callers keep a full HTTP client for URLs a proxy applies to, see `direct_route`).
Failures raise `WireFailure(kind, message, http_status, retry_after)` with the error kinds of
benchlib.client (connect_timeout, connection_refused, dns_failure, connect_error, read_timeout, stream_cut,
http_<status>).
"""

from __future__ import annotations

import asyncio
import errno
import json
import socket
import ssl
import struct
import sys
import time
import urllib.parse
import urllib.request
from typing import Any, Callable

_HEAD, _BODY = 0, 1
_CHUNKED, _LENGTH, _CLOSE = 0, 1, 2
_SIZE, _DATA, _DATA_END, _TRAILER = 0, 1, 2, 3
MAX_HEAD = 64 * 1024
MAX_LINE = 16 * 1024 * 1024

LineHandler = Callable[[bytes, int], bool]  # (line without its newline, arrival ns) -> True when the stream is done
# Kernel receive timestamps (struct timespec, CLOCK_REALTIME): SO_TIMESTAMPNS is 35 on Linux (Python does not
# export the constant); the control message has the same type.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
ANC_SIZE = 64
READ_SIZE = 256 * 1024


class WireFailure(Exception):
    """A classified failure; `before_response` marks a reused connection that died before any byte came back."""

    def __init__(self, kind: str, message: str, http_status: int | None = None, retry_after: float | None = None,
                 before_response: bool = False):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.http_status = http_status
        self.retry_after = retry_after
        self.before_response = before_response


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


def error_message(body: bytes) -> str:
    """The server's own words from an error body: {"error": {"message": ...}}, {"error": "..."}, {"detail": ...}."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return text.strip()[:2000]
    if isinstance(data, dict):
        inner = data.get("error", data)
        if isinstance(inner, dict):
            return str(inner.get("message") or inner.get("detail") or inner)[:2000]
        return str(inner)[:2000]
    return text.strip()[:2000]


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class Exchange:
    """One request/response on a connection; fed from the protocol's callbacks."""

    __slots__ = ("conn", "on_line", "future", "read_timeout", "status", "reason", "headers", "wire_ns",
                 "first_byte_ns", "end_ns", "last_ns", "finished", "body_complete", "keep_alive", "_phase",
                 "_framing", "_remaining", "_cstate", "_fbuf", "_lbuf", "_head", "_error_body", "_timer",
                 "_received")

    def __init__(self, conn: "_Connection", on_line: LineHandler, read_timeout: float, wire_ns: int):
        self.conn = conn
        self.on_line = on_line
        self.future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.read_timeout = read_timeout
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.wire_ns = wire_ns
        self.first_byte_ns = 0
        self.end_ns = 0  # arrival of the line that ended the stream, or of the body's end
        self.last_ns = wire_ns
        self.finished = False  # on_line said the stream is done (e.g. [DONE]); the body may still trail
        self.body_complete = False
        self.keep_alive = True
        self._phase = _HEAD
        self._framing = _CLOSE
        self._remaining = 0
        self._cstate = _SIZE
        self._fbuf = b""
        self._lbuf = b""
        self._head = b""
        self._error_body: bytearray | None = None
        self._received = 0
        self._timer: asyncio.TimerHandle | None = None
        if read_timeout and read_timeout > 0:
            self._timer = asyncio.get_running_loop().call_later(read_timeout, self._check_idle)

    # ---- timeout ------------------------------------------------------------------------------------
    def _check_idle(self) -> None:
        self._timer = None
        if self.body_complete:
            return
        idle = (time.perf_counter_ns() - self.last_ns) / 1e9
        if idle + 1e-3 >= self.read_timeout:
            if not self.future.done():
                self._fail(WireFailure("read_timeout", f"read timed out: no data from the server for "
                                                       f"{self.read_timeout:g} s"))
            else:  # the caller has its answer; the body's end never came: drop the connection
                self.conn.drop()
            return
        self._timer = asyncio.get_running_loop().call_later(self.read_timeout - idle, self._check_idle)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ---- input --------------------------------------------------------------------------------------
    def feed(self, data: bytes, now: int) -> None:
        self.last_ns = now
        if not self.first_byte_ns:
            self.first_byte_ns = now
        self._received += len(data)
        try:
            while self._phase == _HEAD:
                data = self._head + data if self._head else data
                end = data.find(b"\r\n\r\n")
                if end < 0:
                    if len(data) > MAX_HEAD:
                        raise WireFailure("stream_cut", f"response head over {MAX_HEAD} bytes")
                    self._head = data
                    return
                self._head = b""
                self._parse_head(data[:end])
                data = data[end + 4:]
                if 100 <= self.status < 200:  # interim response (100 Continue): the real head follows
                    continue
                self._phase = _BODY
                if self._framing == _LENGTH and self._remaining == 0:
                    self._complete(now)
                    return
            if data:
                self._body(data, now)
        except BaseException as exc:  # noqa: BLE001 — a parse error or the caller's own failure ends the exchange
            self._fail(exc)

    def _parse_head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise WireFailure("stream_cut", f"not an HTTP response: {lines[0][:200]!r}")
        try:
            self.status = int(parts[1])
        except ValueError:
            raise WireFailure("stream_cut", f"bad status line: {lines[0][:200]!r}") from None
        self.reason = parts[2] if len(parts) > 2 else ""
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                key = name.strip().lower()
                headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
        self.headers = headers
        if 100 <= self.status < 200:
            return
        connection = headers.get("connection", "").lower()
        self.keep_alive = "close" not in connection and (parts[0] != "HTTP/1.0" or "keep-alive" in connection)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._framing, self._cstate = _CHUNKED, _SIZE
        elif "content-length" in headers:
            self._framing, self._remaining = _LENGTH, int(headers["content-length"])
        else:
            self._framing, self.keep_alive = _CLOSE, False
        if self.status >= 400:
            self._error_body = bytearray()

    def _body(self, data: bytes, now: int) -> None:
        if self._framing == _LENGTH:
            piece = data[:self._remaining]
            self._remaining -= len(piece)
            self._payload(piece, now)
            if self._remaining == 0:
                self._complete(now)
            return
        if self._framing == _CLOSE:
            self._payload(data, now)
            return
        buf = self._fbuf + data if self._fbuf else data
        self._fbuf = b""
        pos, size = 0, len(buf)
        while pos < size:
            state = self._cstate
            if state == _DATA:
                take = min(self._remaining, size - pos)
                self._payload(buf[pos:pos + take] if (pos or take != size) else buf, now)
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    self._cstate = _DATA_END
            elif state == _DATA_END:
                if size - pos < 2:
                    self._fbuf = buf[pos:]
                    return
                pos += 2
                self._cstate = _SIZE
            else:  # _SIZE or _TRAILER: a CRLF-terminated line
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    if size - pos > MAX_HEAD:
                        raise WireFailure("stream_cut", "chunk size line too long")
                    self._fbuf = buf[pos:]
                    return
                line = buf[pos:end]
                pos = end + 2
                if state == _TRAILER:
                    if not line:
                        self._complete(now)
                        return
                    continue
                try:
                    chunk = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise WireFailure("stream_cut", f"bad chunk size {line[:40]!r}") from None
                if chunk == 0:
                    self._cstate = _TRAILER
                else:
                    self._remaining, self._cstate = chunk, _DATA

    def _payload(self, piece: bytes, now: int) -> None:
        if self._error_body is not None:
            self._error_body += piece
            return
        if self.finished:
            return
        buf = self._lbuf + piece if self._lbuf else piece
        start = 0
        on_line = self.on_line
        while True:
            end = buf.find(b"\n", start)
            if end < 0:
                break
            line = buf[start:end]
            start = end + 1
            if line[-1:] == b"\r":
                line = line[:-1]
            if on_line(line, now):
                self._lbuf = b""
                self._finish(now)
                return
        self._lbuf = buf[start:] if start else buf
        if len(self._lbuf) > MAX_LINE:
            raise WireFailure("stream_cut", f"a stream line over {MAX_LINE} bytes")

    def _finish(self, now: int) -> None:
        self.finished = True
        self.end_ns = now
        if not self.future.done():
            self.future.set_result(self)

    def _complete(self, now: int) -> None:
        """The whole body has arrived."""
        self.body_complete = True
        self._cancel_timer()
        if self._error_body is not None:
            message = error_message(bytes(self._error_body)) or self.reason or f"HTTP {self.status}"
            failure = WireFailure(f"http_{self.status}", message, self.status,
                                  _retry_after(self.headers.get("retry-after")))
            if not self.future.done():
                self.future.set_exception(failure)
        else:
            if self._lbuf and not self.finished:  # a last line without its newline
                line, self._lbuf = self._lbuf, b""
                if self.on_line(line.rstrip(b"\r"), now):
                    self._finish(now)
            if not self.future.done():
                self.end_ns = self.end_ns or now
                self.future.set_result(self)
        self.conn.exchange_done(self)

    def _fail(self, exc: BaseException) -> None:
        self._cancel_timer()
        if not self.future.done():
            self.future.set_exception(exc)
        self.conn.drop()

    def abandon(self) -> None:
        """The client gave up on this exchange (cancelled, or failed already): stop the timer, forget the future."""
        self._cancel_timer()
        if not self.future.done():
            self.future.cancel()

    # ---- connection events --------------------------------------------------------------------------
    def lost(self, exc: BaseException | None, now: int) -> None:
        if self.body_complete:
            return
        if self._phase == _BODY and self._framing == _CLOSE and exc is None:
            self._complete(now)  # a close-delimited body ends with the connection
            return
        self._cancel_timer()
        if self.future.done():
            return
        if not self._received:
            reason = f": {exc}" if exc else ""
            self.future.set_exception(WireFailure("stream_cut", f"server closed the connection before "
                                                                f"responding{reason}", before_response=True))
            return
        where = "in the response head" if self._phase == _HEAD else f"mid-stream after {self._received} bytes"
        self.future.set_exception(WireFailure("stream_cut", f"connection closed {where}"
                                                            f"{f': {exc}' if exc else ''}"))


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


class _RawConnection(_Pooled):
    """A plain-TCP keep-alive connection read with recvmsg in the loop's reader callback; each read carries the
    kernel's receive timestamp when SO_TIMESTAMPNS is on (see the module docstring)."""

    kernel_stamps_seen = 0  # reads stamped by the kernel, over every connection of the process (diagnostics)

    def __init__(self, pool: "StreamingHTTP", sock: socket.socket, kernel_stamps: bool):
        self.pool = pool
        self.sock = sock
        self.kernel_stamps = kernel_stamps
        self.exchange: Exchange | None = None
        self.closed = False
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(READ_SIZE, ANC_SIZE if self.kernel_stamps else 0)
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
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= 16:
                seconds, nanos = struct.unpack_from("qq", payload)
                kernel = seconds * 1_000_000_000 + nanos - (time.time_ns() - now)  # realtime -> perf_counter
                if now - 60_000_000_000 < kernel <= now:  # a clock step would put it off: keep the read time
                    stamp = kernel
                    _RawConnection.kernel_stamps_seen += 1
        self.deliver(data, stamp)

    def _close_socket(self) -> None:
        if self.closed:
            return
        self.closed = True
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

    def close(self) -> None:
        self.drop()

    @property
    def usable(self) -> bool:
        return not self.closed


class StreamingHTTP:
    """POST a body and stream the response's lines to a callback; keep-alive pool for one origin."""

    def __init__(self, base_url: str, *, connect_timeout: float, read_timeout: float,
                 headers: dict[str, str] | None = None):
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base_path = parts.path.rstrip("/")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
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
            raise WireFailure("connect_timeout", f"connect to {self.host_header} timed out after "
                                                 f"{self.connect_timeout:g} s") from None
        except socket.gaierror as exc:
            raise WireFailure("dns_failure", f"{self.host}: {exc}") from None
        except ssl.SSLError as exc:
            raise WireFailure("connect_error", f"TLS handshake with {self.host_header} failed: {exc}") from None
        except OSError as exc:
            text = str(exc)
            lowered = text.lower()
            if any(s in lowered for s in ("name or service not known", "nodename nor servname",
                                          "name resolution", "no address associated", "getaddrinfo")):
                raise WireFailure("dns_failure", f"{self.host}: {text}") from None
            if exc.errno == errno.ECONNREFUSED or "refused" in lowered or "connect call failed" in lowered:
                raise WireFailure("connection_refused", text) from None
            raise WireFailure("connect_error", text or type(exc).__name__) from None
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
                    raise WireFailure("connect_timeout", f"resolving {self.host} timed out after "
                                                         f"{self.connect_timeout:g} s") from None
                except socket.gaierror as exc:
                    raise WireFailure("dns_failure", f"{self.host}: {exc}") from None
            self._addresses = infos
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
                raise WireFailure("connect_timeout", f"connect to {self.host_header} timed out after "
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
        raise WireFailure("connection_refused" if refused else "connect_error", message)

    async def _acquire(self) -> tuple[_Connection, bool]:
        while self.idle:
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
                          on_wire: Callable[[int], None] | None = None, content_type: str = "application/json",
                          accept: str = "text/event-stream") -> Exchange:
        """Send one POST; `on_line(line, arrival_ns)` gets every body line as it arrives (in the read callback:
        keep it short, raise to abort). Returns once on_line returned True or the body ended; a status >= 400
        raises WireFailure(http_<status>) with the server's message. `on_wire(ns)` gets the instant right before
        the request is written to a ready connection (after any connect), again if a stale keep-alive connection
        forced one retry on a fresh connection."""
        payload = self.request_bytes(path, body, content_type, accept)
        for attempt in (0, 1):
            conn, reused = await self._acquire()
            wire_ns = time.perf_counter_ns()  # right before the send: connection setup is not the server's time
            if on_wire is not None:
                on_wire(wire_ns)
            exchange = Exchange(conn, on_line, self.read_timeout, wire_ns)
            conn.exchange = exchange
            try:
                await conn.send(payload)
            except OSError as exc:  # e.g. the server closed this idle connection a moment ago
                conn.drop()
                if reused and attempt == 0:
                    continue
                raise WireFailure("stream_cut", f"sending the request failed: {exc}") from None
            try:
                return await exchange.future
            except WireFailure as failure:
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


def stats(exchange: Exchange) -> dict[str, Any]:
    """Diagnostics of one exchange (for debugging and tests)."""
    return {"status": exchange.status, "wire_ns": exchange.wire_ns, "first_byte_ns": exchange.first_byte_ns,
            "end_ns": exchange.end_ns, "finished": exchange.finished, "body_complete": exchange.body_complete,
            "keep_alive": exchange.keep_alive}
