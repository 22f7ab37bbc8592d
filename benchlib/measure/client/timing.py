"""How a request is timed: the stamps of one streamed answer (StreamState) become its metrics on the record
(finalize, compute_rates), by the definitions of docs/columns.md, on the monotonic clock (time.perf_counter_ns):

    TTFT     first content or reasoning delta − request start (the wire start: the first byte sent)
    TTFO     first answer content (or tool call) − request start: thinking text does not count
    ITL      the gaps between consecutive deltas' arrival stamps
    decode   (completion tokens − 1) ÷ (t_last − t_first)       TPOT its inverse
    prefill  (prompt tokens − cached tokens) ÷ TTFT, at concurrency 1 only (above it TTFT holds queueing)

A streamed chunk is not a token: completion tokens come from the server's count; the client's delta count is
kept beside it and used only where the server gives none (labelled token_source=client_deltas).

A server's count is only taken when it is plausible (check_counts): a whole number >= 0 (not text, a fraction,
infinity or NaN); completion tokens at most the larger of BUDGET_SLACK x max_tokens and TOKENS_PER_DELTA x the
deltas the client received (a server that ignored max_tokens and really streamed the tokens stays plausible;
10,000,000 tokens in 3 deltas does not); prompt tokens (the usage's, the server's own and the cached ones) at most
MAX_CONTEXT_TOKENS, a context no served model has (a prompt's count has no bound from the deltas: it may hold a
conversation's history and media, so the ceiling is the model's, not the request's); reasoning tokens at most
the completion tokens, cached tokens at most the prompt tokens. An implausible count is left empty, named in
`implausible_counts`, and nothing is computed from it (no decode rate from client deltas either: the server's
stream is suspect; no prefill rate, neither ours nor the server's, from a prompt count left out).

A server's own timings (llama.cpp's `timings`, Ollama's final durations) become the server_* rates here too
(apply_llamacpp_timings, apply_ollama_durations), by the same rule: rates only from whole counts and finite times.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from typing import Any

from benchlib.config import metrics
from benchlib.records.rows import RequestRecord
from benchlib.records.secrets import cut

NS = 1e9
COUNT_FIELDS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens", "server_prompt_tokens")
PROMPT_FIELDS = ("prompt_tokens", "cached_tokens", "server_prompt_tokens")
MAX_CONTEXT_TOKENS = 2**24  # 16.8M: above the longest context any served model has (10M tokens)
TOKENS_PER_DELTA = 64  # more tokens than this per streamed delta is no server's stream (vLLM batches a few at most)
MAX_ARGUMENT_DEPTH = 64  # tool-call arguments nested deeper are kept as text (no function takes such an object)
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")
BUDGET_SLACK = 2  # a server stops at max_tokens; twice it is not a miscount of one or two special tokens


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
    """Derive timing metrics from stamps and server token counts (docs/columns.md has the definitions)."""
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
    dropped = check_counts(record)
    if record.completion_tokens is None and record.client_deltas and "completion_tokens" not in dropped:
        # No server count (e.g. llama-cpp-python ignores include_usage): fall back to deltas, labelled.
        record.completion_tokens = record.client_deltas
        record.token_source = record.token_source or "client_deltas"
    compute_rates(record)


def count_value(value: Any) -> int | None:
    """A server's token count as an int; None when it is not one (text, a bool, a fraction, < 0, inf, NaN)."""
    if type(value) is int:  # the usual case, decided before the ABC checks below (each request, on the loop)
        return value if value >= 0 else None
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value) if value >= 0 else None
    if isinstance(value, numbers.Real) and math.isfinite(value) and value >= 0 and float(value).is_integer():
        return int(value)
    return None


def completion_limit(max_tokens: Any, deltas: Any) -> int | None:
    """The most completion tokens a plausible count claims for a request's budget and the deltas received; None
    when neither is known (nothing to judge by)."""
    budget = count_value(max_tokens) or 0
    received = count_value(deltas) or 0
    if not budget and not received:
        return None
    return max(BUDGET_SLACK * budget, TOKENS_PER_DELTA * max(received, 1))


def check_counts(record: RequestRecord) -> set[str]:
    """Empty every implausible server count on the record (module docstring), say which and why in
    `implausible_counts`, and return their names. An implausible completion count also empties the server's own
    decode rate, which rests on the same count."""
    problems: list[str] = []
    dropped: set[str] = set()

    def drop(name: str, why: str) -> None:
        problems.append(f"{name} {why}")
        dropped.add(name)
        setattr(record, name, None)

    for name in COUNT_FIELDS:
        raw = getattr(record, name)
        if raw is None:
            continue
        value = count_value(raw)
        if value is None:
            drop(name, f"{cut(repr(raw), 40)} is not a count")
        else:
            setattr(record, name, value)
    for name in PROMPT_FIELDS:
        value = getattr(record, name)
        if value is not None and value > MAX_CONTEXT_TOKENS:
            drop(name, f"{value} above {MAX_CONTEXT_TOKENS} (longer than any model's context)")
    limit = completion_limit(record.max_tokens, record.client_deltas)
    if record.completion_tokens is not None and limit is not None and record.completion_tokens > limit:
        drop("completion_tokens", f"{record.completion_tokens} for {record.client_deltas} deltas and max_tokens "
                                  f"{record.max_tokens or 'unknown'} (at most {limit})")
    if record.reasoning_tokens is not None and record.completion_tokens is not None \
            and record.reasoning_tokens > record.completion_tokens:
        drop("reasoning_tokens", f"{record.reasoning_tokens} above completion_tokens {record.completion_tokens}")
    if record.cached_tokens is not None and record.prompt_tokens is not None \
            and record.cached_tokens > record.prompt_tokens:
        drop("cached_tokens", f"{record.cached_tokens} above prompt_tokens {record.prompt_tokens}")
    if "completion_tokens" in dropped:
        record.server_decode_tps = None
    if "server_prompt_tokens" in dropped:
        record.server_prefill_tps = None
    record.implausible_counts = "; ".join(problems)
    return dropped


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
    # prefill: at concurrency > 1 it also holds queueing behind other streams; none from a count left out
    computed = (record.prompt_tokens or 0) - (record.cached_tokens or 0)
    judged = record.concurrency <= 1 and not {"prompt_tokens", "cached_tokens"} & dropped_counts(record)
    record.prefill_tps = metrics.none_if_nan(metrics.prefill_tps(computed, record.ttft_s)) if judged else None


