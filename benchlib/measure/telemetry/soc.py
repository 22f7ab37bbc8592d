"""SoC and board sensors for hosts that NVML does not see: Apple Silicon (powermetrics) and Linux SoCs such as
NVIDIA Jetson (hwmon power rails), plus the kernel's thermal zones on any Linux host.

- Powermetrics: macOS's `powermetrics --samplers cpu_power,gpu_power,ane_power,thermal -f plist` (needs root:
  run as root or allow `sudo -n` for it; without, the reason is recorded). Each sample is one plist, samples
  are separated by a NUL byte; `elapsed_ns` is the sample's interval, `processor.{cpu,gpu,ane,combined}_power`
  are the interval's average power in mW (macOS 13+), `thermal_pressure` is a level name ("Nominal", ...).
  Energy is exact per interval (power × elapsed); the counter lags the clock by at most one interval.
- Hwmon: the kernel's hwmon sysfs interface (Documentation/hwmon/sysfs-interface): `powerN_input` in µW, or,
  for INA3221 rail monitors (Jetson), bus voltage `inN_input` (mV) × current `currN_input` (mA) with the rail
  name in `inN_label`. The rails summed are those named in telemetry.hwmon_rails, else a known whole-board
  input rail (Jetson's VDD_IN, or POM_5V_IN on older boards) — never all rails, which nest (VDD_IN includes
  VDD_CPU_GPU_CV and VDD_SOC). Energy integrates the sampled power (trapezoid), so it is as good as the rate.
  jetson-stats is not used: it reads the same files through a root daemon (jtop.service) it must install.
- ThermalZones: /sys/class/thermal/thermal_zoneN/{type,temp} (m°C); the hottest zone is the host's temperature.

Every class has `status` (a sensor-status record) and `read()`; none raises for a missing sensor."""

from __future__ import annotations

import os
import platform
import plistlib
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from benchlib.measure.telemetry.common import NAN, read_sysfs, sensor_status

POWERMETRICS_SAMPLERS = "cpu_power,gpu_power,ane_power,thermal"


KNOWN_BOARD_RAILS = ("VDD_IN", "POM_5V_IN")  # Jetson Orin/Xavier (JetPack 5+) and TX2/Nano-era input rails


THERMAL_PRESSURE_LEVELS = ("Nominal", "Light", "Moderate", "Heavy", "Trapping", "Critical", "Sleeping")


def parse_powermetrics_sample(data: bytes) -> dict[str, Any]:
    """One powermetrics plist sample → {elapsed_ns, power_mw, parts_mw, thermal_pressure}; ValueError if the
    sample carries no processor power (powermetrics before macOS 13 reports none in this form)."""
    sample = plistlib.loads(data.strip(b"\x00\n\r\t "))
    processor = sample.get("processor") or {}
    parts = {k: float(processor[f"{k}_power"]) for k in ("cpu", "gpu", "ane") if f"{k}_power" in processor}
    if "combined_power" in processor:
        power = float(processor["combined_power"])
    elif parts:
        power = sum(parts.values())
    else:
        raise ValueError("powermetrics sample has no processor.combined_power or cpu/gpu/ane_power "
                         "(macOS 13 or later reports them)")
    return {"elapsed_ns": int(sample.get("elapsed_ns") or 0), "power_mw": power, "parts_mw": parts,
            "thermal_pressure": str(sample.get("thermal_pressure") or "")}


def powermetrics_command(interval_ms: int, root: bool | None = None) -> list[str]:
    """The command line: sudo -n unless this process is root (a password prompt would hang the sampler)."""
    root = os.geteuid() == 0 if root is None else root
    exe = shutil.which("powermetrics") or "/usr/bin/powermetrics"
    return ([] if root else ["sudo", "-n"]) + [exe, "--samplers", POWERMETRICS_SAMPLERS, "-f", "plist",
                                               "-b", "0", "-i", str(int(interval_ms))]


