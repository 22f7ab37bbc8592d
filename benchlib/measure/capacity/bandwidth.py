"""The host's memory bandwidth: the ceiling the bandwidth law divides by, and the record every run keeps of it.

Every run records (record()): the bandwidth the params declare (a vendor figure), the theoretical one NVML gives
on GPUs (memory bus width × maximum memory clock × 2 transfers per clock; GDDR and HBM clocks as NVML reports
them: RTX 3090 384 bit × 9751 MHz → 936 GB/s, H100 SXM 5120 bit × 2619 MHz → 3352 GB/s) and, on hosts without a
GPU, a measured one (below); `ceiling_gbs` is the first of those three that exists and `ceiling_source` says which.

The record keeps every measurement (cache file bandwidth.json in paths.cache_dir(), a list per machine keyed by CPU
model and core count, the newest KEEP), each with its time (measured_unix), read and copy GB/s and the machine's
load while it ran (load_during: the load average before and after, the machine's busy CPU share, this process's
share, and other_cpu_percent, the share every other process used). A run reuses the record; a new measurement is
made when the newest is older than CACHE_MAX_AGE_S (7 days) — UNDER_LOAD_RETRY_S (an hour) while none was taken
with the machine otherwise idle —, when there is none, or when asked (remeasure(): the ladder, `make ladder`,
measures afresh each time). A one-measurement file of the older format is read as a list of
one whose load is unknown.

The rule the roofline uses over them (choose()): the best read bandwidth among the measurements taken while the
machine was otherwise idle — other processes used < IDLE_OTHER_CPU_PCT (10 %) of its CPU; if there is none (an
unknown load counts as not idle), the best of them all, with ceiling_source "measured under load". Best, because
other work only ever slows a pass down; idle, because a figure taken beside other jobs is not the machine's.

Measured:

Two numbers, each the best of `repeats` passes over buffers far larger than any CPU cache, split over all cores
(numpy releases the GIL inside these loops):
- read: a reduction over float32 data (`np.add.reduce`): bytes read ÷ time. Decode reads weights, so this is the
  ceiling to compare decode with.
- copy: `np.copyto` between two buffers, counted as STREAM does: (bytes read + bytes written) ÷ time.
GB is 10^9 bytes. The best pass is reported (the least disturbed by other work); all passes are kept. The
ceiling of a CPU host is the read figure: decode reads weights, and copy counts written bytes too."""

from __future__ import annotations

import json
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import psutil

from benchlib.config.paths import cache_dir
from benchlib.records.rows import write_atomic

METHOD = ("best of {repeats} passes over {mib} MiB on {threads} thread(s): read = np.add.reduce over float32, "
          "bytes read ÷ time; copy = np.copyto, (read + written bytes) ÷ time (STREAM convention); GB = 1e9 bytes")


def _timed(threads: int, work) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, range(threads)))
    return time.perf_counter() - start


def measure(size_mib: int = 512, repeats: int = 5, threads: int | None = None) -> dict[str, Any]:
    """Read and copy bandwidth in GB/s (see the module docstring); returns the figures and how they were taken."""
    threads = threads or os.cpu_count() or 1
    n = size_mib * (1 << 20) // 4 // threads * threads
    src = np.ones(n, dtype=np.float32)
    dst = np.empty_like(src)
    parts = np.array_split(np.arange(n), threads)
    bounds = [(int(p[0]), int(p[-1]) + 1) for p in parts]

    def read(i: int) -> None:
        lo, hi = bounds[i]
        np.add.reduce(src[lo:hi])

    def copy(i: int) -> None:
        lo, hi = bounds[i]
        np.copyto(dst[lo:hi], src[lo:hi])

    np.copyto(dst, src)  # touch the destination pages once: first-touch page faults are not bandwidth
    nbytes = src.nbytes
    read_s = [_timed(threads, read) for _ in range(repeats)]
    copy_s = [_timed(threads, copy) for _ in range(repeats)]
    return {
        "read_gbs": nbytes / min(read_s) / 1e9,
        "copy_gbs": 2 * nbytes / min(copy_s) / 1e9,
        "read_gbs_passes": [round(nbytes / s / 1e9, 2) for s in read_s],
        "copy_gbs_passes": [round(2 * nbytes / s / 1e9, 2) for s in copy_s],
        "threads": threads, "size_mib": size_mib, "repeats": repeats,
        "method": METHOD.format(repeats=repeats, mib=size_mib, threads=threads),
    }


# ceiling_source -> what it is (the manifest's ceiling_method, the paper's notes)
MEASURED_UNDER_LOAD = "measured under load"
LABELS = {"declared": "declared in params (host.memory_bandwidth_gbs)",
          "nvml": "NVML theoretical (bus width × memory clock × 2)",
          "measured": "measured read bandwidth of this machine (the best measurement taken while it was otherwise "
                      "idle)",
          MEASURED_UNDER_LOAD: "measured read bandwidth of this machine, measured under load (no measurement was "
                               "taken while it was otherwise idle: the best of them)"}
