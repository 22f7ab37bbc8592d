"""NVIDIA GPUs through NVML (nvidia-ml-py, or a test fake): which GPUs to watch, what each one can report
(energy counter, instant power, memory v2/v1/per-process, temperature, clocks, clock-event reasons), and
reads that return NaN instead of raising."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from benchlib.measure.telemetry.common import NAN, is_number, sensor_status

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


@dataclass
class Gpu:
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
    # a remote source's own labels (energy, power, power_text, mem, temp) for the window columns; empty = NVML's
    labels: dict[str, str] = field(default_factory=dict)
    # last readings, for stale detection
    last_power_ts: int | None = None
    last_power: float = NAN
    last_energy: float = NAN


class Nvml:
    """The pynvml module (or a test fake) plus the probed devices; every read returns NaN instead of raising."""

    def __init__(self, module: Any | None, gpu_indices: Sequence[int] | None, environ: Mapping[str, str],
                 stale_age_s: float):
        self.nvml = module
        self.gpus: list[Gpu] = []
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
            gpu = Gpu(slot=len(self.gpus), index=index, handle=handles[index], uuid=uuids[index])
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

    def _probe(self, gpu: Gpu) -> None:
        nvml, h, s = self.nvml, gpu.handle, gpu.sensors
        name, why = self._try(lambda: _decode(nvml.nvmlDeviceGetName(h)))
        gpu.name = name or ""
        s["gpu_name"] = sensor_status(bool(name), why, "nvmlDeviceGetName")
        s["uuid"] = sensor_status(bool(gpu.uuid), "" if gpu.uuid else "nvmlDeviceGetUUID failed", "nvmlDeviceGetUUID")

        value, why = self._try(lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(h))
        gpu.energy = value is not None
        s["energy_counter"] = sensor_status(gpu.energy, why, ENERGY_SOURCE)

        instant_why = self._probe_instant_power(gpu)
        if instant_why is None:
            gpu.power = "instant"
            s["power"] = sensor_status(True, "", POWER_INSTANT_SOURCE)
        else:
            value, why = self._try(lambda: nvml.nvmlDeviceGetPowerUsage(h))
            if value is not None:
                gpu.power = "usage"
                s["power"] = sensor_status(True, f"instant power unavailable ({instant_why}); fallback is a 1 s average",
                                     POWER_USAGE_SOURCE)
            else:
                s["power"] = sensor_status(False, f"instant: {instant_why}; nvmlDeviceGetPowerUsage: {why}", "")

        s["memory"] = self._probe_memory(gpu)

        value, why = self._try(lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))
        gpu.temp = value is not None
        s["temperature"] = sensor_status(gpu.temp, why, "nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)")
        value, why = self._try(lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))
        gpu.clock = value is not None
        s["sm_clock"] = sensor_status(gpu.clock, why, "nvmlDeviceGetClockInfo(NVML_CLOCK_SM)")

        reasons = []
        for fn_name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            fn = getattr(nvml, fn_name, None)
            if fn is None:
                reasons.append(f"{fn_name}: not in this pynvml")
                continue
            value, why = self._try(lambda fn=fn: fn(h))
            if value is not None:
                gpu.throttle_fn = fn
                s["clock_event_reasons"] = sensor_status(True, "", fn_name)
                break
            reasons.append(f"{fn_name}: {why}")
        else:
            s["clock_event_reasons"] = sensor_status(False, "; ".join(reasons), "")

        for fn_name in ("nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"):
            fn = getattr(nvml, fn_name, None)
            value, why = self._try(lambda fn=fn: fn(h)) if fn else (None, "not in this pynvml")
            if value is not None:
                gpu.power_limit_w = float(value) / 1000.0
                s["power_limit"] = sensor_status(True, "", fn_name)
                break
        else:
            s["power_limit"] = sensor_status(False, why, "")

    def _probe_instant_power(self, gpu: Gpu) -> str | None:
        """None when NVML_FI_DEV_POWER_INSTANT works, else why not."""
        field_id = getattr(self.nvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if field_id is None or not hasattr(self.nvml, "nvmlDeviceGetFieldValues"):
            return "NVML_FI_DEV_POWER_INSTANT not in this pynvml"
        values, why = self._try(lambda: self.nvml.nvmlDeviceGetFieldValues(gpu.handle, [field_id]))
        if values is None:
            return why
        code = int(getattr(values[0], "nvmlReturn", 0))
        return None if code == 0 else _field_reason(self.nvml, code)

    def _probe_memory(self, gpu: Gpu) -> dict[str, Any]:
        nvml, h = self.nvml, gpu.handle
        tried = []
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is not None:
            value, why = self._try(lambda: nvml.nvmlDeviceGetMemoryInfo(h, version=version))
            if value is not None:
                gpu.memory = "v2"
                return sensor_status(True, "", MEMORY_SOURCES["v2"])
            tried.append(f"v2: {why}")
        else:
            tried.append("v2: nvmlMemory_v2 not in this pynvml")
        value, why = self._try(lambda: nvml.nvmlDeviceGetMemoryInfo(h))
        if value is not None:
            gpu.memory = "v1"
            return sensor_status(True, "; ".join(tried), MEMORY_SOURCES["v1"])
        tried.append(f"v1: {why}")
        # Unified memory (GB10) answers Not Supported above; per-process usage is what remains on the GPU side.
        value, why = self._try(lambda: nvml.nvmlDeviceGetComputeRunningProcesses(h))
        if value is not None:
            gpu.memory = "process_sum"
            return sensor_status(True, "device memory info: " + "; ".join(tried), MEMORY_SOURCES["process_sum"])
        tried.append(f"process list: {why}")
        return sensor_status(False, "; ".join(tried), "")

    # -- reading -------------------------------------------------------------------------------------------
    def note_error(self, key: str, reason: str) -> None:
        """Count a runtime failure and keep its first message (sensors.json reports both)."""
        self.error_counts[key] = self.error_counts.get(key, 0) + 1
        self.errors.setdefault(key, reason)

    def _fail(self, key: str, exc: BaseException) -> None:
        self.note_error(key, _nvml_reason(self.nvml, exc))

    def read_fast(self, gpu: Gpu, now_unix: float) -> dict[str, float]:
        """Energy first (closest to the tick's timestamp), then power and memory; stale flag from both."""
        nvml, h = self.nvml, gpu.handle
        out = {"energy": NAN, "power": NAN, "mem": NAN, "procmem": NAN, "stale": NAN}
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
        if stale is None and (is_number(out["power"]) or is_number(out["energy"])):
            # no sensor timestamp: a reading is stale when every value repeats the previous tick exactly
            same = [out[k] == last for k, last in (("power", gpu.last_power), ("energy", gpu.last_energy))
                    if is_number(out[k])]
            stale = bool(same) and all(same)
        gpu.last_power, gpu.last_energy = out["power"], out["energy"]
        out["stale"] = NAN if stale is None else float(stale)
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
                out["procmem"] = NAN if any(u is None for u in used) else float(sum(used))
            except Exception as exc:
                self._fail(f"gpu{gpu.index}.memory", exc)
        return out

    def read_slow(self, gpu: Gpu) -> dict[str, float]:
        nvml, h = self.nvml, gpu.handle
        out = {"temp": NAN, "clock": NAN, "throttle": NAN}
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
