"""Load-generator scaling: how many requests per second 1 and 2 client processes hold on an open-loop schedule.

Setup: a minimal HTTP/1.1 server (a raw asyncio protocol in its own process, below) answers every chat request at
once with a canned four-event SSE stream (one content delta, the finish, usage, [DONE]), so the server never
holds the client back and costs far less CPU per request than the client does. The rate sweep's own sender
sends each level: benchlib.suites.load.rate.send_level with a level plan from rate.open_plan — one worker is
Session.execute on the background loop, two are benchlib.measure.traffic.workers processes at one common schedule,
their rows scored and appended by this process. Arrivals are Poisson (seeded), at most 256 in flight. Per
(workers, offered rate) it prints the sweep's own figures for the level (benchlib.analysis.serving):

    requests, ok          sent and succeeded
    sent_rps              arrival rate the server saw, inside the steady window
    achieved_rps          completions per second inside the window
    lag_p50/p99_ms        schedule_lag_s over the level (wire start − due instant − wait for a slot)
    worker_lag_ms         each worker's lag p50/p99 (p99: the maximum below 100 requests)
    cpu_share             the busiest client process's CPU ÷ wall time (one core = 1.0)
    sender_cpu_ms         CPU per request of the sending process(es): the per-core ceiling is 1000 ÷ this req/s
                          (CPU time, unlike the lag, does not depend on what else runs on the box)
    parent_cpu_ms         with workers: this process's CPU per request (scoring and appending the rows)
    held                  the SCHEDULE RULE: lag p99 ≤ min(5 ms, half the mean gap); else client_bound

and, per worker count, the ceiling: the highest offered rate whose schedule held, and the most it sent; last, the
scheduling the pacing threads got (event_loop.PACER_REALTIME where the OS permits, else why not) and who made the
timed writes (event_loop.BY_SENDING_PROCESS: the sending process, and what it ran under).

--busy N runs N processes spinning at normal priority beside the client and the server for the whole run: a busy box
on demand (the slow hours this VM has at times, when its share of the cores drops), so a change to the sender can be
judged on a loaded box, not only on a quiet one.

    .venv/bin/python bench/worker_scaling.py                                 # 100, 500, 1000, 2000 req/s, 3 s
    .venv/bin/python bench/worker_scaling.py --workers 1 2 4 --rates 500 1000 --seconds 5
    .venv/bin/python bench/worker_scaling.py --workers 1 2 --rates 500 1000 --seconds 5 --busy 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.measure_accuracy import bench_params  # noqa: E402
from benchlib.analysis import serving  # noqa: E402
from benchlib.config.params import RateParams, SloParams  # noqa: E402
from benchlib.measure.client.backends import ChatRequest  # noqa: E402
from benchlib.measure.traffic import workload  # noqa: E402
from benchlib.suites.load import rate as load_rate  # noqa: E402
from benchlib.suites.runner import Planned, open_session  # noqa: E402

CAP = 256
EVENTS = [b'{"id":"b","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant",'
          b'"content":"ok"},"finish_reason":null}]}',
          b'{"id":"b","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
          b'{"id":"b","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":5,'
          b'"completion_tokens":1,"total_tokens":6}}', b"[DONE]"]
BODY = b"".join(b"%x\r\n%s\r\n" % (len(b"data: " + e + b"\n\n"), b"data: " + e + b"\n\n") for e in EVENTS) + \
    b"0\r\n\r\n"
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + BODY


class Instant(asyncio.Protocol):
    """Answers each request on a keep-alive connection as soon as its body is in."""

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport, self.buffer = transport, b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            length = 0
            for line in self.buffer[:head_end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buffer) < head_end + 4 + length:
                return
            self.buffer = self.buffer[head_end + 4 + length:]
            self.transport.write(RESPONSE)


def serve() -> None:
    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Instant, "127.0.0.1", 0, backlog=4096)
        print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
        await server.serve_forever()
    asyncio.run(main())


def start_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True, cwd=str(ROOT))
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


def run_level(params, workers: int, rate: float, seconds: float) -> dict[str, object]:
    plan = load_rate.open_plan(RateParams(rates=[rate], duration_s=seconds, max_concurrency=CAP, workers=workers),
                               rate)
    due = workload.offsets("poisson", rate, int(plan["n"]), seed=0, name=plan["level"])
    with tempfile.TemporaryDirectory() as tmp, open_session(params, "bench", root=Path(tmp), fresh=True,
                                                            concurrency=CAP) as session:
        items = []
        for i in range(int(plan["n"])):
            record = session.base_record(serving.RATE_TASK, plan["level"], i, concurrency=CAP)
            record.prompt = f"request {i}"
            items.append(Planned(record, ChatRequest(messages=[{"role": "user", "content": record.prompt}],
                                                     max_tokens=8)))
        cpu0 = time.process_time()
        health = load_rate.send_level(session, plan, items, due, tqdm(disable=True))
        parent_cpu = time.process_time() - cpu0
        rows = session.run_requests()
    level = serving.rate_levels(rows, [plan], SloParams(), 0.2, {plan["level"]: health}).iloc[0]
    reason = serving.schedule_bound(rows["schedule_lag_s"].astype(float) * 1000, rate)
    return {"workers": int(plan["workers"]), "offered_rps": rate, "requests": int(level["n_requests"]),
            "ok": int(level["n_ok"]), "sent_rps": level["sent_rps"], "achieved_rps": level["achieved_rps"],
            "lag_p50_ms": level["schedule_lag_p50_ms"],
            "lag_p99_ms": level["schedule_lag_p99_ms"] if level["n_requests"] >= 100 else level["schedule_lag_max_ms"],
            "worker_lag_ms": level["worker_lag_ms"] or "-", "cpu_share": level["client_cpu_share"],
            "sender_cpu_ms": level["client_cpu_per_request_ms"],
            "parent_cpu_ms": parent_cpu / len(items) * 1000 if int(plan["workers"]) > 1 else float("nan"),
            "held": "yes" if not reason else "no", "pacer": level["pacer"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rates", type=float, nargs="+", default=[100, 500, 1000, 2000])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="N processes spinning at normal priority beside the run (a busy box)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return 0
    proc, url = start_server()
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    started, load_before = time.time(), os.getloadavg()[0]
    try:
        params = bench_params(url, {})
        rows = []
        for workers in args.workers:
            for rate in args.rates:
                rows.append(run_level(params, workers, rate, args.seconds))
                print(f"  {workers} worker(s), {rate:g} req/s done", file=sys.stderr, flush=True)
    finally:
        for child in (proc, *spinners):
            child.kill()
            child.wait()
    table = pd.DataFrame(rows)
    pacers = table.pop("pacer")
    with pd.option_context("display.width", 200, "display.max_colwidth", 40):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print()
    for workers, mine in table.groupby("workers"):
        held = mine.loc[mine["held"] == "yes", "offered_rps"]
        per_request = mine["sender_cpu_ms"].median()
        print(f"{workers} worker(s): schedule held up to {held.max() if len(held) else 0:g} offered req/s; "
              f"sent at most {mine['sent_rps'].max():.0f} req/s; {per_request:.2f} ms of CPU per request "
              f"(median): ceiling ≈ {1000 / per_request:.0f} req/s per core")
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").is_file() \
        else platform.processor()
    print("pacing thread(s): " + "; ".join(dict.fromkeys(p for p in pacers if p)))
    print(f"\n{cpu} · {os.cpu_count()} cores · {args.busy} busy process(es) beside · load average "
          f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after · wall {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
