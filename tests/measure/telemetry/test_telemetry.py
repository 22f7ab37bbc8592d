"""Telemetry: NVML paths against a scripted fake (no GPU here), the CPU path for real, and the efficiency join."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis.task_stats import add_token_efficiency
from benchlib.config.params import TelemetryParams
from benchlib.measure.telemetry import (
    TELEMETRY_COLUMNS,
    WINDOW_COLUMNS,
    Telemetry,
    read_telemetry,
    read_windows,
    select_gpus,
)
from benchlib.measure.telemetry.host import Rapl
from tests.fakes.fake_nvml import (
    NVML_ERROR_LIBRARY_NOT_FOUND,
    FakeGpu,
    FakeNvml,
    UnsupportedEverywhere,
    all_unsupported_gpu,
)

FAST = TelemetryParams(power_hz=50, slow_hz=10)


def make(tmp_path: Path, nvml=None, *, gpus=None, environ=None, settings=FAST, meminfo=None, powercap=None,
         server_pid=None, sub="run") -> Telemetry:
    """A Telemetry on a fake NVML with no RAPL and the real /proc/meminfo unless told otherwise."""
    if nvml is None:
        nvml = FakeNvml(gpus if gpus is not None else [FakeGpu()])
    empty = tmp_path / "no-powercap"
    empty.mkdir(exist_ok=True)
    return Telemetry(settings, tmp_path / sub, server_pid=server_pid, nvml=nvml, environ=environ or {},
                     powercap_root=powercap or empty, meminfo_path=meminfo or "/proc/meminfo")


def busy_wait(seconds: float) -> None:
    time.sleep(seconds)


# ---- NVML counter windows --------------------------------------------------------------------------------


def test_counter_window_energy_is_counter_difference(tmp_path):
    gpu = FakeGpu(power_w=150.0)
    with make(tmp_path, gpus=[gpu]) as tel:
        with tel.window("summarize", kind="task") as handle:
            busy_wait(0.3)
    row = handle.row
    assert row["energy_source"] == "nvml_counter"
    assert row["energy_reason"] == ""
    # the fake's counter integrates exactly 150 W on the sampler's clock
    assert row["energy_j"] == pytest.approx(150.0 * row["duration_s"], rel=0.01)
    assert row["avg_power_w"] == pytest.approx(row["energy_j"] / row["duration_s"], rel=1e-12)
    assert row["peak_power_w"] == pytest.approx(150.0)
    assert row["power_source"] == "nvml_instant"
    assert row["n_samples"] >= 10
    assert row["stale_samples"] == 0
    assert row["counter_reset"] is False
    assert row["mem_source"] == "nvml_memory_v2" and row["mem_peak_bytes"] == 10 * 2**30
    assert row["temp_avg_c"] == 50 and row["temp_peak_c"] == 50
    assert row["throttle_seen"] == "none"


def test_avg_power_is_energy_over_time_not_mean_of_samples(tmp_path):
    """A 0.1 s burst at 400 W inside a 100 W window: energy ÷ duration, whatever the samples' mean."""
    gpu = FakeGpu(power_w=100.0)
    with make(tmp_path, gpus=[gpu]) as tel:
        with tel.window("burst") as handle:
            busy_wait(0.2)
            burst_start = time.perf_counter()
            gpu.set_power(400.0)
            busy_wait(0.1)
            gpu.set_power(100.0)
            burst_s = time.perf_counter() - burst_start  # a loaded box oversleeps: use the real burst length
            busy_wait(0.2)
    row = handle.row
    expected = 100.0 * row["duration_s"] + 300.0 * burst_s
    assert row["energy_j"] == pytest.approx(expected, rel=0.03)
    assert row["peak_power_w"] == pytest.approx(400.0)


