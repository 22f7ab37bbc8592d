"""Nothing held for ever: every request has an overall deadline and a byte cap besides its idle timeout, on every
path (wire, SDK, Ollama); every /metrics scrape, provenance probe and tokenizer call has a deadline and a size
cap; a tokenizer that fails after answering the probe is one clear line.

Each case sets small bounds in its own params, so it takes a second or two; a guard (GUARD_S) turns a client that
would hang into a failure instead of a stuck test run. It is no timing bound: the bounds' own figures are what
the assertions name."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from benchlib.measure import provenance
from benchlib.measure.client.backends import ChatRequest, make_backend
from benchlib.measure.http.failures import RequestFailed
from benchlib.measure.http.http_response import Exchange
from benchlib.measure.pacing import event_loop
from benchlib.measure.servers.prometheus import ServerMetrics
from benchlib.measure.traffic.prompt_fitting import ServerTokenizer, TokenizerError
from benchlib.records.rows import RequestRecord
from tests.fakes.servers import FakeServer
from tests.helpers import make_params

GUARD_S = 10.0
PATHS = [("openai", "wire"), ("openai", "sdk"), ("ollama", "wire")]  # Ollama has one path (httpx)


def attempt(params, max_tokens: int = 8) -> RequestRecord:
    """One request through the params' backend; the record, failed or not (GUARD_S: a hang fails the test)."""
    backend = make_backend(params.server, params.run)
    record = RequestRecord(model=params.server.model, task="t", suite="s", host=params.host.name)
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=max_tokens)
    try:
        event_loop.run(asyncio.wait_for(backend.execute(request, record), GUARD_S))
    finally:
        event_loop.run(backend.aclose())
    return record


@pytest.fixture
def server():
    servers: list[FakeServer] = []

    def start(**kwargs) -> FakeServer:
        servers.append(FakeServer(**kwargs).start_thread())
        return servers[-1]

    yield start
    for one in servers:
        one.stop()


@pytest.mark.parametrize("kind, client", PATHS)
def test_a_server_that_ignores_max_tokens_is_cut_off_at_the_byte_cap(params_for, kind, client):
    params = params_for({"tokens": 50_000, "itl": 0, "ttft": 0, "ignore_budget": True}, kind=kind,
                        run={"http_client": client, "max_response_bytes": 32_768, "timeout_s": 2})
    record = attempt(params)
    assert record.error_kind == "response_too_large", (record.error_kind, record.error_message)
    assert "32768 bytes" in record.error_message and record.http_status == 200
    assert record.response_text.startswith("alpha bravo")  # what came before the cap is kept


def test_a_cap_passed_inside_the_first_read_keeps_the_status_and_the_text_before_it():
    # a fast server on a busy client: the head and more than the cap arrive in one read (the wire path once
    # recorded no status then, as the test above saw now and again)
    class Connection:
        def drop(self) -> None: ...
        def exchange_done(self, exchange) -> None: ...

    lines: list[bytes] = []
    event = b'data: {"choices":[{"delta":{"content":"alpha bravo "}}]}\n\n'
    body = event * 400  # ~24 KB, past a 4 KB cap
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

    async def one_read() -> BaseException | None:
        exchange = Exchange(Connection(), lambda line, now: lines.append(line) and False, read_timeout=5,
                            wire_ns=0, max_bytes=4096)
        exchange.feed(head + b"%x\r\n" % len(body) + body + b"\r\n", now=1)
        return exchange.future.exception()

    failure = asyncio.run(one_read())
    assert isinstance(failure, RequestFailed) and failure.kind == "response_too_large"
    assert failure.http_status == 200
    assert lines and lines[0].startswith(b"data: ") and 0 < sum(map(len, lines)) <= 4096  # read up to the cap


