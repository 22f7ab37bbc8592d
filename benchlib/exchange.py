"""One HTTP/1.1 response as the lean client reads it: the status line and head (bare-LF heads tolerated),
Content-Length, chunked or close-delimited bodies, SSE lines handed to the caller as they complete, and
error bodies turned into RequestFailed with the server's own message.

Fed from benchlib.wire's connections (data_received / stamped reads); imports benchlib.failures only."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from benchlib.failures import RequestFailed, retry_after, server_message

_HEAD, _BODY = 0, 1
_CHUNKED, _LENGTH, _CLOSE = 0, 1, 2
_SIZE, _DATA, _DATA_END, _TRAILER = 0, 1, 2, 3
LineHandler = Callable[[bytes, int], bool]  # (line without its newline, arrival ns) -> True when the stream is done
MAX_HEAD = 64 * 1024


MAX_LINE = 16 * 1024 * 1024


class Exchange:
    """One request/response on a connection; fed from the protocol's callbacks."""

    __slots__ = ("conn", "on_line", "future", "read_timeout", "status", "reason", "headers", "wire_ns",
                 "first_byte_ns", "end_ns", "last_ns", "finished", "body_complete", "keep_alive", "_phase",
                 "_framing", "_remaining", "_cstate", "_fbuf", "_lbuf", "_head", "_error_body", "_timer",
                 "_received")

    def __init__(self, conn: Any, on_line: LineHandler, read_timeout: float, wire_ns: int):
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
                self._fail(RequestFailed("read_timeout", f"read timed out: no data from the server for "
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
                        raise RequestFailed("stream_cut", f"response head over {MAX_HEAD} bytes")
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
            raise RequestFailed("stream_cut", f"not an HTTP response: {lines[0][:200]!r}")
        try:
            self.status = int(parts[1])
        except ValueError:
            raise RequestFailed("stream_cut", f"bad status line: {lines[0][:200]!r}") from None
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
                        raise RequestFailed("stream_cut", "chunk size line too long")
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
                    raise RequestFailed("stream_cut", f"bad chunk size {line[:40]!r}") from None
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
            raise RequestFailed("stream_cut", f"a stream line over {MAX_LINE} bytes")

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
            message = server_message(bytes(self._error_body)) or self.reason or f"HTTP {self.status}"
            failure = RequestFailed(f"http_{self.status}", message, self.status,
                                  retry_after(self.headers.get("retry-after")))
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
            self.future.set_exception(RequestFailed("stream_cut", f"server closed the connection before "
                                                                f"responding{reason}", before_response=True))
            return
        where = "in the response head" if self._phase == _HEAD else f"mid-stream after {self._received} bytes"
        self.future.set_exception(RequestFailed("stream_cut", f"connection closed {where}"
                                                            f"{f': {exc}' if exc else ''}"))