def test_net_energy_uses_idle_window_power_and_multi_gpu_sums(tmp_path):
    gpus = [FakeGpu(power_w=60.0, uuid="GPU-aaaa"), FakeGpu(power_w=40.0, uuid="GPU-bbbb")]
    with make(tmp_path, gpus=gpus) as tel:
        idle = tel.baseline("idle", 0.2, kind="idle")
        for g in gpus:
            g.set_power(g.power_w + 100.0)
        with tel.window("decode") as handle:
            busy_wait(0.3)
    row = handle.row
    assert idle["avg_power_w"] == pytest.approx(100.0, rel=0.01)
    assert row["gpus"] == "0;1"
    assert row["avg_power_w"] == pytest.approx(300.0, rel=0.01)
    assert row["peak_power_w"] == pytest.approx(300.0)
    assert row["idle_power_w"] == pytest.approx(idle["avg_power_w"])
    assert row["net_energy_j"] == pytest.approx(200.0 * row["duration_s"], rel=0.02)


def test_measure_after_the_fact_interpolates_counters(tmp_path):
    gpu = FakeGpu(power_w=80.0)
    with make(tmp_path, gpus=[gpu]) as tel:
        tel.start()
        busy_wait(0.1)
        t0 = time.perf_counter_ns()
        busy_wait(0.25)
        t1 = time.perf_counter_ns()
        busy_wait(0.05)
        row = tel.measure("request-1", "task", t0, t1)
    assert row["t_start_ns"] == t0 and row["t_end_ns"] == t1
    assert row["energy_j"] == pytest.approx(80.0 * (t1 - t0) / 1e9, rel=0.01)
    assert row["cpu_util_avg"] is not None  # slow-rate counters bracket the window too
    with pytest.raises(ValueError):
        tel.measure("backwards", "task", t1, t0)
    with pytest.raises(ValueError):
        tel.measure("bad-kind", "warmup", t0, t1)


def test_counter_reset_is_flagged_and_falls_back_to_trapezoid(tmp_path):
    state = {"reset_at": None}
    start = time.perf_counter()

    def counter(now: float) -> float:  # 200 W; the counter restarts from zero at reset_at (driver reload)
        if state["reset_at"] is not None and now >= state["reset_at"]:
            return (now - state["reset_at"]) * 200_000.0
        return 1e9 + (now - start) * 200_000.0

    gpu = FakeGpu(power_w=200.0, energy_fn=counter)
    with make(tmp_path, gpus=[gpu]) as tel:
        with tel.window("reset") as handle:
            busy_wait(0.15)
            state["reset_at"] = time.perf_counter()
            busy_wait(0.15)
    row = handle.row
    assert row["counter_reset"] is True
    assert row["energy_source"] == "power_trapezoid"
    assert "backwards" in row["energy_reason"] and "NVML_FI_DEV_POWER_INSTANT" in row["energy_reason"]
    assert row["energy_j"] == pytest.approx(200.0 * row["duration_s"], rel=0.02)


def test_rapl_wraparound_is_undone(tmp_path):
    domain = tmp_path / "powercap" / "intel-rapl:0"
    domain.mkdir(parents=True)
    (domain / "name").write_text("package-0\n")
    (domain / "max_energy_range_uj").write_text("1000\n")
    (domain / "energy_uj").write_text("900\n")
    sub = domain / "intel-rapl:0:0"  # a sub-domain is part of its package: never added
    sub.mkdir()
    (sub / "energy_uj").write_text("5\n")
    rapl = Rapl(tmp_path / "powercap")
    assert rapl.status["available"], rapl.status
    assert rapl.read() == 0.0
    (domain / "energy_uj").write_text("100\n")  # wrapped: 900 -> 1000 -> 100
    assert rapl.read() == 200.0
    (domain / "energy_uj").write_text("400\n")
    assert rapl.read() == 500.0


