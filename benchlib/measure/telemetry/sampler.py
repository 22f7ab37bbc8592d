"""The Telemetry object: probes every sensor once, samples in a background thread (GPU power/energy/memory
at power_hz, the rest at slow_hz), writes telemetry.csv, and measures named windows (idle, loaded, task)
whose rows WindowArithmetic computes."""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import platform
import socket
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pandas as pd
import psutil

from benchlib.config.params import TelemetryParams
from benchlib.measure.telemetry.bmc import NodePower, node_status_missing
from benchlib.measure.telemetry.clock import is_this_host, url_host
from benchlib.measure.telemetry.common import KINDS, NAN, WindowKind, check_kind, sensor_status
from benchlib.measure.telemetry.files import (
    SENSORS_JSON,
    TELEMETRY_COLUMNS,
    TELEMETRY_CSV,
    WINDOW_COLUMNS,
    WINDOW_TEXT,
    WINDOWS_CSV,
    append_window_row,
    csv_cell,
    read_telemetry,
    read_windows,
)
from benchlib.measure.telemetry.host import ProcessTree, Rapl, host_cpu_times, read_mem_available
from benchlib.measure.telemetry.nvml import Nvml
from benchlib.measure.telemetry.soc import Hwmon, Powermetrics, ThermalZones, pressure_level, soc_power_sensor
from benchlib.measure.telemetry.windows import Series, WindowArithmetic, WindowHandle
from benchlib.records.rows import write_atomic


