"""A local streaming server with exactly known timing, for tests and bench/.

Speaks OpenAI-compatible SSE (`/v1/chat/completions`) and Ollama's native NDJSON (`/api/chat`), one token
per chunk. Timing is scheduled against absolute deadlines on the monotonic clock (no drift): the first
token leaves `ttft` seconds after the request is read, then one every `itl` seconds. The instants at which
each chunk was written are logged on time.perf_counter_ns() — the same system-wide CLOCK_MONOTONIC the
client stamps with — and served at GET /log, so a test can compare client stamps with server sends.

A request's max_tokens (Ollama: options.num_predict) caps what is streamed, reasoning included, as a real server
stops at its budget (finish_reason "length"); its "stop" sequences (Ollama: options.stop) end a scripted answer
("echo", "replies") where one first appears, without it. `peak_running` is the most requests it streamed at once.
Behaviour per request comes from the body's "fake" object (sent via params `server.extra_body`):
  {"ttft": 0.15, "itl": 0.02, "tokens": 64, "reasoning_tokens": 0, "prompt_tokens": 10,
   "fault": null | "http_500" | "http_401" | ... | "cut" | "bad_chunk" | "empty" | "no_done" | "no_finish" | "stall" | "stall_mid",
   "retry_after": 1, "timings": true, "cached_tokens": 0, "tool_call": null | {"name":..., "arguments": {...}},
   "load_ms": 0, "fault_when": null, "server_itl": null, "prompt_n": null, "reasoning_field": "reasoning_content"}
"server_itl" is the per-token time the server *reports* (Ollama eval_duration, llama.cpp predicted_ms; default:
the gap it measured between its own first and last token sends, as a real server times itself — on a busy machine
that is longer than "itl", for the server and the client alike), so a test can make the server's own decode rate
disagree with what the client measures.
"cached_tokens" appears as usage.prompt_tokens_details.cached_tokens (vLLM/OpenAI), timings.cache_n (llama.cpp)
and prompt_eval_cached_count (Ollama 0.3x). "prompt_n" overrides llama.cpp's timings.prompt_n (documented as the
prompt tokens processed, cache_n excluded; default: prompt_tokens). "reasoning_field" names the delta field for
thinking text: "reasoning_content" (llama.cpp, older vLLM) or "reasoning" (vLLM since the rename).
Model-info routes follow the documented shapes: Ollama GET /api/version, /api/ps, /api/tags, POST /api/show
(ollama docs/api.md, docs.ollama.com/api); llama.cpp GET /props, /health (tools/server/README.md); vLLM GET
/version. /api/ps lists the models a chat request loaded (keep_alive 0 unloads), as Ollama does.
"fault_when" limits the fault to requests whose messages contain that text (so one run mixes failures
and successes). A fault "http_401_echo" answers 401 quoting the Authorization header it received, as a
careless server might, so tests can prove the key is scrubbed from every output.
"echo": true answers with the last user message's text, word by word (as a base model that repeats its prompt
does); "replies": [{"when": text, "text": ..., "tool_call": {...}}] then appends the first reply whose "when"
occurs in the request's messages (an echo followed by a correct answer), or answers with it alone (a reply with
"media_sha256" instead matches a request carrying an image or audio part whose decoded bytes have that SHA-256: a
vision model that answers what it was shown); a reply with
"busy_text" says that instead when another such request was in the server as this one arrived or "busy_wait" (0.2) s
later (a server whose answers change under load). "unescape": true
decodes backslash escapes in reply and reasoning texts ("\\ud800": a lone surrogate in the stream's JSON).
"leak": true makes a careless server echo the Authorization header it received into the answer, the reasoning
text, a tool call's name and arguments and the final chunk's error-free usage, so tests can prove the key is
scrubbed from every field a server controls. Each chat request's log entry keeps the headers it arrived with
("headers", names lower-cased), so a test can compare what each client path sends.
A fault "http_429_once" answers 429 the first time a given prompt is seen, then streams normally.
Prompt length (load sweeps): POST /extras/tokenize {"input": text} -> {"tokens": [...]} is llama-cpp-python's
route, with a fake tokenizer of one token per whitespace-separated word; "prompt_tokens": "words" makes the
server report that count over every message's text plus FAKE_TEMPLATE_TOKENS per message (the fake chat
template), and "prefill_per_token" (s) adds prompt_tokens x that to the TTFT, as a real prefill would.
Prometheus metrics: FakeServer(metrics="vllm" | "sglang" | "llama.cpp") serves GET /metrics in that server's
exposition format and names (benchlib.measure.servers.prometheus documents them), counting what it really served: requests,
prompt and generation tokens, TTFT / inter-token / e2e sums (histogram _sum/_count) and requests running;
"metrics_extra_tokens": n in a request's "fake" object makes the generation counter over-count by n, as a
server counting tokens the client never received would.
Misbehaviour for "nothing lost, nothing leaked": "ignore_budget": true streams every token whatever max_tokens says
(a server that never stops, with "tokens" large and "itl" 0); fault "drip" sends the stream one byte every
"drip_s" (0.05) seconds for ever, each gap well inside any idle timeout; "usage" replaces the final chunk's usage
object as given (any JSON: {"completion_tokens": 10000000}, "12", Infinity) or, on Ollama, is merged into the
final line ({"eval_count": -5}); "usage_json" is the same as JSON text, for what a request body cannot carry
('{"completion_tokens": Infinity}'); "tool_index" is the tool-call delta's index as given (e.g. [0]); "leak": "split"
puts the key's first half at the end of the tool call's name and of the reasoning text and its second half at
the start of the arguments and of the answer, so no one value holds it whole; "echo_pad": n puts n characters
before the key quoted by "http_401_echo", so a cut at any length can fall inside it.
FakeServer(metrics_fault=...) makes /metrics misbehave: "drip" (one byte every 0.05 s, for ever), "endless" (label
sets streamed without end), "leak" (from the second scrape on — the first one finds the server's names — the key,
from the Authorization header, where a sample value belongs).
FakeServer(tokenizer_fault=...) makes /extras/tokenize answer its first call (the probe) and then fail:
"http_500" (an error page), "count_text" ({"count": "12"}), "drip" and "endless" (as metrics_fault's).
PrefixCacheServer (the load workloads' fake) keeps a prefix cache: it reports as cached the longest prefix a request
shares with an earlier one, answers every request with its own numbered reply and keeps what it received.
Run standalone: python tests/fakes/servers.py [--port N]  (prints "PORT <n>" when listening).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import http.server
import json
import re
import socket
import sys
import threading
import time
import zlib
from typing import Any

DEFAULTS = {"ttft": 0.05, "itl": 0.01, "tokens": 16, "reasoning_tokens": 0, "prompt_tokens": 12, "fault": None,
            "retry_after": 0, "timings": False, "cached_tokens": None, "tool_call": None, "load_ms": 0,
            "fault_when": None, "server_itl": None, "prompt_n": None, "reasoning_field": "reasoning_content",
            "echo": False, "replies": None, "leak": False, "unescape": False, "ignore_budget": False,
            "drip_s": 0.05, "usage": None, "usage_json": None, "tool_index": 0, "echo_pad": 0, "busy_wait": 0.2}
FAKE_DIGEST = "5c8f8b1d6e3a2f4b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b"
FAKE_DETAILS = {"parent_model": "", "format": "gguf", "family": "gemma3", "families": ["gemma3"],
                "parameter_size": "268.10M", "quantization_level": "Q4_K_M"}
FAKE_SIZE = 291_000_000
def _tokens(text: str) -> list[str]:
    """Words with the whitespace after each (line breaks survive streaming)."""
    return re.findall(r"\S+\s*", text)


def _stopped(words: list[str], stops: list[str]) -> list[str]:
    """The words up to where a stop sequence first appears, without it: a real server ends the answer there."""
    text = "".join(words)
    cuts = [text.find(stop) for stop in stops if isinstance(stop, str) and stop and stop in text]
    return _tokens(text[:min(cuts)]) if cuts else words


def _media_parts(messages: list) -> list[str]:
    """The base64 data of every image (data URL) and audio part of OpenAI-style messages."""
    out = []
    for message in messages:
        for part in message.get("content") if isinstance(message.get("content"), list) else []:
            if isinstance(part, dict) and part.get("type") == "image_url":
                out.append(str(part.get("image_url", {}).get("url", "")).partition("base64,")[2])
            elif isinstance(part, dict) and part.get("type") == "input_audio":
                out.append(str(part.get("input_audio", {}).get("data", "")))
    return out


def _unescaped(text: str, spec: dict) -> str:
    """With "unescape": true, backslash escapes in a reply or reasoning text are decoded ("\\ud800" becomes a lone
    surrogate, which only a JSON escape can carry: the request body itself could not be encoded)."""
    return text.encode("ascii", "backslashreplace").decode("unicode_escape") if spec.get("unescape") else text


WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
FAKE_TEMPLATE_TOKENS = 3  # per message: the fake chat template's role marker and turn delimiters


def fake_tokenize(text: str) -> list[int]:
    """The fake tokenizer: one token per whitespace-separated word (ids: a stable hash of the word)."""
    return [zlib.crc32(word.encode("utf-8")) & 0xFFFF for word in text.split()]


def fake_prompt_tokens(messages: Any) -> int:
    """prompt_tokens the fake server reports for "prompt_tokens": "words": words of every text part plus the
    fake template's framing per message."""
    total = 0
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else ""
        parts = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        text = " ".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text")
        total += len(fake_tokenize(text)) + FAKE_TEMPLATE_TOKENS
    return total