CACHE_MAX_AGE_S = 7 * 86400
# With no measurement taken while the machine was otherwise idle, another is made once this much older: a figure
# taken beside other jobs understates the machine (a decode rate then beats its "ceiling"), and a later run may find
# it idle. Once an hour at most, so a machine that is always busy pays a measurement an hour, not one a run.
UNDER_LOAD_RETRY_S = 3600.0
IDLE_OTHER_CPU_PCT = 10.0
KEEP = 200
RULE = (f"the best read bandwidth among the measurements taken while other processes used < {IDLE_OTHER_CPU_PCT:g} % "
        "of the CPU; if none was, the best of all, labelled measured under load")
_MEMO: dict[str, list[dict[str, Any]]] = {}


def theoretical_gbs(bus_width_bits: float, memory_clock_mhz: float) -> float:
    """Peak DRAM bandwidth in GB/s from the bus width and the memory clock NVML reports (double data rate)."""
    return bus_width_bits / 8 * memory_clock_mhz * 1e6 * 2 / 1e9


def nvml_memory(nvml: Any, handle: Any) -> dict[str, Any]:
    """One GPU's bus width, maximum memory clock and theoretical bandwidth; a reason instead where NVML fails."""
    try:
        bits = int(nvml.nvmlDeviceGetMemoryBusWidth(handle))
        mhz = int(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM))
    except Exception as exc:  # noqa: BLE001 — unified-memory parts (GB10, Jetson) report Not Supported
        return {"memory_bandwidth_gbs": None, "memory_bandwidth_reason": f"{type(exc).__name__}: {exc}"}
    if bits <= 0 or mhz <= 0:
        return {"memory_bandwidth_gbs": None, "memory_bandwidth_reason": f"NVML gave bus width {bits} bit, "
                                                                         f"memory clock {mhz} MHz"}
    return {"memory_bus_width_bits": bits, "memory_clock_max_mhz": mhz,
            "memory_bandwidth_gbs": round(theoretical_gbs(bits, mhz), 1)}


