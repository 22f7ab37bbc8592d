"""Why the embedded server runs with a short OpenMP spin: its answer time on idle and on busy cores.

llama.cpp's CPU threads are OpenMP threads; libgomp lets a thread that reaches a barrier spin (300000 turns by
default) before it sleeps. benchlib.measure.servers.llama_cpp gives the server every core, so when anything else runs — the
measuring client, a notebook kernel, another job — one thread is preempted while its partner spins away the
time slice, at every barrier of every token. This script starts the embedded server (Gemma 3 270M, all
cores, exactly as a run does) once per setting and streams the same requests (48 tokens, ignore_eos), first
on idle cores, then with `--hogs` busy-looping processes (default: one per core). Per setting it prints the
seconds per answer (first request included: it is the one a run's warm-up pays) and the server's decode
rate from its own log.

    .venv/bin/python bench/omp_spin.py                       # libgomp default vs GOMP_SPINCOUNT=1000, ~4 min
    .venv/bin/python bench/omp_spin.py --spins 1000 10000 --requests 4

A request that does not finish within --timeout seconds is printed as `>T` (stalled).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchlib.config.params import EmbeddedParams  # noqa: E402
from benchlib.measure.servers.llama_cpp import EmbeddedServer, parse_timings  # noqa: E402


def _busy() -> None:
    while True:
        pass


def answer_times(spin: int | None, requests: int, timeout: float, log: Path) -> tuple[list[str], list[float]]:
    """Seconds per streamed 48-token answer, and the server's logged decode tok/s, for one spin setting."""
    server = EmbeddedServer(EmbeddedParams(omp_spin_count=spin), "gemma3-270m-q4_k_m", log)
    times: list[str] = []
    url = server.start()
    try:
        for i in range(requests):
            body = {"messages": [{"role": "user", "content": f"Tell me about topic {i} in detail, please."}],
                    "max_tokens": 48, "ignore_eos": True, "temperature": 0, "stream": True}
            start = time.monotonic()
            try:
                with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=timeout) as response:
                    for _ in response.iter_lines():
                        if time.monotonic() - start > timeout:
                            raise httpx.ReadTimeout("stalled")
                times.append(f"{time.monotonic() - start:.2f}")
            except httpx.TimeoutException:
                times.append(f">{timeout:.0f}")
                break  # the server is still busy with it; the next request would queue behind
    finally:
        server.stop()
    rates = [t.decode_tps for t in parse_timings(log.read_text(errors="replace")) if t.decode_tps]
    return times, rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spins", nargs="+", default=["default", "1000"],
                        help="GOMP_SPINCOUNT values; 'default' leaves libgomp's own (300000)")
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        os.environ.pop(name, None)  # the setting under test is the only one in force
    spins = [None if s == "default" else int(s) for s in args.spins]
    print(f"{os.cpu_count()} cores; server threads = all cores; {args.requests} streamed answers of 48 tokens each")
    print(f"{'cores':<16}{'GOMP_SPINCOUNT':<16}{'seconds per answer':<40}server decode tok/s (median)")
    with tempfile.TemporaryDirectory() as tmp:
        for busy in (0, args.hogs):
            hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(busy)]
            for hog in hogs:
                hog.start()
            try:
                for spin in spins:
                    log = Path(tmp) / f"server-{busy}-{spin}.log"
                    times, rates = answer_times(spin, args.requests, args.timeout, log)
                    rate = f"{statistics.median(rates):.1f}" if rates else "-"
                    label = "idle" if not busy else f"{busy} busy loop(s)"
                    print(f"{label:<16}{spin if spin is not None else 'default':<16}{' '.join(times):<40}{rate}",
                          flush=True)
            finally:
                for hog in hogs:
                    hog.kill()


if __name__ == "__main__":
    main()
