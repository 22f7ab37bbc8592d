"""How a window's figures are computed: the in-memory columnar series, counter deltas interpolated at the
window edges, trapezoid integration, values in force, and WindowArithmetic (energy, power, net energy,
thermal, memory and host figures of one window)."""

from __future__ import annotations

import bisect
import threading
import time
from array import array
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from benchlib.config import metrics
from benchlib.measure.telemetry.boundary import GPU_BOARD, window_boundary
from benchlib.measure.telemetry.clock import CLOCK_FLAG_FACTOR
from benchlib.measure.telemetry.common import NAN, is_number
from benchlib.measure.telemetry.files import WINDOW_COLUMNS
from benchlib.measure.telemetry.nvml import MEM_SOURCE_LABELS, POWER_INSTANT_SOURCE, POWER_USAGE_SOURCE, Gpu
from benchlib.measure.telemetry.soc import THERMAL_PRESSURE_LEVELS


class Series:
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
                column.append(values.get(name, NAN))

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


def _window_row(name: str, kind: str, t0: int, t1: int) -> dict[str, Any]:
    """A window's row before any sensor is read: every column empty, its span on both clocks, no sources."""
    now_ns, now_unix = time.perf_counter_ns(), time.time()
    row: dict[str, Any] = {c: None for c in WINDOW_COLUMNS}
    row.update(window=name, kind=kind, t_start_ns=t0, t_end_ns=t1, duration_s=(t1 - t0) / 1e9,
               t_start_unix=now_unix - (now_ns - t0) / 1e9, t_end_unix=now_unix - (now_ns - t1) / 1e9,
               counter_reset=False, n_samples=0, stale_samples=0, energy_source="", energy_reason="",
               power_source="", temp_source="", mem_source="", throttle_seen="", unavailable="",
               telemetry_source="", telemetry_host="", clock_flag="", energy_boundary="", idle_subtracted=None,
               node_energy_source="", node_energy_reason="", node_energy_boundary="")
    return row


@dataclass
class WindowHandle:
    """What `Telemetry.window()` yields; `row` is filled when the block exits."""

    name: str
    kind: str
    t_start_ns: int
    row: dict[str, Any] | None = None


