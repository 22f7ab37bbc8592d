"""Power, energy, memory and host telemetry that never crashes for lack of a sensor.

Why not "poll power every 5 s": a 5 s poll misses most of a short task, and NVML's plain power reading is a
1 s average on Ampere and newer. So energy comes from NVML's total-energy counter (mJ) where the GPU has one,
on a GPU-less host from the SoC/board sensor (powermetrics on a Mac, hwmon rails on a Jetson) else RAPL, and
only otherwise from a labelled trapezoid over instant-power samples.
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

Modules (each imports only those listed before it):
    common     window kinds, sensor-status records
    files      telemetry.csv / telemetry_windows.csv / sensors.json: columns, writing a cell, reading back
    nvml       NVIDIA GPUs through NVML: selection, probing, NaN-safe reads
    host       RAPL, process tree, MemAvailable, host CPU
    soc        hosts NVML does not see: Apple powermetrics, hwmon power rails (Jetson), thermal zones
    clock      whether a server URL names this host; a remote clock's offset (NTP-style round trips)
    windows    how a window's energy, power, temperature and memory are computed (WindowArithmetic)
    sampler    Telemetry: the background sampler and its windows
    exporters  DCGM exporter and node_exporter scraped as a source on the server's host
    remote     RemoteTelemetry: the sampler's API over a source on the server's host (agent or exporters)
    agent      `frontier-bench telemetry-agent`: the sampler on the server's host, served over HTTP

Where the samples come from is telemetry.source: local (this process, this host), agent or exporters (the
server's host). A server on another host with source local gets no sensor cells at all, only the reason.

Part of the measurement layer: imports params and schema only; tokens per joule (which needs requests)
is analysis and lives in benchlib.analysis.task_stats.

Rooms of measure/ it may import: pacing, http.
"""

from benchlib.measure.telemetry.common import KINDS, WindowKind
from benchlib.measure.telemetry.files import (
                                      SENSORS_JSON,
                                      TELEMETRY_COLUMNS,
                                      TELEMETRY_CSV,
                                      WINDOW_COLUMNS,
                                      WINDOWS_CSV,
                                      read_telemetry,
                                      read_windows,
)
from benchlib.measure.telemetry.nvml import select_gpus
from benchlib.measure.telemetry.remote import RemoteTelemetry
from benchlib.measure.telemetry.sampler import Telemetry
from benchlib.measure.telemetry.windows import WindowHandle

__all__ = ["KINDS", "RemoteTelemetry", "SENSORS_JSON", "TELEMETRY_COLUMNS", "TELEMETRY_CSV", "Telemetry", "WINDOWS_CSV",
           "WINDOW_COLUMNS", "WindowHandle", "WindowKind", "read_telemetry", "read_windows", "select_gpus"]
