"""The telemetry files and their typed columns: telemetry.csv (the time series), telemetry_windows.csv
(one row per window, appended and fsynced as each closes) and sensors.json; how a cell is written and
how each file is read back."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from benchlib.records.rows import append_csv_row
from benchlib.records.schema import ColumnKind, read_csv

TELEMETRY_CSV = "telemetry.csv"


WINDOWS_CSV = "telemetry_windows.csv"


SENSORS_JSON = "sensors.json"


TELEMETRY_COLUMNS = [  # each line's comment is its columns' meaning (docs/columns.md is written from them)
    "t_ns", "t_unix",  # when the sample was taken: monotonic ns (the clock windows are cut on) and wall clock
    "gpu",  # the GPU's index (empty on a host without one)
    "power_w",  # GPU board power, W (NVML's instant field, else its 1 s average: sensors.json says which)
    "energy_mj",  # NVML's total-energy counter, mJ: windows difference it
    "mem_used_bytes", "gpu_proc_mem_bytes",  # GPU memory used on the device; by the server's processes
    "temp_c", "sm_clock_mhz",  # GPU temperature, °C; SM clock, MHz
    "throttle",  # NVML's clock-event (throttle) reasons, a bit mask
    "stale",  # the GPU's values repeat the previous sample exactly (no fresh reading)
    "cpu_percent",  # the host's CPU use, % of all cores
    "server_rss_bytes", "server_cpu_s",  # the server's process tree: resident memory; CPU time so far
    "rapl_energy_uj",  # RAPL's package energy counter, µJ
    "mem_available_bytes",  # the host's MemAvailable
    # SoC or board power, its energy counter and temperature (powermetrics, hwmon, thermal zones)
    "soc_power_w", "soc_energy_uj", "soc_temp_c",
    "source", "host",  # who sampled (local, agent, exporters) and which host
    "remote_t_ns",  # an agent's sample: the instant on the agent's own clock (t_ns is it placed on ours)
]


WINDOW_COLUMNS = [  # each line's comment is its columns' meaning (docs/columns.md is written from them)
    # the window's name (idle, loaded, a task, concurrency:4, rate:r2.5) and kind (idle, loaded, task, level, steady)
    "window", "kind",
    "t_start_ns", "t_end_ns", "t_start_unix", "t_end_unix",  # its edges, monotonic ns and wall clock
    "duration_s",  # its length, s
    "gpus",  # the GPUs it covers, by index (;-separated)
    "energy_j",  # energy over the window, J, from a counter (energy_source), idle not subtracted
    # the counter it came from (nvml_counter, rapl, powermetrics, hwmon, dcgm_counter, …); why there is none
    "energy_source", "energy_reason",
    "avg_power_w",  # energy_j ÷ duration_s (never a mean of samples)
    "peak_power_w", "power_source",  # the highest power sample, W, and which reading it is
    "idle_power_w",  # the idle window's average power, W
    "net_energy_j",  # energy_j less idle_power_w × duration_s
    "counter_reset",  # an energy counter went backwards inside the window (a reset): its power samples are integrated
    "rapl_energy_j",  # RAPL's package energy over the window, J, kept beside a GPU's
    "temp_avg_c", "temp_peak_c", "temp_source",  # temperature, mean and peak, °C, and where it was read
    "throttle_seen",  # throttle reasons or thermal pressure seen inside the window
    # memory at the start, at its peak, the peak's rise over the start, and where it was read
    "mem_baseline_bytes", "mem_peak_bytes", "mem_delta_bytes", "mem_source",
    "mem_available_drop_bytes",  # how far the host's MemAvailable fell below its start
    "cpu_util_avg",  # the host's CPU use over the window, %
    # the server's process tree: peak resident memory; CPU time used in the window
    "server_rss_peak_bytes", "server_cpu_s",
    "n_samples", "stale_samples",  # samples inside the window; of them, repeated values (no fresh reading)
    "unavailable",  # the sensors that gave nothing here, and why
    "telemetry_source", "telemetry_host",  # who sampled (local, agent, exporters) and which host
    "clock_uncertainty_s",  # a remote source's clock offset uncertainty (half the best round trip)
    "clock_flag",  # the window is shorter than 4 × that uncertainty: its edges may fall on the wrong side of a sample
    "energy_boundary",  # what the joules cover: GPU board, CPU package, SoC CPU+GPU+ANE, whole board, rail set, wall
    "idle_subtracted",  # false for energy_j and every figure from it (net_energy_j is the idle-subtracted one)
    # the whole node from its BMC (telemetry.bmc), beside the chip-level figure above, never mixed into it: its energy,
    # J, and error bound, J; average power, W; where the energy came from (counter or deconvolved average) and why not
    "node_energy_j", "node_energy_error_j", "node_avg_power_w", "node_energy_source", "node_energy_reason",
    # its boundary (whole node, input power (BMC)); the BMC's averaging window, s; readings inside the window
    "node_energy_boundary", "node_averaging_s", "node_samples",
    "gpu_share_of_node",  # energy_j ÷ node_energy_j where a GPU counter and a BMC are both present
]


def csv_cell(value: Any) -> str:
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


def append_window_row(path: Path, row: Mapping[str, Any]) -> None:
    """Append one window row and fsync, like requests.csv: a crash loses at most the window in progress (an older
    layout's file is rewritten in this one first: records.append_csv_row)."""
    append_csv_row(path, WINDOW_COLUMNS, {k: csv_cell(v) if not isinstance(v, str) else v for k, v in row.items()})


WINDOW_TEXT = ("window", "kind", "gpus", "energy_source", "energy_reason", "power_source", "temp_source",
               "throttle_seen", "mem_source", "unavailable", "telemetry_source", "telemetry_host", "clock_flag",
               "energy_boundary", "node_energy_source", "node_energy_reason", "node_energy_boundary")
# The typed schema of a window row: text, exact nanosecond edges, the reset flag, everything else a number.
WINDOW_KINDS: dict[str, ColumnKind] = {
    c: ("str" if c in WINDOW_TEXT else "int" if c in ("t_start_ns", "t_end_ns") else
        "bool" if c == "counter_reset" else "optional_bool" if c == "idle_subtracted" else "float")
    for c in WINDOW_COLUMNS}
TELEMETRY_KINDS: dict[str, ColumnKind] = {c: ("int" if c in ("t_ns", "remote_t_ns") else
                                              "str" if c in ("source", "host") else "float") for c in TELEMETRY_COLUMNS}


def read_windows(path: Path | str) -> pd.DataFrame:
    """telemetry_windows.csv (or the runner's windows.csv, whose extra efficiency columns come back as numbers
    or text) typed by WINDOW_KINDS; a torn row is left out with a warning."""
    return read_csv(path, WINDOW_KINDS, label=str(path), required=("window", "t_start_ns"))


def read_telemetry(path: Path | str) -> pd.DataFrame:
    """telemetry.csv typed by TELEMETRY_KINDS; a half-written last line (SIGKILL) is left out with a warning."""
    return read_csv(path, TELEMETRY_KINDS, label=str(path), required=("t_ns",))
