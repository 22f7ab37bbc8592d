"""The host's memory bandwidth: the ceiling the bandwidth law divides by, and the record every run keeps of it.

Every run records (record()): the bandwidth the params declare (a vendor figure), the theoretical one NVML gives
on GPUs (memory bus width × maximum memory clock × 2 transfers per clock; GDDR and HBM clocks as NVML reports
them: RTX 3090 384 bit × 9751 MHz → 936 GB/s, H100 SXM 5120 bit × 2619 MHz → 3352 GB/s) and, on hosts without a
GPU, a measured one (below); `ceiling_gbs` is the first of those three that exists and `ceiling_source` says which.
The measurement is made once per machine and reused (cache file in paths.cache_dir(), keyed by CPU model and core
count, renewed after CACHE_MAX_AGE_S), so a run does not spend seconds on it.

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
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Mapping

import numpy as np

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
LABELS = {"declared": "declared in params (host.memory_bandwidth_gbs)",
          "nvml": "NVML theoretical (bus width × memory clock × 2)",
          "measured": "measured read bandwidth of this machine"}
CACHE_MAX_AGE_S = 7 * 86400
_MEMO: dict[str, dict[str, Any]] = {}


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


def machine_measurement(cpu: str, cpu_count: int | None, cache: Path | None = None, now: float | None = None,
                        measure_fn=None) -> dict[str, Any]:
    """This machine's measure(), made once and reused: from this process's memo, else the cache file when it is
    for the same CPU and younger than CACHE_MAX_AGE_S, else measured now (and cached). Adds measured_unix and
    `reused` (memo | cache | no)."""
    now = time.time() if now is None else now
    key = f"{cpu} × {cpu_count}"
    path = cache or cache_dir() / "bandwidth.json"
    fresh = _MEMO.get(key)
    if fresh is not None and now - fresh["measured_unix"] < CACHE_MAX_AGE_S:
        return {**fresh, "reused": "memo"}
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stored = {}
    if stored.get("machine") == key and now - float(stored.get("measured_unix", 0)) < CACHE_MAX_AGE_S:
        _MEMO[key] = stored
        return {**stored, "reused": f"cache {path}"}
    result = {**(measure_fn or measure)(), "machine": key, "measured_unix": now}
    _MEMO[key] = result
    try:
        write_atomic(path, json.dumps(result, indent=1))
    except OSError:
        pass  # a read-only home only costs the next run a new measurement
    return {**result, "reused": "no"}


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
                                                    "method", "measured_unix", "reused") if k in measured}
    nvml_gbs = next((g["gbs"] for g in nvml if g["gbs"]), None)
    for source, value in (("declared", declared_gbs), ("nvml", nvml_gbs),
                          ("measured", (out["measured"] or {}).get("read_gbs"))):
        if value:
            out.update(ceiling_gbs=round(float(value), 2), ceiling_source=source, ceiling_method=LABELS[source])
            break
    else:
        out.update(ceiling_gbs=None, ceiling_source="", ceiling_method="no bandwidth: GPU without NVML memory "
                   "figures and none declared (host.memory_bandwidth_gbs)")
    return out
