"""Power, energy, memory and host telemetry that never crashes for lack of a sensor.

Why not "poll power every 5 s": a 5 s poll misses most of a short task, and NVML's plain power reading is a
1 s average on Ampere and newer. So energy comes from NVML's total-energy counter (mJ) where the GPU has one,
from RAPL on a CPU-only host, and only otherwise from a labelled trapezoid over instant-power samples.
Every sensor is probed once at start; what is missing is recorded with its reason (sensors.json) and the
matching window columns stay empty with that reason — never a fabricated number.

Files written in the run folder:
    telemetry.csv            the time series: one row per sample tick and selected GPU (one row per tick on a
                             host without GPUs); host columns repeat on each GPU row of a tick
    telemetry_windows.csv    one row per measured window, appended and fsynced as each closes (resume reads it)
    sensors.json             the probe result: sensor -> {available, reason, source}, devices, runtime errors

Rates: GPU power, energy and memory and RAPL at power_hz; temperature, SM clock, clock-event reasons, host CPU
(/proc/stat), MemAvailable and the server process tree's RSS/CPU at slow_hz (each /proc read costs ~0.1 ms).
Window edges are full ticks, so counters (energy, CPU time) are exact over every window.

All timestamps are time.perf_counter_ns() (CLOCK_MONOTONIC, the clock the runner stamps requests with) plus
wall time for humans.
"""

from __future__ import annotations

import atexit
import bisect
import contextlib
import csv
import json
import math
import os
import re
import threading
import time
import weakref
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence

import numpy as np
import pandas as pd
import psutil

from benchlib.params import TelemetryParams
from benchlib.records import write_atomic

WindowKind = Literal["idle", "loaded", "task"]
KINDS: tuple[str, ...] = ("idle", "loaded", "task")

TELEMETRY_CSV = "telemetry.csv"
WINDOWS_CSV = "telemetry_windows.csv"
SENSORS_JSON = "sensors.json"

TELEMETRY_COLUMNS = [
    "t_ns", "t_unix", "gpu",
    "power_w", "energy_mj", "mem_used_bytes", "gpu_proc_mem_bytes", "temp_c", "sm_clock_mhz", "throttle", "stale",
    "cpu_percent", "server_rss_bytes", "server_cpu_s", "rapl_energy_uj", "mem_available_bytes",
]

WINDOW_COLUMNS = [
    "window", "kind", "t_start_ns", "t_end_ns", "t_start_unix", "t_end_unix", "duration_s", "gpus",
    "energy_j", "energy_source", "energy_reason", "avg_power_w", "peak_power_w", "power_source",
    "idle_power_w", "net_energy_j", "counter_reset", "rapl_energy_j",
    "temp_avg_c", "temp_peak_c", "throttle_seen",
    "mem_baseline_bytes", "mem_peak_bytes", "mem_delta_bytes", "mem_source", "mem_available_drop_bytes",
    "cpu_util_avg", "server_rss_peak_bytes", "server_cpu_s",
    "n_samples", "stale_samples", "unavailable",
]

EFFICIENCY_COLUMNS = ["n_requests", "completion_tokens", "tokens_per_joule", "joules_per_token",
                      "decode_tps_mean", "tps_per_w", "efficiency_reason"]

POWER_INSTANT_SOURCE = "nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT)"
POWER_USAGE_SOURCE = "nvmlDeviceGetPowerUsage (1 s average on Ampere+)"
ENERGY_SOURCE = "nvmlDeviceGetTotalEnergyConsumption (mJ counter)"
MEMORY_SOURCES = {
    "v2": "nvmlDeviceGetMemoryInfo(version=nvmlMemory_v2)",
    "v1": "nvmlDeviceGetMemoryInfo (v1)",
    "process_sum": "sum of nvmlDeviceGetComputeRunningProcesses usedGpuMemory (unified memory)",
}
MEM_SOURCE_LABELS = {"v2": "nvml_memory_v2", "v1": "nvml_memory_v1", "process_sum": "nvml_process_sum"}

# Used when the pynvml module lacks the constants (old bindings, fakes): NVML's documented bit values.
_THROTTLE_BITS = {
    0x1: "GpuIdle", 0x2: "ApplicationsClocksSetting", 0x4: "SwPowerCap", 0x8: "HwSlowdown", 0x10: "SyncBoost",
    0x20: "SwThermalSlowdown", 0x40: "HwThermalSlowdown", 0x80: "HwPowerBrakeSlowdown",
    0x100: "DisplayClockSetting",
}
_NVML_VALUE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
_NAN = float("nan")


# ----------------------------------------------------------------------------------------------------------
# small helpers


def _sensor(available: bool, reason: str = "", source: str = "") -> dict[str, Any]:
    return {"available": bool(available), "reason": reason, "source": source}


