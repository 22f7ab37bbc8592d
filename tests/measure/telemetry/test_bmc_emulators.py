"""The node's BMC as a telemetry source, against real emulators started here (tests/measure/telemetry/bmc_emulators.py):
sushy-tools' static Redfish emulator serving a mockup rewritten while it runs, and OpenIPMI's ipmi_sim polling its
power sensor from a file rewritten while it runs. A known power trace goes in; the window's joules come out within
the error the source allows, through the same Telemetry object a run uses."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from benchlib.config.params import TelemetryParams
from benchlib.measure.telemetry import Telemetry, read_windows
from benchlib.measure.telemetry.bmc import NODE_POWER_CSV
from benchlib.measure.telemetry.boundary import NODE_INPUT
from benchlib.measure.telemetry.node_energy import power_energy
from benchlib.paper.runs import load_runs
from benchlib.paper.systems import run_systems
from benchlib.suites.load import concurrency
from benchlib.suites.runner import open_session, run_suite
from tests.measure.telemetry.bmc_emulators import (
    IPMI_PASSWORD,
    IPMI_SIM,
    IPMI_USER,
    OPENIPMI_HEADERS,
    SUSHY_STATIC,
    IpmiSim,
    PowerTrace,
    RedfishMockup,
    Refresher,
    SushyStatic,
)

IDLE_W, BUSY_W = 120.0, 420.0
BURST_S = 3.0
CREDENTIALS = {"FRONTIER_BENCH_BMC_USER": IPMI_USER, "FRONTIER_BENCH_BMC_PASSWORD": IPMI_PASSWORD}


def settings(protocol: str, url: str, **bmc) -> TelemetryParams:
    # no chip sensor matters here: this host's RAPL/NVML may or may not exist; the node columns are the BMC's alone
    return TelemetryParams(power_hz=10, slow_hz=1, bmc={"protocol": protocol, "url": url, "poll_s": 0.1, **bmc})


def burst(tel: Telemetry, trace: PowerTrace, settle_s: float = 1.5) -> tuple[dict, float]:
    """Idle, then a window over which the node draws BUSY_W, then idle again; the window's row and its known joules."""
    time.sleep(settle_s)
    with tel.window("burst", kind="task") as handle:
        trace.set(BUSY_W)
        time.sleep(BURST_S)
        trace.set(IDLE_W)
    row = handle.row
    return row, trace.energy(row["t_start_ns"], row["t_end_ns"])


def within_its_error(row: dict, known: float) -> None:
    """Within the bound the row states, that bound a useful one (polls every 0.1 s over a 3 s window: the edges
    alone may cost up to 2 × 0.1 s of power), and in fact much closer."""
    assert row["node_energy_boundary"] == NODE_INPUT
    error = abs(row["node_energy_j"] - known)
    assert error <= row["node_energy_error_j"], (row["node_energy_j"], known, row["node_energy_error_j"])
    assert row["node_energy_error_j"] <= 0.10 * known
    assert error <= 0.03 * known, (row["node_energy_j"], known)
    assert row["node_avg_power_w"] == pytest.approx(known / row["duration_s"], rel=0.03)


@pytest.fixture(autouse=True)
def bmc_credentials(monkeypatch):
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)


needs_sushy = pytest.mark.skipif(not shutil.which(SUSHY_STATIC), reason="sushy-static (PyPI sushy-tools, dev extra)")


@needs_sushy
def test_redfish_energy_counter_gives_the_known_joules(tmp_path):
    """EnvironmentMetrics with EnergyJoules and PowerWatts: the counter is preferred, both are recorded."""
    trace = PowerTrace(IDLE_W)

    def metrics(now: int) -> dict:
        return {"@odata.id": "/redfish/v1/Chassis/1U/EnvironmentMetrics", "Id": "EnvironmentMetrics",
                "PowerWatts": {"Reading": trace.rolling(now, 0.0)},
                "EnergyJoules": {"Reading": round(trace.counter(now), 1)}}

    mockup = RedfishMockup(tmp_path / "mockup", {"EnvironmentMetrics": metrics})
    with SushyStatic(mockup.root) as bmc, Refresher(mockup.refresh, 0.05):
        with Telemetry(settings("redfish", bmc.url), tmp_path / "run") as tel:
            row, known = burst(tel, trace)
            sensors = tel.describe()["node_power"]
    within_its_error(row, known)
    assert row["node_energy_source"].startswith("redfish EnvironmentMetrics EnergyJoules.Reading · counter")
    assert sensors["chassis"] == "1U" and sensors["power_field"] == "redfish EnvironmentMetrics PowerWatts.Reading"
    assert sensors["readings"] > 20 and sensors["failed_reads"] == 0
    written = read_windows(tmp_path / "run" / "telemetry_windows.csv").iloc[-1]
    assert written["node_energy_j"] == pytest.approx(row["node_energy_j"])
    samples = (tmp_path / "run" / NODE_POWER_CSV).read_text().splitlines()
    assert samples[0] == "t_ns,t_unix,power_w,energy_j,request_ms" and len(samples) > 20
    assert IPMI_PASSWORD not in json.dumps(tel.describe()) + (tmp_path / "run" / "sensors.json").read_text()


