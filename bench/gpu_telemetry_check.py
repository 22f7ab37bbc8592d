"""The telemetry checked against a known GPU load: a PyTorch load of known duty cycle and length under the project's
own sampler (benchlib.measure.telemetry.Telemetry, telemetry.source local, the real NVML), with what each figure
should be beside what was measured.

    python bench/gpu_telemetry_check.py                   # on a GPU machine (bench/gpu_check.py runs it in part 1)
    python bench/gpu_telemetry_check.py --fake            # the same logic on tests/fakes/fake_nvml.py, no GPU

Checks (one table row each):
  energy      a window's energy from NVML's total-energy counter against its power samples integrated (trapezoid
              over the window's samples): their agreement in %; the counter is what every window reports
  duty        a load busy `duty` of every period: its mean power against idle + duty × (busy − idle), the
              powers measured in the windows below
  windows     two back-to-back windows, busy then idle: the busy one's mean power near the busy level, the idle
              one's near the idle baseline (nothing of the load leaks into the next window), and the two energies
              summing to one window spanning both (the counter is differenced at shared edges)
  baselines   idle (nothing on the GPU) and loaded (memory held, no work) mean power
  memory      NVML's used memory grown by what PyTorch reserved for a held block
  overhead    the sampler thread's CPU, % of one core, at 10 Hz and at 50 Hz
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchlib.config.params import TelemetryParams  # noqa: E402
from benchlib.measure.telemetry import Telemetry  # noqa: E402


class TorchLoad:
    """Work on the GPU: bf16 matmuls of 8192² back to back while busy; a held block for the memory check."""

    def __init__(self, device: int = 0):
        import torch  # the GPU machine's own PyTorch: no project dependency, and absent on the CPU box
        self.torch = torch
        self.device = torch.device("cuda", device)
        self.a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=self.device)
        self.block = None
        torch.cuda.synchronize()

    def busy(self, seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(4):
                self.a @ self.a  # noqa: B018 — the work itself
            self.torch.cuda.synchronize()

    def hold(self, nbytes: int) -> int:
        """Hold `nbytes` on the GPU; what PyTorch reserved for it (its caching allocator rounds up)."""
        before = self.torch.cuda.memory_reserved(self.device)
        self.block = self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device)
        self.block.fill_(1)
        self.torch.cuda.synchronize()
        return self.torch.cuda.memory_reserved(self.device) - before

    def release(self) -> None:
        self.block = None
        self.torch.cuda.empty_cache()


class FakeLoad:
    """The same interface on a fake NVML GPU (tests/fakes/fake_nvml.py's FakeGpu): busy sets its power."""

    def __init__(self, gpu, idle_w: float = 70.0, busy_w: float = 650.0):
        self.gpu, self.idle_w, self.busy_w = gpu, idle_w, busy_w
        gpu.set_power(idle_w)

    def busy(self, seconds: float) -> None:
        self.gpu.set_power(self.busy_w)
        time.sleep(seconds)
        self.gpu.set_power(self.idle_w)

    def hold(self, nbytes: int) -> int:
        self.gpu.mem_used += nbytes
        return nbytes

    def release(self) -> None:
        pass


@dataclass
class Row:
    check: str
    measured: str
    reference: str
    ok: bool
    value: float | None = None


def _trapezoid_j(frame, t0: int, t1: int) -> float:
    """Power samples inside [t0, t1] integrated (J); the counter's independent check."""
    inside = frame[(frame["t_ns"] >= t0) & (frame["t_ns"] <= t1)].dropna(subset=["power_w"])
    t = inside["t_ns"].to_numpy(dtype=float) / 1e9
    p = inside["power_w"].to_numpy(dtype=float)
    return float(np.sum((p[1:] + p[:-1]) / 2 * np.diff(t))) if len(t) > 1 else float("nan")


def _mem_median(frame, t0: int, t1: int) -> float:
    inside = frame[(frame["t_ns"] >= t0) & (frame["t_ns"] <= t1)]
    return float(inside["mem_used_bytes"].median())


def _pct(measured: float, reference: float) -> float:
    return 100.0 * (measured - reference) / reference if reference else float("nan")


def check(load, out_dir: Path, *, nvml=None, power_hz: float = 10.0, idle_s: float = 3.0, busy_s: float = 3.0,
          period_s: float = 1.0, cycles: int = 4, duty: float = 0.5, hold_bytes: int = 4 << 30, overhead_s: float = 4.0,
          tolerance_pct: float = 5.0) -> list[Row]:
    """Run the checks with `load` under a Telemetry writing into out_dir; one Row per check."""
    rows: list[Row] = []
    tel = Telemetry(TelemetryParams(power_hz=power_hz, slow_hz=1.0), out_dir, nvml=nvml)
    try:
        if not tel.gpus:
            raise SystemExit(f"no GPU under the sampler: {tel.sensors.get('nvml', {}).get('reason', '?')}")
        tel.start()
        idle = tel.baseline("idle", seconds=idle_s)
        reserved = load.hold(hold_bytes)
        loaded = tel.baseline("loaded", seconds=idle_s)
        load.release()
        with tel.window("busy", "task") as busy_handle:
            load.busy(busy_s)
        with tel.window("after", "task") as after_handle:
            time.sleep(busy_s)
        both = tel.measure("busy+after", "task", busy_handle.t_start_ns, after_handle.row["t_end_ns"])
        with tel.window("duty", "task") as duty_handle:
            for _ in range(cycles):
                load.busy(period_s * duty)
                time.sleep(period_s * (1 - duty))
        frame = tel.samples_frame()
    finally:
        tel.close()
    busy, after, dutyw = busy_handle.row, after_handle.row, duty_handle.row
    p_idle, p_busy = idle["avg_power_w"], busy["avg_power_w"]
    for row in (busy, dutyw):
        trap = _trapezoid_j(frame, row["t_start_ns"], row["t_end_ns"])
        gap = _pct(trap, row["energy_j"])
        rows.append(Row(f"energy: counter vs ∫power ({row['window']})",
                        f"{row['energy_j']:.1f} J vs {trap:.1f} J ({row['energy_source']})",
                        f"agree within {tolerance_pct:g} %", abs(gap) <= tolerance_pct, gap))
    expected = p_idle + duty * (p_busy - p_idle)
    gap = _pct(dutyw["avg_power_w"], expected)
    rows.append(Row(f"duty {duty:.0%} of {period_s:g} s × {cycles}", f"{dutyw['avg_power_w']:.1f} W",
                    f"{expected:.1f} W = idle + {duty:g} × (busy − idle)", abs(gap) <= 3 * tolerance_pct, gap))
    rows.append(Row("windows: busy then idle, busy's power", f"{p_busy:.1f} W", f"> idle {p_idle:.1f} W",
                    p_busy > p_idle, p_busy))
    leak = _pct(after["avg_power_w"], p_idle)
    rows.append(Row("windows: the idle window after the load", f"{after['avg_power_w']:.1f} W",
                    f"idle {p_idle:.1f} W (the load does not leak into it)", abs(leak) <= 3 * tolerance_pct, leak))
    split = _pct(busy["energy_j"] + after["energy_j"], both["energy_j"])
    rows.append(Row("windows: busy + idle energy vs one window over both",
                    f"{busy['energy_j'] + after['energy_j']:.1f} J vs {both['energy_j']:.1f} J",
                    "equal (shared edges)", abs(split) <= 1.0, split))
    rows.append(Row("baseline: idle", f"{p_idle:.1f} W", f"{idle['n_samples']:.0f} samples over {idle_s:g} s",
                    idle["n_samples"] >= 2, p_idle))
    rows.append(Row("baseline: loaded (memory held, no work)", f"{loaded['avg_power_w']:.1f} W",
                    f"idle {p_idle:.1f} W", loaded["n_samples"] >= 2, loaded["avg_power_w"]))
    grown = _mem_median(frame, loaded["t_start_ns"] + (loaded["t_end_ns"] - loaded["t_start_ns"]) // 2,
                        loaded["t_end_ns"]) - _mem_median(frame, idle["t_start_ns"], idle["t_end_ns"])
    gap = _pct(grown, reserved)
    rows.append(Row("memory: NVML used grew by", f"{grown / 2**30:.3f} GiB",
                    f"PyTorch reserved {reserved / 2**30:.3f} GiB", abs(gap) <= tolerance_pct, gap))
    for hz in (10.0, 50.0):
        with tempfile.TemporaryDirectory(prefix="gpu-telemetry-overhead-") as tmp:
            with Telemetry(TelemetryParams(power_hz=hz, slow_hz=1.0), Path(tmp), nvml=nvml) as sampler:
                time.sleep(overhead_s)
                cost = sampler.overhead()
        rows.append(Row(f"overhead: sampler at {hz:g} Hz", f"{cost['core_percent']:.2f} % of one core",
                        f"{cost['ticks']} ticks in {cost['sampler_wall_s']:.1f} s; < 1 % at 10 Hz",
                        hz != 10.0 or cost["core_percent"] < 1.0, cost["core_percent"]))
    return rows


def table(rows: list[Row]) -> str:
    width = max(len(r.check) for r in rows)
    lines = [f"{'check':{width}s}  {'measured':38s}  {'reference':46s}  verdict"]
    lines += [f"{r.check:{width}s}  {r.measured:38s}  {r.reference:46s}  {'ok' if r.ok else 'OFF'}" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fake", action="store_true", help="tests/fakes/fake_nvml.py and a fake load, no GPU")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--text", type=Path, help="also write the table here")
    parser.add_argument("--out", type=Path, help="keep telemetry.csv and the windows here (default: a temp folder)")
    args = parser.parse_args(argv)
    nvml = None
    if args.fake:
        from tests.fakes.fake_nvml import FakeGpu, FakeNvml  # the test fake: only for --fake
        gpu = FakeGpu()
        nvml, load = FakeNvml([gpu]), FakeLoad(gpu)
    else:
        load = TorchLoad(args.device)
    with tempfile.TemporaryDirectory(prefix="gpu-telemetry-check-") as tmp:
        rows = check(load, args.out or Path(tmp), nvml=nvml)
    text = table(rows)
    print(text)
    if args.text:
        args.text.write_text(text + "\n", encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n", encoding="utf-8")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