def test_rapl_energy_on_a_cpu_only_host(tmp_path):
    """No GPU: the window's energy comes from RAPL, labelled, across several wrap-arounds."""
    domain = tmp_path / "powercap" / "intel-rapl:0"
    domain.mkdir(parents=True)
    (domain / "name").write_text("package-0\n")
    max_range = 4_000_000  # 4 J: wraps every 0.08 s at 50 W
    (domain / "max_energy_range_uj").write_text(f"{max_range}\n")
    energy_file = domain / "energy_uj"
    t_start = time.perf_counter()

    def value() -> int:
        return int((time.perf_counter() - t_start) * 50e6) % max_range  # 50 W

    energy_file.write_text(f"{value()}\n")
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            tmp = energy_file.with_suffix(".tmp")
            tmp.write_text(f"{value()}\n")
            os.replace(tmp, energy_file)
            time.sleep(0.002)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        tel = make(tmp_path, nvml=FakeNvml(init_error=NVML_ERROR_LIBRARY_NOT_FOUND),
                   powercap=tmp_path / "powercap", settings=TelemetryParams(power_hz=100, slow_hz=10))
        with tel:
            with tel.window("cpu-task") as handle:
                busy_wait(0.4)
    finally:
        stop.set()
        thread.join()
    row = handle.row
    assert row["energy_source"] == "rapl"
    assert row["energy_j"] == pytest.approx(50.0 * row["duration_s"], rel=0.05)
    assert row["rapl_energy_j"] == row["energy_j"]
    assert row["power_source"] == "rapl_rate_per_tick"


# ---- missing sensors ---------------------------------------------------------------------------------------


def test_not_supported_everywhere_gives_reasons_not_numbers(tmp_path):
    nvml = UnsupportedEverywhere([all_unsupported_gpu()])
    tel = make(tmp_path, nvml=nvml)
    for key in ("energy_counter", "power", "memory", "temperature", "sm_clock", "clock_event_reasons",
                "power_limit"):
        assert tel.sensors[key]["available"] is False, key
        assert "Not Supported" in tel.sensors[key]["reason"] or "not in this pynvml" in tel.sensors[key]["reason"]
    assert tel.sensors["gpu_name"]["available"] and tel.sensors["nvml"]["available"]
    with tel:
        with tel.window("t") as handle:
            busy_wait(0.15)
    row = handle.row
    for column in ("energy_j", "avg_power_w", "peak_power_w", "net_energy_j", "temp_avg_c", "mem_peak_bytes"):
        assert row[column] is None, column
    assert "gpu0: no energy counter (Not Supported)" in row["energy_reason"]
    assert "no power reading" in row["energy_reason"]
    for prefix in ("energy_j:", "peak_power_w:", "temp_*:", "mem_*:", "throttle_seen:"):
        assert prefix in row["unavailable"]
    samples = read_telemetry(tel.out_dir / "telemetry.csv")
    assert len(samples) >= 5 and samples["power_w"].isna().all() and samples["energy_mj"].isna().all()


def test_host_without_any_sensor_still_writes_complete_rows(tmp_path):
    tel = make(tmp_path, nvml=FakeNvml(init_error=NVML_ERROR_LIBRARY_NOT_FOUND),
               meminfo=tmp_path / "no-meminfo")
    assert tel.sensors["nvml"] == {"available": False, "reason": "nvmlInit failed: NVML Shared Library Not Found",
                                   "source": ""}
    assert not tel.sensors["rapl"]["available"] and "does not exist" not in tel.sensors["rapl"]["reason"]
    assert not tel.sensors["meminfo"]["available"] and "no-meminfo" in tel.sensors["meminfo"]["reason"]
    with tel:
        idle = tel.baseline("idle", 0.1)
        with tel.window("task-a") as handle:
            busy_wait(0.1)
    for row in (idle, handle.row):
        assert list(row) == WINDOW_COLUMNS
        assert row["energy_j"] is None and row["energy_source"] == ""
        assert "nvmlInit failed: NVML Shared Library Not Found" in row["energy_reason"]
        assert "no RAPL" in row["energy_reason"]
        assert row["cpu_util_avg"] is not None and 0.0 <= row["cpu_util_avg"] <= 100.0  # psutil still works
        assert row["n_samples"] >= 2
        for prefix in ("energy_j:", "peak_power_w:", "temp_*:", "throttle_seen:", "mem_*:", "server_*:",
                       "mem_available_drop_bytes:", "rapl_energy_j:"):
            assert prefix in row["unavailable"], prefix
    frame = read_windows(tel.out_dir / "telemetry_windows.csv")
    assert list(frame.columns) == WINDOW_COLUMNS and len(frame) == 2
    assert frame["energy_j"].isna().all() and (frame["energy_reason"].str.len() > 0).all()
    sensors = json.loads((tel.out_dir / "sensors.json").read_text())
    assert sensors["sensors"]["energy_counter"]["available"] is False
    assert sensors["devices"] == []
    samples = read_telemetry(tel.out_dir / "telemetry.csv")
    assert list(samples.columns) == TELEMETRY_COLUMNS and samples["gpu"].isna().all()


