"""Memory and time of one suite summary at scale (issue 53 item 3): `summarize_requests` over N requests of G ITL
gaps each — by default 1,000,000 requests × 100 gaps, 10^8 pooled gaps, the size a long GPU rate sweep reaches.
The summary holds the pooled gaps once (8 bytes a gap), selects the percentiles' ranks in place and resamples the
mean's bootstrap in bounded batches (normal interval above 10^5 values): no 2,000 × n matrix.

Each request's gaps are handed in as a float64 array (the most compact form a caller holds rows in; read_requests'
JSON lists of Python floats take four times as much, and are the import's concern). Prints the input's size, the
summary's own traced peak (tracemalloc: every numpy and Python allocation it makes), the process's peak resident
memory and the wall time.

    .venv/bin/python bench/summary_memory.py [--requests 1000000] [--gaps 100]
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import numpy as np
import pandas as pd

from benchlib.analysis import task_stats


def requests(n: int, gaps: int, seed: int = 1) -> pd.DataFrame:
    """n ok requests of one task: TTFT, e2e, decode rate and `gaps` lognormal ITL gaps each (one array a row)."""
    rng = np.random.default_rng(seed)
    itl = [rng.lognormal(-4.0, 0.3, gaps) for _ in range(n)]
    return pd.DataFrame({"host": "h", "model": "m", "suite": "text", "task": "t", "status": "ok",
                         "is_warmup": False, "ttft_s": rng.lognormal(-2.0, 0.5, n), "e2e_s": rng.lognormal(0.0, 0.3, n),
                         "decode_tps": rng.normal(50.0, 5.0, n), "completion_tokens": float(gaps + 1),
                         "max_tokens": float(gaps + 1), "itl_s": itl})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--gaps", type=int, default=100)
    args = parser.parse_args()
    frame = requests(args.requests, args.gaps)
    held = sum(a.nbytes for a in frame["itl_s"]) / 2**30
    print(f"{args.requests:,} requests × {args.gaps} gaps = {args.requests * args.gaps:,} pooled ITL gaps "
          f"({held:.2f} GiB of gaps held by the input frame)")
    tracemalloc.start()
    started = time.perf_counter()
    out = task_stats.summarize_requests(frame)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    row = out.iloc[0]
    print(f"summary: {elapsed:.1f} s; its own traced peak {peak / 2**30:.2f} GiB; process peak RSS {rss:.2f} GiB "
          "(input included)")
    print(f"ITL p50 {row['itl_s_p50'] * 1e3:.3f} ms [{row['itl_s_p50_lo'] * 1e3:.3f}–{row['itl_s_p50_hi'] * 1e3:.3f}], "
          f"p99 {row['itl_s_p99'] * 1e3:.3f} ms [{row['itl_s_p99_lo'] * 1e3:.3f}–{row['itl_s_p99_hi'] * 1e3:.3f}], "
          f"n {int(row['itl_s_count']):,}")


if __name__ == "__main__":
    main()
