"""Request traces in Mooncake's JSONL format (the FAST'25 release, kvcache-ai/Mooncake FAST25-release/traces), read
as vLLM's, SGLang's and AIPerf's trace replays read them: one JSON object a line,

    {"timestamp": 27482, "input_length": 6755, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6]}

    timestamp      arrival in milliseconds since the trace's first request (several may share one)
    input_length   prompt tokens
    output_length  completion tokens
    hash_ids       one id per block of BLOCK_TOKENS prompt tokens (512 in the release and in AIPerf's and
                   Dynamo's readers; the last block may be partial); two requests whose lists start with the same
                   ids share that prefix of their prompts, token for token (Mooncake chains the hashes: an id
                   stands for its block and every block before it)

What a replay makes of a line (benchlib.suites.load.workloads builds the text):
    send offset    (timestamp − first timestamp) / 1000 × time_scale seconds: time_scale 0.5 replays twice as fast
    prompt         the text of each whole block its hash ids name — the same id always gives the same text, so
                   shared prefixes are shared on the wire — then a tail unique to the request (its id, and filler
                   up to input_length). A block that does not fit whole (the trace's partial last block) becomes
                   part of the tail: a block-granular prefix cache could not have shared it either.
    lengths        input_length and the block size scaled by length_scale (a trace of 7k-token prompts replayed
                   at 1/16 on a small model keeps its sharing structure); output budget min(output_length, cap)

Every field is bounded by what a replay can do (a line outside is refused, naming it): a timestamp at most
MAX_TIMESTAMP_MS (30 days: longer than any released serving trace, and a replay runs in real time), lengths at
most MAX_TOKENS (no served model has a context that long), hash ids 64-bit and at most one per prompt token, a
line at most MAX_LINE_BYTES. A line that is not UTF-8, not JSON, JSON nested or numbered beyond what the parser
takes, or an object that names a key twice (which value counts would be the parser's guess) is the same one-line
error; the file is read as benchlib.records.outside reads every file from outside (a regular file only: a FIFO is
refused at once, not waited on).

Lines are kept in the file's order of timestamps (a stable sort: equal timestamps keep their lines' order); a
request's identity is its line number, so a resumed replay finds the same requests. Pure: nothing here but
reading the file."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from benchlib.measure.client.timing import MAX_CONTEXT_TOKENS
from benchlib.records import outside

BLOCK_TOKENS = 512  # tokens a hash id stands for in Mooncake's trace release (and AIPerf's / Dynamo's default)


FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
MAX_TIMESTAMP_MS = 30 * 86_400_000  # 30 days of arrivals; the Mooncake release spans an hour, Azure's a week
MAX_TOKENS = MAX_CONTEXT_TOKENS  # a prompt or an answer longer than any served model's context
MAX_HASH_ID = 2**63 - 1  # ids are 64-bit hashes (or counters) in every released trace
MAX_LINE_BYTES = 16 * 2**20  # a line of MAX_TOKENS / BLOCK_TOKENS ids is ~0.7 MB; sixteen times that is no trace


class TraceError(ValueError):
    """A trace line that is not a Mooncake record; the message is one line naming the file and line."""


@dataclass(frozen=True)
class TraceRequest:
    line: int  # 1-based line number in the file: the request's identity
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def _number(value: object) -> int | float | None:
    """A JSON number as itself; None for anything else (a bool is not a number here)."""
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else value


def _whole(value: object, name: str, low: int, high: int) -> int:
    number = _number(value)
    # an int is compared as an int: a 4,000-digit one overflows float() (math.isfinite raises on it)
    if number is None or (isinstance(number, float) and not (math.isfinite(number) and number.is_integer())) \
            or not low <= number <= high:
        raise ValueError(f"{name} must be a whole number >= {low} and at most {high}, not {_shown(value)}")
    return int(number)


def _shown(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else f"{text[:20]}… ({len(text)} characters)"


def parse_line(text: str, line: int, source: str = "trace") -> TraceRequest:
    """One JSONL line → TraceRequest; TraceError naming `source:line` and what is wrong."""
    try:
        data = outside.loads_json(text, f"{source}:{line}", "trace record")
    except outside.OutsideError as exc:
        raise TraceError(str(exc)) from None
    try:
        if not isinstance(data, dict):
            raise ValueError(f"expected an object with {', '.join(FIELDS)}, not {type(data).__name__}")
        missing = [f for f in ("timestamp", "input_length", "output_length") if f not in data]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        stamp = _number(data["timestamp"])
        if stamp is None or not 0 <= stamp <= MAX_TIMESTAMP_MS:  # NaN and inf fail it too
            raise ValueError(f"timestamp must be milliseconds >= 0 and at most {MAX_TIMESTAMP_MS} (30 days), not "
                             f"{_shown(data['timestamp'])}")
        input_length = _whole(data["input_length"], "input_length", 1, MAX_TOKENS)
        ids = data.get("hash_ids", [])
        if not isinstance(ids, list):
            raise ValueError(f"hash_ids must be a list of whole numbers, not {_shown(ids)}")
        if len(ids) > input_length:
            raise ValueError(f"{len(ids)} hash ids for input_length {input_length} (each stands for at least "
                             f"one prompt token)")
        hash_ids = tuple(_whole(h, "every hash id", 0, MAX_HASH_ID) for h in ids)
        return TraceRequest(line, float(stamp), input_length,
                            _whole(data["output_length"], "output_length", 1, MAX_TOKENS), hash_ids)
    except ValueError as exc:
        raise TraceError(f"{source}:{line}: {exc}") from None


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line, a bounded line at a time (benchlib.records.outside.lines); TraceError
    naming the line for one over MAX_LINE_BYTES or not UTF-8, or the file for one that is no regular file."""
    try:
        yield from outside.lines(path, MAX_LINE_BYTES)
    except outside.OutsideError as exc:
        raise TraceError(str(exc)) from None


