"""The host's dense compute: the ceiling the plan's prefill roofline divides by (benchlib.analysis.plan).

Measured on a host without a GPU figure: float32 matrix products (numpy's BLAS, all cores) of `size` × `size`,
2·size³ FLOPs each, best of `repeats` passes (the least disturbed by other work), in TFLOP/s. llama.cpp multiplies
quantized weights with its own kernels, not this BLAS, so the figure is a scale, not the server's speed: the plan
divides measured prefill rates by it (the prefill efficiency), and predicts with the same division, so on one
host the scale cancels out of the prediction and only the ratio between models counts (docs/plan.md)."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

METHOD = "best of {repeats} float32 matrix products {size}×{size} (2·n³ FLOPs each) on numpy's BLAS, {threads} cores"


def measure(size: int = 1024, repeats: int = 3) -> dict[str, Any]:
    """TFLOP/s of the best pass and how it was taken."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    np.matmul(a, b)  # the first product pays the BLAS threads' start-up
    best = min(_timed(a, b) for _ in range(repeats))
    return {"tflops": 2 * size ** 3 / best / 1e12, "seconds": best,
            "method": METHOD.format(repeats=repeats, size=size, threads=os.cpu_count())}


def _timed(a: np.ndarray, b: np.ndarray) -> float:
    start = time.perf_counter()
    np.matmul(a, b)
    return time.perf_counter() - start