@needs_sushy
def test_redfish_rolling_average_is_integrated_for_what_it_means(tmp_path):
    """Power.PowerControl[0].PowerConsumedWatts that the BMC averages over 1 s (declared): the deconvolved joules
    match; integrating the readings over the window itself, as they look, does not."""
    trace = PowerTrace(IDLE_W)
    averaging = 1.0

    def power(now: int) -> dict:
        return {"@odata.id": "/redfish/v1/Chassis/1U/Power", "Id": "Power", "PowerControl": [
            {"MemberId": "0", "PowerConsumedWatts": round(trace.rolling(now, averaging), 2)}]}

    mockup = RedfishMockup(tmp_path / "mockup", {"Power": power})
    with SushyStatic(mockup.root) as bmc, Refresher(mockup.refresh, 0.05):
        with Telemetry(settings("redfish", bmc.url, averaging_s=averaging), tmp_path / "run") as tel:
            row, known = burst(tel, trace)
            node = tel._node
            naive = power_energy(node.t_ns, node.power, row["t_start_ns"], row["t_end_ns"], 0.0)
    within_its_error(row, known)
    assert row["node_energy_source"].endswith("· rolling_average_deconvolved") and row["node_averaging_s"] == 1.0
    # as it looks: the average lags by W/2, so the window loses (BUSY − IDLE) × W/2 at its end
    assert known - naive.joules == pytest.approx((BUSY_W - IDLE_W) * averaging / 2, rel=0.25)


@needs_sushy
def test_a_one_minute_average_cannot_give_a_short_windows_joules(tmp_path):
    """PowerMetrics.AverageConsumedWatts over IntervalInMin 1: the BMC states 60 s; a 0.3 s window would need
    readings until 60 s after it closes; past tail_wait_s its node cells stay empty, with the reason."""
    def power(now: int) -> dict:
        return {"@odata.id": "/redfish/v1/Chassis/1U/Power", "Id": "Power", "PowerControl": [
            {"MemberId": "0", "PowerMetrics": {"IntervalInMin": 1, "AverageConsumedWatts": 200}}]}

    mockup = RedfishMockup(tmp_path / "mockup", {"Power": power})
    with SushyStatic(mockup.root) as bmc:
        with Telemetry(settings("redfish", bmc.url, tail_wait_s=0.3), tmp_path / "run") as tel:
            with tel.window("short") as handle:
                time.sleep(0.3)
            stated = tel.describe()["node_power"]
    assert stated["averaging_s"] == 60.0 and stated["averaging_said_by"] == "PowerMetrics.IntervalInMin"
    assert handle.row["node_energy_j"] is None
    assert "until 60 s after the window" in handle.row["node_energy_reason"]


@needs_sushy
def test_a_bmc_that_does_not_answer_leaves_the_reason_not_a_number(tmp_path):
    with Telemetry(settings("redfish", "http://127.0.0.1:9", deadline_s=0.5), tmp_path / "run") as tel:
        with tel.window("task") as handle:
            time.sleep(0.1)
        status = tel.describe()["sensors"]["node_power"]
    assert handle.row["node_energy_j"] is None and not status["available"]
    assert handle.row["node_energy_reason"].startswith("Redfish at http://127.0.0.1:9: ")


