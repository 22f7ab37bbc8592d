"""Nothing leaked: the API key stays out of every file however a server hands it back — where a /metrics sample
value belongs, split across two values of one row, straddling the point where a message is cut — and a password
in base_url is refused before anything is written."""

from __future__ import annotations

import pytest

from benchlib.config.params import ParamsError
from benchlib.measure.http.sse import shown
from benchlib.measure.servers.prometheus import SERVER_METRICS_LOG, ServerMetrics
from benchlib.records.secrets import CUT, cut, scrub, scrub_fields
from benchlib.suites.runner import run_suite
from tests.fakes.servers import FakeServer
from tests.helpers import make_params

KEY = "sk-redact-7Qz3XkV9pLm2Rr8TwY5n"  # distinctive: any piece of it in a file is a leak
HEAD, TAIL = KEY[:15], KEY[15:]  # the halves a splitting server sends apart (the fake splits at the middle)
ENV = "FB_REDACT_TEST_KEY"


def keyed(params_for, monkeypatch, fake: dict, **run):
    monkeypatch.setenv(ENV, KEY)
    return params_for(fake, tasks=["basic_qa"], server={"api_key_env": ENV},
                      run={"warmups": 0, "repeats": 1, **run})


def written(out_dir) -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in out_dir.rglob("*") if p.is_file())


def test_a_key_where_a_metrics_value_belongs_is_scrubbed_from_the_reason(tmp_path):
    server = FakeServer(metrics="vllm", metrics_fault="leak").start_thread()
    scraper = ServerMetrics(server.url, {"Authorization": f"Bearer {KEY}"}, out_dir=tmp_path, poll_s=10,
                            secret=KEY)
    try:
        assert scraper.available  # the first scrape was sound; the later ones carry the key
        with scraper.window("basic_qa", "task"):
            pass
    finally:
        scraper.close()
        server.stop()
    reason = scraper.rows[-1]["server_metrics_reason"]
    assert "not Prometheus text" in reason and "***" in reason, reason
    log = (tmp_path / SERVER_METRICS_LOG).read_text(encoding="utf-8")
    assert HEAD not in log and TAIL not in log and HEAD not in scraper.reason


def test_a_key_split_across_two_values_of_a_row_is_redacted_in_each(params_for, outputs, monkeypatch):
    params = keyed(params_for, monkeypatch, {"leak": "split", "tokens": 4})
    result = run_suite(params, "text", progress=False)
    row = result.requests.iloc[0]
    assert row["status"] == "ok", row["error_message"]
    text = written(result.out_dir)
    assert HEAD not in text and TAIL not in text, "a half of the key reached a file"
    assert row["response_text"].startswith("***") and row["reasoning_text"].endswith("***")


def test_a_key_straddling_the_cut_of_a_server_message_leaves_no_piece(params_for, outputs, monkeypatch):
    # 'invalid API key: ' + pad + 'Bearer ' + key, cut at 2,000 characters ten characters into the key
    params = keyed(params_for, monkeypatch, {"fault": "http_401_echo", "echo_pad": 2000 - 17 - 7 - 10})
    result = run_suite(params, "text", progress=False)
    message = result.requests.iloc[0]["error_message"]
    assert message.endswith("Bearer ***" + CUT), message[-60:]
    assert KEY[:4] not in written(result.out_dir)


@pytest.mark.parametrize("at", range(1, len(KEY)))
def test_a_cut_anywhere_in_the_key_is_redacted_after_it(at):
    chunk = "x" * (200 - at) + KEY + " more"  # shown() keeps 200 characters: `at` of them the key's
    message = f"non-JSON stream chunk: {shown(chunk)!r}"
    assert scrub(message, KEY) == f"non-JSON stream chunk: '{chunk[:200 - at]}***{CUT}'"
    assert scrub(cut("x" * 10 + KEY, 10 + at), KEY) == "x" * 10 + "***" + CUT


def test_a_split_key_is_found_in_any_order_and_any_number_of_pieces():
    row = {"response_text": f"{KEY[20:]} and more", "reasoning_text": f"thinking {KEY[:8]}",
           "tool_calls": [{"name": KEY[8:20], "arguments": {"q": "plain"}}], "prompt": "unrelated"}
    clean = scrub_fields(row, KEY)
    assert clean == {"response_text": "*** and more", "reasoning_text": "thinking ***",
                     "tool_calls": [{"name": "***", "arguments": {"q": "plain"}}], "prompt": "unrelated"}
    innocent = {"a": "the sk- prefix", "b": "redact"}
    assert scrub_fields(innocent, KEY) == innocent


@pytest.mark.parametrize("url", ["http://user:S3CRETPW@127.0.0.1:8000/v1", "http://S3CRETPW@127.0.0.1:8000",
                                 "http://127.0.0.1:8000/v1?api_key=S3CRETPW"])
def test_credentials_in_base_url_are_refused_in_one_line(url):
    with pytest.raises(ParamsError) as refused:
        make_params(url)
    message = str(refused.value)
    assert "S3CRETPW" not in message and "\n" not in message and "api_key_env" in message


@pytest.mark.parametrize("field, source", [("agent_url", "agent"), ("dcgm_url", "exporters"), ("node_url", "exporters")])
@pytest.mark.parametrize("url", ["http://user:S3CRETPW@gpu-box:9101", "http://S3CRETPW@gpu-box:9400/metrics",
                                 "http://gpu-box:9100/metrics?token=S3CRETPW"])
def test_credentials_in_a_telemetry_url_are_refused_in_one_line(field, source, url):
    with pytest.raises(ParamsError) as refused:
        make_params("http://127.0.0.1:8000/v1", telemetry={"source": source, field: url})
    message = str(refused.value)
    assert "S3CRETPW" not in message and "\n" not in message and field in message and "agent_token_env" in message
    # the same source with a clean URL is accepted
    assert make_params("http://127.0.0.1:8000/v1", telemetry={"source": source, field: "http://gpu-box:9101"})
