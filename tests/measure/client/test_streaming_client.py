"""Streaming client against a local server with known timing: metrics, parsing, both protocols.

Tolerances: the fake server schedules each chunk against an absolute monotonic deadline; on loopback
the transfer adds ~0.1 ms and asyncio timers ~1 ms of jitter. On a shared 2-core CI box a thread can be
descheduled for a few ms, so single stamps get 25 ms and the *median* ITL 3 ms; means over 40 intervals
get 5 %. An off-by-one-chunk or wrong-clock bug shows up as ≥ one ITL (20 ms) or a ≥ 2.5 % rate error
on every run, so these bounds still fail on real defects.
"""

from __future__ import annotations

import json
import statistics

import httpx
import pytest

from benchlib.measure.client.backends import ChatRequest, make_backend
from benchlib.measure.client.timing import MAX_ARGUMENT_DEPTH, StreamState, compute_rates, finalize
from benchlib.measure.http.failures import RequestFailed
from benchlib.measure.pacing import event_loop
from benchlib.records.rows import RequestRecord
from tests.fakes.servers import closed_port
from tests.helpers import make_params


def send(params, messages=None, max_tokens=64, **request):
    backend = make_backend(params.server, params.run)
    record = RequestRecord()
    req = ChatRequest(messages=messages or [{"role": "user", "content": "hi"}], max_tokens=max_tokens, **request)
    try:
        event_loop.run(backend.execute(req, record))
    finally:
        event_loop.run(backend.aclose())
    return record


def server_sends(fake_server):
    return httpx.get(f"{fake_server.url}/log").json()[-1]


@pytest.mark.parametrize("kind, http_client", [("openai", "wire"), ("openai", "sdk"), ("ollama", "wire")])
def test_ttft_itl_and_tokens_match_known_timing(params_for, fake_server, kind, http_client):
    params = params_for({"ttft": 0.15, "itl": 0.02, "tokens": 40, "prompt_tokens": 30}, kind=kind,
                        run={"http_client": http_client})
    record = send(params)
    assert record.status == "ok", record.error_message
    assert record.completion_tokens == 40 and record.token_source == "usage"
    assert record.client_deltas == 40 and record.prompt_tokens == 30
    assert record.ttft_s == pytest.approx(0.15, abs=0.025)
    assert len(record.itl_s) == 39
    assert statistics.median(record.itl_s) == pytest.approx(0.02, abs=0.003)
    assert record.decode_tps == pytest.approx(50.0, rel=0.05)
    assert record.tpot_s == pytest.approx(0.02, rel=0.05)
    assert record.prefill_tps == pytest.approx(30 / record.ttft_s)
    assert record.e2e_s >= record.ttft_s + sum(record.itl_s) - 1e-9
    # the client's first stamp trails the server's first send by transfer + parse time only
    log = server_sends(fake_server)
    first_send_after_receive = (log["sends_ns"][0] - log["received_ns"]) / 1e9
    assert record.ttft_s - first_send_after_receive == pytest.approx(0.0, abs=0.02)
    assert record.response_text.startswith("alpha bravo")
    assert record.finish_reason == "stop" and not record.truncated


def test_reasoning_is_kept_apart_and_ttfo_follows_it(params_for):
    params = params_for({"ttft": 0.05, "itl": 0.01, "tokens": 5, "reasoning_tokens": 6})
    record = send(params, thinking=True)
    assert record.status == "ok"
    assert record.client_reasoning_deltas == 6 and record.client_content_deltas == 5
    assert record.reasoning_text.split() == ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    assert record.response_text.split()[0] == "golf"
    assert record.reasoning_tokens == 6 and record.completion_tokens == 11
    # TTFT counts the first reasoning delta, TTFO the first answer delta six intervals later
    assert record.ttfo_s - record.ttft_s == pytest.approx(0.06, abs=0.02)


def test_sdk_path_classifies_faults_like_the_wire_path(params_for):
    for fault, kind in (("http_404", "http_404"), ("cut", "stream_cut"), ("bad_chunk", "bad_chunk")):
        record = send(params_for({"fault": fault, "tokens": 6}, run={"http_client": "sdk"}))
        assert record.status == "failed" and record.error_kind == kind, (fault, record.error_message)


def test_done_without_finish_reason_is_a_cut_stream(params_for):
    record = send(params_for({"fault": "no_finish", "tokens": 6}))
    assert record.status == "failed" and record.error_kind == "stream_cut"
    assert "no finish_reason" in record.error_message


def test_length_finish_is_flagged_truncated(params_for):
    record = send(params_for({"tokens": 8}), max_tokens=8)
    assert record.finish_reason == "length" and record.truncated