@needs_sushy
def test_a_bmc_gone_mid_run_does_not_hold_every_window_close(tmp_path):
    """The emulator stops while the run goes on: after three missed reads a window's close stops waiting for the
    readings after it (tail_wait_s 10 s here), and the window says why it has no node energy."""
    def metrics(now: int) -> dict:
        return {"@odata.id": "/redfish/v1/Chassis/1U/EnvironmentMetrics", "PowerWatts": {"Reading": IDLE_W}}

    mockup = RedfishMockup(tmp_path / "mockup", {"EnvironmentMetrics": metrics})
    with SushyStatic(mockup.root) as bmc:
        tel = Telemetry(settings("redfish", bmc.url, tail_wait_s=10.0, deadline_s=0.5), tmp_path / "run").start()
        time.sleep(0.3)
    try:
        time.sleep(0.5)  # the emulator is gone: its reads fail
        started = time.monotonic()
        with tel.window("after") as handle:
            time.sleep(0.2)
        assert time.monotonic() - started < 3.0
        assert handle.row["node_energy_j"] is None and handle.row["node_energy_reason"]
        assert tel.describe()["node_power"]["failed_reads"] >= 3
    finally:
        tel.close()


needs_ipmi_sim = pytest.mark.skipif(not shutil.which(IPMI_SIM),
                                    reason="ipmi_sim (Debian openipmi; make test installs it)")


@needs_ipmi_sim
def test_ipmi_sensor_gives_the_known_joules(tmp_path):
    """ipmi_sim has no DCMI: the node's power comes from its SDR sensor in watts (2 W a step), which the BMC model
    here averages over 1 s (declared) and ipmi_sim polls every 100 ms."""
    trace = PowerTrace(IDLE_W)
    averaging = 1.0
    with IpmiSim(tmp_path / "bmc") as sim, Refresher(lambda now: sim.set_watts(trace.rolling(now, averaging)), 0.05):
        time.sleep(0.3)  # ipmi_sim's first poll of the file
        with Telemetry(settings("ipmi", f"ipmi://127.0.0.1:{sim.port}", averaging_s=averaging),
                       tmp_path / "run") as tel:
            row, known = burst(tel, trace)
            stated = tel.describe()["node_power"]
    within_its_error(row, known)
    assert stated["power_field"] == "ipmi SDR sensor 'Pwr Consumption' (number 1, watts)"
    assert "0xc1" in stated["dcmi"].lower() and stated["resolution_w"] == 2.0
    assert row["node_energy_source"].endswith("· rolling_average_deconvolved")


@needs_ipmi_sim
def test_ipmi_wrong_password_is_a_reason_and_never_shows_the_password(tmp_path, monkeypatch):
    monkeypatch.setenv("FRONTIER_BENCH_BMC_PASSWORD", "not-the-one-123")
    with IpmiSim(tmp_path / "bmc") as sim:
        with Telemetry(settings("ipmi", f"ipmi://127.0.0.1:{sim.port}", deadline_s=0.5), tmp_path / "run") as tel:
            with tel.window("task") as handle:
                time.sleep(0.1)
            described = json.dumps(tel.describe())
    assert handle.row["node_energy_j"] is None and handle.row["node_energy_reason"].startswith("IPMI at 127.0.0.1:")
    assert "not-the-one-123" not in described + handle.row["node_energy_reason"]


# ---- a study level: the load sweep's concurrency levels, their windows read from the emulated BMC ----------------
NODE_W = 250.0


def level_params(params_for, bmc: dict):
    return params_for({"ttft": 0.05, "itl": 0.01, "tokens": 20},
                      run={"warmups": 0, "repeats": 1, "max_tokens": 64, "timeout_s": 10},
                      sweep={"concurrency": [1, 4], "requests_per_level": 4, "context_lengths": [64], "max_tokens": 64},
                      telemetry={"enabled": True, "idle_baseline_s": 0, "loaded_baseline_s": 0, "power_hz": 10,
                                 "bmc": {"poll_s": 0.1, **bmc}})


def levels_find_the_known_joules(params, watts: float) -> None:
    """The load sweep's concurrency levels under a node drawing `watts` throughout: each level's window holds the
    node's joules (watts × its span) within its stated error, and the level table carries the node's tokens/J."""
    with open_session(params, "load", concurrency=4) as session:
        levels = concurrency.run_concurrency_sweep(session, progress=False)
        windows = session.telemetry.windows_frame()
    level_windows = windows[windows["kind"] == "level"]
    assert len(level_windows) == 2
    for _, w in level_windows.iterrows():
        known = watts * w["duration_s"]
        assert abs(w["node_energy_j"] - known) <= max(w["node_energy_error_j"], 0.03 * known), w.to_dict()
        assert w["node_energy_boundary"] == NODE_INPUT
    assert list(levels["node_energy_j"]) == pytest.approx(list(level_windows["node_energy_j"]))
    assert (levels["node_tokens_per_joule"] == levels["completion_tokens"] / levels["node_energy_j"]).all()


