"""How a request is timed: the stamps of one streamed answer (StreamState) become its metrics on the record
(finalize, compute_rates), by the README's definitions, on the monotonic clock (time.perf_counter_ns):

    TTFT     first content or reasoning delta − request start (the wire start: the first byte sent)
    TTFO     first answer content (or tool call) − request start: thinking text does not count
    ITL      the gaps between consecutive deltas' arrival stamps
    decode   (completion tokens − 1) ÷ (t_last − t_first)       TPOT its inverse
    prefill  (prompt tokens − cached tokens) ÷ TTFT, at concurrency 1 only (above it TTFT holds queueing)

A streamed chunk is not a token: completion tokens come from the server's count; the client's delta count is
kept beside it and used only where the server gives none (labelled token_source=client_deltas).
"""

from __future__ import annotations

import json
from typing import Any

from benchlib.config import metrics
from benchlib.records.rows import RequestRecord

NS = 1e9


class StreamState:
    """Arrival times and text of one streamed answer; turns into metrics on the record."""

    __slots__ = ("start_ns", "first_ns", "first_answer_ns", "last_ns", "delta_ns", "content", "reasoning",
                 "content_deltas", "reasoning_deltas", "chunks", "tool_calls", "finish_reason", "done")

    def __init__(self, start_ns: int):
        self.start_ns = start_ns
        self.first_ns: int | None = None
        self.first_answer_ns: int | None = None
        self.last_ns: int | None = None
        self.delta_ns: list[int] = []
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.content_deltas = 0
        self.reasoning_deltas = 0
        self.chunks = 0
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason = ""
        self.done = False

    def output(self, now: int, content: str | None, reasoning: str | None, answer_like: bool = False) -> None:
        """Record a delta; TTFT counts content or reasoning, TTFO only answer content (or a tool call)."""
        has_content = bool(content)
        if not (has_content or reasoning or answer_like):
            return
        if self.first_ns is None:
            self.first_ns = now
        if (has_content or answer_like) and self.first_answer_ns is None:
            self.first_answer_ns = now
        self.last_ns = now
        self.delta_ns.append(now)
        if has_content:
            self.content.append(content)  # type: ignore[arg-type]
            self.content_deltas += 1
        if reasoning:
            self.reasoning.append(reasoning)
            self.reasoning_deltas += 1


def finalize(record: RequestRecord, state: StreamState, end_ns: int) -> None:
    """Derive timing metrics from stamps and server token counts (see README for definitions)."""
    record.e2e_s = (end_ns - state.start_ns) / NS
    record.response_text = "".join(state.content)
    record.reasoning_text = "".join(state.reasoning)
    record.client_content_deltas = state.content_deltas
    record.client_reasoning_deltas = state.reasoning_deltas
    record.client_deltas = len(state.delta_ns)
    record.client_chunks = state.chunks
    record.tool_calls = [_decode_args(state.tool_calls[i]) for i in sorted(state.tool_calls)]
    record.finish_reason = state.finish_reason or record.finish_reason
    record.truncated = record.finish_reason == "length"
    if state.first_ns is not None:
        record.ttft_s = (state.first_ns - state.start_ns) / NS
    if state.first_answer_ns is not None:
        record.ttfo_s = (state.first_answer_ns - state.start_ns) / NS
    stamps = state.delta_ns
    record.itl_s = [(b - a) / NS for a, b in zip(stamps, stamps[1:])]
    if record.completion_tokens is None and record.client_deltas:
        # No server count (e.g. llama-cpp-python ignores include_usage): fall back to deltas, labelled.
        record.completion_tokens = record.client_deltas
        record.token_source = record.token_source or "client_deltas"
    compute_rates(record)


def compute_rates(record: RequestRecord) -> None:
    """Decode tok/s = (tokens − 1) / (t_last − t_first); TPOT its inverse; prefill tok/s = (prompt − cached
    tokens) / TTFT at concurrency 1 (None above it).

    t_last − t_first is the sum of the ITL list, so rates can be recomputed when a better token count
    arrives later (e.g. from the embedded server's log).
    """
    tokens = record.completion_tokens or 0
    decode_s = sum(record.itl_s)
    record.tpot_s = metrics.none_if_nan(metrics.tpot_s(tokens, decode_s))
    record.decode_tps = metrics.none_if_nan(metrics.decode_tps(tokens, decode_s))
    # prefill rate counts only the tokens the server computed (cached ones were not), and only where TTFT is
    # prefill: at concurrency > 1 it also holds queueing behind other streams
    computed = (record.prompt_tokens or 0) - (record.cached_tokens or 0)
    record.prefill_tps = metrics.none_if_nan(metrics.prefill_tps(computed, record.ttft_s)) \
        if record.concurrency <= 1 else None


def _decode_args(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments", "")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            pass  # keep the raw text; the checker judges it
    return {"name": call.get("name", ""), "arguments": arguments}
