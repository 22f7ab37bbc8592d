"""Open-loop scheduling accuracy: how late one client process sends each request of a Poisson schedule.

Setup: tests/fakes/servers.py's fake server in its own process answers every request quickly (first token after
2 ms, 2 tokens 1 ms apart), so the server never holds the client back. The rate sweep's own path drives it:
`Session.execute(..., offsets=...)` (a dispatcher sleeps until each scheduled instant and starts the request
there; each row is appended and fsynced as it finishes), with arrivals from benchlib.measure.traffic.workload (Poisson,
seeded) and a cap of 256 requests in flight. Per rate it prints:

    requests, ok              sent and succeeded
    sent_rps                  (n − 1) ÷ (last − first wire start): the rate the server saw
    lag_p50/p99/max_ms        schedule_lag_s: wire start − scheduled instant − wait for a free slot (waking late,
                              starting the task, building the request, getting a connection)
    queue_wait_max_ms         wait for a slot (only when 256 were in flight)
    loop_lag_p99_ms           the sweeps' 10 ms sleeper on the client's loop
    client_cpu_share          client process CPU ÷ wall time (one core = 1.0)
    schedule_held             the SCHEDULE RULE of benchlib.analysis.serving: lag p99 ≤ min(5 ms, half the mean gap)

    .venv/bin/python bench/scheduler_lag.py                      # 50, 200, 1000 req/s, 6 s each
    .venv/bin/python bench/scheduler_lag.py --rates 100 500 --seconds 3
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.measure_accuracy import bench_params, start_fake_server  # noqa: E402
from benchlib.analysis import serving  # noqa: E402
from benchlib.measure.client.backends import ChatRequest  # noqa: E402
from benchlib.measure.selfcheck import client_health  # noqa: E402
from benchlib.measure.traffic import workload  # noqa: E402
from benchlib.suites.runner import Planned, open_session  # noqa: E402

FAKE = {"ttft": 0.002, "itl": 0.001, "tokens": 2}
CAP = 256


def run_rate(params, rate: float, seconds: float) -> dict[str, float]:
    n = workload.level_size(rate, seconds, 2)
    due = workload.offsets("poisson", rate, n, seed=0, name=f"bench-{rate:g}")
    with tempfile.TemporaryDirectory() as tmp, open_session(params, "bench", root=Path(tmp), fresh=True,
                                                            concurrency=CAP) as session:
        planned = []
        for i in range(n):
            record = session.base_record("rate", f"r{rate:g}", i, concurrency=CAP)
            record.prompt = f"request {i}"
            planned.append(Planned(record, ChatRequest(messages=[{"role": "user", "content": record.prompt}],
                                                       max_tokens=8)))
        with client_health.client_health(n) as figures:
            records = session.execute(planned, concurrency=CAP, offsets=due)
    lag = np.array([r.schedule_lag_s for r in records if r.schedule_lag_s is not None]) * 1000
    wait = np.array([r.queue_wait_s for r in records if r.queue_wait_s is not None]) * 1000
    starts = np.sort([r.start_ns for r in records if r.start_ns])
    reason = serving.schedule_bound(pd.Series(lag), rate)
    return {"offered_rps": rate, "requests": n, "ok": sum(r.status == "ok" for r in records),
            "sent_rps": (len(starts) - 1) / ((starts[-1] - starts[0]) / 1e9) if len(starts) > 1 else float("nan"),
            "lag_p50_ms": float(np.percentile(lag, 50)), "lag_p99_ms": float(np.percentile(lag, 99)),
            "lag_max_ms": float(lag.max()), "queue_wait_max_ms": float(wait.max()) if len(wait) else 0.0,
            "loop_lag_p99_ms": figures["loop_lag_p99_ms"], "client_cpu_share": figures["client_cpu_share"],
            "schedule_held": "yes" if not reason else f"no: {reason}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[50, 200, 1000])
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    proc, url = start_fake_server()
    started = time.time()
    try:
        params = bench_params(url, FAKE)
        rows = []
        for rate in args.rates:
            rows.append(run_rate(params, rate, args.seconds))
            print(f"  {rate:g} req/s done", file=sys.stderr, flush=True)
    finally:
        proc.kill()
        proc.wait()
    table = pd.DataFrame(rows).set_index("offered_rps").T
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    print(f"\nload average {os.getloadavg()[0]:.2f} · wall {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
