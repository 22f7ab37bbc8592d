"""Streaming chat clients that time every delta on the monotonic clock.

Two wire protocols behind one interface (`Backend.stream`):
- OpenAI-compatible (vLLM, SGLang, llama.cpp's llama-server, llama-cpp-python): a lean HTTP/1.1 client
  (benchlib/measure/http/wire.py) parses the SSE lines in the event loop's read callback, stamped with the kernel's receive
  time where available; the `openai` SDK + httpx cost more CPU per chunk and delayed stamps under load
  (bench/results/, the measure-accuracy file), and stay only for URLs an environment proxy applies to (raw body bytes,
  split into SSE events by the same benchlib/measure/http/sse.py).
- Ollama native `/api/chat` (NDJSON), whose final chunk carries server-side durations.
A speech model gets `Backend.transcribe` instead: one clip to /v1/audio/transcriptions (benchlib.measure.client.transcription).

A streamed chunk is not a token: token counts come from the server (usage / eval counts / server log) and
client delta counts are kept beside them. Every failure becomes an error kind + message on the record; a chunk
of the wrong shape (usage as text, a tool index as a list) is a bad_chunk like any other unexpected chunk.

Every path bounds each request three ways: the idle read timeout (run.timeout_s), an overall deadline (run.deadline_s:
deadline_exceeded) and a byte cap (run.max_response_bytes: response_too_large) — the wire path in its exchange
(benchlib/measure/http/http_response.py), the httpx paths (SDK, Ollama) with asyncio.timeout and a capped response stream
(raw bytes, so error bodies the SDK reads itself are capped too) and capped decoded pieces.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

import httpx
import openai

from benchlib.config.params import RunSettings, ServerParams
from benchlib.measure.client.timing import NS, StreamState, apply_llamacpp_timings, apply_ollama_durations, finalize
from benchlib.measure.client.transcription import TranscriptionRequest, read_transcription, transcription_form
from benchlib.measure.http.failures import (
    RequestFailed,
    connect_failure,
    deadline_exceeded,
    http_failure,
    media_type,
    not_a_stream,
    server_message,
    too_large,
)
from benchlib.measure.http.sse import DONE, Events, LineSplitter, shown
from benchlib.measure.http.wire import StreamingHTTP, direct_route
from benchlib.measure.pacing import send_process
from benchlib.measure.pacing.event_loop import SEND_LEAD_S, on_time
from benchlib.records.rows import STATUS_FAILED, STATUS_OK, RequestRecord
from benchlib.records.secrets import cut

EVENT_STREAM = "text/event-stream"


@dataclass
class ChatRequest:
    """What to send; backends translate it to their wire format."""

    messages: list[dict[str, Any]]
    max_tokens: int
    temperature: float = 0.0
    seed: int | None = None
    thinking: bool = False
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | None = None
    stop: list[str] = field(default_factory=list)  # the task's stop sequences (config.tasks.Task.stop)
    extra_body: dict[str, Any] = field(default_factory=dict)


def classify_exception(exc: BaseException) -> RequestFailed:
    """Map SDK/httpx exceptions to stable error kinds a user can act on."""
    if isinstance(exc, RequestFailed):
        return exc
    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers if exc.response is not None else {}
        return http_failure(exc.status_code, _sdk_message(exc), headers.get("location"), headers.get("retry-after"))
    cause = exc.__cause__ or exc.__context__ if isinstance(exc, openai.APIError) else exc
    cause = cause or exc
    if isinstance(cause, httpx.ConnectTimeout) or isinstance(exc, httpx.ConnectTimeout):
        return RequestFailed("connect_timeout", str(cause) or "connect timed out")
    if isinstance(cause, (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)) or \
            isinstance(exc, openai.APITimeoutError):
        return RequestFailed("read_timeout", str(cause) or "read timed out")
    if isinstance(cause, httpx.ConnectError):
        return connect_failure(cause)
    if isinstance(cause, (httpx.RemoteProtocolError, httpx.ReadError)):
        return RequestFailed("stream_cut", str(cause) or type(cause).__name__)
    if isinstance(exc, openai.APIConnectionError):
        return RequestFailed("connect_error", str(cause) or str(exc))
    return RequestFailed("client_error", f"{type(exc).__name__}: {exc}")


def _sdk_message(exc: openai.APIStatusError) -> str:
    if exc.body is not None:
        return server_message(exc.body if isinstance(exc.body, (dict, str, bytes)) else str(exc.body))
    try:
        return server_message(exc.response.text)
    except Exception:  # the body may be unread on a streamed response
        return cut(str(exc.message), 2000)


class StampingTransport(httpx.AsyncBaseTransport):
    """Stamps the instant httpx hands a request to the connection: TTFT starts on the wire, not before the
    SDK's own request building (4–7 ms per request, ~70 ms on the first, measured on the 2-core CI box)."""

    HEADER = "x-bench-request"

    def __init__(self, inner: httpx.AsyncBaseTransport, max_bytes: int | None = None):
        self.inner = inner
        self.max_bytes = max_bytes
        self.sent_ns: dict[str, int] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        tag = request.headers.get(self.HEADER)
        if tag:
            self.sent_ns[tag] = time.perf_counter_ns()
        response = await self.inner.handle_async_request(request)
        if self.max_bytes:
            response.stream = _CappedStream(response.stream, self.max_bytes, response.status_code)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _CappedStream(httpx.AsyncByteStream):
    """A response's raw bytes, given up past `max_bytes` (whoever reads them: our loop, or the SDK an error body)."""

    def __init__(self, inner: Any, max_bytes: int, status: int):
        self.inner, self.max_bytes, self.status = inner, max_bytes, status

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for piece in self.inner:
            seen += len(piece)
            if seen > self.max_bytes:
                raise too_large(self.max_bytes, self.status)
            yield piece

    async def aclose(self) -> None:
        await self.inner.aclose()