def _isnum(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _fmt(value: Any) -> str:
    """CSV cell: empty for missing, integers without '.0', floats exactly (unix times, counters)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if value.is_integer() and abs(value) < 1e18:
            return str(int(value))
        return repr(value)  # shortest text that reads back to the same float
    return str(value)


def _nvml_reason(nvml: Any, exc: BaseException) -> str:
    """'Not Supported', 'Insufficient Permissions', … for NVML errors; type and text for anything else."""
    error_cls = getattr(nvml, "NVMLError", None)
    if error_cls is not None and isinstance(exc, error_cls):
        try:
            text = str(exc)
        except Exception:  # pynvml's __str__ calls into the library, which may itself be broken
            text = ""
        return text or f"NVML error {getattr(exc, 'value', '?')}"
    return f"{type(exc).__name__}: {exc}"


def _field_reason(nvml: Any, code: int) -> str:
    try:
        return str(nvml.NVMLError(code))
    except Exception:
        return f"NVML error {code}"


def _field_value(field_value: Any) -> float:
    member = _NVML_VALUE_FIELDS.get(int(getattr(field_value, "valueType", 1)), "uiVal")
    return float(getattr(field_value.value, member))


def _decode(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


# ----------------------------------------------------------------------------------------------------------
# GPU selection


def select_gpus(count: int, uuids: Sequence[str], gpu_indices: Sequence[int] | None = None,
                cuda_visible_devices: str | None = None, cuda_device_order: str | None = None
                ) -> tuple[list[int], str]:
    """NVML indices to watch and a sentence saying why.

    params.telemetry.gpu_indices wins; otherwise CUDA_VISIBLE_DEVICES is honoured the way CUDA reads it:
    integers or (prefixes of) GPU UUIDs, and the list ends at the first entry that names no device.
    """
    if gpu_indices is not None:
        chosen = [i for i in dict.fromkeys(gpu_indices) if 0 <= i < count]
        dropped = [i for i in gpu_indices if not 0 <= i < count]
        note = f"gpu_indices={list(gpu_indices)} from params"
        if dropped:
            note += f" (ignored {dropped}: only {count} GPU(s))"
        return chosen, note
    if cuda_visible_devices is None:
        return list(range(count)), f"all {count} GPU(s) (CUDA_VISIBLE_DEVICES unset)"
    chosen: list[int] = []
    stop_note = ""
    for token in (t.strip() for t in cuda_visible_devices.split(",")):
        if not token:
            stop_note = "empty entry"
            break
        index: int | None = None
        if re.fullmatch(r"-?\d+", token):
            value = int(token)
            index = value if 0 <= value < count else None
        elif token.startswith("GPU-"):
            matches = [i for i, uuid in enumerate(uuids) if uuid.startswith(token)]
            index = matches[0] if len(matches) == 1 else None
        elif token.startswith("MIG-"):
            stop_note = f"{token}: MIG instances are not measured (energy is per physical GPU)"
            break
        if index is None:
            stop_note = stop_note or f"{token!r} names no device"
            break
        if index not in chosen:
            chosen.append(index)
    note = f"CUDA_VISIBLE_DEVICES={cuda_visible_devices!r}"
    if stop_note:
        note += f" (list ends at {stop_note}, as in CUDA)"
    if any(t.strip().isdigit() for t in cuda_visible_devices.split(",")) and count > 1 \
            and cuda_device_order != "PCI_BUS_ID":
        # NVML numbers GPUs by PCI bus; CUDA does too only with CUDA_DEVICE_ORDER=PCI_BUS_ID.
        note += "; integer entries read as NVML (PCI bus) indices — set CUDA_DEVICE_ORDER=PCI_BUS_ID to match CUDA"
    return chosen, note


# ----------------------------------------------------------------------------------------------------------
# NVML


@dataclass
class _Gpu:
    slot: int
    index: int
    handle: Any
    uuid: str = ""
    name: str = ""
    energy: bool = False
    power: str = ""  # "instant" | "usage" | ""
    memory: str = ""  # "v2" | "v1" | "process_sum" | ""
    temp: bool = False
    clock: bool = False
    throttle_fn: Callable[[Any], int] | None = None
    power_limit_w: float | None = None
    sensors: dict[str, dict[str, Any]] = field(default_factory=dict)
    # last readings, for stale detection
    last_power_ts: int | None = None
    last_power: float = _NAN
    last_energy: float = _NAN


class _Nvml:
    """The pynvml module (or a test fake) plus the probed devices; every read returns NaN instead of raising."""

    def __init__(self, module: Any | None, gpu_indices: Sequence[int] | None, environ: Mapping[str, str],
                 stale_age_s: float):
        self.nvml = module
        self.gpus: list[_Gpu] = []
        self.ok = False
        self.reason = ""
        self.driver_version = ""
        self.cuda_driver_version = ""
        self.selection = ""
        self.stale_age_us = int(stale_age_s * 1e6)
        self.errors: dict[str, str] = {}  # first runtime error per sensor
        self.error_counts: dict[str, int] = {}
        self.throttle_names = self._throttle_names()
        self._initialised = False
        if module is None:
            try:
                import pynvml  # lazily: the project must import on hosts without the NVIDIA driver

                self.nvml = pynvml
            except Exception as exc:
                self.reason = f"pynvml not importable ({type(exc).__name__}: {exc})"
                return
            self.throttle_names = self._throttle_names()
        try:
            self.nvml.nvmlInit()
            self._initialised = True
        except Exception as exc:
            self.reason = f"nvmlInit failed: {_nvml_reason(self.nvml, exc)}"
            return
        self.ok = True
        self.driver_version = self._text(lambda: _decode(self.nvml.nvmlSystemGetDriverVersion()))
        cuda = self._text(lambda: self.nvml.nvmlSystemGetCudaDriverVersion())
        if cuda.isdigit():
            cuda = f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}"
        self.cuda_driver_version = cuda
        try:
            count = int(self.nvml.nvmlDeviceGetCount())
        except Exception as exc:
            self.reason = f"nvmlDeviceGetCount failed: {_nvml_reason(self.nvml, exc)}"
            return
        handles, uuids = [], []
        for index in range(count):
            try:
                handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
            except Exception as exc:
                handle = None
                self.errors[f"gpu{index}.handle"] = _nvml_reason(self.nvml, exc)
            handles.append(handle)
            uuids.append(self._text(lambda h=handle: _decode(self.nvml.nvmlDeviceGetUUID(h)))
                         if handle is not None else "")
        chosen, self.selection = select_gpus(count, uuids, gpu_indices, environ.get("CUDA_VISIBLE_DEVICES"),
                                             environ.get("CUDA_DEVICE_ORDER"))
        for index in chosen:
            if handles[index] is None:
                continue
            gpu = _Gpu(slot=len(self.gpus), index=index, handle=handles[index], uuid=uuids[index])
            self._probe(gpu)
            self.gpus.append(gpu)
        if not self.gpus:
            self.reason = f"no GPU selected: {self.selection}" if count else "NVML reports 0 GPUs"

    # -- probing -------------------------------------------------------------------------------------------
    def _text(self, fn: Callable[[], Any]) -> str:
        try:
            return str(fn())
        except Exception:
            return ""

    def _try(self, fn: Callable[[], Any]) -> tuple[Any, str]:
        try:
            return fn(), ""
        except Exception as exc:
            return None, _nvml_reason(self.nvml, exc)

    def _throttle_names(self) -> dict[int, str]:
        names: dict[int, str] = {}
        for prefix in ("nvmlClocksEventReason", "nvmlClocksThrottleReason"):
            for attr in dir(self.nvml) if self.nvml is not None else ():
                if not attr.startswith(prefix):
                    continue
                label = attr[len(prefix):]
                value = getattr(self.nvml, attr)
                # skip masks (All, None) and deprecated aliases of the same bit
                if label in ("All", "None", "UserDefinedClocks") or not isinstance(value, int) or value <= 0 \
                        or value & (value - 1):
                    continue
                names.setdefault(value, label)
        return names or dict(_THROTTLE_BITS)

    def _probe(self, gpu: _Gpu) -> None:
        nvml, h, s = self.nvml, gpu.handle, gpu.sensors
        name, why = self._try(lambda: _decode(nvml.nvmlDeviceGetName(h)))
        gpu.name = name or ""
        s["gpu_name"] = _sensor(bool(name), why, "nvmlDeviceGetName")
        s["uuid"] = _sensor(bool(gpu.uuid), "" if gpu.uuid else "nvmlDeviceGetUUID failed", "nvmlDeviceGetUUID")

        value, why = self._try(lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(h))
        gpu.energy = value is not None
        s["energy_counter"] = _sensor(gpu.energy, why, ENERGY_SOURCE)

        instant_why = self._probe_instant_power(gpu)
        if instant_why is None:
            gpu.power = "instant"
            s["power"] = _sensor(True, "", POWER_INSTANT_SOURCE)
        else:
            value, why = self._try(lambda: nvml.nvmlDeviceGetPowerUsage(h))
            if value is not None:
                gpu.power = "usage"
                s["power"] = _sensor(True, f"instant power unavailable ({instant_why}); fallback is a 1 s average",
                                     POWER_USAGE_SOURCE)
            else:
                s["power"] = _sensor(False, f"instant: {instant_why}; nvmlDeviceGetPowerUsage: {why}", "")

        s["memory"] = self._probe_memory(gpu)

        value, why = self._try(lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))
        gpu.temp = value is not None
        s["temperature"] = _sensor(gpu.temp, why, "nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)")
        value, why = self._try(lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))
        gpu.clock = value is not None
        s["sm_clock"] = _sensor(gpu.clock, why, "nvmlDeviceGetClockInfo(NVML_CLOCK_SM)")

        reasons = []
        for fn_name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            fn = getattr(nvml, fn_name, None)
            if fn is None:
                reasons.append(f"{fn_name}: not in this pynvml")
                continue
            value, why = self._try(lambda fn=fn: fn(h))
            if value is not None:
                gpu.throttle_fn = fn
                s["clock_event_reasons"] = _sensor(True, "", fn_name)
                break
            reasons.append(f"{fn_name}: {why}")
        else:
            s["clock_event_reasons"] = _sensor(False, "; ".join(reasons), "")

        for fn_name in ("nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"):
            fn = getattr(nvml, fn_name, None)
            value, why = self._try(lambda fn=fn: fn(h)) if fn else (None, "not in this pynvml")
            if value is not None:
                gpu.power_limit_w = float(value) / 1000.0
                s["power_limit"] = _sensor(True, "", fn_name)
                break
        else:
            s["power_limit"] = _sensor(False, why, "")

    def _probe_instant_power(self, gpu: _Gpu) -> str | None:
        """None when NVML_FI_DEV_POWER_INSTANT works, else why not."""
        field_id = getattr(self.nvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if field_id is None or not hasattr(self.nvml, "nvmlDeviceGetFieldValues"):
            return "NVML_FI_DEV_POWER_INSTANT not in this pynvml"
        values, why = self._try(lambda: self.nvml.nvmlDeviceGetFieldValues(gpu.handle, [field_id]))
        if values is None:
            return why
        code = int(getattr(values[0], "nvmlReturn", 0))
        return None if code == 0 else _field_reason(self.nvml, code)

    def _probe_memory(self, gpu: _Gpu) -> dict[str, Any]:
        nvml, h = self.nvml, gpu.handle
        tried = []
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is not None:
            value, why = self._try(lambda: nvml.nvmlDeviceGetMemoryInfo(h, version=version))
            if value is not None:
                gpu.memory = "v2"
                return _sensor(True, "", MEMORY_SOURCES["v2"])
            tried.append(f"v2: {why}")
        else:
            tried.append("v2: nvmlMemory_v2 not in this pynvml")
        value, why = self._try(lambda: nvml.nvmlDeviceGetMemoryInfo(h))
        if value is not None:
            gpu.memory = "v1"
            return _sensor(True, "; ".join(tried), MEMORY_SOURCES["v1"])
        tried.append(f"v1: {why}")
        # Unified memory (GB10) answers Not Supported above; per-process usage is what remains on the GPU side.
        value, why = self._try(lambda: nvml.nvmlDeviceGetComputeRunningProcesses(h))
        if value is not None:
            gpu.memory = "process_sum"
            return _sensor(True, "device memory info: " + "; ".join(tried), MEMORY_SOURCES["process_sum"])
        tried.append(f"process list: {why}")
        return _sensor(False, "; ".join(tried), "")

    # -- reading -------------------------------------------------------------------------------------------
    def note_error(self, key: str, reason: str) -> None:
        """Count a runtime failure and keep its first message (sensors.json reports both)."""
        self.error_counts[key] = self.error_counts.get(key, 0) + 1
        self.errors.setdefault(key, reason)

    def _fail(self, key: str, exc: BaseException) -> None:
        self.note_error(key, _nvml_reason(self.nvml, exc))

    def read_fast(self, gpu: _Gpu, now_unix: float) -> dict[str, float]:
        """Energy first (closest to the tick's timestamp), then power and memory; stale flag from both."""
        nvml, h = self.nvml, gpu.handle
        out = {"energy": _NAN, "power": _NAN, "mem": _NAN, "procmem": _NAN, "stale": _NAN}
        if gpu.energy:
            try:
                out["energy"] = float(nvml.nvmlDeviceGetTotalEnergyConsumption(h))
            except Exception as exc:
                self._fail(f"gpu{gpu.index}.energy_counter", exc)
        stale: bool | None = None
        if gpu.power == "instant":
            try:
                fv = nvml.nvmlDeviceGetFieldValues(h, [nvml.NVML_FI_DEV_POWER_INSTANT])[0]
                code = int(getattr(fv, "nvmlReturn", 0))
                if code == 0:
                    out["power"] = _field_value(fv) / 1000.0
                    ts = int(getattr(fv, "timestamp", 0) or 0)
                    if ts:
                        # a field whose timestamp did not move, or is old, is a repeat of an earlier reading
                        stale = ts == gpu.last_power_ts or (now_unix * 1e6 - ts) > self.stale_age_us
                        gpu.last_power_ts = ts
                else:  # per-field failures come back in the struct, not as an exception
                    self.note_error(f"gpu{gpu.index}.power", _field_reason(nvml, code))
            except Exception as exc:
                self._fail(f"gpu{gpu.index}.power", exc)
        elif gpu.power == "usage":
            try:
                out["power"] = float(nvml.nvmlDeviceGetPowerUsage(h)) / 1000.0
            except Exception as exc:
                self._fail(f"gpu{gpu.index}.power", exc)
        if stale is None and (_isnum(out["power"]) or _isnum(out["energy"])):
            # no sensor timestamp: a reading is stale when every value repeats the previous tick exactly
            same = [out[k] == last for k, last in (("power", gpu.last_power), ("energy", gpu.last_energy))
                    if _isnum(out[k])]
            stale = bool(same) and all(same)
        gpu.last_power, gpu.last_energy = out["power"], out["energy"]
        out["stale"] = _NAN if stale is None else float(stale)
        if gpu.memory in ("v2", "v1"):
            try:
                info = (nvml.nvmlDeviceGetMemoryInfo(h, version=nvml.nvmlMemory_v2) if gpu.memory == "v2"
                        else nvml.nvmlDeviceGetMemoryInfo(h))
                out["mem"] = float(info.used)
            except Exception as exc:
                self._fail(f"gpu{gpu.index}.memory", exc)
        elif gpu.memory == "process_sum":
            try:
                used = [p.usedGpuMemory for p in nvml.nvmlDeviceGetComputeRunningProcesses(h)]
                # containers/WDDM report None per process: then no number, rather than an undercount
                out["procmem"] = _NAN if any(u is None for u in used) else float(sum(used))
            except Exception as exc:
                self._fail(f"gpu{gpu.index}.memory", exc)
        return out

    def read_slow(self, gpu: _Gpu) -> dict[str, float]:
        nvml, h = self.nvml, gpu.handle
        out = {"temp": _NAN, "clock": _NAN, "throttle": _NAN}
        if gpu.temp:
            try:
                out["temp"] = float(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))
            except Exception as exc:
                self._fail(f"gpu{gpu.index}.temperature", exc)
        if gpu.clock:
            try:
                out["clock"] = float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))
            except Exception as exc:
                self._fail(f"gpu{gpu.index}.sm_clock", exc)
        if gpu.throttle_fn is not None:
            try:
                out["throttle"] = float(gpu.throttle_fn(h))
            except Exception as exc:
                self._fail(f"gpu{gpu.index}.clock_event_reasons", exc)
        return out

    def decode_throttle(self, mask: int) -> list[str]:
        names = [label for bit, label in sorted(self.throttle_names.items()) if mask & bit]
        rest = mask & ~sum(self.throttle_names)
        return names + ([f"0x{rest:x}"] if rest else [])

    def shutdown(self) -> None:
        if self._initialised:
            self._initialised = False
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()


