"""Telemetry of the server's host from elsewhere: the agent in its own process (standing for the remote host, on
the fake NVML at a known power), the clock offset, the reason a remote server without a source gets."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pandas as pd
import pytest

from benchlib.config.params import ParamsError, TelemetryParams
from benchlib.measure.telemetry import RemoteTelemetry, Telemetry, clock, read_telemetry
from benchlib.measure.telemetry.agent import CONNECTION_THREAD, AgentSampler, AgentServer, serve
from benchlib.measure.telemetry.clock import measure_offset
from benchlib.suites import runner
from benchlib.suites.runner import run_suite
from tests.fakes.fake_nvml import FakeGpu, FakeNvml
from tests.helpers import make_params

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "s3cret-agent-token"
POWER_W = 150.0
FAST = dict(power_hz=50, slow_hz=10)
# The agent process: the project's sampler on the fake NVML at POWER_W, served until the test closes its stdin.
AGENT = """
import sys
from benchlib.config.params import TelemetryParams
from benchlib.measure.telemetry.agent import AgentSampler, AgentServer
from tests.fakes.fake_nvml import FakeGpu, FakeNvml
sampler = AgentSampler(TelemetryParams(power_hz=50, slow_hz=10), nvml=FakeNvml([FakeGpu(power_w=float(sys.argv[2]))]),
                       environ={}, powercap_root=sys.argv[1])
