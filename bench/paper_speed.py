"""How long the paper's assembly takes (benchlib.paper.assemble: every table and figure built and written, the
report and its HTML) over synthetic runs: the two deployments the paper tests use (tests/fakes/synthetic_run.py,
one base and one at half speed) and, unless --quick, a bigger set of eight deployments of the same model. Each set
is assembled --repeats times into a scratch folder; the median wall and CPU time (this process's) are printed with
every run's beside them and the load average before and after (the box is shared: compare runs made back to back,
and the CPU time, which moves less with the others' load).

    nice .venv/bin/python bench/paper_speed.py              # two and eight deployments, median of 3
    nice .venv/bin/python bench/paper_speed.py --sets 2     # two deployments only, median of 3
    nice .venv/bin/python bench/paper_speed.py --quick      # two deployments, once
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchlib import paper  # noqa: E402
from tests.fakes.synthetic_run import write_synthetic_run  # noqa: E402

SPEEDS = [0.5, 0.7, 0.85, 1.2, 1.5, 2.0, 3.0]  # the bigger set's extra deployments, as multiples of the base rates


def synthetic_outputs(folder: Path, deployments: int) -> Path:
    """outputs/ with `deployments` deployments of the synthetic model: the base run and variants at other speeds."""
    root = write_synthetic_run(folder / "outputs", text_passed=True)
    for i, speed in enumerate(SPEEDS[:deployments - 1]):
        write_synthetic_run(root, variant="slow" if i == 0 else f"v{i}", speed=speed)
    return root


def timed_assembly(deployments: int, repeats: int) -> tuple[list[float], list[float]]:
    """(wall s, this process's CPU s) per assembly: on a shared box the CPU time moves less with the others' load."""
    walls, cpus = [], []
    with tempfile.TemporaryDirectory(prefix="paper_speed_") as scratch:
        root = synthetic_outputs(Path(scratch), deployments)
        for i in range(repeats):
            start, cpu = time.perf_counter(), time.process_time()
            paper.assemble(outputs_dir=root, out_dir=Path(scratch) / f"out{i}")
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="assemblies per set; the median is reported")
    parser.add_argument("--sets", default="2,8", help="deployments per synthetic set, comma-separated (at most 8)")
    parser.add_argument("--quick", action="store_true", help="the two-deployment set once, nothing bigger")
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    sets = [2] if args.quick else [int(n) for n in args.sets.split(",")]
    if any(not 1 <= n <= len(SPEEDS) + 1 for n in sets):
        parser.error(f"--sets: each set has 1 to {len(SPEEDS) + 1} deployments")
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}, {os.cpu_count()} cores")
    for deployments in sets:
        walls, cpus = timed_assembly(deployments, repeats)
        runs = ", ".join(f"{w:.1f}/{c:.1f}" for w, c in zip(walls, cpus))
        print(f"{deployments} deployments: assemble median {statistics.median(walls):.1f} s wall, "
              f"{statistics.median(cpus):.1f} s CPU (runs, wall/CPU: {runs})", flush=True)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
