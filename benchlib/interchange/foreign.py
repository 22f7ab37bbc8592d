"""The one shape every reader of another tool's files returns (ForeignRun), the one error it raises
(ForeignError), and the field readers they share: a number, a stamp, a count, a row finished under our rules.

Each reader returns a ForeignRun: one RequestRecord per request the tool recorded (every field with a meaning here
mapped; the rest of the tool's record kept in the row's `extra`), the tool's name, version and command line where
its files give them, its own aggregate figures as it wrote them, and the figures of ours it cannot give.

Times: each tool's stamps are subtracted on the clock they were taken on (AIPerf's and GuideLLM's wall-clock
stamps give durations and `started_at_unix`; vLLM's are durations already, its start times on its own
perf_counter), never mixed with ours; `start_ns` holds the tool's own monotonic or wall stamp in ns, for order
only. Tokens are as the tool counted them (its tokenizer or the server's usage, as it was run), and `token_source`
names the tool. TPOT and decode rate follow our definition (benchlib.measure.client.timing.compute_rates:
t_last − t_first over completion tokens − 1), from the tool's per-chunk intervals where it gives them.

A file of a version this reader was not written for, or a record of the wrong shape, raises ForeignError: one line
naming the file and the record. Files are read within benchlib.records.outside's bounds (regular files only, a
size cap, strict JSON), a stamp beyond benchlib.records.plausible.MAX_STAMP_S is a malformed record (it would
overflow a nanosecond stamp), and every string kept from the tool's files — its command line, configuration,
error messages, the records' own fields — goes through benchlib.records.secrets.redact, the one rule for what
comes from outside, before anything holds it.

Records are streamed: `ForeignRun.rows()` yields them one at a time (AIPerf's JSONL is read a line at a time; a
vLLM or GuideLLM file is one JSON document, held parsed while its rows are made), so an import holds a batch of
rows, not the run; `ForeignRun.records` is the whole list, for a caller that wants it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from benchlib.measure.client.timing import check_counts, compute_rates, finite
from benchlib.records import outside, plausible
from benchlib.records.plausible import MAX_STAMP_S
from benchlib.records.rows import STATUS_OK, RequestRecord, request_key
from benchlib.records.secrets import clean_text, redact

# What no other tool's file gives: they are measured around the request by our own client and sensors.
NEVER_GIVEN = ("energy and power (no telemetry windows)", "answer quality (no checker ran)",
               "client self-check (client_prep_s, client_stall_ms)", "server-side timings and counts")
AGGREGATES_ONLY = ("per-request rows (TTFT, ITL, end-to-end of each request)", "intervals of means and medians "
                   "(bootstrap over requests)", "ITL gaps pooled over requests")


MAX_LINE_BYTES = 16 * 2**20  # one AIPerf record is ~2.7 kB; a line of 16 MiB is no record of it


class ForeignError(ValueError):
    """A file of another tool that cannot be imported as it is: one line naming the file and the record. The line
    is cleaned by the secrets rule: it may quote a value of the file."""

    def __init__(self, message: str):
        super().__init__(clean_text(" ".join(str(message).split())))


def _no_rows() -> Iterator[RequestRecord]:
    return iter(())


@dataclass
class ForeignRun:
    tool: str
    version: str  # "" when its files do not say
    command: str  # the tool's command line, "" when its files do not give it
    rows: Callable[[], Iterator[RequestRecord]] = _no_rows  # the records, one at a time, read afresh at each call
    aggregates: dict[str, Any] = field(default_factory=dict)  # the tool's own figures, as it wrote them
    cannot_give: list[str] = field(default_factory=list)  # our figures this import lacks
    files: list[Path] = field(default_factory=list)
    model: str = ""  # as the tool named it
    started_unix: float | None = None
    finished_unix: float | None = None
    # aggregates as ours: metric -> {count, mean, sd, p50, p90, p99} (seconds; decode_tps in tok/s)
    figures: dict[str, dict[str, float]] = field(default_factory=dict)
    totals: tuple[int, int] | None = None  # (ok, failed) requests as the tool counted them
    per_request: bool = False  # the files hold per-request records (rows() yields them)
    _records: list[RequestRecord] | None = field(default=None, init=False, repr=False)

    @property
    def records(self) -> list[RequestRecord]:
        """Every record at once (read once and kept): for a caller that wants the list; an import streams rows()."""
        if self._records is None:
            self._records = list(self.rows())
        return self._records


def json_file(path: Path) -> Any:
    try:
        return outside.load_json(path)
    except outside.OutsideError as exc:
        raise ForeignError(str(exc)) from None
    except OSError as exc:
        raise ForeignError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}… ({len(text)} characters)"


def to_number(value: Any, where: str) -> float | None:
    """A finite number or None; anything else (text, a bool, NaN, an integer too large for a float) is a malformed
    record."""
    if value is None:
        return None
    try:
        number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    except OverflowError:
        number = math.nan
    if not math.isfinite(number):
        raise ForeignError(f"{where}: {shown(value)} is not a number")
    return number


def to_stamp(value: Any, where: str) -> float | None:
    """A start time in seconds (wall clock or the tool's own monotonic clock): a number between 0 and
    MAX_STAMP_S, or None."""
    number = to_number(value, where)
    if number is not None and not 0 <= number <= MAX_STAMP_S:
        raise ForeignError(f"{where}: {shown(value)} is no start time (seconds >= 0 and at most {MAX_STAMP_S:g})")
    return number


def to_count(value: Any, where: str) -> int | None:
    number = to_number(value, where)
    if number is None:
        return None
    if number < 0 or not number.is_integer():
        raise ForeignError(f"{where}: {shown(value)} is not a token count")
    return int(number)


def finish(record: RequestRecord, tool: str) -> RequestRecord:
    """Our derived fields from the tool's: counts checked as ours are, then TPOT, decode and prefill rates; every
    text and structure the tool gave under the secrets rule."""
    record.token_source = tool if record.completion_tokens is not None or record.prompt_tokens is not None else ""
    check_counts(record)
    if record.status == STATUS_OK:
        compute_rates(record)
    for name in ("task", "request_key", "error_kind", "error_message", "response_text", "reasoning_text"):
        setattr(record, name, clean_text(getattr(record, name)))
    record.extra = redact(record.extra)
    return record


def row(tool: str, task: str, index: int, concurrency: int, **values: Any) -> RequestRecord:
    suite = tool
    return RequestRecord(suite=suite, modality="text", task=task, repeat=index, concurrency=concurrency,
                         request_key=request_key(suite, task, "", index, concurrency), **values)



def whole(value: Any) -> int:
    """A count the tool gave as an aggregate; 0 where it is no whole number >= 0."""
    number = finite(value)
    return int(number) if number is not None and number >= 0 and number.is_integer() else 0


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def check_figures(run: ForeignRun) -> None:
    """The tool's own aggregates held to the plausibility rule rows are held to (a mean TTFT of −5 s is none)."""
    where = str(run.files[0]) if run.files else run.tool
    for metric, figures in run.figures.items():
        for stat, value in figures.items():
            if stat != "count":
                plausible.check_value(metric, value, f"{where}: the tool's {stat}", ForeignError)
    for stamp in (run.started_unix, run.finished_unix):
        if stamp is not None:
            plausible.check_value("started_at_unix", stamp, f"{where}: the run's start or end", ForeignError)


HEAD_BYTES = 64 * 2**10  # the opening a reader's looks_like reads: each tool writes its identifying fields first


def head(path: Path) -> str:
    """The opening of a regular file as text ('' for a folder, a missing file or anything not a regular file): what
    a reader looks at to say whether its tool wrote the file, without parsing the whole of it."""
    try:
        with outside.open_regular(path) as f:
            return f.read(HEAD_BYTES).decode("utf-8", errors="replace")
    except (outside.OutsideError, OSError):
        return ""