def test_unified_memory_path_reports_each_view_labelled(tmp_path):
    """GB10: device memory Not Supported → per-process sum, MemAvailable drop and server RSS."""
    gpu = FakeGpu(memory_v2=False, memory_v1=False, processes=[(101, 3 * 2**30), (102, 2**30)])
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       131072000 kB\nMemFree:   1000 kB\nMemAvailable:   100000000 kB\n")
    tel = make(tmp_path, gpus=[gpu], meminfo=meminfo, server_pid=os.getpid())
    assert tel.sensors["memory"]["available"]
    assert "ComputeRunningProcesses" in tel.sensors["memory"]["source"]
    assert "Not Supported" in tel.sensors["memory"]["reason"]
    with tel:
        with tel.window("load-model") as handle:
            busy_wait(0.1)
            gpu.processes = [(101, 7 * 2**30), (102, 2**30)]  # the server maps 4 GiB more weights
            meminfo.write_text("MemTotal:       131072000 kB\nMemFree:   1000 kB\nMemAvailable:    96000000 kB\n")
            busy_wait(0.1)
    row = handle.row
    assert row["mem_source"] == "nvml_process_sum"
    assert row["mem_baseline_bytes"] == 4 * 2**30
    assert row["mem_peak_bytes"] == 8 * 2**30
    assert row["mem_delta_bytes"] == 4 * 2**30
    assert row["mem_available_drop_bytes"] == 4_000_000 * 1024
    assert row["server_rss_peak_bytes"] > 10 * 2**20
    samples = read_telemetry(tel.out_dir / "telemetry.csv")
    assert samples["mem_used_bytes"].isna().all() and samples["gpu_proc_mem_bytes"].max() == 8 * 2**30


def test_process_memory_not_reported_in_containers_is_missing_not_zero(tmp_path):
    gpu = FakeGpu(memory_v2=False, memory_v1=False, processes=[(101, None)])
    with make(tmp_path, gpus=[gpu]) as tel:
        with tel.window("t") as handle:
            busy_wait(0.1)
    assert handle.row["mem_peak_bytes"] is None
    assert "no memory samples" in handle.row["unavailable"]


def test_stale_samples_are_counted(tmp_path):
    frozen = FakeGpu(frozen_power_timestamp=True)  # field timestamp never moves and is 5 s old
    with make(tmp_path, gpus=[frozen]) as tel:
        with tel.window("t") as handle:
            busy_wait(0.2)
    assert handle.row["stale_samples"] == handle.row["n_samples"] > 0

    # no timestamps (1 s average fallback) and no counter: a repeated value is a stale reading
    repeat = FakeGpu(instant_power=False, energy=False)
    with make(tmp_path, gpus=[repeat], sub="b") as tel:
        with tel.window("t") as handle:
            busy_wait(0.2)
    assert 0 < handle.row["stale_samples"] <= handle.row["n_samples"]


def test_instant_power_fallback_is_labelled(tmp_path):
    gpu = FakeGpu(instant_power=False, energy=False, power_w=120.0)
    tel = make(tmp_path, gpus=[gpu])
    power = tel.sensors["power"]
    assert power["available"] and power["source"] == "nvmlDeviceGetPowerUsage (1 s average on Ampere+)"
    assert "instant power unavailable (Not Supported)" in power["reason"]
    with tel:
        with tel.window("t") as handle:
            busy_wait(0.2)
    row = handle.row
    assert row["power_source"] == "nvml_power_usage_1s_avg"
    assert row["energy_source"] == "power_trapezoid"
    assert "1 s average on Ampere+" in row["energy_reason"] and "no energy counter" in row["energy_reason"]
    assert row["energy_j"] == pytest.approx(120.0 * row["duration_s"], rel=0.01)