@pytest.mark.parametrize("kind, client", PATHS)
def test_a_server_that_drips_a_byte_at_a_time_meets_the_deadline(params_for, kind, client):
    params = params_for({"fault": "drip", "drip_s": 0.001, "ttft": 0}, kind=kind,
                        run={"http_client": client, "deadline_s": 0.5, "timeout_s": 1})
    record = attempt(params)
    assert record.error_kind == "deadline_exceeded", (record.error_kind, record.error_message)
    assert "0.5 s" in record.error_message and record.http_status == 200
    assert record.response_text  # the deltas that arrived in time are kept


def test_the_bounds_are_params_with_sane_defaults(params_for):
    run = params_for().run
    assert run.deadline_s >= run.timeout_s and run.max_response_bytes >= 2**20


@pytest.mark.parametrize("fault, kind", [("drip", "deadline_exceeded"), ("endless", "response_too_large")])
def test_a_metrics_endpoint_that_never_ends_fails_its_scrape_within_its_bounds(server, fault, kind):
    fake = server(metrics="vllm", metrics_fault=fault)
    scraper = ServerMetrics(fake.url, deadline_s=0.5, max_bytes=65_536)
    try:
        assert not scraper.available
        assert kind in scraper.reason, scraper.reason
    finally:
        scraper.close()


def test_a_provenance_probe_of_an_endpoint_that_drips_fails_within_its_deadline(server):
    fake = server(metrics="vllm", metrics_fault="drip")
    errors: dict[str, str] = {}
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=0.5) as client:
            provenance._probe(client, "GET", fake.url + "/metrics", errors, "/metrics")
        done.set()

    threading.Thread(target=probe, daemon=True).start()
    assert done.wait(GUARD_S), "the probe never ended"
    assert "deadline_exceeded" in errors["/metrics"]


def test_a_provenance_probe_of_an_endpoint_without_end_stops_at_its_size_cap(server, monkeypatch):
    fake = server(metrics="vllm", metrics_fault="endless")
    monkeypatch.setattr(provenance, "PROBE_MAX_BYTES", 256 * 1024)
    errors: dict[str, str] = {}
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=GUARD_S) as client:  # the deadline is far: only the cap can end it in time
            provenance._probe(client, "GET", fake.url + "/metrics", errors, "/metrics")
        done.set()

    threading.Thread(target=probe, daemon=True).start()
    assert done.wait(GUARD_S), "the probe never ended"
    assert "response_too_large" in errors["/metrics"] and str(256 * 1024) in errors["/metrics"]


@pytest.mark.parametrize("fault, kind", [("drip", "deadline_exceeded"), ("endless", "response_too_large")])
def test_a_tokenizer_that_answers_without_end_after_the_probe_is_cut_off_in_one_line(server, fault, kind):
    fake = server(tokenizer_fault=fault)
    tokenizer = ServerTokenizer.detect(make_params(fake.url))
    assert tokenizer is not None, "the probe is answered"
    tokenizer.deadline_s, tokenizer.max_bytes = 1.0, 256 * 1024  # the bounds a count runs under, made small
    failure: list[BaseException] = []
    done = threading.Event()

    def count() -> None:
        try:
            tokenizer.count("a few words to count")
        except BaseException as exc:  # noqa: BLE001 — handed to the test thread
            failure.append(exc)
        done.set()

    try:
        threading.Thread(target=count, daemon=True).start()
        assert done.wait(GUARD_S), "the count never ended"
    finally:
        tokenizer.close()
    assert len(failure) == 1 and isinstance(failure[0], TokenizerError)
    assert kind in str(failure[0]) and "\n" not in str(failure[0])


@pytest.mark.parametrize("fault, words", [("http_500", "HTTP 500: tokenizer crashed"),
                                          ("count_text", "without a token list or a whole count")])
def test_a_tokenizer_that_fails_after_the_probe_is_one_clear_line(server, fault, words):
    fake = server(tokenizer_fault=fault)
    tokenizer = ServerTokenizer.detect(make_params(fake.url))
    assert tokenizer is not None, "the probe is answered"
    try:
        with pytest.raises(TokenizerError) as failure:
            tokenizer.count("a few words to count")
    finally:
        tokenizer.close()
    message = str(failure.value)
    assert "\n" not in message and words in message and "/extras/tokenize" in message, message
