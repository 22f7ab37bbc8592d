"""Server-Sent Events as every streaming path reads them (the lean wire client and the openai SDK path):
the parts of the WHATWG event-stream format a chat-completions stream uses.

- Lines end in LF, CRLF or a lone CR; a CRLF split across two reads counts once.
- Only those end a line: U+2028, U+0085 and the other Unicode line breaks inside a JSON string are content.
  httpx's `iter_lines` splits on them (str.splitlines), which is why the SDK path feeds raw bytes here.
- A UTF-8 byte-order mark at the very start of the stream is dropped.
- One event's data may span several `data:` lines, joined with LF (the spec's rule). An event is handed on
  as soon as its data decodes as JSON, stamped with the arrival of the line that completed it, so a
  one-line event (every server we know) costs no wait for the blank line that ends it.
- `data: [DONE]` (OpenAI's end marker) is its own value, `DONE`."""

from __future__ import annotations

import json
from typing import Any

from benchlib.measure.http.failures import RequestFailed
from benchlib.records.secrets import cut

BOM = b"\xef\xbb\xbf"
MAX_LINE = 16 * 1024 * 1024
DONE = object()  # what `Events.feed` returns for `data: [DONE]`


class LineSplitter:
    """Bytes in, complete lines out (without their line ends); `rest()` is an unterminated last line."""

    __slots__ = ("_buf", "_cr", "_start")

    def __init__(self) -> None:
        self._buf = b""
        self._cr = False  # the last read ended in CR: an LF opening the next read belongs to it
        self._start = True  # nothing seen yet: a BOM may still come

    def feed(self, piece: bytes) -> list[bytes]:
        if self._cr:
            self._cr = False
            if piece[:1] == b"\n":
                piece = piece[1:]
        buf = self._buf + piece if self._buf else piece
        if self._start:
            if len(buf) < len(BOM) and BOM.startswith(buf):
                self._buf = buf  # maybe a BOM split across reads
                return []
            self._start = False
            if buf[:3] == BOM:
                buf = buf[3:]
        if b"\r" in buf:
            self._cr = buf[-1:] == b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        if len(self._buf) > MAX_LINE:
            raise RequestFailed("stream_cut", f"a stream line over {MAX_LINE} bytes")
        return lines

    def rest(self) -> bytes:
        """The last line when the body ended without a line end (then it is complete too)."""
        rest, self._buf = self._buf, b""
        return rest


def shown(data: str | bytes) -> str:
    """The first 200 characters of a stream chunk, for an error message (the cut marked)."""
    return cut(data.decode("utf-8", "replace") if isinstance(data, bytes) else data, 200)


class Events:
    """`data:` lines in, decoded event payloads out."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: bytes | None = None  # data lines of an event whose JSON is not complete yet

    def feed(self, line: bytes) -> Any:
        """The payload a line completes: DONE, a decoded JSON value, or None (a blank line, a comment, an
        `event:`/`id:`/`retry:` field, or an early line of a multi-line event). Raises bad_chunk when an
        event ends (blank line) whose data is not JSON."""
        if line[:5] != b"data:":
            if not line and self._pending is not None:
                pending, self._pending = self._pending, None
                raise RequestFailed("bad_chunk", f"non-JSON stream chunk: {shown(pending)!r}")
            return None
        data = line[6:] if line[5:6] == b" " else line[5:]
        if self._pending is not None:
            data = self._pending + b"\n" + data
        elif data.strip() == b"[DONE]":
            return DONE
        try:
            value = json.loads(data)
        except ValueError:  # JSONDecodeError, or bytes that are not UTF-8
            if len(data) > MAX_LINE:
                raise RequestFailed("bad_chunk", f"an event's data over {MAX_LINE} bytes: {shown(data)!r}") \
                    from None
            self._pending = data
            return None
        except RecursionError:  # the SDK's parser gives up there too: no reader could take this event
            raise RequestFailed("bad_chunk", f"an event's data nested deeper than JSON's parser goes: "
                                f"{shown(data)!r}") from None
        self._pending = None
        return value

    def unfinished(self) -> bytes | None:
        """The data of an event still waiting for its end when the stream stopped."""
        return self._pending
