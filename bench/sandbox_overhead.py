"""The code sandbox's cost per scored item, and that HumanEval's canonical solutions all pass through it.

    python bench/sandbox_overhead.py                      # 20 empty programs, all 164 canonical solutions
    python bench/sandbox_overhead.py --items 40 --baseline old_sandbox.py
    python bench/sandbox_overhead.py --without-namespaces # the start a machine without unshare gets (Landlock)

Prints the wall time of an empty program (`run_python("pass")`: the start-up cost alone) and of one HumanEval item
(canonical solution, the judge and the worker), median and 90th percentile, with the isolation in force. With
--baseline FILE (a copy of an older benchlib/scoring/sandbox.py, e.g. `git show 0d811c6:benchlib/scoring/sandbox.py`)
the same items also run through that file's run_python, program and tests in one process as it did then.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchlib.config.graded import GradedSource, graded_variants  # noqa: E402
from benchlib.scoring import sandbox  # noqa: E402
from benchlib.scoring.graded import human_eval  # noqa: E402
from benchlib.scoring.verdict import Response  # noqa: E402


def timed(call) -> tuple[float, object]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def figures(name: str, seconds: list[float], passed: int | None = None) -> None:
    ordered = sorted(seconds)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    tail = f"  passed {passed}/{len(seconds)}" if passed is not None else ""
    print(f"{name:<44} n={len(seconds):<4} median {statistics.median(seconds) * 1000:7.1f} ms   "
          f"p90 {p90 * 1000:7.1f} ms{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--empty", type=int, default=20, help="empty programs to time")
    parser.add_argument("--items", type=int, default=164, help="HumanEval items (canonical solutions) to run")
    parser.add_argument("--baseline", type=Path, help="an older sandbox.py to time on the same items")
    parser.add_argument("--without-namespaces", action="store_true",
                        help="the start without unshare and without the throwaway uid (Landlock, where the kernel "
                             "has it), forced through the sandbox's own probe")
    args = parser.parse_args()
    if args.without_namespaces:
        forced = sandbox._probe(None, None, sandbox.landlock_abi())
        sandbox.isolation = lambda: forced
    way = sandbox.isolation()
    print(f"isolation: {way.in_force}" + (f" (missing: {way.missing})" if way.missing else ""))
    problems = [v["expected"] for v in graded_variants(GradedSource(source="human_eval", seed=0, size=164))]
    problems = problems[:args.items]
    old = None
    if args.baseline:
        spec = importlib.util.spec_from_file_location("old_sandbox", args.baseline)
        old = sys.modules["old_sandbox"] = importlib.util.module_from_spec(spec)  # dataclasses look it up there
        spec.loader.exec_module(old)
    runs = {"now": sandbox.run_python, **({"baseline": old.run_python} if old else {})}
    empty: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(args.empty):  # interleaved, so both see the same load
        for label, run in runs.items():
            empty[label].append(timed(lambda: run("pass\n"))[0])
    item: dict[str, list[float]] = {label: [] for label in runs}
    passed, failures = dict.fromkeys(runs, 0), []
    for problem in problems:
        took, verdict = timed(lambda: human_eval(Response(text=problem["canonical_solution"]), problem))
        item["now"].append(took)
        passed["now"] += bool(verdict.passed)
        if not verdict.passed:
            failures.append(verdict.detail)
        if old is not None:
            program = (f"{problem['prompt']}{problem['canonical_solution']}\n\n{problem['test']}\n\n"
                       f"check({problem['entry_point']})\n")
            took, result = timed(lambda: old.run_python(program))
            item["baseline"].append(took)
            passed["baseline"] += bool(result.passed)
    for label in runs:
        figures(f"{label}: empty program", empty[label])
    figures("now: HumanEval item (judge + worker)", item["now"], passed["now"])
    if old is not None:
        figures("baseline: HumanEval item (one process)", item["baseline"], passed["baseline"])
    for detail in failures:
        print("  failed:", detail)

if __name__ == "__main__":
    main()