def read_trace(path: str | Path, max_requests: int | None = None) -> list[TraceRequest]:
    """Every request of the file in timestamp order (the first `max_requests` of them when set); blank lines
    are skipped. TraceError on the first malformed line, or when there is no request at all."""
    path = Path(path)
    try:
        requests = [parse_line(text, number, str(path)) for number, text in _lines(path) if text.strip()]
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the trace ({exc.strerror or exc})") from None
    if not requests:
        raise TraceError(f"{path}: no request in the trace")
    requests.sort(key=lambda r: r.timestamp_ms)
    return requests[:max_requests] if max_requests else requests


def send_offsets(requests: list[TraceRequest], time_scale: float = 1.0) -> list[float]:
    """Seconds from the first request's arrival, scaled: (timestamp − first) / 1000 × time_scale."""
    if not time_scale > 0:
        raise ValueError(f"time_scale must be > 0, not {time_scale!r}")
    if not requests:
        return []
    first = min(r.timestamp_ms for r in requests)
    return [(r.timestamp_ms - first) / 1000.0 * time_scale for r in requests]


def scaled_tokens(tokens: int, length_scale: float) -> int:
    """A trace length at length_scale, at least 1 token."""
    return max(1, int(round(tokens * length_scale)))


def whole_blocks(request: TraceRequest, input_tokens: int, block_tokens: int, tail_tokens: int) -> tuple[int, ...]:
    """The hash ids whose blocks go into the prompt whole: as many leading ids as fit in input_tokens with
    tail_tokens left for the request's own tail (the request id and the rest of its length)."""
    room = max(0, input_tokens - tail_tokens) // max(1, block_tokens)
    return request.hash_ids[:room]


def reuse_share(requests: list[TraceRequest], block_tokens: int = BLOCK_TOKENS) -> float:
    """The share of the trace's prompt tokens a prefix cache with room for everything could serve: each
    request's leading hash ids that an earlier request already sent, × block_tokens, over all input tokens.
    What a replay's measured cache-hit share is compared with."""
    seen: set[int] = set()
    reusable, total = 0, 0
    for request in requests:
        lead = 0
        for hash_id in request.hash_ids:
            if hash_id not in seen:
                break
            lead += 1
        reusable += min(lead * block_tokens, request.input_length)
        total += request.input_length
        seen.update(request.hash_ids)
    return reusable / total if total else math.nan
