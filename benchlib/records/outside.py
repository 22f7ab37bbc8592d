"""Files from outside — another tool's results (benchlib.interchange.readers), a request trace (benchlib.measure.traffic.traces) —
read within bounds, so no file can hang a reader, fill its memory or end it in a traceback:

    regular files only   the file is opened without blocking and refused unless it is a regular file: a FIFO
                         would hold the open (and the read) for ever, /dev/zero — or a link to it — never ends
    a size cap           a file read whole (a JSON document) at most MAX_DOCUMENT_BYTES; a file read line by line
                         at most the caller's bytes per line, so its memory is one line's whatever its length
    strict JSON          an object that names a key twice is refused (JSON leaves to each reader which value
                         counts, so two readers of one file could disagree); nesting deeper than the parser goes
                         and an integer longer than the interpreter converts are one line, not a traceback

Each refusal is an OutsideError: one line naming the file (and the line, for a file read line by line). A file
that cannot be opened at all raises the OSError as it is, for the caller to word.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import IO, Any, Iterator

# A whole JSON document held in memory: its parsed objects take ~2-3 times its size (a vllm bench serve result of
# 60,000 requests is 33 MB); 256 MiB is ~450,000 such requests, above any single run of those tools we know.
MAX_DOCUMENT_BYTES = 256 * 2**20


class OutsideError(ValueError):
    """A file from outside that cannot be read as it is (one line naming it)."""


def _kind(mode: int) -> str:
    return ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a folder" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def regular(path: Path) -> None:
    """Refuse anything but a regular file (links followed), without opening it."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise OutsideError(f"{path}: {_kind(mode)}, not a regular file")


def open_regular(path: Path) -> IO[bytes]:
    """The file opened for reading, refused unless it is a regular file. O_NONBLOCK: the open of a FIFO returns
    at once (to be refused) instead of waiting for a writer; a regular file ignores the flag."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise OutsideError(f"{path}: {_kind(mode)}, not a regular file")
    return os.fdopen(fd, "rb")


def read_document(path: Path, cap: int | None = None) -> bytes:
    """The whole of a regular file of at most `cap` bytes (MAX_DOCUMENT_BYTES unless given)."""
    cap = MAX_DOCUMENT_BYTES if cap is None else cap
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(cap + 1) if size <= cap else b""
    if size > cap or len(data) > cap:
        raise OutsideError(f"{path}: {_size(max(size, len(data)))}, above the {_size(cap)} a file read whole may have")
    return data


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB" if n >= 2**10 else f"{n} bytes"


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {json.dumps(key)[:60]} twice in one object")
        out[key] = value
    return out


def loads_json(text: str | bytes, where: str, what: str = "JSON document") -> Any:
    """Strict JSON (module docstring); OutsideError naming `where` and saying it is not a `what`."""
    try:
        return json.loads(text, object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        raise OutsideError(f"{where}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise OutsideError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    except RecursionError:
        raise OutsideError(f"{where}: not a {what} (nested deeper than the JSON parser goes)") from None
    except ValueError as exc:  # a key twice, or an integer past the interpreter's digit limit (4,300 digits)
        raise OutsideError(f"{where}: not a {what} ({str(exc).split(': ')[0]})") from None


def load_json(path: Path, cap: int | None = None) -> Any:
    """A regular file of at most `cap` bytes (MAX_DOCUMENT_BYTES unless given), as strict JSON."""
    return loads_json(read_document(path, cap), str(path))


def lines(path: Path, max_line_bytes: int) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line of a regular file, one bounded line at a time; OutsideError naming the
    line for one longer than `max_line_bytes` or not UTF-8."""
    with open_regular(path) as handle:
        for number, raw in enumerate(iter(lambda: handle.readline(max_line_bytes + 1), b""), 1):
            if len(raw) > max_line_bytes:
                raise OutsideError(f"{path}:{number}: a line longer than {max_line_bytes} bytes")
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise OutsideError(f"{path}:{number}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                                   f"{exc.start + 1})") from None
