"""Sensors for hosts NVML does not see: Apple Silicon through powermetrics (recorded plist samples played by a
stand-in process), Linux SoC boards through hwmon rails and thermal zones (sysfs trees written here in the
kernel's documented layout)."""

import math
import sys
import time
from pathlib import Path

import pytest

from benchlib.config.params import TelemetryParams
from benchlib.measure.telemetry import WINDOW_COLUMNS, Telemetry, read_windows
from benchlib.measure.telemetry.files import append_window_row
from benchlib.measure.telemetry.soc import (
    Hwmon,
    Powermetrics,
    ThermalZones,
    parse_powermetrics_sample,
    powermetrics_command,
)
from tests.fakes.fake_nvml import NVML_ERROR_LIBRARY_NOT_FOUND, FakeNvml

FAKES = Path(__file__).resolve().parents[2] / "fakes"
FIXTURES = FAKES / "fixtures"
SAMPLES = [FIXTURES / "powermetrics-sample-1.plist", FIXTURES / "powermetrics-sample-2.plist"]
FAKE = [sys.executable, str(FAKES / "fake_powermetrics.py")]
SETTINGS = TelemetryParams(power_hz=20, slow_hz=5)


def no_gpu() -> FakeNvml:
    return FakeNvml(init_error=NVML_ERROR_LIBRARY_NOT_FOUND)


def telemetry(tmp_path: Path, **kwargs) -> Telemetry:
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    kwargs.setdefault("hwmon_root", empty)
    kwargs.setdefault("thermal_root", empty)
    return Telemetry(SETTINGS, tmp_path / "run", nvml=no_gpu(), environ={}, powercap_root=empty, **kwargs)


# ---- Apple Silicon: powermetrics ------------------------------------------------------------------------

def test_powermetrics_plist_samples_parse_to_milliwatts_and_pressure():
    one = parse_powermetrics_sample(SAMPLES[0].read_bytes())
    two = parse_powermetrics_sample(b"\x00" + SAMPLES[1].read_bytes() + b"\n")
    assert one == {"elapsed_ns": 100_000_000, "power_mw": 11950.0, "thermal_pressure": "Nominal",
                   "parts_mw": {"cpu": 9850.0, "gpu": 2100.0, "ane": 0.0}}
    assert two["power_mw"] == 29950.0 and two["thermal_pressure"] == "Heavy"
    without_combined = SAMPLES[0].read_bytes().replace(b"<key>combined_power</key>", b"<key>other</key>")
    assert parse_powermetrics_sample(without_combined)["power_mw"] == 9850.0 + 2100.0 + 0.0
    old = SAMPLES[0].read_bytes().replace(b"_power</key>", b"_energy</key>")  # no *_power keys at all
    with pytest.raises(ValueError, match="macOS 13"):
        parse_powermetrics_sample(old)


def test_powermetrics_command_asks_sudo_without_a_password_unless_root():
    user, root = powermetrics_command(100, root=False), powermetrics_command(100, root=True)
    assert user[:2] == ["sudo", "-n"] and root[0].endswith("powermetrics")
    assert user[2:] == root
    assert root[1:] == ["--samplers", "cpu_power,gpu_power,ane_power,thermal", "-f", "plist", "-b", "0", "-i", "100"]


def test_powermetrics_is_off_outside_macos_and_says_why_without_root():
    assert Powermetrics(100, system="Linux").status == {
        "available": False, "reason": "powermetrics exists on macOS only", "source": ""}
    denied = Powermetrics(100, command=FAKE + ["--deny"])
    assert not denied.status["available"]
    assert denied.status["reason"] == ("powermetrics: powermetrics must be invoked as the superuser — powermetrics "
                                       "needs root: run as root or allow passwordless sudo for it")
    assert all(math.isnan(v) for v in denied.read())  # nothing fabricated


def test_a_mac_window_gets_energy_power_pressure_and_memory_from_powermetrics(tmp_path):
    tel = telemetry(tmp_path, system="Darwin", powermetrics=FAKE + ["100"] + [str(p) for p in SAMPLES])
    try:
        assert tel.sensors["soc_power"]["available"], tel.sensors["soc_power"]
        assert tel.sensors["meminfo"]["source"] == "psutil.virtual_memory().available"
        with tel:
            with tel.window("task") as handle:
                time.sleep(1.5)
        row = handle.row
    finally:
        tel.close()
    assert row is not None and list(row) == WINDOW_COLUMNS
    assert row["energy_source"] == "powermetrics" and row["power_source"] == "powermetrics_interval_avg"
    # the samples alternate 11.95 W and 29.95 W over 100 ms each, one every 100 ms: 20.95 W on average (a
    # counter summed from power × elapsed_ns; the stand-in's sleeps make it a little late, never early)
    per_s = row["energy_j"] / row["duration_s"]
    assert 16.0 < per_s < 22.0, per_s
    assert row["peak_power_w"] == pytest.approx(29.95)
    assert set(row["throttle_seen"].split(";")) == {"thermal_pressure:Nominal", "thermal_pressure:Heavy"}
    assert row["mem_available_drop_bytes"] is not None
    assert row["temp_avg_c"] is None and "no readable thermal zones" in row["unavailable"]
    samples = tel.samples_frame()
    assert samples["soc_power_w"].dropna().isin([11.95, 29.95]).all()
    assert samples["soc_energy_uj"].dropna().is_monotonic_increasing
    assert tel._soc is not None and tel._soc._proc is None  # close() stopped the powermetrics process


# ---- Linux SoC boards: hwmon rails and thermal zones ----------------------------------------------------

