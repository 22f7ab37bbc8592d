"""The same response bytes through both OpenAI-compatible HTTP paths (the lean wire client and the openai SDK
path a proxy forces): every response that is not a clean event stream ends as a named failure with its HTTP
status and the server's words, and every legal variation of the stream format is read in full.

A scripted server answers each request with raw bytes, so each case is exactly the bytes a server (or a proxy
in front of it) sent."""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest

from benchlib.measure.client.backends import ChatRequest, OllamaBackend, make_backend
from benchlib.measure.client.timing import StreamState
from benchlib.measure.http import wire
from benchlib.measure.http.failures import RequestFailed
from benchlib.measure.pacing import event_loop
from benchlib.records.rows import RequestRecord
from tests.helpers import make_params

PATHS = ["wire", "sdk"]


def delta(text: str) -> dict:
    return {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]}


FINAL = {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}


def events(*payloads: dict | str, end: str = "\n\n") -> bytes:
    """SSE text, JSON written as servers write it (UTF-8, not ASCII-escaped), `end` after each event."""
    out = []
    for p in payloads:
        data = p if isinstance(p, str) else json.dumps(p, ensure_ascii=False)
        out.append(f"data: {data}{end}")
    return "".join(out).encode("utf-8")


STREAM = events(delta("hel"), delta("lo"), FINAL, "[DONE]")


def response(body: bytes, status: str = "200 OK", headers: str = "Content-Type: text/event-stream",
             eol: str = "\r\n") -> bytes:
    lines = [f"HTTP/1.1 {status}"] + [h for h in headers.split("\n") if h] + [f"Content-Length: {len(body)}"]
    return (eol.join(lines) + eol + eol).encode("latin-1") + body


class RawServer:
    """Reads each request (head + Content-Length body) and answers with the scripted bytes, in one write
    or in the given pieces. `hang_up(conn_index, request_index)` says to close without answering."""

    def __init__(self, answer: bytes | list[bytes], hang_up=lambda conn, request: False, close: bool = False):
        self.pieces = answer if isinstance(answer, list) else [answer]
        self.hang_up = hang_up
        self.close = close  # close the connection once the answer is sent (whatever it announced)
        self.connections = 0
        self.requests = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = self.connections
        self.connections += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))
                await reader.readexactly(length)
                self.requests += 1
                if self.hang_up(conn, served):
                    break
                for piece in self.pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.003)
                served += 1
                if self.close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    def start(self) -> str:
        async def go():
            server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
            return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
        return event_loop.run(go())


def through(answer: bytes | list[bytes], path: str, close: bool = False) -> RequestRecord:
    """One chat request through `path` to a server answering `answer` (then closing, with `close`); the record,
    failed or not."""
    params = make_params(RawServer(answer, close=close).start(), run={"http_client": path, "timeout_s": 3})
    backend = make_backend(params.server, params.run)
    record = RequestRecord(model="fake-model", task="t", suite="s", host="h")
    try:
        event_loop.run(backend.execute(ChatRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=16), record))
    finally:
        event_loop.run(backend.aclose())
    return record


def assert_failed(record: RequestRecord, kind: str, status: int, *words: str) -> None:
    assert record.status == "failed", record.response_text
    assert record.error_kind == kind, (record.error_kind, record.error_message)
    assert record.http_status == status
    for word in words:
        assert word in record.error_message, record.error_message


def assert_read(record: RequestRecord, text: str = "hello") -> None:
    assert record.status == "ok", (record.error_kind, record.error_message)
    assert record.response_text == text
    assert record.finish_reason == "stop" and record.completion_tokens == 2


# ---- responses that are not the stream asked for --------------------------------------------------------
@pytest.mark.parametrize("path", PATHS)
def test_a_redirect_is_http_3xx_with_the_location(path):
    answer = response(b"", "307 Temporary Redirect", "Location: http://10.0.0.9:8000/v1/chat/completions")
    record = through(answer, path)
    assert_failed(record, "http_307", 307, "http://10.0.0.9:8000/v1/chat/completions", "not followed")


@pytest.mark.parametrize("path", PATHS)
def test_a_gzip_body_sent_although_identity_was_asked_is_decoded(path):
    body = gzip.compress(STREAM)
    assert_read(through(response(body, headers="Content-Type: text/event-stream\nContent-Encoding: gzip"), path))


def test_an_encoding_the_client_cannot_decode_is_named_with_its_status():
    answer = response(b"\x1b\x00\x00", headers="Content-Type: text/event-stream\nContent-Encoding: br")
    assert_failed(through(answer, "wire"), "bad_encoding", 200, "Content-Encoding: br", "identity was asked")


@pytest.mark.parametrize("path", PATHS)
def test_a_json_body_instead_of_a_stream_is_not_a_stream_with_the_servers_words(path):
    body = json.dumps({"error": {"message": "streaming is disabled on this deployment"}}).encode()
    record = through(response(body, headers="Content-Type: application/json"), path)
    assert_failed(record, "not_a_stream", 200, "application/json", "streaming is disabled on this deployment")


