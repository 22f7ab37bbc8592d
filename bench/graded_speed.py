"""Graded items per minute: the quality suite's graded sets on the local models, as the default study runs them.

Setup: each params file (default: the embedded demo's two models, Gemma 3 270M and SmolLM2-135M-Instruct behind
llama-cpp-python) runs the quality suite restricted to the graded sets, `--items` of each (run.graded_items), into a
scratch folder (never outputs/), one model after the other. `--stop off` sends no task's stop sequences — how the
sets were sent before a one-line set stopped at its first line break (`stop: ["\\n"]` in
testdata/tasks/quality_graded.yaml); `--in-flight` sets run.graded_in_flight. Per model and set it prints

    n             items scored
    passed        items right (the set's own scorer)
    items_per_min n ÷ the set's telemetry window (requests and sandboxed scoring, as the suite spends it)
    s_per_item    the window ÷ n: what one more item of the set costs
    tokens        mean completion tokens an answer spent
    at_budget     answers cut by their token budget (finish_reason length)
    in_flight     the concurrency the rows record

then per model the graded part's whole window and items per minute, and the paired verdict between the models over
the items both answered (exact McNemar, benchlib.analysis.paired).

    nice .venv/bin/python bench/graded_speed.py                          # 6 items a set, stops on
    nice .venv/bin/python bench/graded_speed.py --items 6 --stop off     # as before one-line stops
    nice .venv/bin/python bench/graded_speed.py --sets arithmetic word_sorting --items 10
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchlib.analysis import paired  # noqa: E402
from benchlib.config.params import load_params, validate  # noqa: E402
from benchlib.config.tasks import load_tasks  # noqa: E402
from benchlib.scoring import checkers  # noqa: E402
from benchlib.scoring.verdict import Response  # noqa: E402
from benchlib.suites.runner import run_suite  # noqa: E402

MODELS = ["params/embedded.yaml", "params/embedded-smollm2.yaml"]


def graded_sets() -> list[str]:
    return [name for name, task in load_tasks().items() if task.graded is not None]


def warm_scorers(sets: list[str]) -> None:
    """Each set's scorer built once before anything is timed (reasoning-gym imports and builds it on first use,
    seconds that would fall into the first model's window of that set)."""
    tasks = load_tasks()
    for name in sets:
        task = tasks[name]
        if task.checker == "reasoning_gym":
            checkers.score(task.checker, Response(text="0"), task.variants[0].expected, task.checker_args)


def bench_params(path: str, sets: list[str], items: int, in_flight: int | None):
    data = load_params(ROOT / path).model_dump(mode="json", exclude={"source"})
    data["host"]["name"] = "graded-speed"
    data["tasks"] = sets
    data["run"].update(graded_items=items, graded_in_flight=in_flight, graded_concurrency=1, warmups=1)
    data["telemetry"].update(idle_baseline_s=0, loaded_baseline_s=0)
    return validate(data, source=f"{path} (bench/graded_speed.py)")


def per_set(result) -> pd.DataFrame:
    rows = result.requests[~result.requests["is_warmup"].astype(bool)]
    windows = result.windows
    windows = windows[windows["kind"] == "task"].set_index("window") if len(windows) else windows
    out = []
    for name, group in rows.groupby("task", sort=False):
        seconds = float(windows.loc[name, "duration_s"]) if name in windows.index else float("nan")
        n = int(group["passed"].notna().sum())
        out.append({"set": name, "n": n, "passed": int(group["passed"].fillna(False).astype(bool).sum()),
                    "window_s": round(seconds, 1), "items_per_min": round(60 * n / seconds, 1) if seconds else None,
                    "s_per_item": round(seconds / n, 2) if n else None,
                    "tokens": round(pd.to_numeric(group["completion_tokens"], errors="coerce").mean(), 1),
                    "at_budget": int((group["finish_reason"] == "length").sum()),
                    "in_flight": int(group["concurrency"].max())})
    return pd.DataFrame(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", nargs="+", default=MODELS)
    parser.add_argument("--sets", nargs="+", default=None, help="graded sets (default: all)")
    parser.add_argument("--items", type=int, default=6, help="items a set (run.graded_items)")
    parser.add_argument("--stop", choices=["on", "off"], default="on", help="send the sets' stop sequences")
    parser.add_argument("--in-flight", type=int, default=None, help="run.graded_in_flight (default: the params')")
    args = parser.parse_args()
    sets = args.sets or graded_sets()
    if args.stop == "off":  # the sets as sent before one-line stops: this process's task objects, not the files
        for task in load_tasks().values():
            task.stop = []
    print(f"{platform.node()} · {platform.processor() or platform.machine()} · {args.items} items a set · "
          f"stop {args.stop}\n")
    warm_scorers(sets)
    frames, requests = [], []
    with tempfile.TemporaryDirectory(prefix="graded-speed-") as scratch:
        for path in args.params:
            params = bench_params(path, sets, args.items, args.in_flight)
            started = time.monotonic()
            result = run_suite(params, "quality", fresh=True, root=Path(scratch), progress=False)
            wall = time.monotonic() - started
            table = per_set(result).assign(model=params.server.model)
            frames.append(table)
            requests.append(result.requests)
            n, window = table["n"].sum(), table["window_s"].sum()
            print(table.drop(columns="model").to_string(index=False))
            print(f"{params.server.model}: {n} items, {table['passed'].sum()} right, graded windows {window:.0f} s "
                  f"({60 * n / window:.1f} items/min), suite wall {wall:.0f} s with the server's start\n")
    items = paired.item_results(pd.concat(requests, ignore_index=True))
    for row in paired.pairwise(items).to_dict("records"):
        print(paired.Paired(**row).line())


if __name__ == "__main__":
    main()