def ina3221(root: Path, rails: dict[str, tuple[int, int]], chip: str = "hwmon3") -> Path:
    """A hwmon directory as the kernel's ina3221 driver lays it out: inN_label, inN_input (mV), currN_input (mA)
    for channels 1-3, shunt voltages in4-6 (µV), in7_label for their sum (no curr7)."""
    d = root / chip
    d.mkdir(parents=True)
    (d / "name").write_text("ina3221\n")
    for n, (label, (mv, ma)) in enumerate(rails.items(), start=1):
        (d / f"in{n}_label").write_text(label + "\n")
        (d / f"in{n}_input").write_text(f"{mv}\n")
        (d / f"curr{n}_input").write_text(f"{ma}\n")
        (d / f"in{n + 3}_input").write_text("2440\n")
    (d / "in7_label").write_text("sum of shunt voltages\n")
    (d / "in7_input").write_text("7320\n")
    return d


ORIN = {"VDD_IN": (5000, 1500), "VDD_CPU_GPU_CV": (5000, 600), "VDD_SOC": (5000, 300)}  # 7.5 W in; 3 W; 1.5 W


def test_hwmon_picks_the_board_input_rail_never_the_nested_sum(tmp_path):
    ina3221(tmp_path, ORIN)
    board = Hwmon(tmp_path)
    assert board.status["available"] and board.scope == "ina3221/VDD_IN"
    assert board.power_w() == pytest.approx(7.5)
    chosen = Hwmon(tmp_path, ["VDD_CPU_GPU_CV", "ina3221/VDD_SOC"])
    assert chosen.power_w() == pytest.approx(4.5) and chosen.scope == "ina3221/VDD_CPU_GPU_CV+ina3221/VDD_SOC"
    missing = Hwmon(tmp_path, ["VDD_GPU"])
    assert not missing.status["available"] and "['VDD_GPU'] not found" in missing.status["reason"]
    assert "ina3221/VDD_SOC" in missing.status["reason"]


def test_hwmon_without_a_known_board_rail_names_the_setting(tmp_path):
    ina3221(tmp_path, {"VDD_SOC": (5000, 300)})
    unknown = Hwmon(tmp_path)
    assert not unknown.status["available"]
    assert "telemetry.hwmon_rails" in unknown.status["reason"] and "ina3221/VDD_SOC" in unknown.status["reason"]
    assert Hwmon(tmp_path / "absent").status["reason"].startswith("no hwmon power rails under")


def test_hwmon_power_input_in_microwatts(tmp_path):
    d = tmp_path / "hwmon0"
    d.mkdir()
    (d / "name").write_text("board\n")
    (d / "power1_input").write_text("12500000\n")
    (d / "power1_label").write_text("VDD_IN\n")
    sensor = Hwmon(tmp_path)
    assert sensor.power_w() == pytest.approx(12.5) and "powerN_input µW" in sensor.status["source"]


def test_a_jetson_window_gets_board_energy_and_the_hottest_zone(tmp_path):
    hw = tmp_path / "hwmon"
    chip = ina3221(hw, ORIN)
    zones = tmp_path / "thermal"
    for n, (kind, milli) in enumerate([("cpu-thermal", 48500), ("gpu-thermal", 51000), ("tj-thermal", 52250)]):
        (zones / f"thermal_zone{n}").mkdir(parents=True)
        (zones / f"thermal_zone{n}" / "type").write_text(kind + "\n")
        (zones / f"thermal_zone{n}" / "temp").write_text(f"{milli}\n")
    assert ThermalZones(zones).read() == 52.25
    tel = telemetry(tmp_path, system="Linux", hwmon_root=hw, thermal_root=zones)
    with tel:
        with tel.window("task") as handle:
            time.sleep(0.6)
            (chip / "curr1_input").write_text("3000\n")  # load doubles the board's draw to 15 W
            time.sleep(0.6)
    row = handle.row
    assert row is not None
    assert row["energy_source"] == "hwmon" and row["power_source"] == "hwmon_instant"
    assert 7.5 * 1.2 < row["energy_j"] < 15 * 1.25, row["energy_j"]
    assert row["peak_power_w"] == pytest.approx(15.0)
    assert row["temp_peak_c"] == 52.25 and row["temp_source"] == "thermal_zone_max"
    assert tel.sensors["soc_power"]["source"].startswith("hwmon ina3221/VDD_IN")
    assert "thermal_zones" in tel.sensors and tel.sensors["thermal_zones"]["available"]


def test_a_host_without_soc_sensors_says_so_in_the_energy_reason(tmp_path):
    tel = telemetry(tmp_path, system="Linux")
    with tel:
        with tel.window("task") as handle:
            time.sleep(0.1)
    assert handle.row is not None and handle.row["energy_j"] is None
    assert "no SoC power (no hwmon power rails under" in handle.row["energy_reason"]


def test_windows_written_by_an_older_layout_are_rewritten_not_misaligned(tmp_path):
    path = tmp_path / "telemetry_windows.csv"
    old = [c for c in WINDOW_COLUMNS if c != "temp_source"]
    path.write_text(",".join(old) + "\n" + ",".join("idle" if c == "window" else "7" if c == "t_start_ns" else
                                                     "3.5" if c == "energy_j" else "" for c in old) + "\n")
    append_window_row(path, {"window": "task", "t_start_ns": 9, "energy_j": 1.25, "temp_source": "nvml"})
    frame = read_windows(path)
    assert list(frame["window"]) == ["idle", "task"] and list(frame["energy_j"]) == [3.5, 1.25]
    assert list(frame["temp_source"].fillna("")) == ["", "nvml"]
    assert path.read_text().splitlines()[0] == ",".join(WINDOW_COLUMNS)
