"""The load workloads' own figures (benchlib.suites.load.workloads): how closely a trace replay keeps its planned
offsets, and what a prefix cache does to a multi-turn conversation's TTFT.

replay      the shipped synthetic Mooncake trace (40 requests, 15.7 s) replayed against the fake server with a prefix
            cache (tests/fakes/servers.PrefixCacheServer, TTFT 1 ms, 2 tokens, up to 64 in flight) at each
            --scales: per scale the planned and actual span, how late requests left after their due instants
            (p50 and max), and the cache-hit share against the trace's own bound.
multiturn   4 conversations × 4 turns on the embedded SmolLM2-135M-Instruct (llama-cpp-python: one cached slot) with
            192-token user messages: one conversation in flight (each turn finds its history in the slot) against
            the control, two in flight (the slot always holds the other conversation): TTFT per turn, median with
            its 95 % bootstrap interval, n, prompt tokens and the cached share.

Neither writes into outputs/ (a temporary folder). `.venv/bin/python bench/workloads.py [replay|multiturn|all]`."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("FRONTIER_BENCH_OUTPUTS", tempfile.mkdtemp(prefix="bench-workloads-"))

from benchlib.config.params import load_params, validate  # noqa: E402
from benchlib.config.paths import PARAMS_DIR  # noqa: E402
from benchlib.suites.load.workloads import run_workloads  # noqa: E402
from benchlib.suites.runner import open_session  # noqa: E402
from benchlib.views import load_display  # noqa: E402
from tests.fakes.servers import PrefixCacheServer  # noqa: E402
from tests.helpers import make_params  # noqa: E402


def replay(scales: list[float]) -> None:
    server = PrefixCacheServer().start_thread()
    try:
        for scale in scales:
            params = make_params(server.url, {"ttft": 0.001, "itl": 0.001}, sweep={
                "concurrency": [1], "context_lengths": [64], "rate": {"enabled": False},
                "workloads": {"trace": {"enabled": True, "time_scale": scale, "length_scale": 1 / 64,
                                        "max_output_tokens": 2, "max_concurrency": 64}}})
            with open_session(params, "load", concurrency=64, root=Path(tempfile.mkdtemp())) as session:
                levels, _, table = run_workloads(session, progress=False)
            late = table["late_ms"].to_numpy(dtype=float)
            print(f"time_scale {scale:g}: n={len(late)}, planned span {table['planned_offset_s'].max():.3f} s, "
                  f"actual {table['actual_offset_s'].max():.3f} s; late p50 {np.percentile(late, 50):.2f} ms, "
                  f"max {late.max():.2f} ms; cache-hit share {levels['cache_hit_share'].iloc[0]:.3f} "
                  f"(the trace's bound {levels['trace_reuse_share'].iloc[0]:.3f})", flush=True)
    finally:
        server.stop()


def multiturn(user_tokens: int) -> None:
    base = load_params(PARAMS_DIR / "embedded-smollm2.yaml").model_dump()
    for cap in (1, 2):
        data = {**base, "telemetry": {**base["telemetry"], "idle_baseline_s": 0, "loaded_baseline_s": 0}}
        data["sweep"] = {**base["sweep"], "rate": {**base["sweep"]["rate"], "enabled": False}, "workloads": {
            "multiturn": {"enabled": True, "sessions": 4, "turns": 4, "max_concurrency": cap,
                          "user_tokens": user_tokens, "output_tokens": 16, "think_time_s": 0}}}
        params = validate(data, "bench/workloads.py")
        with open_session(params, "load", concurrency=cap, root=Path(tempfile.mkdtemp())) as session:
            _, turns, _ = run_workloads(session, progress=False)
        print(f"--- {cap} conversation(s) in flight")
        print(load_display.turns_line(turns))
        columns = ["turn", "n", "ttft_s_median", "ttft_s_low", "ttft_s_high", "prompt_tokens_mean", "cached_share",
                   "vs_first"]
        with pd.option_context("display.width", 200):
            print(turns[columns].round(3).to_string(), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", choices=["replay", "multiturn", "all"], default="all")
    parser.add_argument("--scales", type=float, nargs="+", default=[1.0, 0.5, 0.1], help="replay time scales")
    parser.add_argument("--user-tokens", type=int, default=192, help="multiturn: tokens of each new user message")
    args = parser.parse_args()
    if args.what in ("replay", "all"):
        replay(args.scales)
    if args.what in ("multiturn", "all"):
        multiturn(args.user_tokens)


if __name__ == "__main__":
    main()
