"""The server's own /metrics: parsed with prometheus_client's parser, differenced around windows, gauges' peaks
polled, cross-checked against the client's requests, in every server's documented names (served by the fake
server from what it really served)."""

import json
import threading
import time

import httpx
import pandas as pd
import pytest

from benchlib.analysis import crosscheck
from benchlib.analysis.crosscheck import check_server_metrics
from benchlib.measure.client.timing import StreamState
from benchlib.measure.servers.prometheus import (
    SERVER_METRICS_COLUMNS,
    SERVER_METRICS_CSV,
    SERVER_METRICS_LOG,
    ServerMetrics,
    metric_names,
    parse_metrics,
    read_server_metrics,
    software_of,
    window_row,
)
from benchlib.suites.runner import run_suite
from tests.fakes.servers import FakeServer, render_metrics

COUNTS = {"requests": 4, "prompt": 40, "generation": 64, "ttft": 0.2, "itl": 0.6, "itl_n": 60, "e2e": 1.0,
          "running": 2}


@pytest.fixture(params=["vllm", "sglang", "llama.cpp"])
def metrics_server(request):
    server = FakeServer(metrics=request.param).start_thread()
    yield server
    server.stop()


def test_each_servers_exposition_parses_to_its_names():
    vllm = parse_metrics(render_metrics("vllm", COUNTS))
    assert software_of(vllm) == "vllm"
    assert vllm["vllm:time_to_first_token_seconds_sum"] == 0.2 and vllm["vllm:time_to_first_token_seconds_count"] == 4
    assert vllm["vllm:generation_tokens_total"] == 64 and vllm["vllm:num_requests_running"] == 2
    assert not any(name.endswith("_bucket") for name in vllm)
    assert software_of(parse_metrics(render_metrics("sglang", COUNTS))) == "sglang"
    llama = parse_metrics(render_metrics("llama.cpp", COUNTS))
    assert software_of(llama) == "llama.cpp" and llama["llamacpp:tokens_predicted_total"] == 64
    # label sets (engines) are summed: two engines' counters make one server's
    two = 'vllm:generation_tokens_total{engine="0"} 5\nvllm:generation_tokens_total{engine="1"} 7\n'
    assert parse_metrics("# TYPE vllm:generation_tokens_total counter\n" + two)["vllm:generation_tokens_total"] == 12


def test_a_window_row_is_deltas_and_peaks():
    before = parse_metrics(render_metrics("vllm", COUNTS))
    after = parse_metrics(render_metrics("vllm", {**COUNTS, "requests": 6, "ttft": 0.5, "e2e": 2.0, "generation": 96,
                                                  "itl": 0.9, "itl_n": 90, "prompt": 60}))
    row = window_row(metric_names("vllm"), before, after, {"running": 3.0, "kv_usage": 0.03})
    assert row["server_ttft_mean_s"] == pytest.approx(0.15) and row["server_e2e_mean_s"] == pytest.approx(0.5)
    assert row["server_itl_mean_s"] == pytest.approx(0.01) and row["server_requests"] == 2
    assert row["server_generation_tokens"] == 32 and row["server_prompt_tokens"] == 20
    assert row["server_running_peak"] == 3.0 and row["server_kv_usage_peak"] == 0.03
    assert row["server_preemptions"] == 0 and row["server_decode_tok_s"] is None
    llama = window_row(metric_names("llama.cpp"), parse_metrics(render_metrics("llama.cpp", COUNTS)),
                       parse_metrics(render_metrics("llama.cpp", {**COUNTS, "generation": 96, "itl": 1.4})), {})
    assert llama["server_decode_tok_s"] == pytest.approx(32 / 0.8)  # tokens_predicted / tokens_predicted_seconds
    assert llama["server_ttft_mean_s"] is None and llama["server_metrics_reason"] == ""


