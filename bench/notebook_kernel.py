"""Why notebooks run with our kernel manager (benchlib/suites/kernel.py): how often a notebook run hangs on busy
cores with jupyter_client's stock async client and with ours.

Each round executes notebooks/explore.ipynb (on a synthetic run, the explorer test's input) through papermill, as
`frontier-bench` executes every notebook, while `--hogs` busy-looping processes keep the cores busy (default: one
per core). A run that has not finished within --timeout seconds is counted as hung (a run takes ~5-15 s): when such hangs
were first seen, py-spy showed the kernel idle and the client's shell socket held the execute_reply it waited for
(its ZMQ_EVENTS read POLLIN), so it would never have finished. Both managers encrypt kernel traffic as ours does, so the only difference is the
client's poll.

    .venv/bin/python bench/notebook_kernel.py                    # 6 runs each, ~3 min on a busy 2-core box
    .venv/bin/python bench/notebook_kernel.py --runs 10 --hogs 0 # the same on idle cores
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import papermill  # noqa: E402

from benchlib.config.paths import NOTEBOOKS_DIR, PROJECT_ROOT  # noqa: E402
from benchlib.suites.kernel import KernelManager  # noqa: E402
from tests.fakes.synthetic_run import write_synthetic_run  # noqa: E402


class StockKernelManager(KernelManager):
    """Ours (encryption included) with jupyter_client's own async client back in: only the client's poll differs."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.client_class = "jupyter_client.asynchronous.AsyncKernelClient"


def _busy() -> None:
    while True:
        pass


def _one_run(manager_name: str, root: str, out: str) -> None:
    manager = {"stock": StockKernelManager, "ours": KernelManager}[manager_name]
    papermill.execute_notebook(str(NOTEBOOKS_DIR / "explore.ipynb"), out, parameters={"outputs_dir": root},
                               kernel_name="python3", cwd=str(PROJECT_ROOT), progress_bar=False,
                               kernel_manager_class=manager)


def measure(manager_name: str, runs: int, timeout: float, root: str, scratch: Path) -> tuple[int, list[float]]:
    """(hung runs, seconds of each finished run). Each run in its own process, so a hung one can be ended."""
    hung, took = 0, []
    ctx = multiprocessing.get_context("spawn")
    for i in range(runs):
        start = time.monotonic()
        proc = ctx.Process(target=_one_run, args=(manager_name, root, str(scratch / f"{manager_name}{i}.ipynb")))
        proc.start()
        proc.join(timeout)
        if proc.is_alive():
            hung += 1
            proc.kill()  # its kernel sees its parent gone and exits within a second
            proc.join()
            print(f"  {manager_name} run {i + 1}: hung (> {timeout:.0f} s)", flush=True)
        elif proc.exitcode == 0:
            took.append(time.monotonic() - start)
            print(f"  {manager_name} run {i + 1}: {took[-1]:.1f} s", flush=True)
        else:
            print(f"  {manager_name} run {i + 1}: failed (exit {proc.exitcode})", flush=True)
    return hung, took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--managers", nargs="+", default=["stock", "ours"], choices=["stock", "ours"])
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="notebook-kernel-"))
    root = str(write_synthetic_run(scratch / "outputs"))
    hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.hogs)]
    for hog in hogs:
        hog.start()
    try:
        print(f"explore.ipynb through papermill, {args.runs} runs per manager, {args.hogs} busy-looping "
              f"processes on {os.cpu_count()} cores, hung = not done in {args.timeout:.0f} s")
        results = {name: measure(name, args.runs, args.timeout, root, scratch) for name in args.managers}
    finally:
        for hog in hogs:
            hog.kill()
    print(f"\n{'manager':<8} {'hung':>9} {'finished: median s':>20}")
    for name, (hung, took) in results.items():
        median = f"{statistics.median(took):.1f}" if took else "—"
        print(f"{name:<8} {hung:>4} of {args.runs:<2} {median:>20}")


if __name__ == "__main__":
    main()