def test_tool_call_deltas_are_assembled(params_for):
    call = {"name": "web_search", "arguments": {"query": "weather in Hubli"}}
    for kind in ("openai", "ollama"):
        record = send(params_for({"tokens": 2, "tool_call": call}, kind=kind))
        assert record.status == "ok"
        assert record.tool_calls == [call]


@pytest.mark.parametrize("client", ["wire", "sdk"])
def test_tool_call_arguments_nested_past_the_parser_are_kept_as_text(params_for, client):
    """The SDK hands a tool call's arguments on as text whatever they hold; arguments nested deeper than
    MAX_ARGUMENT_DEPTH (here 5,000 levels, past JSON's parser) stay that text, and the row is ok."""
    deep = '{"q": ' + "[" * 5000 + "]" * 5000 + "}"
    record = send(params_for({"tokens": 2, "tool_call": {"name": "lookup", "arguments": deep}},
                             run={"http_client": client}))
    assert record.tool_calls == [{"name": "lookup", "arguments": deep}]
    assert record.status == "ok" and json.loads(record.to_row()["tool_calls"])[0]["arguments"] == deep
    just = '{"q": ' + "[" * (MAX_ARGUMENT_DEPTH - 1) + "]" * (MAX_ARGUMENT_DEPTH - 1) + "}"
    record = send(params_for({"tokens": 2, "tool_call": {"name": "lookup", "arguments": just}},
                             run={"http_client": client}))
    assert record.tool_calls == [{"name": "lookup", "arguments": json.loads(just)}]  # up to the bound: an object


def test_a_stream_line_nested_past_the_parser_is_a_bad_chunk(params_for):
    """Ollama sends arguments as an object inside the line: a line no JSON parser takes is bad_chunk, not a
    client error."""
    backend_params = params_for({"tokens": 2}, kind="ollama")
    backend = make_backend(backend_params.server, backend_params.run)
    record = RequestRecord()
    line = b'{"message": {"tool_calls": [{"function": {"name": "f", "arguments": ' + b"[" * 5000 + b"]" * 5000 \
        + b"}}]}}"
    with pytest.raises(RequestFailed) as caught:
        backend._parse_line(line, 0, StreamState(0), record)
    assert caught.value.kind == "bad_chunk" and "nested deeper" in str(caught.value)
    event_loop.run(backend.aclose())


def test_thinking_switch_is_sent_off_by_default(params_for):
    params = params_for()
    backend = make_backend(params.server, params.run)
    assert backend.body_extras(ChatRequest(messages=[], max_tokens=1))["chat_template_kwargs"] == \
        {"enable_thinking": False}
    ollama = make_backend(make_params(params.server.base_url, kind="ollama").server, params.run)
    body = ollama.body(ChatRequest(messages=[], max_tokens=7))
    assert body["think"] is False and body["options"]["num_predict"] == 7 and body["keep_alive"] == "30m"


def test_llamacpp_timings_give_server_rates(params_for):
    record = send(params_for({"ttft": 0.04, "itl": 0.01, "server_itl": 0.01, "tokens": 20, "timings": True, "cached_tokens": 4}))
    assert record.server_decode_tps == pytest.approx(100.0)
    assert record.server_prefill_tps == pytest.approx(12 / 0.04)
    assert record.cached_tokens == 4


def test_metric_arithmetic_on_synthetic_stamps():
    state = StreamState(start_ns=0)
    for i, t in enumerate([100_000_000, 120_000_000, 150_000_000, 200_000_000]):
        state.output(t, f"t{i}", None)
    state.finish_reason = "stop"
    record = RequestRecord(prompt_tokens=50, completion_tokens=4)
    finalize(record, state, end_ns=250_000_000)
    assert record.ttft_s == pytest.approx(0.1) and record.ttfo_s == pytest.approx(0.1)
    assert record.itl_s == pytest.approx([0.02, 0.03, 0.05])
    assert record.decode_tps == pytest.approx(3 / 0.1)  # (tokens − 1) / (t_last − t_first)
    assert record.tpot_s == pytest.approx(0.1 / 3)
    assert record.prefill_tps == pytest.approx(500.0)
    assert record.e2e_s == pytest.approx(0.25)
    record.completion_tokens = 7  # a better count arriving later (server log) re-derives the rates
    compute_rates(record)
    assert record.decode_tps == pytest.approx(6 / 0.1)


def test_without_usage_tokens_fall_back_to_client_deltas_labelled():
    state = StreamState(start_ns=0)
    for t in (10, 20, 30):
        state.output(t * 1_000_000, "x", None)
    record = RequestRecord()
    finalize(record, state, 40_000_000)
    assert record.completion_tokens == 3 and record.token_source == "client_deltas"


def test_connection_refused_is_a_failed_row():
    params = make_params(f"http://127.0.0.1:{closed_port()}")
    record = send(params)
    assert record.status == "failed" and record.error_kind == "connection_refused"