def test_peaks_are_polled_while_requests_run(metrics_server, tmp_path):
    scraper = ServerMetrics(metrics_server.url, out_dir=tmp_path, poll_s=0.05)
    assert scraper.available and scraper.software == metrics_server.metrics

    def ask(i: int) -> None:
        body = {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": f"hi {i}"}],
                "fake": {"tokens": 20, "itl": 0.02}}
        with httpx.Client(timeout=10) as client:
            client.post(metrics_server.url + "/v1/chat/completions", json=body).read()

    with scraper.window("burst", "level"):
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    scraper.close()
    row = read_server_metrics(tmp_path / SERVER_METRICS_LOG).iloc[0]
    assert row["window"] == "burst" and row["kind"] == "level" and row["software"] == metrics_server.metrics
    assert row["server_running_peak"] == 3 and row["server_generation_tokens"] == 60
    if metrics_server.metrics != "llama.cpp":
        assert row["server_requests"] == 3 and 0.0 < row["server_ttft_mean_s"] < 0.2


def test_a_run_against_vllm_cross_checks_ttft_and_tokens(outputs, params_for):
    server = FakeServer(metrics="vllm").start_thread()
    try:
        params = params_for({"tokens": 12, "ttft": 0.03}, run={"repeats": 2, "warmups": 1})
        params.server.base_url = server.url + "/v1"
        params.server.software = "vllm"
        result = run_suite(params, "text", progress=False)
    finally:
        server.stop()
    checked = pd.read_csv(result.out_dir / SERVER_METRICS_CSV)
    assert list(checked.columns[:len(SERVER_METRICS_COLUMNS)]) == SERVER_METRICS_COLUMNS
    tasks = checked[checked["kind"] == "task"]
    assert len(tasks) == len(result.summary) and set(tasks["window"]) == set(result.summary["task"])
    # every request the client counted inside a window was counted by the server, token for token
    assert (tasks["server_requests"] == tasks["client_requests"]).all() and (tasks["client_requests"] == 2).all()
    assert (tasks["token_delta_mismatch"] == False).all()  # noqa: E712 — a real False, not missing
    # the client's TTFT includes the network and its own parsing: a little above the server's, never below
    gap = tasks["ttft_client_minus_server_ms"]
    assert (gap > -1.0).all() and (gap < 50).all(), gap.tolist()
    summary = result.summary.set_index("task")
    assert summary["server_ttft_mean_ms"].between(25, 80).all()
    assert (summary["token_delta_mismatch"] == False).all()  # noqa: E712
    manifest = json.loads((result.out_dir / "manifest.json").read_text())
    assert manifest["server_metrics"]["available"] and manifest["server_metrics"]["software"] == "vllm"


def test_a_server_counting_tokens_the_client_never_saw_is_flagged(outputs, params_for):
    server = FakeServer(metrics="vllm").start_thread()
    try:
        params = params_for({"tokens": 8, "metrics_extra_tokens": 3}, run={"repeats": 1})
        params.server.base_url = server.url + "/v1"
        result = run_suite(params, "text", progress=False)
    finally:
        server.stop()
    assert result.summary["token_delta_mismatch"].map(bool).all()
    checked = pd.read_csv(result.out_dir / SERVER_METRICS_CSV)
    task = checked[checked["kind"] == "task"].iloc[0]
    assert task["server_generation_tokens"] == task["client_completion_tokens"] + 3


def test_a_server_without_metrics_says_so_once_and_writes_nothing(outputs, params_for):
    result = run_suite(params_for({"tokens": 4}), "text", progress=False)
    assert not (result.out_dir / SERVER_METRICS_LOG).exists() and not (result.out_dir / SERVER_METRICS_CSV).exists()
    manifest = json.loads((result.out_dir / "manifest.json").read_text())
    assert manifest["server_metrics"]["available"] is False
    assert manifest["server_metrics"]["reason"].endswith("/metrics: HTTP 404 (the server exposes no Prometheus "
                                                         "metrics here)")
    assert "server_ttft_mean_ms" not in result.summary.columns


