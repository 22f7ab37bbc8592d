"""One HTTP/1.1 response as the lean client reads it: the status line and head (CRLF or bare-LF line ends),
Content-Length (identical duplicates allowed), chunked or close-delimited bodies, gzip/deflate bodies decoded
although identity was asked, SSE lines (benchlib.measure.http.sse's splitting) handed to the caller as they complete, and
every response that is not the stream asked for turned into RequestFailed with its status and the server's own
words: http_<status> for 3xx (with the Location; a POST is not replayed elsewhere), 4xx and 5xx; not_a_stream
for a 2xx whose Content-Type is not an event stream; bad_encoding for a Content-Encoding it cannot decode;
bad_response for a head that is not HTTP. Besides the idle read timeout, an exchange has an overall deadline
(deadline_exceeded) and a byte cap, on the bytes read and on what they decode to (response_too_large): a
server that never stops, or drips a byte at a time, is cut off either way. A failure after the response head
carries its HTTP status.

Fed from benchlib.measure.http.wire's connections (data_received / stamped reads); imports benchlib.measure.http.failures,
benchlib.measure.http.sse and benchlib.records.secrets (the marked cut of quoted server text) only."""

from __future__ import annotations

import asyncio
import re
import time
import zlib
from typing import Any, Callable

from benchlib.measure.http.failures import (
    RequestFailed,
    deadline_exceeded,
    http_failure,
    media_type,
    not_a_stream,
    server_message,
    too_large,
)
from benchlib.measure.http.sse import LineSplitter
from benchlib.records.secrets import cut

_HEAD, _BODY = 0, 1
_CHUNKED, _LENGTH, _CLOSE = 0, 1, 2
_SIZE, _DATA, _DATA_END, _TRAILER = 0, 1, 2, 3
LineHandler = Callable[[bytes, int], bool]  # (line without its newline, arrival ns) -> True when the stream is done
MAX_HEAD = 64 * 1024
_HEAD_END = re.compile(rb"\r?\n\r?\n")
# Content-Encoding values decoded here (zlib's wbits: 16+15 gzip, 15 zlib-wrapped deflate); anything else is
# bad_encoding. The client asks for identity; some proxies compress anyway.
_DECODERS = {"gzip": 31, "x-gzip": 31, "deflate": 15}


