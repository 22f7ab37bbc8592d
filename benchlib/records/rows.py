"""One tidy row per request, appended durably as it finishes (batched with its neighbours: BatchedAppends), and
read back for resume and analysis.

The column set is the dataclass below, each field's comment its meaning (docs/columns.md is written from them).
Lists and dicts are stored as JSON text so requests.csv stays a flat, tidy table.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from benchlib.records.schema import complete_prefix, dataclass_kinds, log, read_csv

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_UNSUPPORTED = "unsupported"
# Failures a rerun sends again: nothing answered, the answer was cut or timed out, the server turned it away
RETRY_KINDS = frozenset({"connection_refused", "dns_failure", "connect_timeout", "connect_error", "read_timeout",
                         "deadline_exceeded", "stream_cut", "empty_response", "server_error", "http_429",
                         "http_408"})
SURROGATE = re.compile("[\ud800-\udfff]")  # code points UTF-8 cannot encode
REPLACEMENT = "\ufffd"


@dataclass
class RequestRecord:
    """One request as requests.csv holds it. Each field's comment is its column's meaning: docs/columns.md is written
    from them (tools/columns_doc.py)."""

    # provenance of the row
    run_id: str = ""
    host: str = ""
    model: str = ""
    server_kind: str = ""
    server_software: str = ""
    # what was measured
    suite: str = ""
    modality: str = ""
    task: str = ""
    variant: str = ""
    repeat: int = 0
    concurrency: int = 1  # requests in flight when it was sent (the level's, or the graded set's in-flight count)
    is_warmup: bool = False  # a warm-up request: recorded, left out of every statistic
    request_key: str = ""  # suite/task/variant/repeat/concurrency: what a resumed run skips on
    task_set: str = ""  # hash of the task files' content this request's prompt and checker came from
    # what was sent (each prompt starts with a unique `(ref …)` id, so no prompt cache has seen it)
    prompt: str = ""
    media_count: int = 0
    payload_bytes: int = 0
    max_tokens: int = 0
    thinking: bool = False
    request_kind: str = "chat"  # chat | transcription (server.api; a transcription sends the clip alone: prompt empty)
    audio_s: float | None = None  # transcription: seconds of audio sent (the server's usage.seconds, else the file's)
    status: str = STATUS_OK  # ok, failed, or unsupported (the deployment does not take that input)
    # why a request failed (benchlib/measure/http/failures.py lists the kinds: connection_refused, read_timeout, http_404,
    # stream_cut, deadline_exceeded, response_too_large, …; check_error on an ok row: the checker raised), the
    # server's own message (long ones cut, marked …[cut]) and the HTTP status
    error_kind: str = ""
    error_message: str = ""
    http_status: int | None = None
    started_at_unix: float = 0.0  # wall clock when it was sent: places the request in the telemetry
    start_ns: int = 0  # monotonic stamp (perf_counter_ns) when the request went on the wire
    ttft_s: float | None = None  # time to first token: the first non-empty content or reasoning delta − start
    ttfo_s: float | None = None  # time to first answer output (content or a tool call), after any thinking
    e2e_s: float | None = None  # end of the stream − start (a transcription: the whole answer − start)
    tpot_s: float | None = None  # (t_last − t_first) ÷ (completion_tokens − 1)
    decode_tps: float | None = None  # 1 ÷ tpot_s: the decode rate, tokens per second
    # (prompt_tokens − cached_tokens) ÷ TTFT, the tokens the server computed, at concurrency 1 only (above it TTFT
    # includes queueing)
    prefill_tps: float | None = None
    itl_s: list[float] = field(default_factory=list)  # JSON list of the intervals between deltas, seconds
    rtf: float | None = None  # transcription: real-time factor, e2e_s ÷ audio_s (below 1: faster than the audio plays)
    # token counts from the server (usage, Ollama's eval counts, or the embedded server's log)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    token_source: str = ""  # usage | server_log | client_deltas (only when the server gives none) | an importing tool
    implausible_counts: str = ""  # server counts left out of every figure, and why (benchlib.measure.client.timing)
    # what the client saw: a streamed chunk is not a token
    client_deltas: int = 0
    client_content_deltas: int = 0
    client_reasoning_deltas: int = 0
    client_chunks: int = 0
    # the server's own timings (llama.cpp's timings or log, Ollama's durations)
    server_prompt_tokens: int | None = None
    server_prefill_tps: float | None = None
    server_decode_tps: float | None = None
    server_load_s: float | None = None
    decode_ratio: float | None = None  # client decode tok/s ÷ server decode tok/s
    rate_mismatch: bool = False  # decode_ratio more than 10 % from 1 (answers of at least 16 tokens)
    cache_suspect: bool = False  # at least run.cache_suspect_share of the prompt came from the server's cache
    cold: bool = False  # the server's load time was above run.cold_load_s
    # the client's loop was held up more than 20 ms in flight and deltas shared one late stamp: TTFT / ITL may be late
    client_stalled: bool = False
    finish_reason: str = ""  # as the server gave it
    truncated: bool = False  # finish_reason == "length": reported apart from wrong answers
    response_text: str = ""  # the answer as sent, raw
    reasoning_text: str = ""  # the thinking text, kept apart
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # structured tool calls, JSON
    text_replaced: bool = False  # text UTF-8 cannot encode (a lone surrogate) was written as U+FFFD
    checker: str = ""  # the task's checker
    passed: bool | None = None  # full credit (empty when the row was not scored)
    score: float | None = None  # the checker's score, partial credit kept
    check_detail: str = ""  # the checker's reasoning in words (which rule read what)
    answer_read: str = ""  # the final answer the checker read out of the text (graded sets; code that was run)
    echo: bool = False  # long verbatim spans of the prompt were cut from the answer before the checker ran
    looping: bool = False  # repetition detected in the answer
    client_prep_s: float | None = None  # request building and connection setup before the wire stamp (not in TTFT)
    client_cpu_s: float | None = None  # the client's CPU time for the request
    client_stall_ms: float | None = None  # the latest the client's event loop woke while the request was in flight, ms
    reconnects: int = 0  # re-sent on a fresh connection: the server had closed the pooled idle one unanswered
    # open-loop scheduling (the rate sweep and the trace replay; empty elsewhere)
    scheduled_ns: int = 0  # the send instant the arrival schedule (or the trace) meant (perf_counter_ns)
    queue_wait_s: float | None = None  # scheduled instant → a max-concurrency slot was free
    schedule_lag_s: float | None = None  # max(scheduled instant, slot free) → the request went on the wire
    target_prompt_tokens: int | None = None  # server-counted prompt length the workload drew or asked for
    extra: dict[str, Any] = field(default_factory=dict)  # an imported row: the tool's fields with no column here, JSON

    def replace_unencodable(self) -> bool:
        """A server may send text UTF-8 cannot encode (a lone surrogate such as \\ud800, from a JSON escape), which
        would stop the append and the suite with it: each such code point becomes U+FFFD and `text_replaced` says
        so. Returns whether anything was replaced."""
        found = False
        for name, value in list(vars(self).items()):  # vars, not fields(): this runs for every row, on the loop
            if isinstance(value, str):
                if not value.isascii() and SURROGATE.search(value):  # isascii: a C scan, most text ends there
                    setattr(self, name, SURROGATE.sub(REPLACEMENT, value))
                    found = True
            elif isinstance(value, (list, dict)) and value:
                if isinstance(value, list) and all(isinstance(v, (int, float)) for v in value):
                    continue  # itl_s: numbers only
                text = json.dumps(value, ensure_ascii=False)
                if SURROGATE.search(text):
                    setattr(self, name, json.loads(SURROGATE.sub(REPLACEMENT, text)))
                    found = True
        self.text_replaced = self.text_replaced or found
        return found

    def to_row(self) -> dict[str, Any]:
        # A shallow copy: the only containers are the three below, turned to JSON text here; asdict's deep copy of
        # them cost more than the rest of the row.
        row = {name: getattr(self, name) for name in COLUMNS}
        for key in ("itl_s", "tool_calls", "extra"):
            row[key] = json.dumps(row[key], separators=(",", ":"), ensure_ascii=False)
        return row


COLUMNS = [f.name for f in fields(RequestRecord)]
REQUEST_KINDS = dataclass_kinds(RequestRecord)  # the one typed schema of requests.csv (benchlib.records.schema)


def request_key(suite: str, task: str, variant: str, repeat: int, concurrency: int = 1, warmup: bool = False,
                extra: str = "") -> str:
    """Key of a request within a run; resume skips keys already written."""
    parts = [suite, task, variant, f"r{repeat}", f"c{concurrency}"] + (["warmup"] if warmup else []) + \
            ([extra] if extra else [])
    return "/".join(parts)


class RequestLog:
    """Append-only requests.csv: one row per finished request, flushed and fsynced at once."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # rows arrive from executor threads: one header, whole rows

    def done_keys(self, run_id: str | None = None) -> set[str]:
        """Keys of whole rows already recorded: a resumed run does not redo them — except a request whose last
        attempt failed in a way the server may not repeat (RETRY_KINDS: refused, cut, timed out, a 5xx), which a
        rerun sends again (its new row supersedes the old, read_requests). A torn or malformed row is never counted
        as done (read_requests leaves it out, with a warning)."""
        frame = read_requests(self.path)
        if run_id is not None:
            frame = frame[frame["run_id"] == run_id]
        kinds = frame["error_kind"] if "error_kind" in frame else pd.Series("", index=frame.index)
        again = (frame["status"] == STATUS_FAILED) & kinds.map(lambda k: isinstance(k, str) and retry_worthy(k))
        return set(frame.loc[~again, "request_key"])

    def recover(self) -> str:
        """Move a torn last row aside before anything is appended: a crash, a kill or a full disk can cut the
        last row; it is moved to `<name>.torn-<time>` (its request is then sent again) and the file ends on
        a whole row. Returns the warning line, '' when the file was whole."""
        if not self.path.is_file():
            return ""
        data = self.path.read_bytes()
        end = complete_prefix(data)
        if end == len(data):
            return ""
        fragment = data[end:]
        aside = self.path.with_name(f"{self.path.name}.torn-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        aside.write_bytes(fragment)
        with self.path.open("r+b") as handle:
            handle.truncate(end)
            handle.flush()
            os.fsync(handle.fileno())
        message = (f"{self.path}: the last row was cut ({len(fragment)} bytes: a crash, a kill or a full disk); "
                   f"moved to {aside.name}; that request will be sent again")
        log.warning(message)
        return message

    def append(self, record: RequestRecord) -> None:
        self.append_many([record])

    def append_many(self, records: Iterable[RequestRecord]) -> None:
        """Serialize first, then one O_APPEND write + fsync: a SIGKILL leaves whole rows or none. Text UTF-8
        cannot encode is replaced first (RequestRecord.replace_unencodable): the row is written, flagged."""
        records = list(records)
        for record in records:
            record.replace_unencodable()
        rows = [r.to_row() for r in records]
        if not rows:
            return
        with self._lock:
            _append_rows(self.path, COLUMNS, rows)

    def read(self) -> pd.DataFrame:
        return read_requests(self.path)


APPEND_EVERY_S = 0.05  # how long a finished row may wait to be batched with others: what a crash can lose


class BatchedAppends:
    """Rows finished on one event loop, appended in batches: the first row of a batch waits up to `every_s` for
    the rows that finish after it, then the batch goes to disk in one RequestLog.append_many (one O_APPEND write
    + fsync) off the loop. `append` returns once its row is on disk, so a caller that counts a row as done still
    counts only rows a crash cannot take back; a crash loses at most the rows of the last `every_s` (their
    requests are sent again on resume, like a torn row's).

    Why: one write + fsync and one executor hand-off per row cost the sending process ~0.4 ms of CPU a request,
    most of it fixed per call (opening the file, the CSV writer, the thread hand-off), and capped the open-loop
    rate one process can hold. A batch that is being written is not cancelled with its callers: rows whose
    requests finished are written even when the level is interrupted."""

    def __init__(self, log: RequestLog, every_s: float = APPEND_EVERY_S):
        self.log, self.every_s = log, every_s
        self._pending: list[tuple[RequestRecord, asyncio.Future]] = []
        self._flusher: asyncio.Task | None = None
        self._wake: asyncio.Future | None = None
        self._hurry = False

    async def append(self, record: RequestRecord) -> None:
        loop = asyncio.get_running_loop()
        written = loop.create_future()
        self._pending.append((record, written))
        if self._flusher is None:
            self._flusher = loop.create_task(self._flush())
        await written

    def finish(self) -> None:
        """No more rows will come (the caller's last request is done): write what is pending now and every row
        after it at once, so the caller's measured window does not end on an idle wait."""
        self._hurry = True
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                if not self._hurry:
                    self._wake = loop.create_future()
                    timer = loop.call_later(self.every_s, lambda wake: wake.done() or wake.set_result(None),
                                            self._wake)
                    try:
                        await self._wake
                    finally:
                        timer.cancel()
                batch, self._pending = self._pending, []
                try:
                    await loop.run_in_executor(None, self.log.append_many, [record for record, _ in batch])
                except Exception as exc:  # noqa: BLE001 — a full disk: every caller of the batch sees it
                    for _, written in batch:
                        if not written.done():
                            written.set_exception(exc)
                else:
                    for _, written in batch:
                        if not written.done():
                            written.set_result(None)
        finally:
            self._flusher = None


def append_csv_row(path: Path, columns: Sequence[str], row: Mapping[str, Any]) -> None:
    """Append one row (cells as given; None is empty) to a log CSV in one O_APPEND write + fsync, so a crash loses
    at most the row in progress. A file whose header is another layout (an older release's columns) is first
    rewritten in this one, every value under its own column, instead of being misaligned."""
    path = Path(path)
    if path.is_file() and path.stat().st_size:
        with path.open(encoding="utf-8", newline="") as handle:
            header = next(csv.reader(handle), [])
        if header != list(columns):
            with path.open(encoding="utf-8", newline="") as handle:
                old = list(csv.DictReader(handle))
            text = io.StringIO()
            writer = csv.DictWriter(text, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
            writer.writeheader()
            writer.writerows({k: v or "" for k, v in r.items() if k in columns} for r in old)
            write_atomic(path, text.getvalue())
    _append_rows(path, columns, [{k: "" if v is None else v for k, v in row.items()}])


def _append_rows(path: Path, columns: Sequence[str], rows: list[Mapping[str, Any]]) -> None:
    """Serialize first, then one O_APPEND write + fsync (a header first into an empty file): a SIGKILL leaves
    whole rows or none, and every append starts on a fresh line whatever a crash left before it."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            writer.writeheader()
        elif os.pread(fd, 1, size - 1) != b"\n":
            buffer.write("\n")
        writer.writerows(rows)
        data = SURROGATE.sub(REPLACEMENT, buffer.getvalue()).encode("utf-8")  # no cell can stop a log's append
        while data:  # a regular-file write completes whole; the loop only guards a short write
            data = data[os.write(fd, data):]
        os.fsync(fd)
    finally:
        os.close(fd)


def retry_worthy(error_kind: str) -> bool:
    """A failure a rerun sends again (RETRY_KINDS, any HTTP 5xx): the server or the route may answer next time."""
    return error_kind in RETRY_KINDS or error_kind.startswith("http_5")


def read_requests(path: Path) -> pd.DataFrame:
    """requests.csv typed by REQUEST_KINDS (booleans are booleans, counts nullable integers, JSON decoded).

    Rows that cannot be read whole (a torn last line) or that lack a request key or a known status are left
    out with a warning naming the file and the count (schema.read_csv); never silently. A request sent again by a
    rerun (its earlier attempt failed: RETRY_KINDS) is read as its last attempt; the file keeps every one.
    """
    frame = read_csv(path, REQUEST_KINDS, label=str(path), required=("request_key", "status"))
    known = frame["status"].isin([STATUS_OK, STATUS_FAILED, STATUS_UNSUPPORTED])
    if not known.all():
        log.warning("%s: %d row(s) with an unknown status were left out", path, int((~known).sum()))
        frame = frame[known]
    keys = ["run_id", "request_key"] if "run_id" in frame else ["request_key"]
    frame = frame[~frame.duplicated(keys, keep="last")]
    return frame.reset_index(drop=True)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write a whole file (text as UTF-8, or bytes) via a hidden temp file + rename, so readers never see half a
    summary or manifest. When the write fails (a full disk), the temp file is removed and the old file, if any,
    stays as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.name}.", delete=False)
    try:
        with tmp:
            tmp.write(data.encode("utf-8") if isinstance(data, str) else data)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp.name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp.name)
        raise


def write_csv_atomic(path: Path, frame: pd.DataFrame) -> None:
    write_atomic(path, frame.to_csv(index=False))