server = AgentServer(sampler, sys.argv[3], port=0).start()
print(server.url, flush=True)
sys.stdin.read()
server.close()
"""


@pytest.fixture(scope="module")
def agent_url(tmp_path_factory):
    empty = tmp_path_factory.mktemp("no-powercap")
    proc = subprocess.Popen([sys.executable, "-c", AGENT, str(empty), str(POWER_W), TOKEN], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), f"the agent did not start (exit {proc.poll()})"
    yield url
    proc.stdin.close()
    proc.wait(timeout=20)


def agent_settings(url: str, **extra) -> TelemetryParams:
    return TelemetryParams(source="agent", agent_url=url, agent_token_env="FB_TEST_AGENT_TOKEN", **FAST, **extra)


def test_agent_window_energy_is_the_remote_counters(agent_url, tmp_path):
    with RemoteTelemetry(agent_settings(agent_url), tmp_path / "run", environ={"FB_TEST_AGENT_TOKEN": TOKEN}) as tel:
        with tel.window("summarize") as handle:
            time.sleep(0.4)
        offset = tel.describe()["source"]["clock"]["start"]
    row = handle.row
    assert row["energy_source"] == "nvml_counter" and row["energy_reason"] == ""
    assert row["avg_power_w"] == pytest.approx(POWER_W, rel=0.01)
    assert row["telemetry_source"] == "agent" and row["telemetry_host"]
    assert row["temp_avg_c"] == 50 and row["mem_source"] == "nvml_memory_v2"
    assert row["clock_uncertainty_s"] == pytest.approx(offset["uncertainty_ns"] / 1e9, rel=1)
    # both processes stamp CLOCK_MONOTONIC: the true offset is 0, and the measurement says so within its bound
    assert abs(offset["offset_ns"]) <= offset["uncertainty_ns"]
    samples = read_telemetry(tmp_path / "run" / "telemetry.csv")
    assert set(samples["source"]) == {"agent"} and samples["remote_t_ns"].notna().all()


def test_a_run_through_the_agent_matches_a_local_run(agent_url, params_for, outputs, monkeypatch):
    """The runner with the agent in its own process as the server's host, and the same fake GPU sampled
    locally: the same window energy (the idle window's fixed length) and average power, the offset recorded."""
    monkeypatch.setenv("FB_TEST_AGENT_TOKEN", TOKEN)
    telemetry = {"enabled": True, "idle_baseline_s": 0.5, "loaded_baseline_s": 0, **FAST}
    fake = {"ttft": 0.05, "itl": 0.01, "tokens": 8}
    remote = run_suite(params_for(fake, telemetry={**telemetry, "source": "agent", "agent_url": agent_url,
                                                   "agent_token_env": "FB_TEST_AGENT_TOKEN"},
                                  tasks=["basic_qa"], host={"name": "via-agent"}), "text", progress=False)
    nvml = FakeNvml([FakeGpu(power_w=POWER_W)])
    monkeypatch.setattr(runner, "Telemetry", lambda settings, out_dir: Telemetry(settings, out_dir, nvml=nvml,
                                                                                  environ={}))
    local = run_suite(params_for(fake, telemetry=telemetry, tasks=["basic_qa"], host={"name": "local"}), "text",
                      progress=False)
    for frame in (remote.windows, local.windows):
        assert (frame["energy_source"] == "nvml_counter").all(), frame["energy_reason"].tolist()
        assert frame["avg_power_w"].tolist() == pytest.approx([POWER_W] * len(frame), rel=0.01)
    # each idle window's energy is the fake GPU's true energy over that window (its length varies a little with
    # the edge samples), so the two runs agree per second of window within the sampler's tolerance
    idle = {name: r.windows.set_index("window").loc["idle"] for name, r in (("remote", remote), ("local", local))}
    for row in idle.values():
        assert row["energy_j"] == pytest.approx(POWER_W * row["duration_s"], rel=0.01)
    assert idle["remote"]["energy_j"] / idle["remote"]["duration_s"] == pytest.approx(
        idle["local"]["energy_j"] / idle["local"]["duration_s"], rel=0.02)
    assert set(remote.windows["telemetry_source"]) == {"agent"} and set(local.windows["telemetry_source"]) == {"local"}
    source = json.loads((remote.out_dir / "manifest.json").read_text())["sensors"]["source"]
    assert source["kind"] == "agent" and {"start", "end"} <= set(source["clock"])
    for label in ("start", "end"):
        assert source["clock"][label]["round_trips"] == 8 and source["clock"][label]["uncertainty_ns"] > 0
    assert TOKEN not in (remote.out_dir / "manifest.json").read_text()


def test_a_wrong_token_is_refused_and_every_window_says_why(agent_url, tmp_path):
    with RemoteTelemetry(agent_settings(agent_url), tmp_path / "run", environ={"FB_TEST_AGENT_TOKEN": "wrong"}) as tel:
        with tel.window("w") as handle:
            time.sleep(0.05)
    assert "HTTP 401" in handle.row["energy_reason"] and handle.row["energy_j"] is None
    assert handle.row["unavailable"] == handle.row["energy_reason"]
    with RemoteTelemetry(agent_settings(agent_url), tmp_path / "unset", environ={}) as tel:
        assert tel.no_source_reason.endswith("$FB_TEST_AGENT_TOKEN is not set here")


def test_a_remote_server_without_a_source_gets_the_reason_in_every_energy_cell(tmp_path):
    """The client's own GPU (a fake at 150 W) must not pass for the server's."""
    tel = Telemetry(TelemetryParams(**FAST), tmp_path / "run", nvml=FakeNvml([FakeGpu(power_w=POWER_W)]), environ={})
    tel.set_server_url("http://gpu-box.invalid:8000/v1")
    with tel:
        with tel.window("task") as handle:
            time.sleep(0.1)
        tel.set_server_url("http://127.0.0.1:8000/v1")  # the same client, its server local again: readings count
        with tel.window("local") as local:
            time.sleep(0.1)
    reason = "server on gpu-box.invalid: no telemetry source for it"
    row = handle.row
    assert row["energy_reason"] == reason and row["unavailable"] == reason
    for column in ("energy_j", "avg_power_w", "peak_power_w", "net_energy_j", "rapl_energy_j", "temp_avg_c",
                   "mem_peak_bytes", "cpu_util_avg"):
        assert row[column] is None, column
    assert local.row["avg_power_w"] == pytest.approx(POWER_W, rel=0.01)


def test_the_runner_with_a_remote_server_and_no_source(params_for, outputs, monkeypatch):
    monkeypatch.setattr(clock, "_this_hosts_addresses", lambda: set())
    monkeypatch.setattr(clock, "is_this_host", lambda host: False)  # the fake server stands for another host
    monkeypatch.setattr("benchlib.measure.telemetry.sampler.is_this_host", lambda host: False)
    params = params_for({"tokens": 4}, telemetry={"enabled": True, "idle_baseline_s": 0.2, **FAST},
                        tasks=["basic_qa"])
    result = run_suite(params, "text", progress=False)
    assert len(result.windows) >= 2
    assert set(result.windows["energy_reason"]) == {"server on 127.0.0.1: no telemetry source for it"}
    assert result.windows["energy_j"].isna().all()


@pytest.mark.parametrize("host,local", [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                        ("gpu-box.invalid", False), ("192.0.2.10", False)])
def test_which_hosts_are_this_one(host, local):
    assert clock.is_this_host(host) is local


def test_offset_is_the_midpoint_of_the_fastest_round_trip():
    """A remote clock 5 s ahead: the estimate is within its own uncertainty of it."""
    ahead = 5_000_000_000
    offset = measure_offset(lambda: time.perf_counter_ns() + ahead, 6)
    assert abs(offset.offset_ns - ahead) <= offset.uncertainty_ns and offset.round_trips == 6
    assert offset.to_local(ahead + 10) == 10 - (offset.offset_ns - ahead)


class _StubSource:
    """A source whose offset is very uncertain: every short window must be flagged."""
    label, host = "agent", "stub"

    def layout(self):
        return {"host": "stub", "gpus": [], "nvml_reason": "stub"}

    def measure_clock(self):
        return clock.ClockOffset(0, 50_000_000, 100_000_000, 1, 0.0)

    def uncertainty_s(self):
        return 0.05

    def pull(self, force):
        t = time.perf_counter_ns()
        return [(t, time.time(), {"cpu_busy_s": t / 1e9, "cpu_total_s": 2 * t / 1e9}, t)]

    def describe(self):
        return {}

    def close(self):
        return None


def test_a_window_shorter_than_four_uncertainties_is_flagged(tmp_path):
    with RemoteTelemetry(agent_settings("http://stub"), tmp_path / "run", source=_StubSource()) as tel:
        short = tel.measure("short", "task", time.perf_counter_ns() - 100_000_000, time.perf_counter_ns())
        long = tel.measure("long", "task", time.perf_counter_ns() - 300_000_000, time.perf_counter_ns())
    assert "4 × the clock offset's uncertainty" in short["clock_flag"] and short["clock_uncertainty_s"] == 0.05
    assert long["clock_flag"] == ""


def test_the_agents_buffer_is_bounded_and_says_what_was_lost(tmp_path):
    sampler = AgentSampler(TelemetryParams(**FAST), buffer=5, nvml=FakeNvml([FakeGpu()]), environ={},
                           powercap_root=tmp_path)
    server = AgentServer(sampler, "tok", port=0)
    try:
        for _ in range(12):
            sampler.sample_now()
        answer = sampler.samples(0)
        assert answer["first"] == answer["next"] - 5 and len(answer["t_ns"]) == 5
        assert server.authorised("Bearer tok") and not server.authorised("Bearer tok2")
        assert not server.authorised(None)
    finally:
        server.httpd.server_close()
        sampler.close()


def _handler_threads() -> int:
    return sum(t.name == CONNECTION_THREAD for t in threading.enumerate())


def _wait_for(condition, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def _agent(tmp_path, **bounds) -> AgentServer:
    sampler = AgentSampler(TelemetryParams(**FAST), nvml=FakeNvml([FakeGpu()]), environ={}, powercap_root=tmp_path)
    server = AgentServer(sampler, "tok", port=0, **bounds)
    server.thread.start()  # the HTTP side only: no samples are asked for
    return server


def test_the_agent_holds_at_most_its_cap_of_connections_closing_unauthorised_ones_first(tmp_path):
    """300 unauthenticated half-open connections made 305 threads, held for ever. With a deadline far away,
    only the cap can bound them: the oldest unauthorised ones are closed to make room, and an authorised
    client still gets through."""
    server = _agent(tmp_path, max_connections=8, auth_timeout_s=600)
    idle = []
    try:
        idle = [socket.create_connection(server.httpd.server_address[:2], timeout=10) for _ in range(300)]
        assert _wait_for(lambda: _handler_threads() <= 8), f"{_handler_threads()} connection threads"
        answer = httpx.get(f"{server.url}/clock", headers={"Authorization": "Bearer tok"}, timeout=10)
        assert answer.status_code == 200
        for connection in idle[:-8]:  # closed by the agent: the end of the stream, at once
            assert connection.recv(1) == b""
    finally:
        for connection in idle:
            connection.close()
        server.close()


def test_an_unauthorised_connection_is_closed_at_its_deadline_however_it_drips(tmp_path):
    """The deadline counts from the connect, not per read: a client sending a byte every 20 ms is closed at it
    like a silent one; a wrong token is answered 401 and closed at once."""
    server = _agent(tmp_path, auth_timeout_s=1.0)
    address = server.httpd.server_address[:2]
    try:
        silent = socket.create_connection(address, timeout=10)
        dripping = socket.create_connection(address, timeout=10)
        started, closed = time.monotonic(), False
        for byte in b"GET /clock HTTP/1.1\r\n" + b"X-Pad: a\r\n" * 40:  # 8 s of dripping if never closed
            try:
                dripping.send(bytes([byte]))
            except OSError:  # a reset or a broken pipe: the agent closed it
                closed = True
                break
            time.sleep(0.02)
            if select.select([dripping], [], [], 0)[0]:  # the end of the stream (or a reset) is readable
                closed = True
                break
        assert closed and time.monotonic() - started < 8
        assert silent.recv(1) == b""
        wrong = socket.create_connection(address, timeout=10)
        wrong.sendall(b"GET /clock HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer nope\r\n\r\n")
        reply = b"".join(iter(lambda: wrong.recv(4096), b""))  # ends: the agent closes after its 401
        assert reply.startswith(b"HTTP/1.1 401") and b"Connection: close" in reply
        assert _wait_for(lambda: _handler_threads() == 0)
    finally:
        server.close()


def test_params_need_the_sources_urls():
    with pytest.raises(ValueError, match="agent_url"):
        TelemetryParams(source="agent")
    with pytest.raises(ValueError, match="dcgm_url and/or node_url"):
        TelemetryParams(source="exporters")
    with pytest.raises(ParamsError):
        make_params("http://127.0.0.1:1", telemetry={"source": "carrier-pigeon"})


def test_the_platform_table_names_each_hosts_telemetry_source(tmp_path):
    from benchlib.paper.runs import Runs
    from benchlib.paper.systems import run_telemetry_source

    windows = pd.DataFrame([
        {"host": "laptop-a", "telemetry_source": "agent", "telemetry_host": "titan", "energy_reason": ""},
        {"host": "laptop-b", "telemetry_source": "local", "telemetry_host": "laptop-b",
         "energy_reason": "server on beast: no telemetry source for it"},
        {"host": "spark", "telemetry_source": "local", "telemetry_host": "spark", "energy_reason": ""},
        {"host": "old", "energy_reason": ""},
    ])
    runs = Runs(root=tmp_path, summary=pd.DataFrame(), requests=pd.DataFrame(), windows=windows, meta=pd.DataFrame())
    assert run_telemetry_source(runs, "laptop-a") == "agent on titan"
    assert run_telemetry_source(runs, "laptop-b") == "none (server on beast)"
    assert run_telemetry_source(runs, "spark") == "local"
    assert run_telemetry_source(runs, "old") == "local"


def test_the_cli_agent_needs_its_token_and_serves_this_hosts_sensors(tmp_path):
    cli = [sys.executable, "-m", "benchlib.cli", "telemetry-agent", "--port", "0", "--token-env", "FB_TEST_TOKEN"]
    env = {k: v for k, v in os.environ.items() if k != "FB_TEST_TOKEN"}
    with pytest.raises(ValueError, match="set FB_TEST_TOKEN"):  # the CLI prints it as its one-line error, exit 2
        serve(port=0, token_env="FB_TEST_TOKEN", environ=env)
    proc = subprocess.Popen(cli, cwd=ROOT, env={**env, "FB_TEST_TOKEN": TOKEN}, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("telemetry agent on http://127.0.0.1:"), line
        url = line.split()[3].rstrip(";")
        settings = agent_settings(url)
        with RemoteTelemetry(settings, tmp_path / "run", environ={"FB_TEST_AGENT_TOKEN": TOKEN}) as tel:
            with tel.window("w") as handle:
                time.sleep(0.3)
        # the same sensors a local run on this host has (here: no GPU, host CPU and MemAvailable)
        local = Telemetry(TelemetryParams(**FAST), tmp_path / "local")
        assert tel.sensors["nvml"]["available"] == local.sensors["nvml"]["available"]
        assert handle.row["cpu_util_avg"] is not None and handle.row["telemetry_source"] == "agent"
        local.close()
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0  # SIGTERM stops it cleanly