# ----------------------------------------------------------------------------------------------------------
# host sensors


class _Rapl:
    """Package energy from /sys/class/powercap/intel-rapl:N (AMD Zen uses the same names), unwrapped."""

    def __init__(self, root: Path):
        self.domains: list[tuple[Path, float]] = []  # (energy_uj path, max_energy_range_uj)
        self.last: list[float] = []
        self.total = 0.0
        self.status = _sensor(False, "", "")
        if not root.is_dir():
            self.status = _sensor(False, f"{root} does not exist: no powercap driver", "")
            return
        found = sorted(p for p in root.iterdir() if re.fullmatch(r"intel-rapl:\d+", p.name))
        # Top-level domains only (sub-domains are parts of their package); psys overlaps the packages.
        named = [(p, _read_text(p / "name") or p.name) for p in found]
        packages = [p for p, name in named if name != "psys"] or [p for p, _ in named]
        if not packages:
            self.status = _sensor(False, f"no intel-rapl:N domains under {root}", "")
            return
        problems = []
        for path in packages:
            try:
                int((path / "energy_uj").read_text())
                max_range = float(int((path / "max_energy_range_uj").read_text()))
                self.domains.append((path / "energy_uj", max_range))
            except (OSError, ValueError) as exc:
                why = "permission denied (root-only on Linux >= 5.10)" if isinstance(exc, PermissionError) \
                    else f"{type(exc).__name__}: {exc}"
                problems.append(f"{path.name}: {why}")
        if problems:  # a partial package sum would under-report; all or nothing
            self.domains = []
            self.status = _sensor(False, "; ".join(problems), "")
            return
        self.status = _sensor(True, "", "+".join(f"{p.parent.name}/energy_uj" for p, _ in self.domains))

    def read(self) -> float:
        """Cumulative µJ since the first read, wrap-around undone with max_energy_range_uj."""
        if not self.domains:
            return _NAN
        values = []
        for path, _ in self.domains:
            with open(path, "rb") as handle:
                values.append(float(int(handle.read())))
        if not self.last:
            self.last = values
            self.total = 0.0
            return self.total
        for i, (value, (_, max_range)) in enumerate(zip(values, self.domains)):
            delta = value - self.last[i]
            if delta < 0:
                delta += max_range
            self.total += delta
        self.last = values
        return self.total


