"""A pynvml stand-in for tests and the overhead bench: the subset benchlib.measure.telemetry calls, scriptable per GPU.

Energy is integrated from the configured power on the same clock the sampler uses (time.perf_counter), so a
window's true energy is known exactly. Any feature can be switched to NVML_ERROR_NOT_SUPPORTED, a function
can be made absent (old bindings), and nvmlInit can fail (host without a driver).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15

_TEXT = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
}


class FakeNVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _TEXT.get(self.value, f"NVML error {self.value}")


def not_supported() -> FakeNVMLError:
    return FakeNVMLError(NVML_ERROR_NOT_SUPPORTED)


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-1111-2222-3333-444444444444"
    power_w: float = 100.0
    energy: bool = True
    instant_power: bool = True
    power_usage: bool = True
    memory_v2: bool = True
    memory_v1: bool = True
    mem_used: int = 10 * 2**30
    processes: list[tuple[int, int | None]] | None = field(default_factory=list)  # None: Not Supported
    temp_c: int = 50
    clock_mhz: int = 1980
    bus_width_bits: int | None = 5120  # H100 SXM HBM3; None: Not Supported (unified memory, e.g. GB10)
    mem_clock_max_mhz: int = 2619
    throttle: int | None = 0  # None: Not Supported
    power_limit_mw: int = 700_000
    energy_offset_mj: float = 5e9
    energy_fn: Callable[[float], float] | None = None  # perf_counter seconds -> mJ, replaces the integral
    frozen_power_timestamp: bool = False  # the instant-power field never gets a new timestamp (stale sensor)
    lost: bool = False  # every runtime read raises GPU_IS_LOST (after probing succeeded)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._since = time.perf_counter()
        self._acc_mj = 0.0
        self._frozen_ts = int(time.time() * 1e6) - 5_000_000

    def set_power(self, watts: float) -> None:
        """Change the draw from now on; the counter keeps what was consumed so far."""
        with self._lock:
            now = time.perf_counter()
            self._acc_mj += self.power_w * (now - self._since) * 1000.0
            self._since, self.power_w = now, watts

    def energy_mj(self) -> float:
        now = time.perf_counter()
        if self.energy_fn is not None:
            return self.energy_fn(now)
        with self._lock:
            return self.energy_offset_mj + self._acc_mj + self.power_w * (now - self._since) * 1000.0


class FakeNvml:
    """Module-like object: attribute names and signatures follow nvidia-ml-py's pynvml."""

    NVMLError = FakeNVMLError
    NVML_SUCCESS = NVML_SUCCESS
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    NVML_FI_DEV_POWER_INSTANT = 186
    NVML_VALUE_TYPE_UNSIGNED_INT = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    nvmlMemory_v2 = 0x02000028
    nvmlClocksEventReasonGpuIdle = 0x1
    nvmlClocksEventReasonApplicationsClocksSetting = 0x2
    nvmlClocksEventReasonUserDefinedClocks = 0x2
    nvmlClocksEventReasonSwPowerCap = 0x4
    nvmlClocksEventReasonHwSlowdown = 0x8
    nvmlClocksEventReasonSyncBoost = 0x10
    nvmlClocksEventReasonSwThermalSlowdown = 0x20
    nvmlClocksEventReasonHwThermalSlowdown = 0x40
    nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x80
    nvmlClocksEventReasonNone = 0x0
    nvmlClocksEventReasonAll = 0x1FF

    def __init__(self, gpus: list[FakeGpu] | None = None, init_error: int | None = None,
                 missing: tuple[str, ...] = (), driver: str = "580.82.07", cuda: int = 13000):
        self.gpus = list(gpus) if gpus is not None else [FakeGpu()]
        self.init_error = init_error
        self.missing = set(missing)
        self.driver = driver
        self.cuda = cuda
        self.initialised = False
        self.shutdowns = 0
        self.calls: dict[str, int] = {}

    def __getattribute__(self, name: str) -> Any:
        # lets a test simulate older bindings that lack a function (e.g. the ClocksEvent rename)
        if name != "missing" and name in object.__getattribute__(self, "missing"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    # -- helpers ---------------------------------------------------------------------------------------------
    def _gpu(self, handle: int, call: str, runtime: bool = True) -> FakeGpu:
        self.calls[call] = self.calls.get(call, 0) + 1
        if not self.initialised:
            raise FakeNVMLError(NVML_ERROR_UNINITIALIZED)
        gpu = self.gpus[handle]
        if runtime and gpu.lost:
            raise FakeNVMLError(NVML_ERROR_GPU_IS_LOST)
        return gpu

    # -- library ---------------------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise FakeNVMLError(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1
        self.initialised = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if not 0 <= index < len(self.gpus):
            raise FakeNVMLError(2)
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self._gpu(handle, "uuid", runtime=False).uuid

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self._gpu(handle, "name", runtime=False).name

    # -- sensors ---------------------------------------------------------------------------------------------
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        gpu = self._gpu(handle, "energy")
        if not gpu.energy:
            raise not_supported()
        return int(gpu.energy_mj())

    def nvmlDeviceGetFieldValues(self, handle: int, field_ids: list[int]) -> list[SimpleNamespace]:
        gpu = self._gpu(handle, "field_values")
        out = []
        for field_id in field_ids:
            ok = field_id == self.NVML_FI_DEV_POWER_INSTANT and gpu.instant_power
            ts = gpu._frozen_ts if gpu.frozen_power_timestamp else int(time.time() * 1e6)
            out.append(SimpleNamespace(
                fieldId=field_id, scopeId=0, timestamp=ts, latencyUsec=0, valueType=self.NVML_VALUE_TYPE_UNSIGNED_INT,
                nvmlReturn=NVML_SUCCESS if ok else NVML_ERROR_NOT_SUPPORTED,
                value=SimpleNamespace(uiVal=int(gpu.power_w * 1000) if ok else 0, dVal=0.0)))
        return out

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        gpu = self._gpu(handle, "power_usage")
        if not gpu.power_usage:
            raise not_supported()
        return int(gpu.power_w * 1000)

    def nvmlDeviceGetMemoryBusWidth(self, handle: int) -> int:
        gpu = self._gpu(handle, "bus_width", runtime=False)
        if gpu.bus_width_bits is None:
            raise not_supported()
        return gpu.bus_width_bits

    def nvmlDeviceGetMaxClockInfo(self, handle: int, clock_type: int) -> int:
        gpu = self._gpu(handle, "max_clock", runtime=False)
        return gpu.mem_clock_max_mhz if clock_type == self.NVML_CLOCK_MEM else gpu.clock_mhz

    def nvmlDeviceGetMemoryInfo(self, handle: int, version: int | None = None) -> SimpleNamespace:
        gpu = self._gpu(handle, "memory_v2" if version else "memory_v1")
        if (version and not gpu.memory_v2) or (not version and not gpu.memory_v1):
            raise not_supported()
        return SimpleNamespace(total=80 * 2**30, free=80 * 2**30 - gpu.mem_used, used=gpu.mem_used, reserved=0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[SimpleNamespace]:
        gpu = self._gpu(handle, "processes")
        if gpu.processes is None:
            raise not_supported()
        return [SimpleNamespace(pid=pid, usedGpuMemory=used, gpuInstanceId=0, computeInstanceId=0)
                for pid, used in gpu.processes]

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return self._gpu(handle, "temperature").temp_c

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        return self._gpu(handle, "clock").clock_mhz

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        gpu = self._gpu(handle, "event_reasons")
        if gpu.throttle is None:
            raise not_supported()
        return gpu.throttle

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: int) -> int:
        gpu = self._gpu(handle, "throttle_reasons")
        if gpu.throttle is None:
            raise not_supported()
        return gpu.throttle

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return self._gpu(handle, "power_limit").power_limit_mw


def all_unsupported_gpu(**overrides: Any) -> FakeGpu:
    """A GPU whose every sensor answers Not Supported (name and UUID still work)."""
    values = dict(energy=False, instant_power=False, power_usage=False, memory_v2=False, memory_v1=False,
                  processes=None, throttle=None)
    values.update(overrides)
    gpu = FakeGpu(**values)
    return gpu


class UnsupportedEverywhere(FakeNvml):
    """Temperature, clocks and power limit also Not Supported: nothing but identity works."""

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        raise not_supported()

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        raise not_supported()

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        raise not_supported()