class Telemetry(WindowArithmetic):
    """Background sampler plus named windows.

    `Telemetry(settings, out_dir, server_pid=None, nvml=None)` probes sensors at once; `start()` launches the
    sampler (window/baseline/measure start it too). `nvml` injects a pynvml-like module (tests); the
    powercap root, meminfo path, hwmon and thermal roots, the powermetrics command line, the OS name (`system`)
    and environment are injectable for the same reason.
    settings.enabled=False gives an object with the same API that samples nothing and whose windows carry
    only their times and the reason "telemetry disabled".
    """

    def __init__(self, settings: TelemetryParams, out_dir: Path | str, server_pid: int | None = None,
                 nvml: Any = None, *, powercap_root: Path | str = "/sys/class/powercap",
                 meminfo_path: Path | str = "/proc/meminfo", environ: Mapping[str, str] | None = None,
                 hwmon_root: Path | str = "/sys/class/hwmon", thermal_root: Path | str = "/sys/class/thermal",
                 powermetrics: list[str] | None = None, system: str | None = None):
        self._init_state(settings, out_dir, meminfo_path, system, environ)
        if not self.enabled:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._nvml = Nvml(nvml, settings.gpu_indices, os.environ if environ is None else environ,
                           stale_age_s=max(1.0, 2.0 / settings.power_hz))
        self._rapl = Rapl(Path(powercap_root))
        if settings.powermetrics or self.system != "Darwin":
            self._soc = soc_power_sensor(max(1, round(1000 / settings.power_hz)), settings.hwmon_rails,
                                         system=self.system, powermetrics=powermetrics, hwmon_root=hwmon_root)
        self._zones = ThermalZones(thermal_root)
        self._meminfo_status = self._probe_meminfo()
        self._cpu_status = self._probe_cpu()
        if server_pid is not None:
            self.set_server_pid(server_pid)
        self._gpus = self._nvml.gpus
        self._series = Series(series_names(self._gpus))
        self.sensors = self._aggregate_sensors()
        self.sensors["node_power"] = self._node.status if self._node is not None else node_status_missing()
        self._windows = self._load_previous_windows()
        # a notebook kernel may exit without close(): flush what is buffered (weakly, so tests don't pin objects)
        atexit.register(_close_if_alive, weakref.ref(self))

    def _init_state(self, settings: TelemetryParams, out_dir: Path | str, meminfo_path: Path | str = "/proc/meminfo",
                    system: str | None = None, environ: Mapping[str, str] | None = None) -> None:
        """Everything but the chip-level sensors (a remote source sets those from what its host describes); the
        node's BMC when params name one (probed here, whatever samples the chip)."""
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
        self._tree: ProcessTree | None = None
        self._server_status = sensor_status(False, "no server pid given", "")
        self._cpu_last: tuple[float, float] | None = None
        self.meminfo_path = Path(meminfo_path)
        self.system = system or platform.system()
        self._soc: Powermetrics | Hwmon | None = None
        self.sensors: dict[str, dict[str, Any]] = {}
        self.source_label, self.source_host = "local", socket.gethostname()
        self.no_source_reason = ""
        self.clock_uncertainty_s = None
        self.server_host = ""
        self._node: NodePower | None = None
        if not self.enabled:
            self.sensors = {"telemetry": sensor_status(False, "telemetry disabled", "params.telemetry.enabled")}
            self._nvml = None
            self._rapl = None
        elif settings.bmc.protocol != "none":
            self._node = NodePower(settings.bmc, self.out_dir, environ)

    # -- probing -------------------------------------------------------------------------------------------
    def _probe_meminfo(self) -> dict[str, Any]:
        if self.system == "Darwin":  # no /proc: the OS's own figure (unified memory: GPU allocations included)
            return sensor_status(True, "", "psutil.virtual_memory().available")
        try:
            value = read_mem_available(self.meminfo_path)
        except OSError as exc:
            return sensor_status(False, f"{self.meminfo_path}: {exc.strerror or exc}", "")
        if math.isnan(value):
            return sensor_status(False, f"{self.meminfo_path} has no MemAvailable line", "")
        return sensor_status(True, "", f"{self.meminfo_path} MemAvailable")

    @staticmethod
    def _probe_cpu() -> dict[str, Any]:
        try:
            host_cpu_times()
        except Exception as exc:
            return sensor_status(False, f"psutil.cpu_times failed: {exc}", "")
        return sensor_status(True, "", "psutil.cpu_times (busy share of all cores)")

    def set_server_pid(self, pid: int | None) -> None:
        """Watch this process and its descendants (the runner learns the pid after the idle baseline)."""
        if not self.enabled:
            return
        if pid is None:
            self._tree, self._server_status = None, sensor_status(False, "no server pid given", "")
        else:
            try:
                self._tree = ProcessTree(int(pid))
                self._server_status = sensor_status(True, "", f"psutil process tree of pid {pid} (RSS sum, CPU time)")
            except psutil.Error as exc:
                self._tree = None
                self._server_status = sensor_status(False, f"pid {pid}: {type(exc).__name__}", "")
        if self.sensors:
            self.sensors["server_process"] = self._server_status

    def set_server_url(self, url: str | None) -> None:
        """The server this run measures: on another host, this host's sensors do not describe it, so every
        window says so instead of carrying them (a remote source overrides this)."""
        self.server_host = url_host(url)
        if self.server_host and not is_this_host(self.server_host):
            self.no_source_reason = f"server on {self.server_host}: no telemetry source for it"
        else:
            self.no_source_reason = ""

    def measure_clock(self, label: str) -> None:
        """Local samples share the windows' clock: nothing to measure (a remote source measures its offset)."""

    def source_description(self) -> dict[str, Any]:
        """Where this run's telemetry came from (sensors.json and the manifest)."""
        return {"kind": self.source_label, "host": self.source_host, "server_host": self.server_host,
                "no_source_reason": self.no_source_reason}

    def _aggregate_sensors(self) -> dict[str, dict[str, Any]]:
        """One entry per sensor: available only if every selected GPU has it; reasons name the GPU."""
        nvml = self._nvml
        out: dict[str, dict[str, Any]] = {
            "nvml": sensor_status(nvml.ok, "" if nvml.ok else nvml.reason, "pynvml" if nvml.ok else ""),
            "driver_version": sensor_status(bool(nvml.driver_version), "" if nvml.driver_version else
                                      (nvml.reason or "nvmlSystemGetDriverVersion failed"),
                                      "nvmlSystemGetDriverVersion"),
            "cuda_driver_version": sensor_status(bool(nvml.cuda_driver_version), "" if nvml.cuda_driver_version else
                                           (nvml.reason or "nvmlSystemGetCudaDriverVersion failed"),
                                           "nvmlSystemGetCudaDriverVersion"),
        }
        keys = ("gpu_name", "uuid", "energy_counter", "power", "memory", "temperature", "sm_clock",
                "clock_event_reasons", "power_limit")
        for key in keys:
            if not self._gpus:
                out[key] = sensor_status(False, nvml.reason or "no GPU", "")
                continue
            entries = [(g.index, g.sensors[key]) for g in self._gpus]
            sources = sorted({e["source"] for _, e in entries if e["source"]})
            reasons = [f"gpu{i}: {e['reason']}" for i, e in entries if e["reason"]]
            out[key] = sensor_status(all(e["available"] for _, e in entries), "; ".join(reasons), " | ".join(sources))
        out["host_cpu"] = self._cpu_status
        out["server_process"] = self._server_status
        out["rapl"] = self._rapl.status
        out["soc_power"] = self._soc.status if self._soc is not None else sensor_status(
            False, "telemetry.powermetrics is false", "")
        out["thermal_zones"] = self._zones.status
        out["meminfo"] = self._meminfo_status
        return out

    def describe(self) -> dict[str, Any]:
        """The sensors.json payload."""
        if not self.enabled:
            return {"enabled": False, "sensors": self.sensors, "source": self.source_description()}
        nvml = self._nvml
        return {
            "enabled": True,
            "source": self.source_description(),
            "power_hz": self.settings.power_hz,
            "slow_hz": self.settings.slow_hz,
            "sensors": self.sensors,
            "gpu_selection": nvml.selection,
            "driver_version": nvml.driver_version,
            "cuda_driver_version": nvml.cuda_driver_version,
            "devices": [{"index": g.index, "uuid": g.uuid, "name": g.name, "power_limit_w": g.power_limit_w,
                         "sensors": g.sensors} for g in self._gpus],
            "node_power": self._node.describe() if self._node is not None else None,
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
        if self._node is not None:
            self._node.start()
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
        if not self._gpus and not self._rapl.status["available"] and not self._soc_ok:
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
            for gpu in self._gpus:
                fast = self._nvml.read_fast(gpu, t_unix)
                slow_values = self._nvml.read_slow(gpu) if slow else {"temp": NAN, "clock": NAN, "throttle": NAN}
                for key, value in {**fast, **slow_values}.items():
                    values[f"{key}@{gpu.slot}"] = value
            values["rapl_uj"] = self._safe("rapl", self._rapl.read)
            if self._soc_ok:
                assert self._soc is not None
                try:
                    values["soc_uj"], values["soc_w"] = self._soc.read()
                except Exception as exc:
                    self._record_error("soc_power", exc)
                values["soc_pressure"] = pressure_level(self._soc.pressure)
            if slow:
                # Each /proc file costs ~0.1 ms to open and generate (per process for the server tree): host
                # readings go at the slow rate. Window edges are full ticks and CPU figures are counters, so
                # window values stay exact; only RSS/MemAvailable peaks are sampled at slow_hz.
                self._read_host(values)
            self._store(t_ns, t_unix, values)
            return t_ns

    def _store(self, t_ns: int, t_unix: float, values: dict[str, float], remote_t_ns: int | None = None) -> None:
        """One tick into the series and its telemetry.csv rows (caller holds _tick_lock); remote_t_ns is the
        sample's own clock when it was read on another host."""
        self._series.append(t_ns, t_unix, values)
        self._ticks += 1
        host = [values.get("cpu_percent", NAN), values.get("server_rss", NAN), values.get("server_cpu", NAN),
                values.get("rapl_uj", NAN), values.get("mem_avail", NAN), values.get("soc_w", NAN),
                values.get("soc_uj", NAN), values.get("soc_temp", NAN)]
        head = f"{t_ns},{t_unix:.6f}"
        label = f"{self.source_label},{self.source_host},{'' if remote_t_ns is None else remote_t_ns}"
        tail = ",".join(csv_cell(v) for v in host) + "," + label
        if not self._gpus:
            self._rows.append(f"{head},,,,,,,,,,{tail}\n")
        for g in self._gpus:
            m = {k: values.get(f"{k}@{g.slot}", NAN) for k in
                 ("power", "energy", "mem", "procmem", "temp", "clock", "throttle", "stale")}
            throttle = csv_cell(m["throttle"])
            stale = "" if math.isnan(m["stale"]) else ("true" if m["stale"] else "false")
            gpu_cells = ",".join(csv_cell(m[k]) for k in ("power", "energy", "mem", "procmem", "temp", "clock"))
            self._rows.append(f"{head},{g.index},{gpu_cells},{throttle},{stale},{tail}\n")

    def _read_host(self, values: dict[str, float]) -> None:
        try:
            busy, total = host_cpu_times()
            values["cpu_busy_s"], values["cpu_total_s"] = busy, total
            if self._cpu_last is not None and total > self._cpu_last[1]:
                share = (busy - self._cpu_last[0]) / (total - self._cpu_last[1])
                values["cpu_percent"] = round(min(max(share, 0.0), 1.0) * 100.0, 2)
            self._cpu_last = (busy, total)
        except Exception as exc:
            self._record_error("host_cpu", exc)
        if self._meminfo_status["available"]:
            values["mem_avail"] = self._safe("meminfo", self._mem_available)
        if self._zones.zones:
            values["soc_temp"] = self._safe("thermal_zones", self._zones.read)
        tree = self._tree
        if tree is not None:
            tree.maybe_refresh()
            values["server_rss"], values["server_cpu"] = tree.read()

    @property
    def _soc_ok(self) -> bool:
        return self._soc is not None and self._soc.status["available"]

    def _mem_available(self) -> float:
        if self.system == "Darwin":
            return float(psutil.virtual_memory().available)
        return read_mem_available(self.meminfo_path)

    def _safe(self, key: str, fn: Callable[[], float]) -> float:
        try:
            return fn()
        except Exception as exc:
            self._record_error(key, exc)
            return NAN

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
        if self._soc is not None:
            self._soc.close()
        if self._node is not None:
            self._node.close()
        self._nvml.shutdown()

    def __enter__(self) -> "Telemetry":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- windows -------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def window(self, name: str, kind: WindowKind = "task") -> Iterator[WindowHandle]:
        """Measure the block as one window; the row is recorded even if the block raises."""
        check_kind(kind)
        t0 = self.sample_now() or time.perf_counter_ns()
        handle = WindowHandle(name, kind, t0)
        try:
            yield handle
        finally:
            t1 = self.sample_now() or time.perf_counter_ns()
            handle.row = self._record(name, kind, t0, t1)

    def measure(self, name: str, kind: WindowKind, t0_ns: int, t1_ns: int) -> dict[str, Any]:
        """A window after the fact, from perf_counter_ns stamps (e.g. a request's start and end)."""
        check_kind(kind)
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
            if column not in WINDOW_TEXT and column != "counter_reset":
                frame[column] = pd.to_numeric(frame[column], errors="coerce")
        return frame

    def samples_frame(self) -> pd.DataFrame:
        """This process's samples, tidy (one row per tick and GPU), without reading the CSV back."""
        if not self.enabled:
            return pd.DataFrame(columns=TELEMETRY_COLUMNS)
        self._flush()
        return read_telemetry(self.out_dir / TELEMETRY_CSV)

    def _record(self, name: str, kind: str, t0: int, t1: int) -> dict[str, Any]:
        if self._node is not None:  # an averaging BMC reports a window's last seconds after it closes
            self._node.wait_for(t1)
        row = self._summarise(name, kind, t0, t1)
        self._windows.append(row)
        if self.enabled:
            append_window_row(self.out_dir / WINDOWS_CSV, row)
        return row

    def _load_previous_windows(self) -> list[dict[str, Any]]:
        path = self.out_dir / WINDOWS_CSV
        if not path.is_file() or path.stat().st_size == 0:
            return []
        frame = read_windows(path)
        return frame.to_dict("records")


def series_names(gpus: list[Any]) -> list[str]:
    """The sampled series: host columns, then each GPU's under its slot."""
    names = ["cpu_busy_s", "cpu_total_s", "cpu_percent", "server_rss", "server_cpu", "rapl_uj", "mem_avail",
             "soc_uj", "soc_w", "soc_temp", "soc_pressure"]
    for gpu in gpus:
        names += [f"{key}@{gpu.slot}" for key in ("power", "energy", "mem", "procmem", "stale", "temp", "clock",
                                                   "throttle")]
    return names


def _close_if_alive(ref: "weakref.ref[Telemetry]") -> None:
    telemetry = ref()
    if telemetry is not None:
        telemetry.close()
