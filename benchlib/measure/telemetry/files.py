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


TELEMETRY_COLUMNS = [
    "t_ns", "t_unix", "gpu",
    "power_w", "energy_mj", "mem_used_bytes", "gpu_proc_mem_bytes", "temp_c", "sm_clock_mhz", "throttle", "stale",
    "cpu_percent", "server_rss_bytes", "server_cpu_s", "rapl_energy_uj", "mem_available_bytes",
    "soc_power_w", "soc_energy_uj", "soc_temp_c",
    "source", "host", "remote_t_ns",
]


WINDOW_COLUMNS = [
    "window", "kind", "t_start_ns", "t_end_ns", "t_start_unix", "t_end_unix", "duration_s", "gpus",
    "energy_j", "energy_source", "energy_reason", "avg_power_w", "peak_power_w", "power_source",
    "idle_power_w", "net_energy_j", "counter_reset", "rapl_energy_j",
    "temp_avg_c", "temp_peak_c", "temp_source", "throttle_seen",
    "mem_baseline_bytes", "mem_peak_bytes", "mem_delta_bytes", "mem_source", "mem_available_drop_bytes",
    "cpu_util_avg", "server_rss_peak_bytes", "server_cpu_s",
    "n_samples", "stale_samples", "unavailable",
    "telemetry_source", "telemetry_host", "clock_uncertainty_s", "clock_flag",
    "energy_boundary", "idle_subtracted",
    # the whole node from its BMC (telemetry.bmc), beside the chip-level figure above: never mixed into it
    "node_energy_j", "node_energy_error_j", "node_avg_power_w", "node_energy_source", "node_energy_reason",
    "node_energy_boundary", "node_averaging_s", "node_samples", "gpu_share_of_node",
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