async def capped(pieces: AsyncIterator[bytes], max_bytes: int, status: int) -> AsyncIterator[bytes]:
    """Decoded body pieces, given up past `max_bytes` (a small gzip body can decode to gigabytes)."""
    seen = 0
    async for piece in pieces:
        seen += len(piece)
        if seen > max_bytes:
            raise too_large(max_bytes, status)
        yield piece


class Backend:
    """One server protocol. `stream` fills `record` (timing, tokens, text) or raises RequestFailed."""

    kind = "base"

    def __init__(self, server: ServerParams, run: RunSettings, concurrency: int = 1):
        self.server = server
        self.run = run
        self.timeout = httpx.Timeout(run.timeout_s, connect=run.connect_timeout_s)
        self.limits = httpx.Limits(max_connections=max(concurrency, 1) + 4,
                                   max_keepalive_connections=max(concurrency, 1) + 4)
        self.transport = StampingTransport(httpx.AsyncHTTPTransport(limits=self.limits), run.max_response_bytes)
        self._next_tag = itertools.count()

    @contextlib.asynccontextmanager
    async def deadline(self, record: RequestRecord) -> AsyncIterator[None]:
        """run.deadline_s over the block (the httpx paths; the wire path's exchange keeps its own)."""
        limit = asyncio.timeout(self.run.deadline_s)
        try:
            async with limit:
                yield
        except TimeoutError:
            if not limit.expired():
                raise
            raise deadline_exceeded(self.run.deadline_s, record.http_status) from None

    def new_tag(self) -> str:
        return str(next(self._next_tag))

    def wire_start(self, tag: str, state: StreamState, record: RequestRecord) -> None:
        """Move the clock's origin to the wire instant once the transport has stamped it."""
        sent = self.transport.sent_ns.pop(tag, None)
        if sent is not None and sent >= state.start_ns:
            record.client_prep_s = (sent - state.start_ns) / NS
            state.start_ns = record.start_ns = sent

    chat_on_time = False  # chat requests go by a path whose write can be handed on (the plain-HTTP wire)

    def sends_on_time(self, request: ChatRequest | TranscriptionRequest) -> bool:
        """Whether this request's path hands its write on (to the sending process) in an open-loop level
        (event_loop.paced with a lead): the wire client's plain-HTTP chat path only."""
        return self.chat_on_time and isinstance(request, ChatRequest)

    def pacing_lead_ns(self) -> int:
        """The lead to pace an open-loop level with (event_loop.paced): SEND_LEAD_S where chat requests can be
        prepared ahead and written by the sending process, else none (each is handed to the loop at its instant)."""
        return int(SEND_LEAD_S * 1e9) if self.chat_on_time else 0

    async def ready_to_pace(self) -> None:
        """Before an open-loop level: where this backend's writes go by the sending process, wait (in an executor,
        up to send_process.START_TIMEOUT_S) until it is up; until then the pacing thread writes them."""
        sender = send_process.shared() if self.chat_on_time else None
        if sender is not None:
            await asyncio.get_running_loop().run_in_executor(None, sender.wait_started)

    async def stream(self, request: ChatRequest, record: RequestRecord) -> None:
        raise NotImplementedError

    async def transcribe(self, request: TranscriptionRequest, record: RequestRecord) -> None:
        raise RequestFailed("unsupported_request", f"the {self.kind} protocol has no transcription endpoint")

    async def aclose(self) -> None:
        return None

    async def execute(self, request: ChatRequest | TranscriptionRequest, record: RequestRecord) -> RequestRecord:
        """Send with bounded 429 retries; on failure the record gets status failed + kind + message."""
        attempts = self.run.retries_429 + 1
        if isinstance(request, TranscriptionRequest):
            send, record.request_kind = self.transcribe, "transcription"
        else:
            send = self.stream
            record.max_tokens = record.max_tokens or request.max_tokens  # what a plausible count is held to
        early = on_time()
        if early is not None and not self.sends_on_time(request):
            await early.due()  # started ahead of its instant, on a path whose write cannot be handed on
        for attempt in range(attempts):
            record.http_status = None  # set by the attempt as soon as a response head arrives
            try:
                await send(request, record)
                record.status = STATUS_OK
                record.error_kind = record.error_message = ""
                return record
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 — every failure becomes a row
                failure = classify_exception(exc)
                record.status = STATUS_FAILED
                record.error_kind = failure.kind
                record.error_message = failure.message
                record.http_status = failure.http_status or record.http_status
                if failure.kind == "http_429" and attempt + 1 < attempts:
                    await asyncio.sleep(min(failure.retry_after if failure.retry_after is not None
                                            else 2.0 ** attempt, 30.0))
                    continue
                return record
        return record


