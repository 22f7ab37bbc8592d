"""The telemetry agent's cost and the clock offset's uncertainty (telemetry.source: agent).

The agent runs in its own process (standing for the server's host) on tests/fakes/fake_nvml.py's GPUs plus the
real host path (psutil, /proc/meminfo, RAPL if readable), sampling at --hz; a client in this process pulls its
samples at the same rate through RemoteTelemetry, as a run does. Printed:
    clock    the offset measurement (8 round trips, the smallest RTT wins) repeated --clocks times: the
             uncertainty (RTT/2) median and max, and the offset itself (the true offset is 0 here: both
             processes stamp CLOCK_MONOTONIC, so |offset| <= uncertainty is a check of the method)
    agent    the agent process's CPU time per second of wall time (% of one core) while served, and idle
             (sampling, nobody pulling) for comparison

    .venv/bin/python bench/telemetry_agent.py                  # 20 s served + 20 s idle at 10 Hz, 200 clocks
    .venv/bin/python bench/telemetry_agent.py --seconds 5 --gpus 8
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchlib.config.params import TelemetryParams  # noqa: E402
from benchlib.measure.telemetry import RemoteTelemetry  # noqa: E402
from benchlib.measure.telemetry.remote import AgentSource  # noqa: E402

TOKEN = "bench-token"
AGENT = """
import sys
from benchlib.config.params import TelemetryParams
from benchlib.measure.telemetry.agent import AgentSampler, AgentServer
from tests.fakes.fake_nvml import FakeGpu, FakeNvml
gpus = [FakeGpu(uuid=f"GPU-{i:04d}") for i in range(int(sys.argv[2]))]
sampler = AgentSampler(TelemetryParams(power_hz=float(sys.argv[1]), slow_hz=1.0), nvml=FakeNvml(gpus), environ={})
server = AgentServer(sampler, sys.argv[3], port=0).start()
print(server.url, flush=True)
sys.stdin.read()
server.close()
"""


def core_percent(proc: psutil.Process, seconds: float) -> float:
    before, t0 = proc.cpu_times(), time.perf_counter()
    time.sleep(seconds)
    after, t1 = proc.cpu_times(), time.perf_counter()
    return 100.0 * ((after.user - before.user) + (after.system - before.system)) / (t1 - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hz", type=float, default=10.0)
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clocks", type=int, default=200)
    args = parser.parse_args()
    agent = subprocess.Popen([sys.executable, "-c", AGENT, str(args.hz), str(args.gpus), TOKEN], cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    url = agent.stdout.readline().strip()
    proc = psutil.Process(agent.pid)
    try:
        source = AgentSource(url, TOKEN, round_trips=8)
        source.layout()
        offsets = [source.measure_clock() for _ in range(args.clocks)]
        source.close()
        unc = sorted(o.uncertainty_ns / 1e3 for o in offsets)
        off = [abs(o.offset_ns) / 1e3 for o in offsets]
        print(f"clock    {args.clocks} measurements of 8 round trips: uncertainty median "
              f"{statistics.median(unc):.0f} µs, max {unc[-1]:.0f} µs; "
              f"|offset| median {statistics.median(off):.0f} µs (true offset 0); "
              f"|offset| <= uncertainty in {sum(abs(o.offset_ns) <= o.uncertainty_ns for o in offsets)}/{len(offsets)}")
        idle = core_percent(proc, args.seconds)
        settings = TelemetryParams(power_hz=args.hz, slow_hz=1.0, source="agent", agent_url=url, agent_token_env="T")
        with tempfile.TemporaryDirectory() as tmp, RemoteTelemetry(settings, Path(tmp), environ={"T": TOKEN}) as tel:
            tel.start()
            time.sleep(1.0)
            served = core_percent(proc, args.seconds)
            client = tel.overhead()["core_percent"]
        print(f"agent    {args.gpus} fake GPU(s) at {args.hz:g} Hz: {served:.2f} % of one core while a client pulls at "
              f"{args.hz:g} Hz, {idle:.2f} % sampling with no client; the client's pulling thread {client:.2f} %")
    finally:
        agent.stdin.close()
        agent.wait(timeout=20)


if __name__ == "__main__":
    main()