@needs_sushy
def test_a_study_level_against_the_redfish_emulator(params_for, outputs, tmp_path):
    trace = PowerTrace(NODE_W)

    def metrics(now: int) -> dict:
        return {"@odata.id": "/redfish/v1/Chassis/1U/EnvironmentMetrics", "Id": "EnvironmentMetrics",
                "PowerWatts": {"Reading": NODE_W}, "EnergyJoules": {"Reading": round(trace.counter(now), 1)}}

    mockup = RedfishMockup(tmp_path / "mockup", {"EnvironmentMetrics": metrics})
    with SushyStatic(mockup.root) as bmc, Refresher(mockup.refresh, 0.05):
        levels_find_the_known_joules(level_params(params_for, {"protocol": "redfish", "url": bmc.url}), NODE_W)


@needs_ipmi_sim
def test_a_study_level_against_ipmi_sim(params_for, outputs, tmp_path):
    with IpmiSim(tmp_path / "bmc") as sim:
        sim.set_watts(NODE_W)
        time.sleep(0.3)  # ipmi_sim's first poll of the file
        levels_find_the_known_joules(level_params(params_for, {"protocol": "ipmi",
                                                               "url": f"ipmi://127.0.0.1:{sim.port}"}), NODE_W)


needs_dcmi_module = pytest.mark.skipif(not (shutil.which(IPMI_SIM) and OPENIPMI_HEADERS.is_file()
                                            and (shutil.which("cc") or shutil.which("gcc"))),
                                       reason="ipmi_sim, libopenipmi-dev and a C compiler (make test installs them)")


@needs_dcmi_module
def test_ipmi_dcmi_power_reading_gives_the_known_joules(tmp_path):
    """DCMI Get Power Reading from ipmi_sim with ipmi_sim_dcmi.c loaded (ipmi_sim answers no DCMI itself): preferred
    over the SDR sensor, whole watts, the BMC model averaging over 1 s (declared)."""
    trace = PowerTrace(IDLE_W)
    averaging = 1.0
    with IpmiSim(tmp_path / "bmc", dcmi=True) as sim, \
            Refresher(lambda now: sim.set_watts(trace.rolling(now, averaging)), 0.05):
        time.sleep(0.3)
        with Telemetry(settings("ipmi", f"ipmi://127.0.0.1:{sim.port}", averaging_s=averaging),
                       tmp_path / "run") as tel:
            row, known = burst(tel, trace)
            stated = tel.describe()["node_power"]
    within_its_error(row, known)
    assert stated["power_field"] == "ipmi DCMI Get Power Reading (current power)"
    assert stated["statistics_period_s"] == 1.0 and stated["resolution_w"] == 1.0


@needs_sushy
def test_a_run_with_a_bmc_shows_node_tokens_per_joule_in_the_paper(params_for, outputs, tmp_path):
    """A text suite run with the Redfish emulator as its node's BMC: windows.csv holds the node's joules beside the
    chip's (or the chip's reason), and the paper's systems carry node tokens per joule from them."""
    trace = PowerTrace(NODE_W)

    def metrics(now: int) -> dict:
        return {"@odata.id": "/redfish/v1/Chassis/1U/EnvironmentMetrics", "Id": "EnvironmentMetrics",
                "PowerWatts": {"Reading": NODE_W}, "EnergyJoules": {"Reading": round(trace.counter(now), 1)}}

    mockup = RedfishMockup(tmp_path / "mockup", {"EnvironmentMetrics": metrics})
    with SushyStatic(mockup.root) as bmc, Refresher(mockup.refresh, 0.05):
        params = params_for({"ttft": 0.05, "itl": 0.01, "tokens": 20},
                            run={"warmups": 0, "repeats": 3, "max_tokens": 64, "timeout_s": 10},
                            tasks=["basic_qa"],
                            telemetry={"enabled": True, "idle_baseline_s": 0, "loaded_baseline_s": 0,
                                       "bmc": {"protocol": "redfish", "url": bmc.url, "poll_s": 0.1}})
        result = run_suite(params, "text", progress=False)
    task = result.windows[result.windows["kind"] == "task"].iloc[-1]
    assert task["node_energy_j"] == pytest.approx(NODE_W * task["duration_s"], rel=0.05)
    assert task["node_tokens_per_joule"] == pytest.approx(task["completion_tokens"] / task["node_energy_j"])
    systems = run_systems(load_runs(outputs)).set_index("model")
    assert systems.loc["fake-model", "node_tokens_per_joule"] == pytest.approx(task["node_tokens_per_joule"])