class FakeServer:
    """asyncio HTTP/1.1 server; run in a thread (tests) or as a process (bench, standalone)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, metrics: str | None = None,
                 metrics_fault: str | None = None, tokenizer_fault: str | None = None):
        self.host, self.port = host, port
        self.metrics = metrics
        self.metrics_fault = metrics_fault
        self.tokenizer_fault = tokenizer_fault
        self.tokenize_calls = 0
        self.metrics_calls = 0
        self.counts = {"requests": 0, "prompt": 0, "generation": 0, "ttft": 0.0, "itl": 0.0, "itl_n": 0, "e2e": 0.0,
                       "running": 0}
        self.log: list[dict[str, Any]] = []
        self.peak_running = 0  # the most chat requests this server streamed at once
        self.chatting = 0  # "busy_text" requests in this server right now (arrived, not yet answered)
        self.seen_prompts: set[str] = set()
        self.http_faults: list[str] = []  # the status of each chat request answered with an HTTP error, in order
        self.loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._serve_task: asyncio.Task | None = None
        self.loaded: dict[str, dict[str, Any]] = {}  # what /api/ps reports: models a chat request loaded

    # ---- lifecycle ---------------------------------------------------------------------------------
    async def serve(self) -> None:
        self._serve_task = asyncio.current_task()
        self._server = await asyncio.start_server(self._handle, self.host, self.port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        async with self._server:
            await self._server.serve_forever()

    def start_thread(self) -> "FakeServer":
        def target() -> None:
            self.loop = asyncio.new_event_loop()
            try:
                self.loop.run_until_complete(self.serve())
            except asyncio.CancelledError:
                pass

        self._thread = threading.Thread(target=target, daemon=True, name="fake-server")
        self._thread.start()
        self._ready.wait(5)
        return self

    def stop(self) -> None:
        """Close the listener and cancel in-flight handlers (e.g. stalled streams) before the loop ends."""
        if not (self.loop and self._server):
            return

        async def shutdown() -> None:
            current = asyncio.current_task()
            handlers = [t for t in asyncio.all_tasks() if t is not current and t is not self._serve_task
                        and not t.done()]
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)
            self._server.close()  # last: it ends serve_forever, and with it the loop

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(timeout=5)
        if self._thread:
            self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # ---- HTTP plumbing -----------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                received = time.perf_counter_ns()
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
                length = int(headers.get("content-length", 0))
                body = json.loads(await reader.readexactly(length)) if length else {}
                if isinstance(body, dict):
                    body["_auth"], body["_headers"] = headers.get("authorization", ""), headers
                keep_open = await self._route(method, path.split("?")[0], body, writer, received)
                if not keep_open:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            try:
                writer.close()
            except Exception:  # noqa: BLE001
                pass

    @staticmethod
    def _head(writer: asyncio.StreamWriter, status: int, content_type: str, length: int | None = None,
              extra: dict[str, str] | None = None) -> None:
        reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
                  429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}.get(status, "X")
        lines = [f"HTTP/1.1 {status} {reason}", f"Content-Type: {content_type}"]
        lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
        lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())

    async def _json(self, writer: asyncio.StreamWriter, status: int, data: Any,
                    extra: dict[str, str] | None = None) -> bool:
        payload = json.dumps(data).encode()
        self._head(writer, status, "application/json", len(payload), extra)
        writer.write(payload)
        await writer.drain()
        return True

    @staticmethod
    def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))

    async def _route(self, method: str, path: str, body: dict, writer: asyncio.StreamWriter, received: int) -> bool:
        if method == "GET" and path == "/v1/models":
            return await self._json(writer, 200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
        if method == "GET" and path == "/log":
            return await self._json(writer, 200, self.log)
        if method == "GET" and path in ("/version", "/api/version"):
            return await self._json(writer, 200, {"version": "fake-1.0"})
        if method == "GET" and path == "/metrics" and self.metrics:
            self.metrics_calls += 1
        if method == "GET" and path == "/metrics" and self.metrics and self.metrics_fault \
                and (self.metrics_fault != "leak" or self.metrics_calls > 1):
            return await self._bad_metrics(writer, str(body.get("_auth", "")))
        if method == "GET" and path == "/metrics" and self.metrics:
            text = render_metrics(self.metrics, self.counts).encode()
            self._head(writer, 200, "text/plain; version=0.0.4; charset=utf-8", len(text))
            writer.write(text)
            await writer.drain()
            return True
        if method == "GET" and path == "/api/ps":
            return await self._json(writer, 200, {"models": list(self.loaded.values())})
        if method == "GET" and path == "/api/tags":
            return await self._json(writer, 200, {"models": [
                {"name": "fake-model", "model": "fake-model", "modified_at": "2026-04-07T10:00:00Z",
                 "size": FAKE_SIZE, "digest": FAKE_DIGEST, "details": FAKE_DETAILS}]})
        if method == "POST" and path == "/api/show":
            if body.get("model") != "fake-model":
                return await self._json(writer, 404, {"error": f"model '{body.get('model')}' not found"})
            return await self._json(writer, 200, {
                "modelfile": "# Modelfile generated by \"ollama show\"\nFROM fake", "parameters": "num_ctx 8192",
                "template": "{{ .Prompt }}", "license": "fake license text", "details": FAKE_DETAILS,
                "model_info": {"general.architecture": "gemma3", "general.parameter_count": 268098176,
                               "gemma3.context_length": 32768, "tokenizer.ggml.tokens": []},
                "capabilities": ["completion"], "modified_at": "2026-04-07T10:00:00Z"})
        if method == "GET" and path == "/props":
            return await self._json(writer, 200, {
                "default_generation_settings": {"id": 0, "n_ctx": 4096, "params": {"n_predict": -1}},
                "total_slots": 1, "model_path": "/models/fake-model-Q4_K_M.gguf", "chat_template": "{{ messages }}",
                "modalities": {"vision": False, "audio": False}, "build_info": "b6000-fake0000", "is_sleeping": False})
        if method == "GET" and path in ("/health", "/v1/health"):
            return await self._json(writer, 200, {"status": "ok"})
        if method == "POST" and path == "/extras/tokenize" and self.tokenizer_fault and self.tokenize_calls:
            self.tokenize_calls += 1
            if self.tokenizer_fault == "http_500":
                return await self._json(writer, 500, {"error": {"message": "tokenizer crashed\nTraceback: ..."}})
            if self.tokenizer_fault in ("drip", "endless"):
                return await self._without_end(writer, self.tokenizer_fault)
            return await self._json(writer, 200, {"count": "12"})
        if method == "POST" and path == "/extras/tokenize":  # llama-cpp-python's tokenizer route, fake tokenizer
            self.tokenize_calls += 1
            return await self._json(writer, 200, {"tokens": fake_tokenize(str(body.get("input", "")))})
        if method == "POST" and path == "/v1/chat/completions":
            return await self._chat(body, writer, received, ollama=False)
        if method == "POST" and path == "/api/chat":
            return await self._chat(body, writer, received, ollama=True)
        return await self._json(writer, 404, {"error": {"message": f"no route {method} {path}"}})

    async def _bad_metrics(self, writer: asyncio.StreamWriter, auth: str) -> bool:
        """/metrics as FakeServer(metrics_fault=...) says (the module docstring)."""
        if self.metrics_fault == "leak":
            key = auth.removeprefix("Bearer ")
            text = render_metrics(self.metrics, self.counts).replace(" 0\n", f" {key}\n", 1).encode()
            self._head(writer, 200, "text/plain; version=0.0.4", len(text))
            writer.write(text)
            await writer.drain()
            return True
        return await self._without_end(writer, self.metrics_fault)

    async def _without_end(self, writer: asyncio.StreamWriter, how: str) -> bool:
        """A 200 whose body never ends: "drip" one byte every 0.05 s, else 50 lines at a time as fast as it goes."""
        self._head(writer, 200, "text/plain; version=0.0.4")
        line = b'vllm:num_requests_running{engine="0",model_name="fake-model",pad="%s"} 1\n' % (b"x" * 200)
        while True:  # until the client gives up
            if how == "drip":
                for byte in line:
                    self._chunk(writer, bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(0.05)
            else:
                self._chunk(writer, line * 50)
                await writer.drain()
                await asyncio.sleep(0)

    # ---- chat --------------------------------------------------------------------------------------
    async def _chat(self, body: dict, writer: asyncio.StreamWriter, received: int, ollama: bool) -> bool:
        # only requests that ask about overlap count: a test that left a request stalled in a shared server (fault
        # "stall" sleeps for an hour) must not make every later request look concurrent
        watched = any("busy_text" in r for r in (body.get("fake") or {}).get("replies") or [] if isinstance(r, dict))
        body["_chatting"] = token = {"open": watched}
        self.chatting += watched
        try:
            return await self._chat_body(body, writer, received, ollama)
        finally:
            self._answered(token)

    def _answered(self, token: dict | None) -> None:
        """This request no longer counts as in the server: said before its last bytes leave, so a client that starts
        the next request the moment it has the answer never finds this one still counted."""
        if token is not None and token["open"]:
            token["open"] = False
            self.chatting -= 1

    async def _chat_body(self, body: dict, writer: asyncio.StreamWriter, received: int, ollama: bool) -> bool:
        spec = {**DEFAULTS, **(body.get("fake") or {})}
        if spec["prompt_tokens"] == "words":
            spec["prompt_tokens"] = fake_prompt_tokens(body.get("messages", []))
        spec["ttft"] += float(spec.get("prefill_per_token") or 0) * spec["prompt_tokens"]
        fault = spec["fault"]
        prompt = json.dumps(body.get("messages", []), ensure_ascii=False)
        if spec["fault_when"] and spec["fault_when"] not in prompt:
            fault = None
        if fault == "http_401_echo":
            pad = "x" * int(spec["echo_pad"])
            return await self._json(writer, 401, {"error": {"message": f"invalid API key: {pad}{body.get('_auth')}"}})
        if fault == "http_429_once":
            first_time = prompt not in self.seen_prompts
            self.seen_prompts.add(prompt)
            if first_time:
                return await self._json(writer, 429, {"error": {"message": "rate limited, slow down"}},
                                        {"Retry-After": str(spec["retry_after"])})
            fault = None
        if fault and fault.startswith("http_"):
            status = int(fault.split("_")[1])
            self.http_faults.append(fault)
            return await self._json(writer, status, {"error": {"message": f"fake {status} for testing"}},
                                    {"Retry-After": str(spec["retry_after"])} if status == 429 else None)
        if spec["leak"] == "split":  # the key in halves, each half in another value
            auth = str(body.get("_auth", "")).removeprefix("Bearer ")
            head, tail = auth[:len(auth) // 2], auth[len(auth) // 2:]
            spec["replies"] = [{"when": "", "text": f"{tail} is the rest",
                                "tool_call": {"name": f"lookup{head}", "arguments": {"q": tail}}}]
            spec["reasoning_tokens"] = max(spec["reasoning_tokens"], 1)
            spec["reasoning_text"], spec["reasoning_sep"] = f"thinking{head}", ""
        elif spec["leak"]:  # echo the key everywhere a server controls
            auth = str(body.get("_auth", ""))
            spec["replies"] = [{"when": "", "text": f"answer {auth} end",
                                "tool_call": {"name": f"lookup {auth}", "arguments": {"q": auth, "note": auth}}}]
            spec["reasoning_tokens"] = max(spec["reasoning_tokens"], 2)
            spec["reasoning_text"] = f"thinking {auth}"
        if any("busy_text" in reply for reply in spec["replies"] or []):
            alone = self.chatting == 1
            await asyncio.sleep(spec["busy_wait"])  # the other requests of a concurrent batch arrive meanwhile
            spec["busy"] = not alone or self.chatting > 1
        words = self._scripted_words(body, spec)
        stops = body.get("stop") or (body.get("options") or {}).get("stop") or []
        if words is not None and stops:
            words = _stopped(words, stops)
        if words is not None:
            spec["tokens"] = len(words)
        budget = body.get("max_tokens") or (body.get("options") or {}).get("num_predict")
        if isinstance(budget, int) and budget > 0 and spec["tokens"] + spec["reasoning_tokens"] > budget \
                and not spec["ignore_budget"]:
            spec["tokens"] = max(0, budget - spec["reasoning_tokens"])  # a real server stops at the budget
            if words is not None:
                words = words[:spec["tokens"]]
        if fault == "stall":  # accept, then never answer: a read timeout
            await asyncio.sleep(3600)
            return False
        entry = {"received_ns": received, "sends_ns": [], "tokens": spec["tokens"], "prompt": prompt[:200],
                 "headers": body.get("_headers", {}),
                 "request": {k: body.get(k) for k in ("model", "think", "keep_alive", "options", "chat_template_kwargs",
                                                      "stream_options", "max_tokens", "stop") if k in body}}
        if ollama:
            if body.get("keep_alive") in (0, "0", "0s"):
                self.loaded.pop(body.get("model", ""), None)
            else:
                self.loaded[body.get("model", "")] = {
                    "name": body.get("model", ""), "model": body.get("model", ""), "size": FAKE_SIZE,
                    "digest": FAKE_DIGEST, "details": FAKE_DETAILS, "expires_at": "2026-04-07T10:30:00Z",
                    "size_vram": FAKE_SIZE, "context_length": 8192}
        self.log.append(entry)
        self.counts["running"] += 1
        self.peak_running = max(self.peak_running, self.counts["running"])
        try:
            return await self._stream(body, spec, writer, received, ollama, fault, words, entry)
        finally:
            self.counts["running"] -= 1

    async def _stream(self, body: dict, spec: dict, writer: asyncio.StreamWriter, received: int, ollama: bool,
                      fault: Any, words: list[str] | None, entry: dict) -> bool:
        self._head(writer, 200, "application/x-ndjson" if ollama else "text/event-stream")
        await writer.drain()
        total = spec["reasoning_tokens"] + spec["tokens"]
        first_at = received + int(spec["ttft"] * 1e9)
        if fault == "drip":  # a byte at a time for ever: never silent for long, never done
            index = 0
            while True:
                data = self._token_chunk(WORDS[index % len(WORDS)] + " ", False, ollama, spec["reasoning_field"])
                for byte in b"%x\r\n%s\r\n" % (len(data), data):
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(spec["drip_s"])
                index += 1
        for index in range(total):
            deadline = first_at + int(index * spec["itl"] * 1e9)
            delay = (deadline - time.perf_counter_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            if fault == "stall_mid" and index == total // 2:  # tokens flowed, then silence: read timeout
                await asyncio.sleep(3600)
            if fault == "cut" and index == total // 2:
                writer.transport.abort()  # drop the connection mid-stream, no terminating chunk
                return False
            reasoning = index < spec["reasoning_tokens"]
            word = WORDS[index % len(WORDS)] + " "
            if reasoning and spec.get("reasoning_text"):
                word = _unescaped(spec["reasoning_text"], spec) + spec.get("reasoning_sep", " ")
            if words is not None and not reasoning:
                word = words[index - spec["reasoning_tokens"]]
            if fault == "empty":
                word = ""
            if not index:  # the first token is produced now: the server's TTFT ends here, as a real server's does
                entry["first_token_ns"] = time.perf_counter_ns()
            if fault == "bad_chunk" and index == 1:
                self._chunk(writer, b"data: {this is not json\n\n")
            else:
                self._chunk(writer, self._token_chunk(word, reasoning, ollama, spec["reasoning_field"]))
            await writer.drain()
            entry["sends_ns"].append(time.perf_counter_ns())
        if spec["tool_call"]:
            self._chunk(writer, self._tool_chunk(spec["tool_call"], ollama, spec["tool_index"]))
        if fault == "no_done":
            writer.write(b"0\r\n\r\n")  # well-formed end of body, but no finish_reason and no [DONE]
            await writer.drain()
            return True
        self._answered(body.get("_chatting"))
        sends = entry["sends_ns"]
        if spec["server_itl"] is None and len(sends) > 1:  # a real server reports the decode time it measured
            spec["server_itl"] = (sends[-1] - sends[0]) / 1e9 / (len(sends) - 1)
        self._chunk(writer, self._final_chunks(body, spec, ollama))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        sends = entry["sends_ns"]
        c = self.counts
        c["requests"] += 1
        c["prompt"] += int(spec["prompt_tokens"])
        c["generation"] += total + int(spec.get("metrics_extra_tokens") or 0)
        if sends:
            # from before its first write: a thread preempted between the write and the stamp after it would
            # report a TTFT longer than the client's, which the client-minus-server check reads as negative
            c["ttft"] += (entry.get("first_token_ns", sends[0]) - received) / 1e9
            c["itl"] += (sends[-1] - sends[0]) / 1e9
            c["itl_n"] += len(sends) - 1
        c["e2e"] += (time.perf_counter_ns() - received) / 1e9
        return True

    @staticmethod
    def _scripted_words(body: dict, spec: dict) -> list[str] | None:
        """The answer's words for "echo" / "replies" (None: the default alphabet); sets spec["tool_call"]."""
        if not spec["echo"] and not spec["replies"]:
            return None
        def text(message: dict) -> str:
            content = message.get("content", "")
            if isinstance(content, list):
                content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content or "")

        messages = body.get("messages", [])
        words: list[str] = []
        if spec["echo"]:
            users = [m for m in messages if m.get("role") == "user"]
            words += _tokens(text(users[-1]) + "\n") if users else []
        plain = "\n".join(text(m) for m in messages)
        media = {hashlib.sha256(base64.b64decode(data)).hexdigest() for data in _media_parts(messages)}
        for reply in spec["replies"] or []:
            if reply["media_sha256"] in media if "media_sha256" in reply else reply.get("when", "") in plain:
                said = reply["busy_text"] if spec.get("busy") and "busy_text" in reply else reply.get("text", "")
                words += _tokens(_unescaped(str(said), spec))
                spec["tool_call"] = reply.get("tool_call") or spec["tool_call"]
                break
        return words or ["(nothing) "]

    @staticmethod
    def _token_chunk(word: str, reasoning: bool, ollama: bool, reasoning_field: str = "reasoning_content") -> bytes:
        if ollama:
            message = {"role": "assistant", "content": "" if reasoning else word}
            if reasoning:
                message["thinking"] = word
            return json.dumps({"model": "fake-model", "message": message, "done": False}).encode() + b"\n"
        delta = {reasoning_field: word} if reasoning else {"content": word}
        chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    @staticmethod
    def _tool_chunk(call: dict, ollama: bool, index: Any = 0) -> bytes:
        if ollama:
            message = {"role": "assistant", "content": "",
                       "tool_calls": [{"function": {"name": call["name"], "arguments": call.get("arguments", {})}}]}
            return json.dumps({"model": "fake-model", "message": message, "done": False}).encode() + b"\n"
        arguments = call.get("arguments", {})  # text is sent as it is (JSON the fake could not encode itself)
        delta = {"tool_calls": [{"index": index, "id": "call_0", "type": "function",
                                 "function": {"name": call["name"],
                                              "arguments": arguments if isinstance(arguments, str)
                                              else json.dumps(arguments)}}]}
        chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    @staticmethod
    def _final_chunks(body: dict, spec: dict, ollama: bool) -> bytes:
        if spec["usage_json"]:
            spec["usage"] = json.loads(spec["usage_json"])
        completion = spec["reasoning_tokens"] + spec["tokens"]
        budget = body.get("max_tokens") or (body.get("options") or {}).get("num_predict")
        finish = "length" if budget is not None and completion >= budget else "stop"
        if spec["tool_call"]:
            finish = "tool_calls"
        server_itl = spec["server_itl"] if spec["server_itl"] is not None else spec["itl"]
        if ollama:
            itl_ns = int(round(server_itl * 1e9))
            final = {"model": "fake-model", "message": {"role": "assistant", "content": ""}, "done": True,
                     "done_reason": finish if finish != "tool_calls" else "stop",
                     "total_duration": int((spec["ttft"] + completion * spec["itl"]) * 1e9),
                     "load_duration": int(spec["load_ms"] * 1e6),
                     "prompt_eval_count": spec["prompt_tokens"],
                     "prompt_eval_duration": int(spec["ttft"] * 1e9), "eval_count": completion,
                     "eval_duration": completion * itl_ns}
            if spec["cached_tokens"] is not None:
                final["prompt_eval_cached_count"] = spec["cached_tokens"]
            final.update(spec["usage"] or {})
            return json.dumps(final).encode() + b"\n"
        parts = [{"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}]
        if spec["fault"] == "no_finish":  # [DONE] arrives, but no chunk ever said why the answer ended
            parts = []
        usage_chunk: dict[str, Any] = {"object": "chat.completion.chunk", "choices": []}
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": spec["prompt_tokens"], "completion_tokens": completion,
                     "total_tokens": spec["prompt_tokens"] + completion}
            if spec["reasoning_tokens"]:
                usage["completion_tokens_details"] = {"reasoning_tokens": spec["reasoning_tokens"]}
            if spec["cached_tokens"] is not None:
                usage["prompt_tokens_details"] = {"cached_tokens": spec["cached_tokens"]}
            usage_chunk["usage"] = usage if spec["usage"] is None else spec["usage"]
        if spec["timings"]:  # llama.cpp server's per-request timings object
            prompt_n = spec["prompt_n"] if spec["prompt_n"] is not None else spec["prompt_tokens"]
            prompt_ms, predicted_ms = spec["ttft"] * 1000, completion * server_itl * 1000
            usage_chunk["timings"] = {"cache_n": spec["cached_tokens"] or 0, "prompt_n": prompt_n,
                                      "prompt_ms": prompt_ms, "prompt_per_token_ms": prompt_ms / max(prompt_n, 1),
                                      "prompt_per_second": 1e3 / prompt_ms * prompt_n if prompt_ms else None,
                                      "predicted_n": completion, "predicted_ms": predicted_ms,
                                      "predicted_per_token_ms": predicted_ms / max(completion, 1),
                                      "predicted_per_second": 1e3 / predicted_ms * completion if predicted_ms else None}
        if len(usage_chunk) > 2:
            parts.append(usage_chunk)
        text = "".join(f"data: {json.dumps(p)}\n\n" for p in parts) + "data: [DONE]\n\n"
        return text.encode()


def render_metrics(flavour: str, c: dict[str, Any]) -> str:
    """/metrics in the server's own exposition format and names (label sets as each server writes them)."""
    lines: list[str] = []

    def metric(name: str, kind: str, value: float, labels: str) -> None:
        lines.extend([f"# HELP {name} fake", f"# TYPE {name} {kind}", f"{name}{labels} {value}"])

    def histogram(name: str, total: float, count: int, labels: str) -> None:
        inner = labels[1:-1] + "," if labels else ""
        lines.extend([f"# HELP {name} fake", f"# TYPE {name} histogram",
                      f'{name}_bucket{{{inner}le="+Inf"}} {count}', f"{name}_count{labels} {count}",
                      f"{name}_sum{labels} {total}"])

    if flavour == "llama.cpp":
        metric("llamacpp:prompt_tokens_total", "counter", c["prompt"], "")
        metric("llamacpp:tokens_predicted_total", "counter", c["generation"], "")
        metric("llamacpp:tokens_predicted_seconds_total", "counter", c["itl"], "")
        metric("llamacpp:requests_processing", "gauge", c["running"], "")
        metric("llamacpp:requests_deferred", "gauge", 0, "")
        return "\n".join(lines) + "\n"
    prefix, labels = ("vllm", '{engine="0",model_name="fake-model"}') if flavour == "vllm" else \
        ("sglang", '{model_name="fake-model"}')
    histogram(f"{prefix}:time_to_first_token_seconds", c["ttft"], c["requests"], labels)
    histogram(f"{prefix}:inter_token_latency_seconds", c["itl"], c["itl_n"], labels)
    histogram(f"{prefix}:e2e_request_latency_seconds", c["e2e"], c["requests"], labels)
    metric(f"{prefix}:prompt_tokens_total", "counter", c["prompt"], labels)
    metric(f"{prefix}:generation_tokens_total", "counter", c["generation"], labels)
    if flavour == "vllm":
        metric("vllm:num_requests_running", "gauge", c["running"], labels)
        metric("vllm:num_requests_waiting", "gauge", 0, labels)
        metric("vllm:kv_cache_usage_perc", "gauge", 0.01 * c["running"], labels)
        metric("vllm:num_preemptions_total", "counter", 0, labels)
    else:
        metric("sglang:num_running_reqs", "gauge", c["running"], labels)
        metric("sglang:num_queue_reqs", "gauge", 0, labels)
        metric("sglang:token_usage", "gauge", 0.01 * c["running"], labels)
        metric("sglang:num_retracted_requests_total", "counter", 0, labels)
    return "\n".join(lines) + "\n"


class PrefixCacheServer(FakeServer):
    """A fake with a prefix cache, for the load workloads: a request's prompt is its messages as fake tokens (each
    message: a role marker, its words, two closing tokens — FAKE_TEMPLATE_TOKENS framing, as "prompt_tokens":
    "words" counts) and the server reports as cached (usage.prompt_tokens_details.cached_tokens) the longest prefix
    it shares with any earlier request, less the last token (a server always computes that one, as vLLM does).
    Every answer is its own ("reply<n> ..."), so a test can tell whose answer a later turn carries; `received` keeps
    each request's whole messages, arrival stamp and cached count. metrics="vllm" also counts the hits and queries
    as vLLM's vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total (prompt tokens)."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.received: list[dict[str, Any]] = []
        self._sequences: list[list[str]] = []
        self.counts.update(cache_hits=0, cache_queries=0)

    @staticmethod
    def sequence(messages: Any) -> list[str]:
        tokens: list[str] = []
        for message in messages if isinstance(messages, list) else []:
            content = message.get("content") if isinstance(message, dict) else ""
            tokens += [f"<{message.get('role', '')}>", *str(content or "").split(), "</turn>", "\n"]
        return tokens

    async def _chat(self, body: dict, writer: asyncio.StreamWriter, received: int, ollama: bool) -> bool:
        tokens = self.sequence(body.get("messages", []))
        shared = 0
        for earlier in self._sequences:
            n = 0
            while n < min(len(tokens), len(earlier)) and tokens[n] == earlier[n]:
                n += 1
            shared = max(shared, n)
        cached = max(0, min(shared, len(tokens) - 1))
        self._sequences.append(tokens)
        number = len(self.received)
        self.received.append({"messages": body.get("messages", []), "received_ns": received, "cached_tokens": cached,
                              "prompt_tokens": len(tokens)})
        self.counts["cache_hits"] += cached
        self.counts["cache_queries"] += len(tokens)
        fake = {**(body.get("fake") or {}), "prompt_tokens": len(tokens), "cached_tokens": cached,
                "replies": [{"when": "", "text": f"reply{number} " + " ".join(WORDS)}]}
        return await super()._chat({**body, "fake": fake}, writer, received, ollama)

    async def _route(self, method: str, path: str, body: dict, writer: asyncio.StreamWriter, received: int) -> bool:
        if method == "GET" and path == "/metrics" and self.metrics == "vllm":
            labels = '{engine="0",model_name="fake-model"}'
            text = render_metrics("vllm", self.counts) + "".join(
                f"# HELP vllm:{name} fake\n# TYPE vllm:{name} counter\nvllm:{name}_total{labels} {self.counts[key]}\n"
                for name, key in (("prefix_cache_hits", "cache_hits"), ("prefix_cache_queries", "cache_queries")))
            payload = text.encode()
            self._head(writer, 200, "text/plain; version=0.0.4; charset=utf-8", len(payload))
            writer.write(payload)
            await writer.drain()
            return True
        return await super()._route(method, path, body, writer, received)


class FakeTranscriptionServer:
    """OpenAI's /v1/audio/transcriptions, faked: it parses the multipart/form-data body itself (split on the
    boundary the Content-Type names, each part's Content-Disposition name and filename read by hand, so the client's
    encoding is checked by something other than the MIME parser the real server uses) and keeps each request's parts
    in `received` ({name: (filename or None, content type, bytes)}). It answers `text` as {"text", "usage":
    {"type": "duration", "seconds": usage_seconds}} (usage left out when usage_seconds is None), or the `fault`:
    "http_500" | "model" (404 unless model is `served`) | "not_json" | "no_text" | "text_number"."""

    def __init__(self, text: str = "hello world", usage_seconds: float | None = 2.5, fault: str | None = None,
                 served: str = "fake-model"):
        self.text, self.usage_seconds, self.fault, self.served = text, usage_seconds, fault, served
        self.received: list[dict[str, tuple[str | None, str, bytes]]] = []
        self.headers: list[dict[str, str]] = []  # each request's headers, names lower-cased
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def reply(self, status: int, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                self.reply(200, json.dumps({"object": "list", "data": [{"id": owner.served}]}).encode())

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/v1/audio/transcriptions":
                    return self.reply(404, b'{"error": {"message": "no such route"}}')
                parts = owner.parse(self.headers.get("Content-Type", ""), body)
                owner.received.append(parts)
                owner.headers.append({name.lower(): value for name, value in self.headers.items()})
                self.reply(*owner.answer(parts))

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name="fake-transcription")

    @staticmethod
    def parse(content_type: str, body: bytes) -> dict[str, tuple[str | None, str, bytes]]:
        media, _, params = content_type.partition(";")
        assert media.strip() == "multipart/form-data", content_type
        boundary = params.split("boundary=", 1)[1].strip().strip('"').encode()
        parts: dict[str, tuple[str | None, str, bytes]] = {}
        for chunk in body.split(b"--" + boundary)[1:]:
            if chunk.startswith(b"--"):
                break  # the closing delimiter
            head, _, data = chunk.lstrip(b"\r\n").partition(b"\r\n\r\n")
            headers = {k.strip().lower(): v.strip() for k, v in
                       (line.split(":", 1) for line in head.decode().split("\r\n") if ":" in line)}
            disposition = headers["content-disposition"]
            name = re.search(r'\bname="([^"]*)"', disposition).group(1)
            filename = re.search(r'filename="([^"]*)"', disposition)
            parts[name] = (filename.group(1) if filename else None, headers.get("content-type", ""),
                           data[:-2] if data.endswith(b"\r\n") else data)
        return parts

    def answer(self, parts: dict[str, tuple[str | None, str, bytes]]) -> tuple[int, bytes]:
        model = parts.get("model", (None, "", b""))[2].decode()
        if self.fault == "http_500":
            return 500, b'{"error": {"message": "the decoder fell over"}}'
        if self.fault == "model" and model != self.served:
            return 404, json.dumps({"error": {"message": f"The model '{model}' does not exist",
                                              "code": "model_not_found"}}).encode()
        if self.fault == "not_json":
            return 200, b"<html>a proxy's page</html>"
        body: dict[str, Any] = {"text": 12 if self.fault == "text_number" else self.text}
        if self.fault == "no_text":
            body = {"transcript": self.text}
        if self.usage_seconds is not None:
            body["usage"] = {"type": "duration", "seconds": self.usage_seconds}
        return 200, json.dumps(body).encode()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "FakeTranscriptionServer":
        self.thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def closed_port() -> int:
    """A port nothing listens on (for connection-refused tests)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = FakeServer(port=args.port)

    async def run() -> None:
        task = asyncio.create_task(server.serve())
        await asyncio.get_running_loop().run_in_executor(None, server._ready.wait)
        print(f"PORT {server.port}", flush=True)
        await task

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
