"""The host's measured memory bandwidth: the ceiling the bandwidth law divides by, when no vendor figure is given.

Two numbers, each the best of `repeats` passes over buffers far larger than any CPU cache, split over all cores
(numpy releases the GIL inside these loops):
- read: a reduction over float32 data (`np.add.reduce`): bytes read ÷ time. Decode reads weights, so this is the
  ceiling to compare decode with.
- copy: `np.copyto` between two buffers, counted as STREAM does: (bytes read + bytes written) ÷ time.
GB is 10^9 bytes. The best pass is reported (the least disturbed by other work); all passes are kept."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

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