def test_client_and_server_windows_match_by_time():
    windows = pd.DataFrame([{"window": "t", "kind": "task", "t_start_ns": 1_000_000_000, "t_end_ns": 3_000_000_000,
                             "server_ttft_mean_s": 0.1, "server_generation_tokens": 30}])
    requests = pd.DataFrame([
        {"start_ns": 1_100_000_000, "e2e_s": 0.5, "ttft_s": 0.11, "completion_tokens": 10, "status": "ok"},
        {"start_ns": 1_700_000_000, "e2e_s": 0.5, "ttft_s": 0.13, "completion_tokens": 20, "status": "ok"},
        {"start_ns": 3_500_000_000, "e2e_s": 0.5, "ttft_s": 0.50, "completion_tokens": 99, "status": "ok"}])
    row = check_server_metrics(windows, requests).iloc[0]
    assert row["client_requests"] == 2 and row["client_completion_tokens"] == 30
    assert row["ttft_client_minus_server_ms"] == pytest.approx(20.0) and row["token_delta_mismatch"] is False
    lost = requests.assign(completion_tokens=[10, None, 99])  # a request whose usage the client never got
    assert check_server_metrics(windows, lost).iloc[0]["token_delta_mismatch"] is True
    # a request the server refused (no usage, nothing generated) right after the window is neither in it nor a
    # mismatch: the scrapes bracket the window's requests exactly
    refused = pd.DataFrame([{"start_ns": 3_010_000_000, "e2e_s": 0.002, "ttft_s": None, "completion_tokens": None,
                             "status": "failed"}])
    row = check_server_metrics(windows, pd.concat([requests, refused], ignore_index=True)).iloc[0]
    assert row["client_requests"] == 2 and row["token_delta_mismatch"] is False
    assert row["client_stalled_requests"] == 0  # no client_stall_ms column: nothing known to be stalled
    # held up 35 ms with two deltas in one read (an interval of exactly 0); the third is outside the window
    stalled = requests.assign(client_stall_ms=[0.4, 35.0, 900.0], itl_s=["[0.01]", "[0.0, 0.01]", "[0.0]"])
    assert check_server_metrics(windows, stalled).iloc[0]["client_stalled_requests"] == 1
    # a hold-up that merged no reads left every kernel stamp right: not counted
    harmless = requests.assign(client_stall_ms=[0.4, 35.0, 900.0], itl_s=["[0.01]", "[0.02, 0.01]", "[0.0]"])
    assert check_server_metrics(windows, harmless).iloc[0]["client_stalled_requests"] == 0


def test_a_client_hold_up_is_measured_flagged_and_counted_in_its_window(outputs, params_for, monkeypatch):
    """A synchronous stall on the client's loop mid-stream (a careless callback; in CI once a GIL hold-up that
    made a 0.77 s vLLM TTFT read 1.97 s) shows on that request alone and in its /metrics window."""
    server = FakeServer(metrics="vllm").start_thread()
    seen = {"deltas": 0}
    original = StreamState.output

    def output(self, now, content, reasoning, answer_like=False):
        seen["deltas"] += 1
        if seen["deltas"] == 6:  # the second request's second delta (the warm-up's deltas come first)
            time.sleep(0.15)
        return original(self, now, content, reasoning, answer_like)

    monkeypatch.setattr(StreamState, "output", output)
    try:
        params = params_for({"tokens": 4, "ttft": 0.03, "itl": 0.01}, run={"repeats": 2, "warmups": 1})
        params.tasks = ["basic_qa"]
        params.server.base_url = server.url + "/v1"
        params.server.software = "vllm"
        result = run_suite(params, "text", progress=False)
    finally:
        server.stop()
    rows = result.requests.sort_values("start_ns").reset_index(drop=True)
    stall = rows["client_stall_ms"].astype(float)
    assert stall[1] >= 140 and rows["client_stalled"].map(bool).tolist() == [False, True, False]
    assert (stall[[0, 2]] < 20).all(), stall.tolist()  # the idle loop wakes within a few ms
    flagged = crosscheck.flag_requests(rows)
    assert flagged["flags"][1].startswith("client loop held up 1") and flagged["flags"][1].endswith("(stamps may be late)")
    assert result.summary.set_index("task").loc["basic_qa", "n_client_stalled"] == 1
    window = pd.read_csv(result.out_dir / SERVER_METRICS_CSV).iloc[0]
    assert window["client_requests"] == 2 and window["client_stalled_requests"] == 1
