"""Every fault becomes a failed row with its kind and the server's message, and the run goes on."""

from __future__ import annotations

import json
import socket
import time

import pytest

from benchlib.suites.runner import run_suite
from tests.fakes.servers import closed_port
from tests.helpers import make_params

TASKS = ["basic_qa"]  # 1 warm-up + 3 measured requests over three distinct variants


def run_text(params):
    return run_suite(params, "text", progress=False)


def measured(result):
    return result.requests[~result.requests["is_warmup"]].sort_values("repeat").reset_index(drop=True)


def assert_all_failed(result, kind, message_part):
    rows = result.requests
    assert len(rows) == 4, "the run must go on: every planned request gets its row"
    assert set(rows["status"]) == {"failed"}
    assert set(rows["error_kind"]) == {kind}
    assert all(message_part in m for m in rows["error_message"]), rows["error_message"].tolist()
    summary = result.summary.set_index("task").loc["basic_qa"]
    assert summary["n_failed"] == 3 and summary["n_ok"] == 0
    assert not bool(summary["valid"])
    assert kind in str(summary["failures"])


@pytest.mark.parametrize("status, kind", [(400, "http_400"), (401, "http_401"), (403, "http_403"),
                                          (404, "http_404"), (500, "http_500"), (503, "http_503")])
def test_http_errors_become_rows_with_the_server_message(params_for, outputs, status, kind):
    params = params_for({"fault": f"http_{status}"}, tasks=TASKS, run={"warmups": 1, "repeats": 3})
    assert_all_failed(run_text(params), kind, f"fake {status} for testing")


def test_connection_refused(outputs):
    params = make_params(f"http://127.0.0.1:{closed_port()}", tasks=TASKS, run={"warmups": 1, "repeats": 3})
    assert_all_failed(run_text(params), "connection_refused", "Connect call failed")


def test_dns_failure(outputs, monkeypatch):
    # No real DNS traffic: the resolver itself answers 'not known' for this name, as it would offline.
    real = socket.getaddrinfo

    def fake_getaddrinfo(host, *args, **kwargs):
        if host == "no-such-host.test":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    params = make_params("http://no-such-host.test:8000", tasks=TASKS, run={"warmups": 1, "repeats": 3})
    assert_all_failed(run_text(params), "dns_failure", "Name or service not known")


def test_connect_timeout(outputs):
    # A listener whose accept backlog is full drops further SYNs: connect() hangs until the timeout.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        try:
            filler.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(filler)
    try:
        params = make_params(f"http://127.0.0.1:{port}", tasks=TASKS,
                             run={"warmups": 0, "repeats": 2, "connect_timeout_s": 0.3})
        result = run_text(params)
    finally:
        for sock in fillers + [listener]:
            sock.close()
    assert list(result.requests["error_kind"]) == ["connect_timeout", "connect_timeout"]
    # the manifest's probes wait for a connection no longer than the run's connect timeout, and only once: after
    # the first found no connection the others are not sent (each would wait the same again)
    server = json.loads((result.out_dir / "manifest.json").read_text())["server"]
    errors = server["errors"]
    assert errors["/v1/models"].startswith("ConnectTimeout")
    assert {errors[path] for path in errors if path != "/v1/models"} == {"not probed: the server took no connection"}
    assert len(errors) > 1


@pytest.mark.parametrize("fault, kind, message", [
    ("stall", "read_timeout", "timed out"),
    ("stall_mid", "read_timeout", "timed out"),
    ("cut", "stream_cut", ""),
    ("no_done", "stream_cut", "without [DONE]"),
    ("bad_chunk", "bad_chunk", "non-JSON stream chunk"),
    ("empty", "empty_response", "no content"),
])
def test_stream_faults(params_for, outputs, fault, kind, message):
    params = params_for({"fault": fault, "tokens": 6, "ttft": 0.01, "itl": 0.005}, tasks=TASKS,
                        run={"warmups": 0, "repeats": 2, "timeout_s": 0.5})
    result = run_text(params)
    assert list(result.requests["status"]) == ["failed", "failed"]
    assert set(result.requests["error_kind"]) == {kind}
    assert all(message in m for m in result.requests["error_message"])


def test_stall_mid_keeps_the_partial_answer(params_for, outputs):
    params = params_for({"fault": "stall_mid", "tokens": 8, "ttft": 0.01, "itl": 0.005}, tasks=TASKS,
                        run={"warmups": 0, "repeats": 1, "timeout_s": 0.5})
    row = run_text(params).requests.iloc[0]
    assert row["error_kind"] == "read_timeout"
    assert row["client_content_deltas"] == 4 and row["response_text"].startswith("alpha bravo")


def test_one_failure_does_not_stop_the_next_request(params_for, outputs):
    params = params_for({"fault": "http_500", "fault_when": "Japan", "tokens": 4}, tasks=TASKS,
                        run={"warmups": 0, "repeats": 3})
    rows = measured(run_text(params))
    assert list(rows["variant"]) == ["capital_france", "capital_japan", "largest_planet"]
    assert list(rows["status"]) == ["ok", "failed", "ok"]
    assert rows.loc[1, "error_kind"] == "http_500"


def test_429_is_retried_honouring_retry_after(params_for, outputs):
    params = params_for({"fault": "http_429_once", "retry_after": 0.3, "tokens": 4}, tasks=TASKS,
                        run={"warmups": 0, "repeats": 1})
    started = time.monotonic()
    rows = run_text(params).requests
    assert list(rows["status"]) == ["ok"]
    assert time.monotonic() - started >= 0.3


def test_429_gives_up_after_bounded_retries(params_for, fake_server, outputs):
    params = params_for({"fault": "http_429", "retry_after": 0.1}, tasks=TASKS,
                        run={"warmups": 0, "repeats": 1, "retries_429": 2})
    answered = len(fake_server.http_faults)
    started = time.monotonic()
    rows = run_text(params).requests
    assert fake_server.http_faults[answered:] == ["http_429"] * 3, "the first try and exactly 2 retries"
    assert list(rows["status"]) == ["failed"] and list(rows["error_kind"]) == ["http_429"]
    assert "fake 429 for testing" in rows["error_message"][0], rows["error_message"][0]  # the server's own words
    assert time.monotonic() - started >= 0.2  # each retry waited the server's Retry-After (0.1 s)


def test_error_rate_above_threshold_marks_task_invalid(params_for, outputs):
    params = params_for({"fault": "http_500", "fault_when": "Japan", "tokens": 4}, tasks=TASKS,
                        run={"warmups": 0, "repeats": 3, "max_error_rate": 0.2})
    summary = run_text(params).summary.set_index("task").loc["basic_qa"]
    assert summary["n_failed"] == 1 and summary["n_ok"] == 2
    assert summary["error_rate"] == pytest.approx(1 / 3)
    assert not bool(summary["valid"])
    lenient = params_for({"fault": "http_500", "fault_when": "Japan", "tokens": 4}, tasks=TASKS,
                         host={"name": "lenient"}, run={"warmups": 0, "repeats": 3, "max_error_rate": 0.5})
    assert bool(run_text(lenient).summary.set_index("task").loc["basic_qa", "valid"])
