"""Every joule states its boundary (benchlib.measure.telemetry.boundary): the window rows of each energy source carry
energy_boundary and idle_subtracted — NVML on the fake GPU, RAPL and hwmon from sysfs trees written here."""

from __future__ import annotations

import time
from pathlib import Path

from benchlib.config.params import TelemetryParams
from benchlib.measure.telemetry import WINDOW_COLUMNS, Telemetry, boundary, read_windows
from benchlib.measure.telemetry.soc import Hwmon
from tests.fakes.fake_nvml import NVML_ERROR_LIBRARY_NOT_FOUND, FakeGpu, FakeNvml
from tests.measure.telemetry.test_soc_sensors import ORIN, ina3221

SETTINGS = TelemetryParams(power_hz=50, slow_hz=10)


def window(tmp_path: Path, *, nvml=None, powercap=None, hwmon=None, rails=None, settings=SETTINGS) -> dict:
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    if rails is not None:
        settings = settings.model_copy(update={"hwmon_rails": rails})
    tel = Telemetry(settings, tmp_path / "run", nvml=nvml or FakeNvml(init_error=NVML_ERROR_LIBRARY_NOT_FOUND),
                    environ={}, powercap_root=powercap or empty, hwmon_root=hwmon or empty, thermal_root=empty,
                    system="Linux")
    with tel:
        with tel.window("task") as handle:
            time.sleep(0.3)
    frame = read_windows(tmp_path / "run" / "telemetry_windows.csv")
    assert {"energy_boundary", "idle_subtracted"} <= set(frame.columns) and list(handle.row) == WINDOW_COLUMNS
    assert frame["energy_boundary"].iloc[-1] == handle.row["energy_boundary"]  # written and read back
    return handle.row


def rapl_tree(root: Path, name: str) -> Path:
    domain = root / "intel-rapl:0"
    domain.mkdir(parents=True)
    (domain / "name").write_text(f"{name}\n")
    (domain / "max_energy_range_uj").write_text("262143328850\n")
    (domain / "energy_uj").write_text("1000\n")
    return root


def test_nvml_energy_is_the_gpu_board_and_gross(tmp_path):
    row = window(tmp_path, nvml=FakeNvml([FakeGpu(power_w=150.0)]))
    assert row["energy_source"] == "nvml_counter" and row["energy_j"] > 0
    assert row["energy_boundary"] == "GPU board" and row["idle_subtracted"] is False


def test_rapl_energy_is_the_cpu_package_or_the_platform_for_psys_alone(tmp_path):
    row = window(tmp_path / "a", powercap=rapl_tree(tmp_path / "a" / "powercap", "package-0"))
    assert row["energy_source"] == "rapl" and row["energy_j"] is not None
    assert row["energy_boundary"] == "CPU package" and row["idle_subtracted"] is False
    psys = window(tmp_path / "b", powercap=rapl_tree(tmp_path / "b" / "powercap", "psys"))
    assert psys["energy_boundary"] == "platform (RAPL psys)"


def test_hwmon_is_the_whole_board_on_its_input_rail_else_the_rail_set(tmp_path):
    ina3221(tmp_path / "a" / "hwmon", ORIN)
    row = window(tmp_path / "a", hwmon=tmp_path / "a" / "hwmon")
    assert row["energy_source"] == "hwmon" and row["energy_boundary"] == "whole board"
    ina3221(tmp_path / "b" / "hwmon", ORIN)
    rails = window(tmp_path / "b", hwmon=tmp_path / "b" / "hwmon", rails=["VDD_CPU_GPU_CV", "VDD_SOC"])
    assert rails["energy_boundary"] == "rail set: ina3221/VDD_CPU_GPU_CV+ina3221/VDD_SOC"


def test_no_energy_no_boundary(tmp_path):
    row = window(tmp_path)
    assert row["energy_j"] is None and row["energy_boundary"] == "" and row["idle_subtracted"] is None


def test_boundary_of_each_source_by_name(tmp_path):
    assert boundary.window_boundary("powermetrics", gpus=False) == "SoC CPU+GPU+ANE"
    assert boundary.window_boundary("dcgm_counter", gpus=True) == "GPU board"
    assert boundary.window_boundary("", gpus=True) == ""
    ina3221(tmp_path, ORIN)
    assert boundary.hwmon_boundary(Hwmon(tmp_path)) == "whole board"
    assert boundary.published_boundary("156-205 W average GPU draw") == "GPU board"
    assert boundary.published_boundary("~140 W total system TDP") == "whole board"
    assert boundary.published_boundary("") == ""