class _ProcessTree:
    """RSS and CPU time of the server process and its descendants."""

    # Listing descendants scans every pid on the host (~1-10 ms): do it each second while a server is starting
    # its workers, then every few seconds; RSS and CPU of the known processes are read on every slow tick.
    EARLY_S, EARLY_EVERY_S, LATE_EVERY_S = 30.0, 1.0, 5.0

    def __init__(self, pid: int):
        self.pid = pid
        self.root = psutil.Process(pid)
        self.procs: list[psutil.Process] = [self.root]
        self.since = time.monotonic()
        self.refreshed = -math.inf
        self.refresh()

    def refresh(self) -> None:
        self.refreshed = time.monotonic()
        try:
            self.procs = [self.root] + self.root.children(recursive=True)
        except psutil.Error:
            self.procs = [self.root]

    def maybe_refresh(self) -> None:
        now = time.monotonic()
        every = self.EARLY_EVERY_S if now - self.since < self.EARLY_S else self.LATE_EVERY_S
        if now - self.refreshed >= every:
            self.refresh()

    def read(self) -> tuple[float, float]:
        """(rss bytes, cpu seconds); RSS sums shared pages per process (an upper bound); NaN once the root exits."""
        rss = cpu = 0.0
        for proc in self.procs:
            try:
                times = proc.cpu_times()
                rss += proc.memory_info().rss
            except psutil.Error:
                if proc is self.root:
                    return _NAN, _NAN
                continue
            # children_* hold only reaped descendants, which are no longer in the tree: no double count
            cpu += times.user + times.system + times.children_user + times.children_system
        return float(rss), cpu


def _read_text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _read_mem_available(path: Path) -> float:
    """MemAvailable in bytes (hand-parsed so tests can point at a fake /proc/meminfo)."""
    with open(path, "rb") as handle:
        for line in handle:
            if line.startswith(b"MemAvailable:"):
                return float(int(line.split()[1]) * 1024)
    return _NAN


