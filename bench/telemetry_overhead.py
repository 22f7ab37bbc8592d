"""Sampler overhead: CPU time of the telemetry thread per second of wall time, as a share of one core.

Target: < 1 % of one core at the default 10 Hz. Modes:
    fake  NVML calls answered by tests/fakes/fake_nvml.py (N GPUs) + the real host path (psutil, meminfo, RAPL)
    cpu   no GPU (nvmlInit fails): host CPU, /proc/meminfo, RAPL if readable, server process tree
    real  the installed pynvml against this host's driver (skipped when nvmlInit fails)
Every mode watches a stand-in "server": a sleeping python process with three child processes.

    .venv/bin/python bench/telemetry_overhead.py                 # 20 s per mode at 10 Hz
    .venv/bin/python bench/telemetry_overhead.py --seconds 5 --gpus 8 --modes fake
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchlib.config.params import TelemetryParams  # noqa: E402
from benchlib.measure.telemetry import Telemetry  # noqa: E402
from tests.fakes.fake_nvml import NVML_ERROR_LIBRARY_NOT_FOUND, FakeGpu, FakeNvml  # noqa: E402

SERVER = ("import subprocess, sys, time\n"
          "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1e6)']) for _ in range(3)]\n"
          "time.sleep(1e6)\n")


def start_server() -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "-c", SERVER])
    deadline = time.time() + 10
    while len(psutil.Process(server.pid).children()) < 3 and time.time() < deadline:
        time.sleep(0.05)
    return server


def stop_server(server: subprocess.Popen) -> None:
    """End the stand-in and the children it started, each by its pid."""
    try:
        kids = psutil.Process(server.pid).children(recursive=True)
    except psutil.Error:
        kids = []
    server.kill()
    server.wait()
    for kid in kids:
        try:
            kid.kill()
            kid.wait(5)
        except psutil.Error:
            pass


def measure(mode: str, seconds: float, hz: float, gpus: int, server_pid: int) -> dict | None:
    nvml = {"fake": lambda: FakeNvml([FakeGpu(uuid=f"GPU-{i:04d}") for i in range(gpus)]),
            "cpu": lambda: FakeNvml(init_error=NVML_ERROR_LIBRARY_NOT_FOUND),
            "real": lambda: None}[mode]()
    with tempfile.TemporaryDirectory(prefix="telemetry-overhead-") as out:
        tel = Telemetry(TelemetryParams(power_hz=hz, slow_hz=1.0), Path(out), server_pid=server_pid, nvml=nvml)
        if mode == "real" and not tel.sensors["nvml"]["available"]:
            reason = tel.sensors["nvml"]["reason"]
            tel.close()
            print(f"{mode:5s}  skipped: {reason}")
            return None
        with tel:
            time.sleep(seconds)
            stats = tel.overhead()
        n_gpus = len(tel.gpus)
        energy = tel.sensors["energy_counter"]["available"] or tel.sensors["rapl"]["available"]
    per_tick_us = 1e6 * stats["sampler_cpu_s"] / max(stats["ticks"], 1)
    return {"mode": mode, "gpus": n_gpus, "ticks": stats["ticks"], "rate_hz": stats["ticks"] / stats["sampler_wall_s"],
            "cpu_s": stats["sampler_cpu_s"], "wall_s": stats["sampler_wall_s"], "per_tick_us": per_tick_us,
            "core_percent": stats["core_percent"], "energy": energy}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="sampling time per mode")
    parser.add_argument("--hz", type=float, default=10.0, help="power_hz (slow sensors stay at 1 Hz)")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs the fake NVML reports")
    parser.add_argument("--modes", default="fake,cpu,real", help="comma-separated: fake, cpu, real")
    args = parser.parse_args()
    server = start_server()
    results = []
    try:
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            result = measure(mode, args.seconds, args.hz, args.gpus, server.pid)
            if result:
                results.append(result)
    finally:
        stop_server(server)
    print(f"telemetry sampler overhead at {args.hz:g} Hz over {args.seconds:g} s per mode "
          f"(host: {psutil.cpu_count()} CPUs, {len(psutil.pids())} processes)")
    print(f"{'mode':5s} {'gpus':>4s} {'ticks':>6s} {'rate':>7s} {'cpu_s':>8s} {'µs/tick':>8s} {'% core':>7s}  verdict")
    worst = 0.0
    for r in results:
        worst = max(worst, r["core_percent"])
        verdict = "ok (< 1 %)" if r["core_percent"] < 1.0 else "OVER 1 %"
        print(f"{r['mode']:5s} {r['gpus']:4d} {r['ticks']:6d} {r['rate_hz']:6.2f}Hz {r['cpu_s']:8.4f} "
              f"{r['per_tick_us']:8.1f} {r['core_percent']:6.3f}%  {verdict}")
    print(f"worst: {worst:.3f} % of one core")
    return 0 if worst < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