class Exchange:
    """One request/response on a connection; fed from the protocol's callbacks."""

    __slots__ = ("conn", "on_line", "future", "read_timeout", "status", "reason", "headers", "wire_ns",
                 "first_byte_ns", "end_ns", "last_ns", "finished", "body_complete", "keep_alive", "_phase",
                 "_framing", "_remaining", "_cstate", "_fbuf", "_lines", "_head", "_error_body", "_error_kind",
                 "_timer", "_received", "_decoder", "expect", "deadline_s", "max_bytes", "_decoded", "_deadline")

    def __init__(self, conn: Any, on_line: LineHandler, read_timeout: float, wire_ns: int,
                 expect: str = "text/event-stream", deadline_s: float | None = None, max_bytes: int | None = None):
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
        self._lines = LineSplitter()
        self._head = b""
        self._error_body: bytearray | None = None  # the body is collected for a failure of this kind
        self._error_kind = ""
        self._decoder: Any = None  # zlib decompressor for a gzip/deflate body
        self.expect = expect  # the media type asked for; a 2xx of another declared type is not_a_stream
        self._received = 0
        self._decoded = 0  # body bytes after any Content-Encoding was undone
        self.deadline_s = deadline_s
        self.max_bytes = max_bytes
        self._timer: asyncio.TimerHandle | None = None
        self._deadline: asyncio.TimerHandle | None = None
        if read_timeout and read_timeout > 0:
            self._timer = asyncio.get_running_loop().call_later(read_timeout, self._check_idle)
        if deadline_s and deadline_s > 0:
            self._deadline = asyncio.get_running_loop().call_later(deadline_s, self._deadline_passed)

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

    def _deadline_passed(self) -> None:
        self._deadline = None
        if self.body_complete:
            return
        if not self.future.done():
            self._fail(deadline_exceeded(self.deadline_s or 0, self.status or None))
        else:  # the caller has its answer; the body's end never came: drop the connection
            self.conn.drop()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    # ---- input --------------------------------------------------------------------------------------
    def feed(self, data: bytes, now: int) -> None:
        self.last_ns = now
        if not self.first_byte_ns:
            self.first_byte_ns = now
        self._received += len(data)
        over = self._received - self.max_bytes if self.max_bytes else 0
        if over > 0:  # the bytes before the cap are still read: the head's status and the text they carry stay
            data = data[:max(0, len(data) - over)]
        try:
            self._consume(data, now)
            if over > 0:
                raise too_large(self.max_bytes, self.status or None)
        except BaseException as exc:  # noqa: BLE001 — a parse error or the caller's own failure ends the exchange
            self._fail(exc)

    def _consume(self, data: bytes, now: int) -> None:
        """Head, then body, of the bytes just read."""
        while self._phase == _HEAD:
            data = self._head + data if self._head else data
            end = _HEAD_END.search(data)
            if end is None:
                if len(data) > MAX_HEAD:
                    raise RequestFailed("bad_response", f"response head over {MAX_HEAD} bytes")
                self._head = data
                return
            self._head = b""
            self._parse_head(data[:end.start()])
            data = data[end.end():]
            if 100 <= self.status < 200:  # interim response (100 Continue): the real head follows
                continue
            self._phase = _BODY
            if self._framing == _LENGTH and self._remaining == 0:
                self._complete(now)
                return
        if data:
            self._body(data, now)

    def _parse_head(self, head: bytes) -> None:
        lines = [line.rstrip("\r") for line in head.decode("latin-1").split("\n")]
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise RequestFailed("bad_response", f"not an HTTP response: {cut(lines[0], 200)!r}")
        try:
            self.status = int(parts[1])
        except ValueError:
            raise RequestFailed("bad_response", f"bad status line: {cut(lines[0], 200)!r}") from None
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
            self._framing, self._remaining = _LENGTH, self._content_length(headers["content-length"])
        else:
            self._framing, self.keep_alive = _CLOSE, False
        encoding = headers.get("content-encoding", "").strip().lower()
        if encoding and encoding != "identity":
            if encoding not in _DECODERS:
                raise RequestFailed("bad_encoding", f"HTTP {self.status} body sent with Content-Encoding: "
                                    f"{encoding} although identity was asked; it cannot be decoded here",
                                    self.status)
            self._decoder = zlib.decompressobj(_DECODERS[encoding])
        declared = media_type(headers.get("content-type"))
        if self.status >= 300:
            self._error_body, self._error_kind = bytearray(), f"http_{self.status}"
        elif self.expect and declared and declared != self.expect:
            self._error_body, self._error_kind = bytearray(), "not_a_stream"

    def _content_length(self, value: str) -> int:
        """Content-Length, where a repeated header with one value is that value (RFC 9110 §8.6)."""
        values = {v.strip() for v in value.split(",")}
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise RequestFailed("bad_response", f"HTTP {self.status} with conflicting or invalid Content-Length: "
                                f"{cut(value, 100)!r}", self.status)
        return int(values.pop())

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
                    raise RequestFailed("stream_cut", f"bad chunk size {cut(line.decode('latin-1'), 40)!r}") from None
                if chunk == 0:
                    self._cstate = _TRAILER
                else:
                    self._remaining, self._cstate = chunk, _DATA

    def _payload(self, piece: bytes, now: int) -> None:
        if self._decoder is not None:
            try:
                piece = self._decoder.decompress(piece)
            except zlib.error as exc:
                raise RequestFailed("bad_encoding", f"HTTP {self.status} body does not decode as "
                                    f"{self.headers.get('content-encoding')}: {exc}", self.status) from None
        self._decoded += len(piece)
        if self.max_bytes and self._decoded > self.max_bytes:  # a small compressed body can decode to gigabytes
            raise too_large(self.max_bytes, self.status)
        if self._error_body is not None:
            if len(self._error_body) < MAX_HEAD:
                self._error_body += piece
            return
        if self.finished:
            return
        on_line = self.on_line
        for line in self._lines.feed(piece):
            if on_line(line, now):
                self._finish(now)
                return

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
            if not self.future.done():
                self.future.set_exception(self._failure())
        else:
            line = self._lines.rest()
            if line and not self.finished:  # a last line without its line end
                try:
                    if self.on_line(line, now):
                        self._finish(now)
                except BaseException as exc:  # noqa: BLE001 — the caller's parse failure ends the exchange
                    self._fail(exc)
                    return
            if not self.future.done():
                self.end_ns = self.end_ns or now
                self.future.set_result(self)
        self.conn.exchange_done(self)

    def _failure(self) -> RequestFailed:
        """The collected body of a response that is not the stream asked for, as a failure."""
        words = server_message(bytes(self._error_body or b"")) or self.reason or f"HTTP {self.status}"
        if self._error_kind == "not_a_stream":
            return not_a_stream(self.status, self.headers.get("content-type", ""), self.expect, words)
        return http_failure(self.status, words, self.headers.get("location"), self.headers.get("retry-after"))

    def _fail(self, exc: BaseException) -> None:
        self._cancel_timer()
        if isinstance(exc, RequestFailed) and exc.http_status is None and self.status:
            exc.http_status = self.status  # e.g. an error event inside a 200 stream: the status stays on the row
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
        status = self.status if self._phase == _BODY else None  # the head had arrived: its status stays on the row
        self.future.set_exception(RequestFailed("stream_cut", f"connection closed {where}"
                                                            f"{f': {exc}' if exc else ''}", status))