def _host_cpu_times() -> tuple[float, float]:
    """(busy, total) seconds over all cores; guest time is already inside user time.

    Both are sums of non-decreasing fields (float addition is monotonic), so neither ever steps backwards —
    total minus idle would, by rounding.
    """
    times = psutil.cpu_times()
    busy = sum(getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal"))
    return busy, busy + times.idle + getattr(times, "iowait", 0.0)


# ----------------------------------------------------------------------------------------------------------
# in-memory series


class _Series:
    """Columnar samples (8 bytes per value) so hours at 10 Hz stay small; NaN marks a missing reading."""

    def __init__(self, names: Sequence[str]):
        self.t_ns = array("q")
        self.t_unix = array("d")
        self.cols = {name: array("d") for name in names}
        self.lock = threading.Lock()

    def append(self, t_ns: int, t_unix: float, values: Mapping[str, float]) -> None:
        with self.lock:
            self.t_ns.append(t_ns)
            self.t_unix.append(t_unix)
            for name, column in self.cols.items():
                column.append(values.get(name, _NAN))

    def span(self, t0: int, t1: int, margin_ns: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Samples in [t0 - margin, t1 + margin] plus one more each side (interpolation, values held at t0)."""
        with self.lock:
            lo = max(bisect.bisect_left(self.t_ns, t0 - margin_ns) - 1, 0)
            hi = min(bisect.bisect_right(self.t_ns, t1 + margin_ns) + 1, len(self.t_ns))
            t = np.array(self.t_ns[lo:hi], dtype=np.int64)
            cols = {name: np.array(col[lo:hi], dtype=float) for name, col in self.cols.items()}
        return t, cols


def _valid(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mask = ~np.isnan(v)
    return t[mask], v[mask]


def _counter_delta(t: np.ndarray, v: np.ndarray, t0: int, t1: int) -> tuple[float | None, bool, str]:
    """Counter increase over [t0, t1], interpolated at the edges: (delta, went_backwards, why-not)."""
    t, v = _valid(t, v)
    if not len(t) or t[0] > t0 or t[-1] < t1:
        return None, False, "samples do not cover the window"
    lo = int(np.searchsorted(t, t0, side="right")) - 1
    hi = int(np.searchsorted(t, t1, side="left"))
    if np.any(np.diff(v[lo:hi + 1]) < 0):
        return None, True, "counter went backwards (reset) inside the window"
    tf = (t - t[0]).astype(float)  # relative times keep float interpolation exact to the ns
    v0, v1 = np.interp([t0 - t[0], t1 - t[0]], tf, v)
    return float(v1 - v0), False, ""


def _increase(t: np.ndarray, v: np.ndarray, t0: int, t1: int) -> float | None:
    """Sum of positive steps over [t0, t1]: CPU time of a process tree drops when a child exits unreaped."""
    t, v = _valid(t, v)
    if not len(t) or t[0] > t0 or t[-1] < t1:
        return None
    tf = (t - t[0]).astype(float)
    v0, v1 = np.interp([t0 - t[0], t1 - t[0]], tf, v)
    inside = v[(t > t0) & (t < t1)]
    seq = np.concatenate([[v0], inside, [v1]])
    return float(np.clip(np.diff(seq), 0, None).sum())


def _trapezoid(t: np.ndarray, p: np.ndarray, t0: int, t1: int) -> float | None:
    """∫ power dt in joules over [t0, t1], linear between samples (numpy<2 lacks np.trapezoid)."""
    t, p = _valid(t, p)
    if len(t) < 2 or t[0] > t0 or t[-1] < t1:
        return None
    tf = (t - t[0]).astype(float) / 1e9
    e0, e1 = (t0 - t[0]) / 1e9, (t1 - t[0]) / 1e9
    p0, p1 = np.interp([e0, e1], tf, p)
    inside = (tf > e0) & (tf < e1)
    ts = np.concatenate([[e0], tf[inside], [e1]])
    ps = np.concatenate([[p0], p[inside], [p1]])
    return float(np.sum((ps[1:] + ps[:-1]) / 2.0 * np.diff(ts)))


def _held(t: np.ndarray, v: np.ndarray, t0: int, t1: int) -> np.ndarray:
    """The value in force at t0 (last sample at or before it) followed by the samples inside (t0, t1]."""
    t, v = _valid(t, v)
    before = v[t <= t0]
    inside = v[(t > t0) & (t <= t1)]
    return np.concatenate([before[-1:], inside])


# ----------------------------------------------------------------------------------------------------------
# the public object


@dataclass
class WindowHandle:
    """What `Telemetry.window()` yields; `row` is filled when the block exits."""

    name: str
    kind: str
    t_start_ns: int
    row: dict[str, Any] | None = None


class Telemetry:
    """Background sampler plus named windows.

    `Telemetry(settings, out_dir, server_pid=None, nvml=None)` probes sensors at once; `start()` launches the
    sampler (window/baseline/measure start it too). `nvml` injects a pynvml-like module (tests); the
    powercap root, meminfo path and environment are injectable for the same reason.
    settings.enabled=False gives an object with the same API that samples nothing and whose windows carry
    only their times and the reason "telemetry disabled".
    """

    def __init__(self, settings: TelemetryParams, out_dir: Path | str, server_pid: int | None = None,
                 nvml: Any = None, *, powercap_root: Path | str = "/sys/class/powercap",
                 meminfo_path: Path | str = "/proc/meminfo", environ: Mapping[str, str] | None = None):
        self.settings = settings
        self.out_dir = Path(out_dir)
        self.enabled = settings.enabled
        self._closed = False
        self._started = False
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._tick_lock = threading.Lock()  # one tick at a time (sampler thread vs window edges)
        self._rows: list[str] = []
        self._csv_handle: Any = None
        self._last_flush = time.perf_counter()
        self._sampler_cpu_s = 0.0
        self._sampler_wall_s = 0.0
        self._ticks = 0
        self._windows: list[dict[str, Any]] = []
        self._tree: _ProcessTree | None = None
        self._server_status = _sensor(False, "no server pid given", "")
        self._cpu_last: tuple[float, float] | None = None
        self.meminfo_path = Path(meminfo_path)
        self.sensors: dict[str, dict[str, Any]] = {}
        if not self.enabled:
            self.sensors = {"telemetry": _sensor(False, "telemetry disabled", "params.telemetry.enabled")}
            self._nvml = None
            self._rapl = None
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._nvml = _Nvml(nvml, settings.gpu_indices, os.environ if environ is None else environ,
                           stale_age_s=max(1.0, 2.0 / settings.power_hz))
        self._rapl = _Rapl(Path(powercap_root))
        self._meminfo_status = self._probe_meminfo()
        self._cpu_status = self._probe_cpu()
        if server_pid is not None:
            self.set_server_pid(server_pid)
        self._gpus = self._nvml.gpus
        names = ["cpu_busy_s", "cpu_total_s", "cpu_percent", "server_rss", "server_cpu", "rapl_uj", "mem_avail"]
        for gpu in self._gpus:
            names += [f"{key}@{gpu.slot}" for key in
                      ("power", "energy", "mem", "procmem", "stale", "temp", "clock", "throttle")]
        self._series = _Series(names)
        self.sensors = self._aggregate_sensors()
        self._windows = self._load_previous_windows()
        # a notebook kernel may exit without close(): flush what is buffered (weakly, so tests don't pin objects)
        atexit.register(_close_if_alive, weakref.ref(self))

    # -- probing -------------------------------------------------------------------------------------------
    def _probe_meminfo(self) -> dict[str, Any]:
        try:
            value = _read_mem_available(self.meminfo_path)
        except OSError as exc:
            return _sensor(False, f"{self.meminfo_path}: {exc.strerror or exc}", "")
        if math.isnan(value):
            return _sensor(False, f"{self.meminfo_path} has no MemAvailable line", "")
        return _sensor(True, "", f"{self.meminfo_path} MemAvailable")

    @staticmethod
    def _probe_cpu() -> dict[str, Any]:
        try:
            _host_cpu_times()
        except Exception as exc:
            return _sensor(False, f"psutil.cpu_times failed: {exc}", "")
        return _sensor(True, "", "psutil.cpu_times (busy share of all cores)")

    def set_server_pid(self, pid: int | None) -> None:
        """Watch this process and its descendants (the runner learns the pid after the idle baseline)."""
        if not self.enabled:
            return
        if pid is None:
            self._tree, self._server_status = None, _sensor(False, "no server pid given", "")
        else:
            try:
                self._tree = _ProcessTree(int(pid))
                self._server_status = _sensor(True, "", f"psutil process tree of pid {pid} (RSS sum, CPU time)")
            except psutil.Error as exc:
                self._tree = None
                self._server_status = _sensor(False, f"pid {pid}: {type(exc).__name__}", "")
        if self.sensors:
            self.sensors["server_process"] = self._server_status

    def _aggregate_sensors(self) -> dict[str, dict[str, Any]]:
        """One entry per sensor: available only if every selected GPU has it; reasons name the GPU."""
        nvml = self._nvml
        out: dict[str, dict[str, Any]] = {
            "nvml": _sensor(nvml.ok, "" if nvml.ok else nvml.reason, "pynvml" if nvml.ok else ""),
            "driver_version": _sensor(bool(nvml.driver_version), "" if nvml.driver_version else
                                      (nvml.reason or "nvmlSystemGetDriverVersion failed"),
                                      "nvmlSystemGetDriverVersion"),
            "cuda_driver_version": _sensor(bool(nvml.cuda_driver_version), "" if nvml.cuda_driver_version else
                                           (nvml.reason or "nvmlSystemGetCudaDriverVersion failed"),
                                           "nvmlSystemGetCudaDriverVersion"),
        }
        keys = ("gpu_name", "uuid", "energy_counter", "power", "memory", "temperature", "sm_clock",
                "clock_event_reasons", "power_limit")
        for key in keys:
            if not self._gpus:
                out[key] = _sensor(False, nvml.reason or "no GPU", "")
                continue
            entries = [(g.index, g.sensors[key]) for g in self._gpus]
            sources = sorted({e["source"] for _, e in entries if e["source"]})
            reasons = [f"gpu{i}: {e['reason']}" for i, e in entries if e["reason"]]
            out[key] = _sensor(all(e["available"] for _, e in entries), "; ".join(reasons), " | ".join(sources))
        out["host_cpu"] = self._cpu_status
        out["server_process"] = self._server_status
        out["rapl"] = self._rapl.status
        out["meminfo"] = self._meminfo_status
        return out

    def describe(self) -> dict[str, Any]:
        """The sensors.json payload."""
        if not self.enabled:
            return {"enabled": False, "sensors": self.sensors}
        nvml = self._nvml
        return {
            "enabled": True,
            "power_hz": self.settings.power_hz,
            "slow_hz": self.settings.slow_hz,
            "sensors": self.sensors,
            "gpu_selection": nvml.selection,
            "driver_version": nvml.driver_version,
            "cuda_driver_version": nvml.cuda_driver_version,
            "devices": [{"index": g.index, "uuid": g.uuid, "name": g.name, "power_limit_w": g.power_limit_w,
                         "sensors": g.sensors} for g in self._gpus],
            "runtime_errors": {k: {"first": v, "count": nvml.error_counts.get(k, 0)} for k, v in nvml.errors.items()},
            "sampler": self.overhead(),
        }

    def write_sensors_json(self, path: Path | str | None = None) -> Path:
        target = Path(path) if path else self.out_dir / SENSORS_JSON
        write_atomic(target, json.dumps(self.describe(), indent=2, default=str))
        return target

    @property
    def gpus(self) -> list[dict[str, Any]]:
        return [{"index": g.index, "uuid": g.uuid, "name": g.name} for g in self._gpus] if self.enabled else []

    # -- sampler -------------------------------------------------------------------------------------------
    def start(self) -> "Telemetry":
        """Start the sampler thread (idempotent) and write sensors.json."""
        if not self.enabled or self._started or self._closed:
            return self
        self._started = True
        self._open_csv()
        self.write_sensors_json()
        self._thread = threading.Thread(target=self._run, name="telemetry-sampler", daemon=True)
        self._thread.start()
        return self

    def _open_csv(self) -> None:
        path = self.out_dir / TELEMETRY_CSV
        header = ",".join(TELEMETRY_COLUMNS)
        if path.is_file() and path.stat().st_size:
            with path.open(encoding="utf-8") as handle:
                if handle.readline().strip() != header:  # an older layout: keep it aside rather than mix columns
                    path.rename(path.with_name(f"telemetry.{int(time.time())}.csv"))
        fresh = not path.is_file() or path.stat().st_size == 0
        self._csv_handle = path.open("a", encoding="utf-8", newline="")
        if fresh:
            self._csv_handle.write(header + "\n")
            self._csv_handle.flush()

    def _run(self) -> None:
        period = 1.0 / self.settings.power_hz
        slow_every = max(1, round(self.settings.power_hz / self.settings.slow_hz))
        if not self._gpus and not self._rapl.status["available"]:
            period, slow_every = 1.0 / self.settings.slow_hz, 1  # nothing to read fast: don't write empty rows
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        next_at = wall0
        k = 0
        while not self._stop.is_set():
            try:
                self._tick(slow=k % slow_every == 0)
                if time.perf_counter() - self._last_flush >= 1.0:
                    self._flush()
            except Exception as exc:  # the sampler must outlive any sensor or disk hiccup
                self._record_error("sampler", exc)
            k += 1
            self._sampler_cpu_s = time.thread_time() - cpu0
            self._sampler_wall_s = time.perf_counter() - wall0
            next_at += period
            now = time.perf_counter()
            if next_at < now:  # overran (suspended, overloaded host): skip missed ticks rather than burst
                next_at = now
            # time.sleep costs less CPU per wake-up than Event.wait with a timeout (measured ~40 vs ~100 µs
            # on a VM); 0.1 s slices keep close() prompt at any rate
            while not self._stop.is_set() and (remaining := next_at - time.perf_counter()) > 0:
                time.sleep(min(remaining, 0.1))

    def _tick(self, slow: bool) -> int:
        """Read every available sensor once, store it and queue its CSV rows; returns the tick's t_ns."""
        with self._tick_lock:
            t_ns = time.perf_counter_ns()
            t_unix = time.time()
            values: dict[str, float] = {}
            gpu_rows = []
            for gpu in self._gpus:
                fast = self._nvml.read_fast(gpu, t_unix)
                slow_values = self._nvml.read_slow(gpu) if slow else {"temp": _NAN, "clock": _NAN, "throttle": _NAN}
                merged = {**fast, **slow_values}
                for key, value in merged.items():
                    values[f"{key}@{gpu.slot}"] = value
                gpu_rows.append((gpu.index, merged))
            values["rapl_uj"] = self._safe("rapl", self._rapl.read)
            if slow:
                # Each /proc file costs ~0.1 ms to open and generate (per process for the server tree): host
                # readings go at the slow rate. Window edges are full ticks and CPU figures are counters, so
                # window values stay exact; only RSS/MemAvailable peaks are sampled at slow_hz.
                self._read_host(values)
            self._series.append(t_ns, t_unix, values)
            self._ticks += 1
            host = [values.get("cpu_percent", _NAN), values.get("server_rss", _NAN), values.get("server_cpu", _NAN),
                    values["rapl_uj"], values.get("mem_avail", _NAN)]
            head = f"{t_ns},{t_unix:.6f}"
            tail = ",".join(_fmt(v) for v in host)
            if not gpu_rows:
                self._rows.append(f"{head},,,,,,,,,,{tail}\n")
            for index, m in gpu_rows:
                throttle = _fmt(m["throttle"])
                stale = "" if math.isnan(m["stale"]) else ("true" if m["stale"] else "false")
                gpu_cells = ",".join(_fmt(m[k]) for k in ("power", "energy", "mem", "procmem", "temp", "clock"))
                self._rows.append(f"{head},{index},{gpu_cells},{throttle},{stale},{tail}\n")
            return t_ns

    def _read_host(self, values: dict[str, float]) -> None:
        try:
            busy, total = _host_cpu_times()
            values["cpu_busy_s"], values["cpu_total_s"] = busy, total
            if self._cpu_last is not None and total > self._cpu_last[1]:
                share = (busy - self._cpu_last[0]) / (total - self._cpu_last[1])
                values["cpu_percent"] = round(min(max(share, 0.0), 1.0) * 100.0, 2)
            self._cpu_last = (busy, total)
        except Exception as exc:
            self._record_error("host_cpu", exc)
        if self._meminfo_status["available"]:
            values["mem_avail"] = self._safe("meminfo", lambda: _read_mem_available(self.meminfo_path))
        tree = self._tree
        if tree is not None:
            tree.maybe_refresh()
            values["server_rss"], values["server_cpu"] = tree.read()

    def _safe(self, key: str, fn: Callable[[], float]) -> float:
        try:
            return fn()
        except Exception as exc:
            self._record_error(key, exc)
            return _NAN

    def _record_error(self, key: str, exc: BaseException) -> None:
        self._nvml.note_error(key, f"{type(exc).__name__}: {exc}")

    def _flush(self) -> None:
        with self._tick_lock:
            rows, self._rows = self._rows, []
            if rows and self._csv_handle is not None:
                self._csv_handle.write("".join(rows))
                self._csv_handle.flush()
            self._last_flush = time.perf_counter()

    def sample_now(self) -> int | None:
        """A synchronous full tick (window edges use it so counters are read exactly at the boundary)."""
        if not self.enabled or self._closed:
            return None
        self.start()
        return self._tick(slow=True)

    def overhead(self) -> dict[str, float]:
        """Sampler thread CPU time against its wall time (the < 1 % of one core target)."""
        wall = self._sampler_wall_s
        return {"sampler_cpu_s": round(self._sampler_cpu_s, 6), "sampler_wall_s": round(wall, 3),
                "ticks": self._ticks, "core_percent": round(100.0 * self._sampler_cpu_s / wall, 4) if wall else 0.0}

    def close(self) -> None:
        """Stop the sampler, flush telemetry.csv, rewrite sensors.json, shut NVML down. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if not self.enabled:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self._flush()
        if self._csv_handle is not None:
            with contextlib.suppress(OSError):
                os.fsync(self._csv_handle.fileno())
            self._csv_handle.close()
            self._csv_handle = None
        if self._started:
            with contextlib.suppress(OSError):
                self.write_sensors_json()
        self._nvml.shutdown()

    def __enter__(self) -> "Telemetry":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- windows -------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def window(self, name: str, kind: WindowKind = "task") -> Iterator[WindowHandle]:
        """Measure the block as one window; the row is recorded even if the block raises."""
        _check_kind(kind)
        t0 = self.sample_now() or time.perf_counter_ns()
        handle = WindowHandle(name, kind, t0)
        try:
            yield handle
        finally:
            t1 = self.sample_now() or time.perf_counter_ns()
            handle.row = self._record(name, kind, t0, t1)

    def measure(self, name: str, kind: WindowKind, t0_ns: int, t1_ns: int) -> dict[str, Any]:
        """A window after the fact, from perf_counter_ns stamps (e.g. a request's start and end)."""
        _check_kind(kind)
        if t1_ns < t0_ns:
            raise ValueError(f"window {name!r}: t1_ns < t0_ns")
        if self.enabled and not self._closed:
            self.sample_now()  # a full tick after t1: slow-rate counters then bracket the window too
        return self._record(name, kind, int(t0_ns), int(t1_ns))

    def baseline(self, name: str = "idle", seconds: float | None = None, kind: WindowKind | None = None
                 ) -> dict[str, Any]:
        """Sleep `seconds` (default: the params' idle/loaded baseline) while recording a window."""
        kind = kind or (name if name in KINDS else "idle")
        if seconds is None:
            seconds = self.settings.loaded_baseline_s if kind == "loaded" else self.settings.idle_baseline_s
        with self.window(name, kind) as handle:
            time.sleep(max(0.0, float(seconds)))
        assert handle.row is not None
        return handle.row

    def windows_frame(self) -> pd.DataFrame:
        """Every window of this run folder (earlier processes' too, for resume), in WINDOW_COLUMNS order."""
        frame = pd.DataFrame(list(self._windows), columns=WINDOW_COLUMNS)
        for column in WINDOW_COLUMNS:  # None → NaN so numeric columns stay numeric when a sensor is missing
            if column not in _WINDOW_TEXT and column != "counter_reset":
                frame[column] = pd.to_numeric(frame[column], errors="coerce")
        return frame

    def samples_frame(self) -> pd.DataFrame:
        """This process's samples, tidy (one row per tick and GPU), without reading the CSV back."""
        if not self.enabled:
            return pd.DataFrame(columns=TELEMETRY_COLUMNS)
        self._flush()
        return read_telemetry(self.out_dir / TELEMETRY_CSV)

    def _record(self, name: str, kind: str, t0: int, t1: int) -> dict[str, Any]:
        row = self._summarise(name, kind, t0, t1)
        self._windows.append(row)
        if self.enabled:
            _append_row(self.out_dir / WINDOWS_CSV, row)
        return row

    def _load_previous_windows(self) -> list[dict[str, Any]]:
        path = self.out_dir / WINDOWS_CSV
        if not path.is_file() or path.stat().st_size == 0:
            return []
        frame = read_windows(path)
        return frame.to_dict("records")

    # -- window arithmetic ---------------------------------------------------------------------------------
    def _summarise(self, name: str, kind: str, t0: int, t1: int) -> dict[str, Any]:
        now_ns, now_unix = time.perf_counter_ns(), time.time()
        row: dict[str, Any] = {c: None for c in WINDOW_COLUMNS}
        row.update(window=name, kind=kind, t_start_ns=t0, t_end_ns=t1, duration_s=(t1 - t0) / 1e9,
                   t_start_unix=now_unix - (now_ns - t0) / 1e9, t_end_unix=now_unix - (now_ns - t1) / 1e9,
                   counter_reset=False, n_samples=0, stale_samples=0, energy_source="", energy_reason="",
                   power_source="", mem_source="", throttle_seen="", unavailable="")
        if not self.enabled:
            row["energy_reason"] = row["unavailable"] = "telemetry disabled"
            row["gpus"] = ""
            return row
        missing: list[str] = []
        # two slow periods either side: 1 Hz values (temperature, host CPU, MemAvailable) have a value in force
        # at t0 and bracket both edges even when the window is measured after the fact
        t, cols = self._series.span(t0, t1, margin_ns=int(2e9 / self.settings.slow_hz))
        inside = (t >= t0) & (t <= t1)
        row["n_samples"] = int(inside.sum())
        row["gpus"] = ";".join(str(g.index) for g in self._gpus)
        duration = row["duration_s"]

        # energy: NVML counter per GPU → labelled trapezoid per GPU → RAPL only on hosts without GPUs
        if self._gpus:
            energies, sources, notes, failed = [], [], [], []
            for g in self._gpus:
                joules, source, note, reset = self._gpu_energy(g, t, cols, t0, t1)
                row["counter_reset"] = row["counter_reset"] or reset
                if joules is None:
                    failed.append(f"gpu{g.index}: {note}")
                else:
                    energies.append(joules)
                    sources.append(source)
                    if note:
                        notes.append(f"gpu{g.index}: {note}")
            if failed:
                row["energy_reason"] = "; ".join(failed)
            else:
                row["energy_j"] = float(sum(energies))
                row["energy_source"] = "+".join(dict.fromkeys(sources))
                row["energy_reason"] = "; ".join(notes)
        rapl_j = None
        if self._rapl.status["available"]:
            delta, reset, why = _counter_delta(t, cols["rapl_uj"], t0, t1)
            rapl_j = None if delta is None else delta / 1e6
            if rapl_j is None:
                missing.append(f"rapl_energy_j: {why}")
        else:
            missing.append(f"rapl_energy_j: {self._rapl.status['reason']}")
        row["rapl_energy_j"] = rapl_j
        if not self._gpus:
            if rapl_j is not None:
                row["energy_j"], row["energy_source"] = rapl_j, "rapl"
            else:
                rapl_why = self._rapl.status["reason"] or "RAPL samples do not cover the window"
                row["energy_reason"] = f"no GPU ({self._nvml.reason}); no RAPL ({rapl_why})"
        if row["energy_j"] is not None:
            if duration > 0:
                row["avg_power_w"] = row["energy_j"] / duration  # energy ÷ time, never a mean of samples
            else:
                missing.append("avg_power_w: zero-length window")
        else:
            missing.append(f"energy_j: {row['energy_reason']}")

        # peak power: summed instant power per tick (RAPL: per-tick average rate, labelled)
        if self._gpus and all(g.power for g in self._gpus):
            total = np.sum([cols[f"power@{g.slot}"] for g in self._gpus], axis=0)
            peak = total[inside & ~np.isnan(total)]
            if not len(peak):  # a window shorter than one sample period: the reading in force
                peak = _held(t, total, t0, t1)
            if len(peak):
                row["peak_power_w"] = float(peak.max())
                row["power_source"] = "+".join(dict.fromkeys(
                    "nvml_instant" if g.power == "instant" else "nvml_power_usage_1s_avg" for g in self._gpus))
            else:
                missing.append("peak_power_w: no power samples in the window")
        elif self._gpus:
            missing.append(f"peak_power_w: {self.sensors['power']['reason']}")
        elif rapl_j is not None:
            rt, rv = _valid(t, cols["rapl_uj"])
            keep = (rt >= t0) & (rt <= t1)
            rt, rv = rt[keep], rv[keep]
            if len(rt) >= 2:
                row["peak_power_w"] = float(np.max(np.diff(rv) / np.diff(rt) * 1e3))  # µJ/ns → W
                row["power_source"] = "rapl_rate_per_tick"
            else:
                missing.append("peak_power_w: fewer than two RAPL samples in the window")
        else:
            missing.append("peak_power_w: no power sensor")

        self._net_energy(row, missing)
        self._thermal(row, t, cols, t0, t1, missing)
        self._memory(row, t, cols, t0, t1, missing)

        # host side
        busy, _, why = _counter_delta(t, cols["cpu_busy_s"], t0, t1)
        total_cpu, _, why_total = _counter_delta(t, cols["cpu_total_s"], t0, t1)
        if busy is not None and total_cpu:
            row["cpu_util_avg"] = round(min(max(busy / total_cpu, 0.0), 1.0) * 100.0, 3)
        else:
            missing.append("cpu_util_avg: " + (self._cpu_status["reason"] or why or why_total
                                               or "no CPU time elapsed"))
        if self._tree is not None or not np.all(np.isnan(cols["server_rss"])):
            rss = _held(t, cols["server_rss"], t0, t1)
            row["server_rss_peak_bytes"] = float(rss.max()) if len(rss) else None
            row["server_cpu_s"] = _increase(t, cols["server_cpu"], t0, t1)
            if row["server_rss_peak_bytes"] is None or row["server_cpu_s"] is None:
                missing.append("server_*: server process not sampled in the window (exited?)")
        else:
            missing.append(f"server_*: {self._server_status['reason']}")
        avail = _held(t, cols["mem_avail"], t0, t1)
        if len(avail):
            row["mem_available_drop_bytes"] = float(avail[0] - avail.min())
        else:
            missing.append(f"mem_available_drop_bytes: {self._meminfo_status['reason'] or 'no samples'}")
        if self._gpus:
            row["stale_samples"] = int(sum(np.nansum(cols[f"stale@{g.slot}"][inside]) for g in self._gpus))
        row["unavailable"] = "; ".join(missing)
        return row

    def _gpu_energy(self, g: _Gpu, t: np.ndarray, cols: dict[str, np.ndarray], t0: int, t1: int
                    ) -> tuple[float | None, str, str, bool]:
        """(joules, source, note-or-why, counter_reset) for one GPU."""
        reset = False
        note = ""
        if g.energy:
            delta, reset, why = _counter_delta(t, cols[f"energy@{g.slot}"], t0, t1)
            if delta is not None:
                return delta / 1000.0, "nvml_counter", "", False
            note = f"energy counter: {why}"
        else:
            note = f"no energy counter ({g.sensors['energy_counter']['reason']})"
        if g.power:
            joules = _trapezoid(t, cols[f"power@{g.slot}"], t0, t1)
            label = POWER_INSTANT_SOURCE if g.power == "instant" else POWER_USAGE_SOURCE
            if joules is not None:
                return joules, "power_trapezoid", f"{note}; integrated {label} samples", reset
            return None, "", f"{note}; power samples do not cover the window", reset
        return None, "", f"{note}; no power reading ({g.sensors['power']['reason']})", reset

    def _net_energy(self, row: dict[str, Any], missing: list[str]) -> None:
        """Energy above the latest idle window's average power (same energy source, else not comparable)."""
        if row["energy_j"] is None:
            missing.append("net_energy_j: no energy")
            return
        idle = [w for w in self._windows if w.get("kind") == "idle" and _isnum(w.get("avg_power_w"))
                and w.get("energy_source") == row["energy_source"]]
        if row["kind"] == "idle" and _isnum(row["avg_power_w"]):
            idle = idle + [row]
        if not idle:
            missing.append("net_energy_j: no idle window with energy from the same source")
            return
        latest = max(idle, key=lambda w: int(w["t_end_ns"]))
        row["idle_power_w"] = float(latest["avg_power_w"])
        row["net_energy_j"] = row["energy_j"] - row["idle_power_w"] * row["duration_s"]

    def _thermal(self, row: dict[str, Any], t: np.ndarray, cols: dict[str, np.ndarray], t0: int, t1: int,
                 missing: list[str]) -> None:
        if not self._gpus:
            missing.append(f"temp/throttle: no GPU ({self._nvml.reason})")
            return
        temps = np.concatenate([_held(t, cols[f"temp@{g.slot}"], t0, t1) for g in self._gpus])
        if len(temps):
            row["temp_avg_c"], row["temp_peak_c"] = float(temps.mean()), float(temps.max())
        else:
            missing.append(f"temp_*: {self.sensors['temperature']['reason'] or 'no samples in the window'}")
        masks = np.concatenate([_held(t, cols[f"throttle@{g.slot}"], t0, t1) for g in self._gpus])
        if len(masks):
            seen = 0
            for mask in masks:
                seen |= int(mask)
            row["throttle_seen"] = ";".join(self._nvml.decode_throttle(seen)) or "none"
        else:
            missing.append(f"throttle_seen: {self.sensors['clock_event_reasons']['reason'] or 'no samples'}")

    def _memory(self, row: dict[str, Any], t: np.ndarray, cols: dict[str, np.ndarray], t0: int, t1: int,
                missing: list[str]) -> None:
        """Best memory view: NVML device memory (v2/v1), else per-process sum (unified), else server RSS (CPU)."""
        series: np.ndarray | None = None
        if self._gpus:
            if all(g.memory for g in self._gpus):
                parts = [cols[f"{'procmem' if g.memory == 'process_sum' else 'mem'}@{g.slot}"] for g in self._gpus]
                series = np.sum(parts, axis=0)
                row["mem_source"] = "+".join(dict.fromkeys(MEM_SOURCE_LABELS[g.memory] for g in self._gpus))
            else:
                missing.append(f"mem_*: {self.sensors['memory']['reason']}")
        elif self._tree is not None or not np.all(np.isnan(cols["server_rss"])):
            series = cols["server_rss"]
            row["mem_source"] = "server_rss"
        else:
            missing.append(f"mem_*: no GPU and {self._server_status['reason']}")
        if series is None:
            return
        values = _held(t, series, t0, t1)
        if not len(values):
            missing.append("mem_*: no memory samples in the window")
            return
        row["mem_baseline_bytes"] = float(values[0])
        row["mem_peak_bytes"] = float(values.max())
        row["mem_delta_bytes"] = row["mem_peak_bytes"] - row["mem_baseline_bytes"]


def _close_if_alive(ref: "weakref.ref[Telemetry]") -> None:
    telemetry = ref()
    if telemetry is not None:
        telemetry.close()


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"window kind must be one of {', '.join(KINDS)} (got {kind!r})")


def _append_row(path: Path, row: Mapping[str, Any]) -> None:
    """Append one window row and fsync, like requests.csv: a crash loses at most the window in progress."""
    fresh = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=WINDOW_COLUMNS, extrasaction="ignore")
        if fresh:
            writer.writeheader()
        writer.writerow({k: _fmt(v) if not isinstance(v, str) else v for k, v in row.items()})
        handle.flush()
        os.fsync(handle.fileno())


# ----------------------------------------------------------------------------------------------------------
# reading back and efficiency

_WINDOW_TEXT = ("window", "kind", "gpus", "energy_source", "energy_reason", "power_source", "throttle_seen",
                "mem_source", "unavailable")


def read_windows(path: Path | str) -> pd.DataFrame:
    """telemetry_windows.csv (or the runner's windows.csv) with text columns as text and empties as NaN."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return pd.DataFrame(columns=WINDOW_COLUMNS)
    frame = pd.read_csv(path, on_bad_lines="skip", engine="python",
                        dtype={c: str for c in _WINDOW_TEXT + ("efficiency_reason",)}, keep_default_na=False,
                        na_values={c: [""] for c in WINDOW_COLUMNS if c not in _WINDOW_TEXT})
    for column in WINDOW_COLUMNS:
        if column not in frame:
            frame[column] = None
    if "counter_reset" in frame:
        frame["counter_reset"] = frame["counter_reset"].map(lambda v: str(v).strip().lower() == "true")
    return frame


def read_telemetry(path: Path | str) -> pd.DataFrame:
    """telemetry.csv as a DataFrame; a half-written last line (SIGKILL) is dropped."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return pd.DataFrame(columns=TELEMETRY_COLUMNS)
    frame = pd.read_csv(path, on_bad_lines="skip", engine="python")
    frame = frame[pd.to_numeric(frame["t_ns"], errors="coerce").notna()]
    return frame.reset_index(drop=True)


def add_token_efficiency(windows: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """Tokens per joule for each task window, beside the paper's tok/s per W from the same window.

    A task window counts the non-warm-up, status=="ok" requests of the task named like the window that ran
    inside it (start_ns/e2e_s, or wall time when start_ns is missing). tps_per_w is the mean decode_tps of
    those requests ÷ the window's avg_power_w (energy ÷ duration), so both views share one power figure.
    Without energy every ratio is NaN and efficiency_reason carries energy_reason.
    """
    out = windows.copy()
    for column in EFFICIENCY_COLUMNS:
        out[column] = "" if column == "efficiency_reason" else np.nan
    out["efficiency_reason"] = out["efficiency_reason"].astype(object)
    if requests is None or not len(requests):
        mask = out["kind"] == "task"
        out.loc[mask, "efficiency_reason"] = "no requests"
        out.loc[~mask, "efficiency_reason"] = "not a task window"
        return out
    req = requests.copy()
    ok = (req["status"] == "ok") & ~req["is_warmup"].map(lambda v: str(v).strip().lower() == "true")
    req = req[ok]
    start_ns, e2e, unix = (_numeric(req, c) for c in ("start_ns", "e2e_s", "started_at_unix"))
    slack = 0.05  # s: stamps are taken a few µs apart on either side of the window edge
    for i, w in out.iterrows():
        if w["kind"] != "task":
            out.at[i, "efficiency_reason"] = "not a task window"
            continue
        t0, t1 = float(w["t_start_ns"]), float(w["t_end_ns"])
        by_ns = (start_ns > 0) & (start_ns >= t0 - slack * 1e9) & (start_ns + e2e * 1e9 <= t1 + slack * 1e9)
        by_unix = (start_ns <= 0) & _isnum_series(w.get("t_start_unix")) & \
            (unix >= float(w.get("t_start_unix") or 0) - slack) & \
            (unix + e2e <= float(w.get("t_end_unix") or 0) + slack)
        mine = req[(req["task"] == w["window"]) & (by_ns | by_unix)]
        tokens = pd.to_numeric(mine["completion_tokens"], errors="coerce")
        out.at[i, "n_requests"] = len(mine)
        out.at[i, "completion_tokens"] = float(tokens.sum()) if tokens.notna().any() else np.nan
        tps = pd.to_numeric(mine["decode_tps"], errors="coerce").dropna()
        out.at[i, "decode_tps_mean"] = float(tps.mean()) if len(tps) else np.nan
        energy = pd.to_numeric(pd.Series([w.get("energy_j")]), errors="coerce").iloc[0]
        power = pd.to_numeric(pd.Series([w.get("avg_power_w")]), errors="coerce").iloc[0]
        reasons = []
        if not len(mine):
            reasons.append("no ok non-warm-up requests of this task inside the window")
        if pd.isna(energy) or pd.isna(power) or power <= 0:
            reasons.append(f"no energy: {w.get('energy_reason') or 'not measured'}")
        else:
            total = out.at[i, "completion_tokens"]
            if _isnum(total) and total > 0:
                out.at[i, "tokens_per_joule"] = total / energy
                out.at[i, "joules_per_token"] = energy / total
            elif len(mine):
                reasons.append("no completion tokens counted")
            if len(tps):
                out.at[i, "tps_per_w"] = float(tps.mean()) / power
        out.at[i, "efficiency_reason"] = "; ".join(reasons)
    return out


def _numeric(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame:
        return pd.Series(0.0, index=frame.index)
    return pd.to_numeric(frame[column], errors="coerce").fillna(0.0)


def _isnum_series(value: Any) -> bool:
    try:
        return _isnum(float(value))
    except (TypeError, ValueError):
        return False