def load_during(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """fn()'s result with `load`: what else the machine did while it ran — the 1-minute load average before and
    after, the whole machine's busy CPU share over the run (from psutil.cpu_times deltas, the figure
    psutil.cpu_percent gives, without resetting the reference other callers of cpu_percent keep), this process's
    own share, and `other_cpu_percent`, the share every other process used (machine busy − own, ≥ 0)."""
    me = psutil.Process()
    before_load, before_cpu, before_own = os.getloadavg(), psutil.cpu_times(), me.cpu_times()
    wall0 = time.perf_counter()
    result = fn()
    wall = time.perf_counter() - wall0
    after_cpu, after_own = psutil.cpu_times(), me.cpu_times()
    total = sum(after_cpu) - sum(before_cpu)
    idle = sum(getattr(after_cpu, f, 0.0) - getattr(before_cpu, f, 0.0) for f in ("idle", "iowait"))
    busy = max(total - idle, 0.0)
    own = (after_own.user - before_own.user) + (after_own.system - before_own.system)
    busy_pct = 100 * busy / total if total > 0 else math.nan
    own_pct = 100 * own / total if total > 0 else math.nan
    return {**result, "load": {
        "loadavg_1m_before": round(before_load[0], 2), "loadavg_1m_after": round(os.getloadavg()[0], 2),
        "cpu_percent": round(busy_pct, 1), "own_cpu_percent": round(min(own_pct, busy_pct), 1),
        "other_cpu_percent": round(max(busy_pct - own_pct, 0.0), 1), "wall_s": round(wall, 3),
        "cpu_count": os.cpu_count()}}


def _read_store(path: Path) -> dict[str, list[dict[str, Any]]]:
    """{machine: [measurement, …]} from the cache file; the older one-measurement file ({"machine": …,
    "read_gbs": …}) becomes a list of one, its load unknown (None)."""
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(stored, dict):
        return {}
    if isinstance(stored.get("machines"), dict):
        return {k: [m for m in v if isinstance(m, dict)] for k, v in stored["machines"].items() if isinstance(v, list)}
    if stored.get("machine") and stored.get("read_gbs") is not None:  # format 1: one measurement, no load
        return {str(stored["machine"]): [{**{k: v for k, v in stored.items() if k != "machine"}, "load": None}]}
    return {}


def is_idle(measurement: Mapping[str, Any]) -> bool:
    """Taken while other processes used less than IDLE_OTHER_CPU_PCT of the machine's CPU (unknown load: no)."""
    other = (measurement.get("load") or {}).get("other_cpu_percent")
    return isinstance(other, (int, float)) and not math.isnan(other) and other < IDLE_OTHER_CPU_PCT


def choose(measurements: list[Mapping[str, Any]]) -> tuple[dict[str, Any] | None, bool]:
    """The rule (module docstring): (the best read bandwidth among the idle measurements, False), else (the best
    of them all, True: measured under load); (None, False) when there is none."""
    usable = [m for m in measurements if isinstance(m.get("read_gbs"), (int, float))]
    if not usable:
        return None, False
    idle = [m for m in usable if is_idle(m)]
    return dict(max(idle or usable, key=lambda m: m["read_gbs"])), not idle


def machine_measurements(cpu: str, cpu_count: int | None, cache: Path | None = None, now: float | None = None,
                         measure_fn=None, fresh: bool = False) -> tuple[list[dict[str, Any]], str]:
    """Every measurement of this machine (oldest first) and whether one was made now (`reused`: memo | cache |
    no). A new one is made when asked (fresh), when there is none, or when the newest is older than
    CACHE_MAX_AGE_S (UNDER_LOAD_RETRY_S while none of them is idle); it is appended to the cache file (the
    newest KEEP per machine are kept)."""
    now = time.time() if now is None else now
    key = f"{cpu} × {cpu_count}"
    path = cache or cache_dir() / "bandwidth.json"
    store = _read_store(path)
    known = store.get(key) or _MEMO.get(key) or []
    newest = max((float(m.get("measured_unix") or 0) for m in known), default=0.0)
    max_age = CACHE_MAX_AGE_S if any(map(is_idle, known)) else UNDER_LOAD_RETRY_S
    if known and not fresh and now - newest < max_age:
        return known, ("memo" if key not in store else f"cache {path}")
    known = [*known, {**load_during(measure_fn or measure), "measured_unix": now}][-KEEP:]
    _MEMO[key] = known
    store[key] = known
    try:
        write_atomic(path, json.dumps({"format": 2, "machines": store}, indent=1))
    except OSError:
        pass  # a read-only home only costs the next run a new measurement
    return known, "no"


def remeasure(cpu: str, cpu_count: int | None, cache: Path | None = None, measure_fn=None) -> dict[str, Any]:
    """Measure now, keep it in the record with the others, and return it (the ladder asks for a fresh one)."""
    known, _ = machine_measurements(cpu, cpu_count, cache, measure_fn=measure_fn, fresh=True)
    return known[-1]


def machine_measurement(cpu: str, cpu_count: int | None, cache: Path | None = None, now: float | None = None,
                        measure_fn=None, fresh: bool = False) -> dict[str, Any]:
    """The measurement the roofline uses, chosen by the rule among every one this machine has (module docstring),
    with `reused`, `under_load`, `n_measurements`, `n_idle` and `measurements` (each one's time, figures and
    other processes' CPU share)."""
    known, reused = machine_measurements(cpu, cpu_count, cache, now, measure_fn, fresh)
    chosen, under_load = choose(known)
    return {**(chosen or {}), "reused": reused, "under_load": under_load, "rule": RULE,
            "n_measurements": len(known), "n_idle": sum(map(is_idle, known)),
            "measurements": [{"measured_unix": m.get("measured_unix"), "read_gbs": m.get("read_gbs"),
                              "copy_gbs": m.get("copy_gbs"),
                              "other_cpu_percent": (m.get("load") or {}).get("other_cpu_percent"),
                              "loadavg_1m": (m.get("load") or {}).get("loadavg_1m_before")} for m in known]}


def record(declared_gbs: float | None, gpu: Mapping[str, Any], cpu: str, cpu_count: int | None,
           cache: Path | None = None, measure_fn=None) -> dict[str, Any]:
    """The run's bandwidth record (module docstring): declared, nvml (per GPU), measured (hosts without a GPU),
    ceiling_gbs and ceiling_source (a key of LABELS) with its method."""
    gpus = [g for g in (gpu.get("gpus") or []) if isinstance(g, Mapping)] if gpu.get("available") else []
    nvml = [{"index": g.get("index"), "name": g.get("name"), "gbs": g.get("memory_bandwidth_gbs"),
             "reason": g.get("memory_bandwidth_reason", "")} for g in gpus]
    out: dict[str, Any] = {"declared_gbs": declared_gbs, "nvml": nvml, "measured": None}
    if not gpus:
        measured = machine_measurement(cpu, cpu_count, cache, measure_fn=measure_fn)
        out["measured"] = {k: measured[k] for k in ("read_gbs", "copy_gbs", "read_gbs_passes", "copy_gbs_passes",
                                                    "method", "measured_unix", "reused", "load", "under_load",
                                                    "rule", "n_measurements", "n_idle", "measurements")
                           if k in measured}
    nvml_gbs = next((g["gbs"] for g in nvml if g["gbs"]), None)
    measured_source = MEASURED_UNDER_LOAD if (out["measured"] or {}).get("under_load") else "measured"
    for source, value in (("declared", declared_gbs), ("nvml", nvml_gbs),
                          (measured_source, (out["measured"] or {}).get("read_gbs"))):
        if value:
            out.update(ceiling_gbs=round(float(value), 2), ceiling_source=source, ceiling_method=LABELS[source])
            break
    else:
        out.update(ceiling_gbs=None, ceiling_source="", ceiling_method="no bandwidth: GPU without NVML memory "
                   "figures and none declared (host.memory_bandwidth_gbs)")
    return out