def test_throttle_reasons_decoded_with_older_function_name(tmp_path):
    gpu = FakeGpu(throttle=0x4 | 0x40)
    nvml = FakeNvml([gpu], missing=("nvmlDeviceGetCurrentClocksEventReasons",))
    with make(tmp_path, nvml=nvml) as tel:
        assert tel.sensors["clock_event_reasons"]["source"] == "nvmlDeviceGetCurrentClocksThrottleReasons"
        with tel.window("hot") as handle:
            busy_wait(0.1)
    assert handle.row["throttle_seen"] == "SwPowerCap;HwThermalSlowdown"


def test_runtime_failures_never_stop_the_sampler(tmp_path):
    gpu = FakeGpu(power_w=90.0)
    with make(tmp_path, gpus=[gpu]) as tel:
        busy_wait(0.05)
        gpu.lost = True
        with tel.window("lost") as handle:
            busy_wait(0.1)
        assert tel._thread is not None and tel._thread.is_alive()
    assert handle.row["energy_j"] is None and "do not cover" in handle.row["energy_reason"]
    errors = json.loads((tel.out_dir / "sensors.json").read_text())["runtime_errors"]
    assert errors["gpu0.energy_counter"]["first"] == "GPU is lost" and errors["gpu0.energy_counter"]["count"] > 1


# ---- GPU selection -----------------------------------------------------------------------------------------


UUIDS = ["GPU-aaaa-0000", "GPU-bbbb-1111", "GPU-cccc-2222"]


@pytest.mark.parametrize("env,expected", [
    (None, [0, 1, 2]),
    ("1", [1]),
    ("2,0", [2, 0]),
    ("GPU-bbbb", [1]),  # unique UUID prefix, as CUDA accepts
    ("GPU-cccc-2222,1", [2, 1]),
    ("0,7,1", [0]),  # CUDA ignores everything after an invalid entry
    ("", []),
    ("-1", []),
    ("GPU-", []),  # ambiguous prefix names no single device
])
def test_cuda_visible_devices(env, expected):
    chosen, note = select_gpus(3, UUIDS, None, env, "PCI_BUS_ID")
    assert chosen == expected
    assert ("unset" in note) if env is None else ("CUDA_VISIBLE_DEVICES" in note)


def test_gpu_indices_param_overrides_environment():
    chosen, note = select_gpus(3, UUIDS, [2, 5], "0", None)
    assert chosen == [2] and "ignored [5]" in note


def test_telemetry_watches_only_visible_gpus(tmp_path):
    gpus = [FakeGpu(power_w=10.0, uuid=UUIDS[0]), FakeGpu(power_w=20.0, uuid=UUIDS[1]),
            FakeGpu(power_w=40.0, uuid=UUIDS[2])]
    with make(tmp_path, gpus=gpus, environ={"CUDA_VISIBLE_DEVICES": "GPU-cccc,0"}) as tel:
        assert [g["index"] for g in tel.gpus] == [2, 0]
        with tel.window("t") as handle:
            busy_wait(0.15)
    assert handle.row["gpus"] == "2;0"
    assert handle.row["avg_power_w"] == pytest.approx(50.0, rel=0.01)
    sensors = json.loads((tel.out_dir / "sensors.json").read_text())
    assert [d["uuid"] for d in sensors["devices"]] == [UUIDS[2], UUIDS[0]]
    assert sensors["cuda_driver_version"] == "13.0" and sensors["driver_version"] == "580.82.07"
    samples = read_telemetry(tel.out_dir / "telemetry.csv")
    assert sorted(samples["gpu"].unique().tolist()) == [0, 2]


def test_hidden_gpus_mean_no_gpu_with_reason(tmp_path):
    tel = make(tmp_path, environ={"CUDA_VISIBLE_DEVICES": ""})
    assert tel.gpus == [] and "no GPU selected" in tel.sensors["energy_counter"]["reason"]
    tel.close()


# ---- the CPU path, for real --------------------------------------------------------------------------------

CHILD = r"""
import sys, time
sys.stdin.readline()                       # wait for "go" so the allocation happens inside the window
block = bytearray(b"\x01") * (150 * 2**20)  # touched pages: RSS grows by 150 MiB
end = time.process_time() + 0.8
while time.process_time() < end:
    pass
print("done", flush=True)
time.sleep(60)
"""