class OpenAIBackend(Backend):
    """OpenAI-compatible /v1/chat/completions, streamed with usage, parsed from raw SSE lines."""

    kind = "openai"

    def __init__(self, server: ServerParams, run: RunSettings, concurrency: int = 1):
        super().__init__(server, run, concurrency)
        base = server.api_url()
        self.base_url = base
        self.http = httpx.AsyncClient(timeout=self.timeout, transport=self.transport)
        # max_retries=0: a retry would hide a failure inside one row's timing; we retry 429 ourselves.
        self.client = openai.AsyncOpenAI(base_url=base, api_key=server.api_key(), max_retries=0,
                                         timeout=self.timeout, http_client=self.http)
        # Each SDK request carries the Authorization header every other path sends (ServerParams.auth_headers): none
        # without a key — the SDK's placeholder omitted per request (the only place it accepts an explicit omit).
        self.sdk_auth = {"Authorization": openai.omit, **server.auth_headers()}
        # The hot path, the lean wire client (the module docstring says why); the SDK above for proxied URLs.
        self.wire = StreamingHTTP(base, connect_timeout=run.connect_timeout_s, read_timeout=run.timeout_s,
                                  headers=server.auth_headers(), deadline_s=run.deadline_s,
                                  max_bytes=run.max_response_bytes) \
            if run.http_client == "wire" and direct_route(base) else None
        self.chat_on_time = self.wire is not None and self.wire.scheme == "http"
        if self.chat_on_time:  # started now, so it is up before an open-loop level's first instant
            send_process.shared()

    def body_extras(self, request: ChatRequest) -> dict[str, Any]:
        extra: dict[str, Any] = {"chat_template_kwargs": {"enable_thinking": request.thinking}}
        extra.update(self.server.extra_body)
        extra.update(request.extra_body)
        return extra

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body, as the SDK would send it: named fields, then extra_body merged on top."""
        body: dict[str, Any] = {"model": self.server.request_model(), "messages": request.messages, "stream": True,
                                "stream_options": {"include_usage": True}, "max_tokens": request.max_tokens,
                                "temperature": request.temperature}
        if request.seed is not None:
            body["seed"] = request.seed
        if request.stop:
            body["stop"] = list(request.stop)
        if request.tools:
            body["tools"] = request.tools
            if request.tool_choice:
                body["tool_choice"] = request.tool_choice
        body.update(self.body_extras(request))
        return body

    async def stream(self, request: ChatRequest, record: RequestRecord) -> None:
        if self.wire is None:
            return await self._stream_sdk(request, record)
        body = json.dumps(self.request_body(request), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        record.started_at_unix = time.time()
        start = time.perf_counter_ns()
        record.start_ns = start
        state = StreamState(start)
        parse = self._parse_chunk
        events = Events()

        sends = 0

        def on_wire(sent: int, ready: int) -> None:  # the request goes on a ready connection: TTFT's origin
            nonlocal sends
            sends += 1
            record.reconnects = sends - 1  # a second send: the pooled connection had been closed by the server
            record.client_prep_s = (ready - start) / NS  # not the wait for a paced request's instant
            state.start_ns = record.start_ns = sent

        def on_line(line: bytes, now: int) -> bool:  # runs in the read callback, stamped on arrival
            event = events.feed(line)
            if event is DONE:
                state.done = True
                return True
            if event is not None:
                parse(event, now, state, record)
            return False

        end = 0
        try:
            exchange = await self.wire.post_stream("/chat/completions", body, on_line, on_wire=on_wire)
            record.http_status = exchange.status
            end = exchange.end_ns
        finally:
            finalize(record, state, end or time.perf_counter_ns())
        self._check_complete(state, record, events)

    async def _stream_sdk(self, request: ChatRequest, record: RequestRecord) -> None:
        """The openai SDK + httpx path (run.http_client 'sdk', or a URL an environment proxy applies to).

        The body is `request_body()`, byte for byte what the wire path sends: the SDK merges extra_body
        into the JSON it builds from the named arguments."""
        body = self.request_body(request)
        named = ("model", "messages", "stream")
        tag = self.new_tag()
        kwargs: dict[str, Any] = {key: body[key] for key in named}
        kwargs["extra_body"] = {key: value for key, value in body.items() if key not in named}
        kwargs["extra_headers"] = {**self.sdk_auth, StampingTransport.HEADER: tag}
        record.started_at_unix = time.time()
        start = time.perf_counter_ns()
        record.start_ns = start
        state = StreamState(start)
        events, lines = Events(), LineSplitter()
        async with self.deadline(record):
            try:
                async with self.client.chat.completions.with_streaming_response.create(**kwargs) as response:
                    self.wire_start(tag, state, record)
                    record.http_status = response.status_code
                    declared = response.headers.get("content-type", "")
                    if media_type(declared) not in ("", EVENT_STREAM):
                        raise not_a_stream(response.status_code, declared, EVENT_STREAM,
                                           server_message(await response.read()))
                    # not iter_lines: see benchlib/measure/http/sse.py
                    async for piece in capped(response.iter_bytes(), self.run.max_response_bytes,
                                              response.status_code):
                        now = time.perf_counter_ns()
                        for line in lines.feed(piece):
                            event = events.feed(line)
                            if event is DONE:
                                state.done = True
                                break
                            if event is not None:
                                self._parse_chunk(event, now, state, record)
                        if state.done:
                            break
                    else:
                        event = events.feed(lines.rest())  # a last line without its line end
                        if event is DONE:
                            state.done = True
                        elif event is not None:
                            self._parse_chunk(event, time.perf_counter_ns(), state, record)
            finally:
                end = time.perf_counter_ns()
                self.wire_start(tag, state, record)
                finalize(record, state, end)
        self._check_complete(state, record, events)

    async def transcribe(self, request: TranscriptionRequest, record: RequestRecord) -> None:
        """The clip as multipart/form-data to /audio/transcriptions, timed from the wire to the whole answer
        (benchlib.measure.client.transcription: the form, the answer's checks, e2e and the real-time factor)."""
        data, files = transcription_form(request, self.server.request_model(), record)
        tag = self.new_tag()
        record.started_at_unix = time.time()
        record.start_ns = time.perf_counter_ns()
        state = StreamState(record.start_ns)
        async with self.deadline(record):
            try:
                response = await self.http.post(f"{self.base_url}/audio/transcriptions", data=data, files=files,
                                                 headers={**self.server.auth_headers(), StampingTransport.HEADER: tag})
                end = time.perf_counter_ns()
            except httpx.HTTPError as exc:
                raise classify_exception(exc) from exc
            finally:
                self.wire_start(tag, state, record)
        record.http_status = response.status_code
        if response.status_code >= 300:
            raise http_failure(response.status_code, server_message(response.content),
                               response.headers.get("location"), response.headers.get("retry-after"))
        read_transcription(record, response.status_code, response.content, (end - state.start_ns) / NS)

    @staticmethod
    def _parse_chunk(chunk: Any, now: int, state: StreamState, record: RequestRecord) -> None:
        """One decoded event of a chat-completions stream (benchlib.measure.http.sse.Events)."""
        if not isinstance(chunk, dict):
            raise RequestFailed("bad_chunk", f"unexpected stream chunk: {shown(json.dumps(chunk))!r}")
        state.chunks += 1
        if chunk.get("error"):  # also beside non-empty choices: the server's words are the failure
            raise RequestFailed("server_error", f"error in stream: {server_message(chunk)}")
        for choice in shaped(chunk.get("choices"), list, "choices") or ():
            choice = shaped(choice, dict, "a choice") or {}
            delta = shaped(choice.get("delta"), dict, "delta") or {}
            reasoning = shaped(delta.get("reasoning_content") or delta.get("reasoning"), str, "delta.reasoning")
            tool_deltas = shaped(delta.get("tool_calls"), list, "delta.tool_calls")
            for call in tool_deltas or ():
                call = shaped(call, dict, "a tool call") or {}
                index = shaped(call.get("index"), int, "a tool call's index")
                slot = state.tool_calls.setdefault(len(state.tool_calls) if index is None else index,
                                                   {"name": "", "arguments": ""})
                function = shaped(call.get("function"), dict, "a tool call's function") or {}
                arguments = function.get("arguments")
                if isinstance(arguments, dict):  # an object where the protocol has its JSON text
                    arguments = json.dumps(arguments, ensure_ascii=False)
                slot["name"] += shaped(function.get("name"), str, "a tool call's name") or ""
                slot["arguments"] += shaped(arguments, str, "a tool call's arguments") or ""
            state.output(now, shaped(delta.get("content"), str, "delta.content"), reasoning,
                         answer_like=bool(tool_deltas))
            finish = shaped(choice.get("finish_reason"), str, "finish_reason")
            if finish:
                state.finish_reason = finish
        usage = shaped(chunk.get("usage"), dict, "usage")
        if usage:  # counts as sent: benchlib.measure.client.timing.check_counts keeps implausible ones out
            record.prompt_tokens = usage.get("prompt_tokens")
            record.completion_tokens = usage.get("completion_tokens")
            record.token_source = "usage"
            details = shaped(usage.get("completion_tokens_details"), dict, "usage.completion_tokens_details") or {}
            if details.get("reasoning_tokens") is not None:
                record.reasoning_tokens = details["reasoning_tokens"]
            prompt_details = shaped(usage.get("prompt_tokens_details"), dict, "usage.prompt_tokens_details") or {}
            if prompt_details.get("cached_tokens") is not None:
                record.cached_tokens = prompt_details["cached_tokens"]
        timings = shaped(chunk.get("timings"), dict, "timings")
        if timings:
            apply_llamacpp_timings(record, timings)

    @staticmethod
    def _check_complete(state: StreamState, record: RequestRecord, events: Events) -> None:
        unfinished = events.unfinished()
        if unfinished is not None and not state.done:
            raise RequestFailed("bad_chunk", f"the stream ended inside an event whose data is not JSON: "
                                f"{shown(unfinished)!r}")
        if not state.done and not state.finish_reason:
            raise RequestFailed("stream_cut", f"stream ended after {state.chunks} chunks without [DONE]")
        if not state.finish_reason:  # e.g. llama-cpp-python ends an interrupted answer with a bare [DONE]
            raise RequestFailed("stream_cut", f"[DONE] after {state.chunks} chunks but no finish_reason: "
                                "the server ended the answer without saying why")
        if not record.response_text and not record.reasoning_text and not record.tool_calls:
            raise RequestFailed("empty_response", f"no content in {state.chunks} chunks "
                                f"(finish_reason={state.finish_reason or 'none'})")

    async def aclose(self) -> None:
        if self.wire is not None:
            await self.wire.aclose()
        await self.client.close()


def shaped(value: Any, kind: type, what: str) -> Any:
    """`value` when it is absent or of the type the protocol gives it, else a bad_chunk naming the field."""
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    raise RequestFailed("bad_chunk", f"{what} is a {type(value).__name__}, not a {kind.__name__}: "
                        f"{shown(json.dumps(value, default=str))!r}")


class OllamaBackend(Backend):
    """Ollama's native /api/chat: NDJSON stream, `think` switch, keep_alive, server-side durations."""

    kind = "ollama"

    def __init__(self, server: ServerParams, run: RunSettings, concurrency: int = 1):
        super().__init__(server, run, concurrency)
        self.base_url = server.root_url()
        self.http = httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout, transport=self.transport,
                                      headers=server.auth_headers())

    async def aclose(self) -> None:
        await self.http.aclose()

    def body(self, request: ChatRequest) -> dict[str, Any]:
        options: dict[str, Any] = {"num_predict": request.max_tokens, "temperature": request.temperature}
        if request.seed is not None:
            options["seed"] = request.seed
        options.update({"stop": list(request.stop)} if request.stop else {})
        body: dict[str, Any] = {"model": self.server.request_model(), "messages": request.messages, "stream": True,
                                "think": request.thinking, "keep_alive": ollama_keep_alive(self.server.keep_alive),
                                "options": options}
        if request.tools:
            body["tools"] = request.tools
        extra = {**self.server.extra_body, **request.extra_body}
        if "options" in extra:
            body["options"].update(extra.pop("options"))
        body.update(extra)
        return body

    async def stream(self, request: ChatRequest, record: RequestRecord) -> None:
        body = self.body(request)
        tag = self.new_tag()
        record.started_at_unix = time.time()
        start = time.perf_counter_ns()
        record.start_ns = start
        state = StreamState(start)
        async with self.deadline(record):
            try:
                async with self.http.stream("POST", "/api/chat", json=body,
                                            headers={StampingTransport.HEADER: tag}) as response:
                    self.wire_start(tag, state, record)
                    record.http_status = response.status_code
                    if response.status_code >= 300:
                        raise http_failure(response.status_code, server_message(await response.aread()),
                                           response.headers.get("location"), response.headers.get("retry-after"))
                    lines = LineSplitter()  # LF/CR only: a raw U+0085 inside a JSON string is content
                    async for piece in capped(response.aiter_bytes(), self.run.max_response_bytes,
                                              response.status_code):
                        now = time.perf_counter_ns()
                        for line in lines.feed(piece):
                            if line.strip():
                                self._parse_line(line, now, state, record)
                            if state.done:
                                break
                        if state.done:
                            break
                    else:
                        rest = lines.rest()  # a last line without its line end
                        if rest.strip():
                            self._parse_line(rest, time.perf_counter_ns(), state, record)
            except httpx.HTTPError as exc:
                raise classify_exception(exc) from exc
            finally:
                end = time.perf_counter_ns()
                self.wire_start(tag, state, record)
                finalize(record, state, end)
        if not state.done:
            raise RequestFailed("stream_cut", f"stream ended after {state.chunks} lines without done=true")
        if not record.response_text and not record.reasoning_text and not record.tool_calls:
            raise RequestFailed("empty_response", f"no content in {state.chunks} lines "
                                f"(done_reason={state.finish_reason or 'none'})")

    @staticmethod
    def _parse_line(line: bytes, now: int, state: StreamState, record: RequestRecord) -> None:
        try:
            chunk = json.loads(line)
        except ValueError:  # JSONDecodeError, or bytes that are not UTF-8
            raise RequestFailed("bad_chunk", f"non-JSON stream line: {shown(line)!r}") from None
        except RecursionError:
            raise RequestFailed("bad_chunk", f"a stream line nested deeper than JSON's parser goes: "
                                f"{shown(line)!r}") from None
        if not isinstance(chunk, dict):
            raise RequestFailed("bad_chunk", f"unexpected stream line: {shown(line)!r}")
        state.chunks += 1
        if "error" in chunk:
            raise RequestFailed("server_error", f"error in stream: {server_message(chunk)}")
        message = shaped(chunk.get("message"), dict, "message") or {}
        calls = shaped(message.get("tool_calls"), list, "message.tool_calls") or []
        for call in calls:
            function = shaped((shaped(call, dict, "a tool call") or {}).get("function"), dict,
                              "a tool call's function") or {}
            state.tool_calls[len(state.tool_calls)] = {"name": shaped(function.get("name"), str, "a tool call's name")
                                                       or "", "arguments": function.get("arguments", {})}
        state.output(now, shaped(message.get("content"), str, "message.content"),
                     shaped(message.get("thinking"), str, "message.thinking"), answer_like=bool(calls))
        if chunk.get("done"):
            state.done = True
            state.finish_reason = shaped(chunk.get("done_reason"), str, "done_reason") or "stop"
            apply_ollama_durations(record, chunk)


def ollama_keep_alive(value: str) -> str | int | float:
    """keep_alive as Ollama parses it (api/types.go Duration.UnmarshalJSON): a JSON number is seconds (negative =
    forever), a string goes through Go's time.ParseDuration, which rejects unit-less text other than "0". So
    "30m" and "0" pass as they are, and a bare number in params ("300", "-1") is sent as a number, not as a
    string Ollama would answer with HTTP 400."""
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    if not math.isfinite(number):
        return text
    return int(number) if number.is_integer() else number


def make_backend(server: ServerParams, run: RunSettings, concurrency: int = 1) -> Backend:
    """The backend for a server kind; embedded llama-cpp-python speaks the OpenAI protocol."""
    if server.kind == "ollama":
        return OllamaBackend(server, run, concurrency)
    return OpenAIBackend(server, run, concurrency)