def dropped_counts(record: RequestRecord) -> set[str]:
    """The names of the counts check_counts left out (each of its reasons starts with one)."""
    return {reason.split(" ", 1)[0] for reason in (record.implausible_counts or "").split("; ") if reason}


def _decode_args(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as an object where they are JSON no deeper than MAX_ARGUMENT_DEPTH; else the text
    as sent (the SDK hands arguments on as text whatever they hold; the checker judges it)."""
    arguments = call.get("arguments", "")
    if isinstance(arguments, str):
        if json_depth(arguments) <= MAX_ARGUMENT_DEPTH:
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError:
                pass  # keep the raw text; the checker judges it
    elif object_depth(arguments) > MAX_ARGUMENT_DEPTH:  # an object in the chunk (Ollama): kept as its text
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {"name": call.get("name", ""), "arguments": arguments}


def json_depth(text: str) -> int:
    """How deep JSON text nests (brackets outside strings), counted without parsing: JSON's parser, and every
    reader of the row after it, recurses once a level and gives up near the interpreter's limit (1,000)."""
    depth = deepest = 0
    for match in _BRACKETS.finditer(_STRINGS.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_ARGUMENT_DEPTH:
                break
    return deepest


def object_depth(value: Any) -> int:
    """How deep a decoded JSON value nests (a scalar 0, {} 1), level by level without recursion, given up past
    MAX_ARGUMENT_DEPTH."""
    depth, level = 0, [value]
    while depth <= MAX_ARGUMENT_DEPTH:
        containers = [item for item in level if isinstance(item, (dict, list))]
        if not containers:
            break
        depth += 1
        level = [child for item in containers for child in (item.values() if isinstance(item, dict) else item)]
    return depth


def finite(value: Any) -> float | None:
    """A server's number (a duration) as a finite float; None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def apply_llamacpp_timings(record: RequestRecord, timings: dict[str, Any]) -> None:
    """llama.cpp server's `timings` object: prompt_n/prompt_ms, predicted_n/predicted_ms, cache_n (counts as
    sent: check_counts judges them; rates only from whole counts and finite times)."""
    prompt_n, prompt_ms = count_value(timings.get("prompt_n")), finite(timings.get("prompt_ms"))
    predicted_n, predicted_ms = count_value(timings.get("predicted_n")), finite(timings.get("predicted_ms"))
    if timings.get("prompt_n") is not None:
        record.server_prompt_tokens = timings["prompt_n"]
    if prompt_n and prompt_ms:
        record.server_prefill_tps = metrics.none_if_nan(metrics.rate(prompt_n, prompt_ms / 1000.0))
    if predicted_n and predicted_ms:
        record.server_decode_tps = metrics.none_if_nan(metrics.rate(predicted_n, predicted_ms / 1000.0))
    if timings.get("cache_n") is not None and record.cached_tokens is None:
        record.cached_tokens = timings["cache_n"]


def apply_ollama_durations(record: RequestRecord, final: dict[str, Any]) -> None:
    """Final chunk (docs.ollama.com/api/chat, docs/api.md): prompt_eval_count/duration, eval_count/duration,
    load_duration (nanoseconds), and, from Ollama 0.3x on, prompt_eval_cached_count (prompt tokens read from the
    prompt cache, a part of prompt_eval_count). Counts as sent (check_counts judges them); rates and the load
    time only from whole counts and finite durations."""
    record.prompt_tokens = final.get("prompt_eval_count", record.prompt_tokens)
    if final.get("prompt_eval_cached_count") is not None:
        record.cached_tokens = final["prompt_eval_cached_count"]
    record.completion_tokens = final.get("eval_count", record.completion_tokens)
    if record.completion_tokens is not None:
        record.token_source = "usage"
    record.server_prompt_tokens = final.get("prompt_eval_count")
    prompt_ns, eval_ns = finite(final.get("prompt_eval_duration")), finite(final.get("eval_duration"))
    prompt_n, eval_n = count_value(final.get("prompt_eval_count")), count_value(final.get("eval_count"))
    if prompt_n and prompt_ns:
        record.server_prefill_tps = metrics.none_if_nan(metrics.rate(prompt_n, prompt_ns / NS))
    if eval_n and eval_ns:
        record.server_decode_tps = metrics.none_if_nan(metrics.rate(eval_n, eval_ns / NS))
    load_ns = finite(final.get("load_duration"))
    if load_ns is not None and load_ns >= 0:
        record.server_load_s = load_ns / NS