class WindowArithmetic:
    """How a window's figures are computed from the sampled series: energy (NVML counter per GPU, else a
    labelled trapezoid over instant power; on a GPU-less host the SoC/board sensor — powermetrics, hwmon rails
    — else RAPL), average power = energy ÷ duration, peak power, net energy over the idle baseline, temperature
    and throttling (NVML; else the hottest thermal zone and powermetrics' thermal pressure), memory, host CPU
    and the server process tree.

    A mixin of `Telemetry`: it reads the sampler's state (`_series`, `_gpus`, `_rapl`, `_soc`, `_zones`, `_nvml`,
    `_tree`, `_windows`, `sensors` and the probe statuses) and never samples itself. The source's labels
    (`source_label`, `source_host`), `no_source_reason` (server elsewhere, nothing sampling it) and
    `clock_uncertainty_s` (remote samples) come from the sampler too."""

    source_label = "local"
    source_host = ""
    no_source_reason = ""
    clock_uncertainty_s: float | None = None
    host_temp_label = "thermal_zone_max"
    _node: Any = None  # NodePower (benchlib.measure.telemetry.bmc) when params name a BMC

    def _summarise(self, name: str, kind: str, t0: int, t1: int) -> dict[str, Any]:
        row = _window_row(name, kind, t0, t1)
        row["telemetry_source"], row["telemetry_host"] = self.source_label, self.source_host
        if not self.enabled:
            row["energy_reason"] = row["unavailable"] = "telemetry disabled"
            row["gpus"] = ""
            return row
        self._node_figures(row, t0, t1)
        if self.no_source_reason:
            # the server is elsewhere and nothing samples its host (or its agent is unreachable): this host's
            # readings would pass for the server's, so every sensor cell stays empty with the reason
            row["energy_reason"] = row["unavailable"] = self.no_source_reason
            row["gpus"] = ""
            return row
        missing: list[str] = []
        # two slow periods either side: 1 Hz values (temperature, host CPU, MemAvailable) have a value in force
        # at t0 and bracket both edges even when the window is measured after the fact
        t, cols = self._series.span(t0, t1, margin_ns=int(2e9 / self.settings.slow_hz))
        inside = (t >= t0) & (t <= t1)
        row["n_samples"] = int(inside.sum())
        row["gpus"] = ";".join(str(g.index) for g in self._gpus)
        rapl_j, soc_j = self._energy(row, t, cols, t0, t1, missing)
        self._peak_power(row, t, cols, t0, t1, inside, rapl_j, soc_j, missing)
        self._net_energy(row, missing)
        # what energy_j covers (telemetry/boundary); it is gross: net_energy_j is the idle-subtracted figure
        row["energy_boundary"] = window_boundary(row["energy_source"], bool(self._gpus),
                                                 self._soc if self._soc_ok else None, self._rapl)
        row["idle_subtracted"] = False if row["energy_j"] is not None else None
        self._thermal(row, t, cols, t0, t1, missing)
        self._memory(row, t, cols, t0, t1, missing)
        self._host_side(row, t, cols, t0, t1, missing)
        if self._gpus:
            row["stale_samples"] = int(sum(np.nansum(cols[f"stale@{g.slot}"][inside]) for g in self._gpus))
        row["unavailable"] = "; ".join(missing)
        self._clock_flag(row)
        if row["energy_boundary"] == GPU_BOARD and is_number(row["energy_j"]) and is_number(row["node_energy_j"]) \
                and row["node_energy_j"] > 0:
            row["gpu_share_of_node"] = row["energy_j"] / row["node_energy_j"]
        return row

    def _node_figures(self, row: dict[str, Any], t0: int, t1: int) -> None:
        """The whole node from its BMC (telemetry.bmc), beside the chip-level energy: its own columns, its own
        boundary. The BMC is named in params for the server's node, so it is read whatever samples the chip."""
        node = self._node
        if node is None:
            row["node_energy_reason"] = "no BMC in params (telemetry.bmc.protocol none)"
            return
        row.update(node.figures(t0, t1))

    def _clock_flag(self, row: dict[str, Any]) -> None:
        """Remote samples are placed on this clock within ± the offset's uncertainty: a window not several times
        longer than that has edges the samples may straddle."""
        uncertainty = self.clock_uncertainty_s
        if uncertainty is None:
            return
        row["clock_uncertainty_s"] = uncertainty
        if row["duration_s"] < CLOCK_FLAG_FACTOR * uncertainty:
            row["clock_flag"] = (f"window {row['duration_s'] * 1e3:.3g} ms < {CLOCK_FLAG_FACTOR} × the clock "
                                 f"offset's uncertainty ({uncertainty * 1e3:.3g} ms): edges uncertain")

    def _energy(self, row: dict[str, Any], t: np.ndarray, cols: dict[str, np.ndarray], t0: int, t1: int,
                missing: list[str]) -> tuple[float | None, float | None]:
        """Energy and average power: NVML counter per GPU → labelled trapezoid per GPU; on a host without GPUs
        the SoC/board sensor, else RAPL. Returns (RAPL joules, SoC joules), read on every host (peak power)."""
        if self._gpus:
            self._gpus_energy(row, t, cols, t0, t1)
        rapl_j = None
        if self._rapl.status["available"]:
            delta, reset, why = _counter_delta(t, cols["rapl_uj"], t0, t1)
            rapl_j = None if delta is None else delta / 1e6
            if rapl_j is None:
                missing.append(f"rapl_energy_j: {why}")
        else:
            missing.append(f"rapl_energy_j: {self._rapl.status['reason']}")
        row["rapl_energy_j"] = rapl_j
        soc_j, soc_why = None, self.sensors["soc_power"]["reason"]
        if self._soc_ok:
            delta, _, soc_why = _counter_delta(t, cols["soc_uj"], t0, t1)
            soc_j = None if delta is None else delta / 1e6
        if not self._gpus:
            if soc_j is not None:  # a whole-board or SoC package scope: wider than RAPL's CPU package
                row["energy_j"] = soc_j
                row["energy_source"] = self._soc.energy_source
            elif rapl_j is not None:
                row["energy_j"], row["energy_source"] = rapl_j, "rapl"
            else:
                rapl_why = self._rapl.status["reason"] or "RAPL samples do not cover the window"
                row["energy_reason"] = f"no GPU ({self._nvml.reason}); no SoC power ({soc_why}); no RAPL ({rapl_why})"
        duration = row["duration_s"]
        if row["energy_j"] is not None:
            if duration > 0:
                row["avg_power_w"] = metrics.average_power_w(row["energy_j"], duration)  # never a mean of samples
            else:
                missing.append("avg_power_w: zero-length window")
        else:
            missing.append(f"energy_j: {row['energy_reason']}")
        return rapl_j, soc_j

    def _gpus_energy(self, row: dict[str, Any], t: np.ndarray, cols: dict[str, np.ndarray], t0: int, t1: int) -> None:
        """Every GPU's energy summed (_gpu_energy each), or why not: one GPU without energy leaves it empty."""
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

    def _peak_power(self, row: dict[str, Any], t: np.ndarray, cols: dict[str, np.ndarray], t0: int, t1: int,
                    inside: np.ndarray, rapl_j: float | None, soc_j: float | None, missing: list[str]) -> None:
        """Peak power: summed instant power per tick over the GPUs, else the SoC sensor's, else RAPL's per-tick
        average rate (labelled)."""
        if self._gpus and all(g.power for g in self._gpus):
            total = np.sum([cols[f"power@{g.slot}"] for g in self._gpus], axis=0)
            peak = total[inside & ~np.isnan(total)]
            if not len(peak):  # a window shorter than one sample period: the reading in force
                peak = _held(t, total, t0, t1)
            if len(peak):
                row["peak_power_w"] = float(peak.max())
                row["power_source"] = "+".join(dict.fromkeys(g.labels.get("power") or (
                    "nvml_instant" if g.power == "instant" else "nvml_power_usage_1s_avg") for g in self._gpus))
            else:
                missing.append("peak_power_w: no power samples in the window")
        elif self._gpus:
            missing.append(f"peak_power_w: {self.sensors['power']['reason']}")
        elif soc_j is not None:
            peak = _held(t, cols["soc_w"], t0, t1)
            row["peak_power_w"] = float(peak.max()) if len(peak) else None
            row["power_source"] = self._soc.power_source
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

    def _host_side(self, row: dict[str, Any], t: np.ndarray, cols: dict[str, np.ndarray], t0: int, t1: int,
                   missing: list[str]) -> None:
        """The host side: CPU utilisation, the server process tree's peak RSS and CPU time, MemAvailable's drop."""
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

    def _gpu_energy(self, g: Gpu, t: np.ndarray, cols: dict[str, np.ndarray], t0: int, t1: int
                    ) -> tuple[float | None, str, str, bool]:
        """(joules, source, note-or-why, counter_reset) for one GPU."""
        reset = False
        note = ""
        if g.energy:
            delta, reset, why = _counter_delta(t, cols[f"energy@{g.slot}"], t0, t1)
            if delta is not None:
                return delta / 1000.0, g.labels.get("energy", "nvml_counter"), "", False
            note = f"energy counter: {why}"
        else:
            note = f"no energy counter ({g.sensors['energy_counter']['reason']})"
        if g.power:
            joules = _trapezoid(t, cols[f"power@{g.slot}"], t0, t1)
            label = g.labels.get("power_text") or (POWER_INSTANT_SOURCE if g.power == "instant" else POWER_USAGE_SOURCE)
            if joules is not None:
                return joules, "power_trapezoid", f"{note}; integrated {label} samples", reset
            return None, "", f"{note}; power samples do not cover the window", reset
        return None, "", f"{note}; no power reading ({g.sensors['power']['reason']})", reset

    def _net_energy(self, row: dict[str, Any], missing: list[str]) -> None:
        """Energy above the latest idle window's average power (same energy source, else not comparable)."""
        if row["energy_j"] is None:
            missing.append("net_energy_j: no energy")
            return
        idle = [w for w in self._windows if w.get("kind") == "idle" and is_number(w.get("avg_power_w"))
                and w.get("energy_source") == row["energy_source"]]
        if row["kind"] == "idle" and is_number(row["avg_power_w"]):
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
            self._host_thermal(row, t, cols, t0, t1, missing)
            return
        row["temp_source"] = "+".join(dict.fromkeys(g.labels.get("temp", "nvml") for g in self._gpus))
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

    def _host_thermal(self, row: dict[str, Any], t: np.ndarray, cols: dict[str, np.ndarray], t0: int, t1: int,
                      missing: list[str]) -> None:
        """No GPU: the hottest thermal zone; thermal pressure levels seen (powermetrics) as throttle_seen."""
        temps = _held(t, cols["soc_temp"], t0, t1)
        if len(temps):
            row["temp_avg_c"], row["temp_peak_c"] = float(temps.mean()), float(temps.max())
            row["temp_source"] = self.host_temp_label
        else:
            missing.append(f"temp_*: no GPU ({self._nvml.reason}); {self._zones.status['reason'] or 'no samples'}")
        levels = _held(t, cols["soc_pressure"], t0, t1)
        if len(levels):
            row["throttle_seen"] = ";".join(f"thermal_pressure:{THERMAL_PRESSURE_LEVELS[int(i)]}"
                                            for i in sorted(set(levels.astype(int))))
        else:
            missing.append("throttle_seen: no GPU and no thermal pressure (powermetrics)")

    def _memory(self, row: dict[str, Any], t: np.ndarray, cols: dict[str, np.ndarray], t0: int, t1: int,
                missing: list[str]) -> None:
        """Best memory view: NVML device memory (v2/v1), else per-process sum (unified), else server RSS (CPU)."""
        series: np.ndarray | None = None
        if self._gpus:
            if all(g.memory for g in self._gpus):
                parts = [cols[f"{'procmem' if g.memory == 'process_sum' else 'mem'}@{g.slot}"] for g in self._gpus]
                series = np.sum(parts, axis=0)
                row["mem_source"] = "+".join(dict.fromkeys(g.labels.get("mem") or MEM_SOURCE_LABELS[g.memory]
                                                           for g in self._gpus))
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
