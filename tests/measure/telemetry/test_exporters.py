"""Exporters as the telemetry source: a DCGM-exporter fake in NVIDIA's documented format, and a real
prometheus-node-exporter (Debian package; `make test` installs it: Makefile .venv/.node-exporter) started here."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from benchlib.config.params import TelemetryParams
from benchlib.measure.telemetry import RemoteTelemetry, read_telemetry
from benchlib.measure.telemetry.exporters import node_values, parse_samples
from tests.fakes.fake_dcgm import DcgmGpu, FakeDcgmExporter

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or "/usr/bin/prometheus-node-exporter"
FAST = dict(power_hz=20, slow_hz=10)


def dcgm_settings(url: str) -> TelemetryParams:
    return TelemetryParams(source="exporters", dcgm_url=url, **FAST)


def test_dcgm_energy_comes_from_its_counter(tmp_path):
    gpus = [DcgmGpu(index=0, power_w=300.0), DcgmGpu(index=1, uuid="GPU-second", power_w=100.0, reasons=0)]
    with FakeDcgmExporter(gpus, hostname="titan") as exporter:
        with RemoteTelemetry(dcgm_settings(exporter.url), tmp_path / "run") as tel:
            with tel.window("task") as handle:
                time.sleep(0.5)
    row = handle.row
    assert row["energy_source"] == "dcgm_counter" and row["energy_reason"] == ""
    assert row["avg_power_w"] == pytest.approx(400.0, rel=0.02)
    assert row["peak_power_w"] == 400.0 and row["power_source"] == "dcgm_power_usage"
    assert row["mem_peak_bytes"] == 2 * 40_000 * 2**20 and row["mem_source"] == "dcgm_fb_used"
    assert row["temp_peak_c"] == 61.0 and row["temp_source"] == "dcgm"
    assert row["throttle_seen"] == "SwPowerCap"
    assert row["telemetry_source"] == "exporters" and row["telemetry_host"] == "titan" and row["gpus"] == "0;1"
    assert row["clock_uncertainty_s"] > 0
    samples = read_telemetry(tmp_path / "run" / "telemetry.csv")
    assert set(samples["host"]) == {"titan"} and set(samples["gpu"].dropna()) == {0, 1}


def test_without_the_energy_field_power_is_integrated_and_labelled(tmp_path):
    with FakeDcgmExporter([DcgmGpu(power_w=250.0)], energy=False, old_names=True) as exporter:
        with RemoteTelemetry(dcgm_settings(exporter.url), tmp_path / "run") as tel:
            with tel.window("task") as handle:
                time.sleep(0.3)
    row = handle.row
    assert row["energy_source"] == "power_trapezoid"
    assert "integrated DCGM_FI_DEV_POWER_USAGE samples" in row["energy_reason"]
    assert row["avg_power_w"] == pytest.approx(250.0, rel=1e-6)
    assert row["throttle_seen"] == "SwPowerCap"  # the pre-3.3 field name


def test_a_repeated_dcgm_value_is_counted_stale(tmp_path):
    """DCGM refreshes every collect interval: an energy and power identical to the last scrape's are stale."""
    gpu = DcgmGpu(power_w=200.0)
    gpu.energy_mj = lambda: 1e9  # a counter that does not move between scrapes
    with FakeDcgmExporter([gpu]) as exporter:
        with RemoteTelemetry(dcgm_settings(exporter.url), tmp_path / "run") as tel:
            with tel.window("task") as handle:
                time.sleep(0.3)
    assert handle.row["stale_samples"] >= 2


def test_node_exporter_text_gives_cpu_memory_rapl_and_temperatures():
    text = """# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} 100
node_cpu_seconds_total{cpu="0",mode="user"} 30
node_cpu_seconds_total{cpu="0",mode="iowait"} 5
node_cpu_seconds_total{cpu="1",mode="system"} 10
node_cpu_seconds_total{cpu="1",mode="idle"} 50
# TYPE node_memory_MemAvailable_bytes gauge
node_memory_MemAvailable_bytes 1.5e+10
# TYPE node_rapl_package_joules_total counter
node_rapl_package_joules_total{index="0",path="/sys/class/powercap/intel-rapl:0"} 12.5
node_rapl_package_joules_total{index="1",path="/sys/class/powercap/intel-rapl:1"} 2.5
# TYPE node_rapl_dram_joules_total counter
node_rapl_dram_joules_total{index="0",path="/sys/class/powercap/intel-rapl:0:0"} 99
# TYPE node_hwmon_temp_celsius gauge
node_hwmon_temp_celsius{chip="platform_coretemp_0",sensor="temp1"} 48
# TYPE node_thermal_zone_temp gauge
node_thermal_zone_temp{type="x86_pkg_temp",zone="0"} 52
# TYPE node_uname_info gauge
node_uname_info{nodename="beast",release="6.1.0"} 1
"""
    node = node_values(parse_samples(text))
    assert node["cpu_busy_s"] == 40 and node["cpu_total_s"] == 195
    assert node["mem_avail"] == 1.5e10 and node["rapl_uj"] == 15e6 and node["soc_temp"] == 52
    assert node["host"] == "beast"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def node_exporter():
    """The real node_exporter on a free port, its collectors limited to what telemetry reads."""
    assert Path(NODE_EXPORTER).is_file(), (f"{NODE_EXPORTER} missing: `make test` installs Debian's "
                                           "prometheus-node-exporter (.venv/.node-exporter)")
    port = _free_port()
    proc = subprocess.Popen([NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
                             "--collector.cpu", "--collector.meminfo", "--collector.hwmon", "--collector.thermal_zone",
                             "--collector.rapl", "--collector.uname"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/metrics"
    for _ in range(100):
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def test_a_real_node_exporter_gives_cpu_memory_and_temperature_windows(node_exporter, tmp_path):
    text = httpx.get(node_exporter, timeout=5).text
    has_temps = "node_hwmon_temp_celsius{" in text or "node_thermal_zone_temp{" in text
    settings = TelemetryParams(source="exporters", node_url=node_exporter, **FAST)
    with RemoteTelemetry(settings, tmp_path / "run") as tel:
        with tel.window("task") as handle:
            time.sleep(1.2)
    row = handle.row
    assert row["telemetry_source"] == "exporters" and row["telemetry_host"] == socket.gethostname()
    assert 0 <= row["cpu_util_avg"] <= 100
    assert row["mem_available_drop_bytes"] is not None and row["mem_available_drop_bytes"] >= 0
    samples = read_telemetry(tmp_path / "run" / "telemetry.csv")
    assert samples["mem_available_bytes"].notna().sum() >= 2 and samples["cpu_percent"].notna().any()
    if has_temps:  # a host with hwmon or thermal zones
        assert row["temp_source"] == "node_exporter_temp_max" and row["temp_peak_c"] is not None
        assert samples["soc_temp_c"].notna().any()
    else:  # this VM exposes neither: the reason, never a number
        assert row["temp_peak_c"] is None
        assert "no node_hwmon_temp_celsius or node_thermal_zone_temp" in row["unavailable"]
    if "node_rapl_package_joules_total{" not in text:
        assert row["energy_j"] is None and "node_rapl_package_joules_total" in row["energy_reason"]