class Powermetrics:
    """Apple Silicon package power (CPU + GPU + ANE) and thermal pressure from a powermetrics process.

    `command` replaces the real command line (tests run a script printing recorded samples). The probe waits up
    to `probe_s` for the first sample; a process that exits first (no root, no sudo rule) leaves the sensor
    unavailable with its own message as the reason."""

    energy_source = "powermetrics"  # window labels: where the energy and the peak power come from
    power_source = "powermetrics_interval_avg"

    def __init__(self, interval_ms: int, command: Sequence[str] | None = None, system: str | None = None,
                 probe_s: float = 3.0):
        self.status = sensor_status(False, "", "")
        self.energy_uj = 0.0
        self.power_w = NAN
        self.pressure = ""
        self.samples = 0
        self.errors: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._first = threading.Event()
        if command is None:
            if (system or platform.system()) != "Darwin":
                self.status = sensor_status(False, "powermetrics exists on macOS only", "")
                return
            command = powermetrics_command(interval_ms)
        self.command = list(command)
        try:
            self._proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE)
        except OSError as exc:
            self.status = sensor_status(False, f"cannot start {self.command[0]}: {exc.strerror or exc}", "")
            return
        self._thread = threading.Thread(target=self._read_loop, name="powermetrics-reader", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + probe_s
        while not self._first.wait(0.05):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                break
        if self.samples:
            self.status = sensor_status(True, "", " ".join(self.command))
            return
        why = self._stderr_line() if self._proc.poll() is not None else f"no sample within {probe_s:g} s"
        if "superuser" in why or "password" in why or "sudo" in why:
            why += " — powermetrics needs root: run as root or allow passwordless sudo for it"
        self.status = sensor_status(False, f"powermetrics: {why or 'exited without a sample'}"
                                           + (f" ({self.errors[0]})" if self.errors else ""), "")
        self.close()

    def _stderr_line(self) -> str:
        assert self._proc is not None and self._proc.stderr is not None
        try:
            text = self._proc.stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""
        return text.splitlines()[0] if text else ""

    def _read_loop(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        buffer = b""
        stream = self._proc.stdout
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                break
            buffer += chunk
            *done, buffer = buffer.split(b"\x00")
            for data in done:
                if data.strip():
                    self._take(data)
        if buffer.strip():
            self._take(buffer)

    def _take(self, data: bytes) -> None:
        try:
            sample = parse_powermetrics_sample(data)
        except Exception as exc:  # a torn or unexpected sample: counted, never fatal
            if len(self.errors) < 5:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            return
        with self._lock:
            self.energy_uj += sample["power_mw"] * sample["elapsed_ns"] / 1e6  # mW × ns → µJ
            self.power_w = sample["power_mw"] / 1e3
            self.pressure = sample["thermal_pressure"]
            self.samples += 1
        self._first.set()

    def read(self) -> tuple[float, float]:
        """(cumulative µJ since start, the last interval's average W)."""
        if not self.status["available"]:
            return NAN, NAN
        with self._lock:
            return self.energy_uj, self.power_w

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Hwmon:
    """Board power from hwmon rails (W), integrated into a µJ counter between reads."""

    energy_source = "hwmon"
    power_source = "hwmon_instant"
    pressure = ""  # no thermal-pressure level on Linux

    def __init__(self, root: Path | str = "/sys/class/hwmon", rails: Sequence[str] | None = None):
        self.root = Path(root)
        self.status = sensor_status(False, "", "")
        self.rails: list[tuple[str, tuple[Path, ...]]] = []  # (chip/label, power files or (mV, mA) files)
        self.energy_uj = 0.0
        self._last: tuple[float, float] | None = None  # (monotonic s, W)
        found = self._discover()
        if not found:
            self.status = sensor_status(False, f"no hwmon power rails under {self.root}", "")
            return
        if rails:
            chosen = [(name, files) for name, files in found.items()
                      if name in rails or name.split("/", 1)[1] in rails]
            missing = [r for r in rails if not any(r in (n, n.split("/", 1)[1]) for n, _ in chosen)]
            if missing:
                self.status = sensor_status(False, f"hwmon rails {missing} not found (have: {sorted(found)})", "")
                return
        else:
            chosen = [(n, f) for n, f in found.items() if n.split("/", 1)[1] in KNOWN_BOARD_RAILS][:1]
            if not chosen:
                self.status = sensor_status(False, f"no known whole-board input rail ({', '.join(KNOWN_BOARD_RAILS)}) "
                                                   f"among hwmon rails {sorted(found)}; name the rails to sum in "
                                                   "telemetry.hwmon_rails", "")
                return
        self.rails = chosen
        self.scope = "+".join(name for name, _ in chosen)
        self.status = sensor_status(True, "", f"hwmon {self.scope} (" + ", ".join(
            "powerN_input µW" if len(files) == 1 else "inN_input mV × currN_input mA" for _, files in chosen) + ")")

    def _discover(self) -> dict[str, tuple[Path, ...]]:
        found: dict[str, tuple[Path, ...]] = {}
        if not self.root.is_dir():
            return found
        for chip_dir in sorted(self.root.iterdir()):
            chip = read_sysfs(chip_dir / "name") or chip_dir.name
            for path in sorted(chip_dir.glob("power*_input")):
                n = re.fullmatch(r"power(\d+)_input", path.name)
                if n:
                    label = read_sysfs(chip_dir / f"power{n[1]}_label") or f"power{n[1]}"
                    found[f"{chip}/{label}"] = (path,)
            for path in sorted(chip_dir.glob("in*_label")):
                n = re.fullmatch(r"in(\d+)_label", path.name)
                if not n:
                    continue
                volts, amps = chip_dir / f"in{n[1]}_input", chip_dir / f"curr{n[1]}_input"
                name = f"{chip}/{read_sysfs(path)}"
                if volts.is_file() and amps.is_file() and name not in found:  # INA3221: in7_label has no curr7
                    found[name] = (volts, amps)
        return found

    def power_w(self) -> float:
        total = 0.0
        for _, files in self.rails:
            if len(files) == 1:
                total += int(read_sysfs(files[0]) or "x") / 1e6  # µW
            else:
                total += int(read_sysfs(files[0]) or "x") * int(read_sysfs(files[1]) or "x") / 1e6  # mV × mA
        return total

    def read(self) -> tuple[float, float]:
        """(cumulative µJ since the first read, trapezoid between reads; the rails' summed W now)."""
        if not self.rails:
            return NAN, NAN
        now, watts = time.monotonic(), self.power_w()
        if self._last is not None:
            self.energy_uj += (watts + self._last[1]) / 2.0 * (now - self._last[0]) * 1e6
        self._last = (now, watts)
        return self.energy_uj, watts

    def close(self) -> None:
        return None


class ThermalZones:
    """The hottest of the kernel's thermal zones, in °C."""

    def __init__(self, root: Path | str = "/sys/class/thermal"):
        self.root = Path(root)
        self.zones: list[tuple[str, Path]] = []
        for zone in sorted(self.root.glob("thermal_zone*")) if self.root.is_dir() else []:
            if (zone / "temp").is_file() and read_sysfs(zone / "temp").lstrip("-").isdigit():
                self.zones.append((read_sysfs(zone / "type") or zone.name, zone / "temp"))
        self.status = sensor_status(bool(self.zones), "" if self.zones else f"no readable thermal zones under "
                                    f"{self.root}", f"max of thermal zones {', '.join(t for t, _ in self.zones)}"
                                    if self.zones else "")

    def read(self) -> float:
        values = [int(v) / 1000.0 for _, path in self.zones if (v := read_sysfs(path)).lstrip("-").isdigit()]
        return max(values) if values else NAN


def soc_power_sensor(interval_ms: int, rails: Sequence[str] | None, *, system: str | None = None,
                     powermetrics: Sequence[str] | None = None, hwmon_root: Path | str = "/sys/class/hwmon"
                     ) -> Powermetrics | Hwmon:
    """powermetrics on macOS (or when a command is injected), hwmon rails elsewhere."""
    if powermetrics is not None or (system or platform.system()) == "Darwin":
        return Powermetrics(interval_ms, powermetrics, system)
    return Hwmon(hwmon_root, rails)


def pressure_level(name: str) -> float:
    """A thermal-pressure name as a number for the series (index in THERMAL_PRESSURE_LEVELS; NaN if unknown)."""
    return float(THERMAL_PRESSURE_LEVELS.index(name)) if name in THERMAL_PRESSURE_LEVELS else NAN