@pytest.mark.parametrize("path", PATHS)
def test_an_error_beside_non_empty_choices_keeps_the_servers_message(path):
    broken = {**delta("x"), "error": {"message": "CUDA error: out of memory", "type": "server_error"}}
    record = through(response(events(delta("hel"), broken, FINAL, "[DONE]")), path)
    assert_failed(record, "server_error", 200, "CUDA error: out of memory")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("chunk, words", [
    ({**FINAL, "usage": "7 tokens"}, "usage is a str"),
    ({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": [0], "function": {"name": "f"}}]}}]},
     "a tool call's index is a list"),
    ({"choices": [{"index": 0, "delta": {"content": ["hel"]}}]}, "delta.content is a list"),
    ({"choices": {"index": 0}}, "choices is a dict"),
])
def test_a_chunk_of_the_wrong_shape_is_a_bad_chunk_on_both_paths(path, chunk, words):
    record = through(response(events(delta("hel"), chunk, FINAL, "[DONE]")), path)
    assert_failed(record, "bad_chunk", 200, words)


@pytest.mark.parametrize("path", PATHS)
def test_a_connection_that_dies_after_the_head_keeps_its_status_on_both_paths(path):
    body = events(delta("hel"))
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % (len(body) + 500)
    record = through(head + body, path, close=True)
    assert_failed(record, "stream_cut", 200)
    assert record.response_text == "hel"


# ---- legal variations of the stream that must be read in full ---------------------------------------------
@pytest.mark.parametrize("path", PATHS)
def test_bare_lf_response_head(path):
    assert_read(through(response(STREAM, eol="\n"), path))


@pytest.mark.parametrize("path", PATHS)
def test_two_identical_content_length_headers(path):
    answer = response(STREAM, headers=f"Content-Type: text/event-stream\nContent-Length: {len(STREAM)}")
    assert_read(through(answer, path))


def test_two_different_content_length_headers_are_a_bad_response():
    answer = response(STREAM, headers="Content-Type: text/event-stream\nContent-Length: 3")
    assert_failed(through(answer, "wire"), "bad_response", 200, "Content-Length")


@pytest.mark.parametrize("path", PATHS)
def test_one_event_whose_json_spans_two_data_lines(path):
    first = json.dumps(delta("hel"))
    split = first.index('"choices"')
    multi = f"data: {first[:split]}\ndata: {first[split:]}\n\n".encode()
    assert_read(through(response(multi + events(delta("lo"), FINAL, "[DONE]")), path))


@pytest.mark.parametrize("path", PATHS)
def test_cr_only_line_ends(path):
    assert_read(through(response(events(delta("hel"), delta("lo"), FINAL, "[DONE]", end="\r\r")), path))


def test_a_crlf_split_between_two_reads_counts_once():
    body = events(delta("hel"), delta("lo"), FINAL, "[DONE]", end="\r\n\r\n")
    head = response(body)[:-len(body)]
    cut = body.index(b"\r\n") + 1  # the first event's CR ends one read, its LF opens the next
    assert_read(through([head + body[:cut], body[cut:]], "wire"))


@pytest.mark.parametrize("path", PATHS)
def test_a_utf8_bom_before_the_first_event_keeps_the_first_delta(path):
    assert_read(through(response(b"\xef\xbb\xbf" + STREAM), path))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("char", ["\u2028", "\u0085", "\u2029"])
def test_unicode_line_separators_inside_content_are_content(path, char):
    record = through(response(events(delta(f"hel{char}"), delta("lo"), FINAL, "[DONE]")), path)
    assert_read(record, f"hel{char}lo")


@pytest.mark.parametrize("path", PATHS)
def test_an_event_that_never_becomes_json_is_a_bad_chunk(path):
    record = through(response(b"data: {\"choices\": [\n\n" + STREAM), path)
    assert_failed(record, "bad_chunk", 200, "choices")


# ---- the stale keep-alive retry ------------------------------------------------------------------------
def test_a_stale_connection_is_retried_on_a_fresh_one_even_with_more_stale_ones_pooled():
    """Two pooled connections; the server drops both as the next request arrives on either of them. The retry
    must open a new connection, not take the other dead one from the pool."""
    server = RawServer(response(STREAM), hang_up=lambda conn, request: conn < 2 and request >= 1)
    url = server.start()

    async def run():
        http = wire.StreamingHTTP(url, connect_timeout=2, read_timeout=2)

        async def one():
            return await http.post_stream("/chat/completions", b"{}", lambda line, now: line == b"data: [DONE]")

        first = await asyncio.gather(one(), one())  # two connections, both back in the pool
        assert len(http.idle) == 2
        last = await one()
        await http.aclose()
        return first, last

    first, last = event_loop.run(run())
    assert [e.status for e in first] == [200, 200] and last.status == 200
    assert server.connections == 3, "the retry went to a fresh (third) connection"


def test_a_stale_connection_failure_is_still_a_failure_on_a_fresh_connection():
    url = RawServer(response(STREAM), hang_up=lambda conn, request: True).start()  # never answers at all

    async def run():
        http = wire.StreamingHTTP(url, connect_timeout=2, read_timeout=2)
        try:
            await http.post_stream("/chat/completions", b"{}", lambda line, now: False)
        finally:
            await http.aclose()

    with pytest.raises(RequestFailed) as failure:
        event_loop.run(run())
    assert failure.value.kind == "stream_cut" and "before responding" in failure.value.message


@pytest.mark.parametrize("line, field", [
    (b'{"message": "just text", "done": false}', "message"),
    (b'{"message": {"role": "assistant", "content": ["a", "list"]}, "done": false}', "message.content"),
    (b'{"message": {"role": "assistant", "thinking": 7}, "done": false}', "message.thinking"),
    (b'{"message": {"tool_calls": {"function": {"name": "f"}}}, "done": false}', "message.tool_calls"),
    (b'{"message": {"tool_calls": [{"function": {"name": ["f"]}}]}, "done": false}', "a tool call's name"),
    (b'{"message": {"content": "ok"}, "done": true, "done_reason": 3}', "done_reason"),
    (b'["not", "an", "object"]', "unexpected stream line"),
])
def test_an_ollama_line_of_the_wrong_shape_is_a_bad_chunk(line, field):
    with pytest.raises(RequestFailed) as failure:
        OllamaBackend._parse_line(line, 1, StreamState(0), RequestRecord())
    assert failure.value.kind == "bad_chunk" and field in failure.value.message