def test_server_process_tree_cpu_and_rss_are_measured(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        tel = make(tmp_path, nvml=FakeNvml(init_error=NVML_ERROR_LIBRARY_NOT_FOUND), server_pid=child.pid,
                   settings=TelemetryParams(power_hz=20, slow_hz=2))
        assert tel.sensors["server_process"]["available"]
        with tel:
            with tel.window("burn") as handle:
                child.stdin.write("go\n")
                child.stdin.flush()
                assert child.stdout.readline().strip() == "done"
    finally:
        child.kill()
        child.wait()
    row = handle.row
    assert row["server_cpu_s"] > 0.5
    assert row["server_rss_peak_bytes"] > 150 * 2**20
    assert row["mem_source"] == "server_rss" and row["mem_delta_bytes"] > 100 * 2**20
    assert row["cpu_util_avg"] > 0
    assert row["energy_j"] is None and "no RAPL" in row["energy_reason"]


# ---- lifecycle ---------------------------------------------------------------------------------------------


def test_files_close_twice_and_resume(tmp_path):
    gpu = FakeGpu(power_w=100.0)
    tel = make(tmp_path, gpus=[gpu])
    tel.start()
    tel.baseline("idle", 0.1)
    busy_wait(1.1)  # past one flush period: rows reach the file while running
    assert len(read_telemetry(tel.out_dir / "telemetry.csv")) > 10
    tel.close()
    tel.close()
    samples = read_telemetry(tel.out_dir / "telemetry.csv")
    assert list(samples.columns) == TELEMETRY_COLUMNS
    assert np.all(np.diff(samples["t_ns"].to_numpy()) > 0)
    assert samples["power_w"].eq(100.0).all() and samples["temp_c"].notna().any()
    assert tel.overhead()["ticks"] == len(samples)
    assert (tel.out_dir / "sensors.json").is_file()

    # a resumed process sees the earlier idle window and nets against it
    gpu.set_power(250.0)
    again = make(tmp_path, gpus=[gpu])
    assert list(again.windows_frame()["window"]) == ["idle"]
    with again:
        with again.window("task") as handle:
            busy_wait(0.1)
    assert handle.row["idle_power_w"] == pytest.approx(100.0, rel=0.01)
    assert handle.row["net_energy_j"] == pytest.approx(150.0 * handle.row["duration_s"], rel=0.03)
    assert list(again.windows_frame()["window"]) == ["idle", "task"]
    # the second process appended to the same series
    assert len(read_telemetry(tel.out_dir / "telemetry.csv")) > len(samples)


def test_disabled_is_a_no_op_with_the_same_api(tmp_path):
    tel = Telemetry(TelemetryParams(enabled=False), tmp_path / "off")
    tel.start()
    tel.set_server_pid(os.getpid())
    with tel.window("t") as handle:
        busy_wait(0.02)
    row = tel.baseline("idle", 0.01)
    assert handle.row["energy_reason"] == "telemetry disabled" and handle.row["duration_s"] > 0
    assert row["kind"] == "idle" and row["energy_j"] is None
    assert list(tel.windows_frame().columns) == WINDOW_COLUMNS and len(tel.windows_frame()) == 2
    assert not (tmp_path / "off" / "telemetry.csv").exists()
    tel.close()
    tel.close()


# ---- efficiency --------------------------------------------------------------------------------------------


def _requests() -> pd.DataFrame:
    s = 1_000_000_000
    rows = [
        # task, warm-up, status, tokens, decode_tps, start_ns, e2e_s
        ("qa", False, "ok", 500, 20.0, 11 * s, 2.0),
        ("qa", False, "ok", 500, 30.0, 14 * s, 2.0),
        ("qa", True, "ok", 900, 99.0, 10 * s, 0.5),  # warm-up: excluded
        ("qa", False, "failed", 900, None, 17 * s, 1.0),  # failed: excluded
        ("qa", False, "ok", 900, 99.0, 40 * s, 1.0),  # another window of the same task
        ("other", False, "ok", 900, 99.0, 12 * s, 1.0),
    ]
    return pd.DataFrame(rows, columns=["task", "is_warmup", "status", "completion_tokens", "decode_tps",
                                       "start_ns", "e2e_s"]).assign(started_at_unix=0.0)


def _windows() -> pd.DataFrame:
    s = 1_000_000_000
    rows = [
        dict(window="idle", kind="idle", t_start_ns=0, t_end_ns=2 * s, energy_j=20.0, avg_power_w=10.0,
             energy_reason=""),
        dict(window="qa", kind="task", t_start_ns=10 * s, t_end_ns=20 * s, energy_j=100.0, avg_power_w=10.0,
             energy_reason=""),
        dict(window="qa", kind="task", t_start_ns=30 * s, t_end_ns=50 * s, energy_j=None, avg_power_w=None,
             energy_reason="no GPU (nvmlInit failed: NVML Shared Library Not Found)"),
    ]
    return pd.DataFrame(rows, columns=WINDOW_COLUMNS)


def test_add_token_efficiency():
    windows, requests = _windows(), _requests()
    before = windows.copy()
    out = add_token_efficiency(windows, requests)
    pd.testing.assert_frame_equal(windows, before)  # pure
    idle, task, dark = out.iloc[0], out.iloc[1], out.iloc[2]
    assert idle["efficiency_reason"] == "not a task window" and math.isnan(idle["tokens_per_joule"])
    assert task["n_requests"] == 2 and task["completion_tokens"] == 1000
    assert task["tokens_per_joule"] == pytest.approx(10.0)
    assert task["joules_per_token"] == pytest.approx(0.1)
    assert task["decode_tps_mean"] == pytest.approx(25.0)
    assert task["tps_per_w"] == pytest.approx(2.5)  # the paper's figure, same window power
    assert task["efficiency_reason"] == ""
    assert dark["n_requests"] == 1 and dark["completion_tokens"] == 900
    assert math.isnan(dark["tokens_per_joule"]) and math.isnan(dark["tps_per_w"])
    assert "nvmlInit failed" in dark["efficiency_reason"]


def test_add_token_efficiency_on_a_real_windows_file(tmp_path):
    """Round trip: windows read back from disk, requests matched by wall clock when start_ns is missing."""
    with make(tmp_path, gpus=[FakeGpu(power_w=50.0)]) as tel:
        with tel.window("qa") as handle:
            started = time.time()
            busy_wait(0.2)
    requests = pd.DataFrame([dict(task="qa", is_warmup=False, status="ok", completion_tokens=40, decode_tps=200.0,
                                  start_ns=0, started_at_unix=started, e2e_s=0.15)])
    frame = read_windows(tel.out_dir / "telemetry_windows.csv")
    out = add_token_efficiency(frame, requests)
    row = out.iloc[0]
    assert row["completion_tokens"] == 40
    assert row["tokens_per_joule"] == pytest.approx(40 / handle.row["energy_j"], rel=1e-6)
    assert row["tps_per_w"] == pytest.approx(200.0 / handle.row["avg_power_w"], rel=1e-6)


def test_tps_per_w_of_a_concurrent_window_uses_the_aggregate_rate():
    windows = pd.DataFrame([{"window": "concurrency", "kind": "task", "t_start_ns": 0, "t_end_ns": 2_000_000_000,
                             "t_start_unix": 0.0, "t_end_unix": 2.0, "duration_s": 2.0, "energy_j": 200.0,
                             "avg_power_w": 100.0, "energy_reason": ""}])
    requests = pd.DataFrame([{"task": "concurrency", "status": "ok", "is_warmup": False, "concurrency": 8,
                              "start_ns": 100_000_000, "e2e_s": 1.5, "started_at_unix": 0.1,
                              "completion_tokens": 100, "decode_tps": 10.0} for _ in range(8)])
    row = add_token_efficiency(windows, requests).iloc[0]
    assert row["tps_per_w"] == pytest.approx(800 / 2.0 / 100.0)  # 400 tok/s aggregate ÷ 100 W, not 10 ÷ 100
    assert row["tokens_per_joule"] == pytest.approx(800 / 200.0)
