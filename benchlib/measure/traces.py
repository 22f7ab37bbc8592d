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

Lines are kept in the file's order of timestamps (a stable sort: equal timestamps keep their lines' order); a
request's identity is its line number, so a resumed replay finds the same requests. Pure: nothing here but
reading the file."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

BLOCK_TOKENS = 512  # tokens a hash id stands for in Mooncake's trace release (and AIPerf's / Dynamo's default)


FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


class TraceError(ValueError):
    """A trace line that is not a Mooncake record; the message is one line naming the file and line."""


@dataclass(frozen=True)
class TraceRequest:
    line: int  # 1-based line number in the file: the request's identity
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def _whole(value: object, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value != int(value) or value < low:
        raise ValueError(f"{name} must be a whole number >= {low}, not {json.dumps(value)}")
    return int(value)


def parse_line(text: str, line: int, source: str = "trace") -> TraceRequest:
    """One JSONL line → TraceRequest; TraceError naming `source:line` and what is wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{source}:{line}: not JSON ({exc.msg} at column {exc.colno})") from None
    try:
        if not isinstance(data, dict):
            raise ValueError(f"expected an object with {', '.join(FIELDS)}, not {type(data).__name__}")
        missing = [f for f in ("timestamp", "input_length", "output_length") if f not in data]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        stamp = data["timestamp"]
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or not math.isfinite(stamp) or stamp < 0:
            raise ValueError(f"timestamp must be milliseconds >= 0, not {json.dumps(stamp)}")
        ids = data.get("hash_ids", [])
        if not isinstance(ids, list):
            raise ValueError(f"hash_ids must be a list of whole numbers, not {json.dumps(ids)[:60]}")
        hash_ids = tuple(_whole(h, "every hash id", 0) for h in ids)
        return TraceRequest(line, float(stamp), _whole(data["input_length"], "input_length", 1),
                            _whole(data["output_length"], "output_length", 1), hash_ids)
    except ValueError as exc:
        raise TraceError(f"{source}:{line}: {exc}") from None


def read_trace(path: str | Path, max_requests: int | None = None) -> list[TraceRequest]:
    """Every request of the file in timestamp order (the first `max_requests` of them when set); blank lines
    are skipped. TraceError on the first malformed line, or when there is no request at all."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the trace ({exc.strerror or exc})") from None
    requests = [parse_line(text, number, str(path)) for number, text in enumerate(lines, 1) if text.strip()]
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
