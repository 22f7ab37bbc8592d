"""A task's requests sized to a precision (params run.latency, plan: precision; the rule is
benchlib.analysis.latency_precision): each non-graded task of the suite sends its run.repeats requests, then looks,
and while its chosen percentile's 95 % interval is wider than ±relative of the estimate it sends more — growth × the
requests so far — until the precision is reached, max_requests is, or the plan's time budget is spent. Each look is
a row of the suite folder's latency_plan.csv (the percentile, its interval, and why it stopped), which the paper
reads. A fixed plan (the default) sends nothing here.

The requests added carry the next repeat numbers (cycling through the task's variants as run.repeats does), so a
resumed run finds them by their keys.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from typing import Any

import pandas as pd

from benchlib.analysis import latency_precision
from benchlib.config.tasks import load_pass
from benchlib.records.rows import STATUS_OK, write_csv_atomic
from benchlib.records.schema import flag
from benchlib.suites.session_api import SuiteSession

LATENCY_PLAN_CSV = "latency_plan.csv"


def run_looks(session: SuiteSession, by_task: dict[str, list], done: set[str], bar: Any) -> set[str]:
    """Send the non-graded tasks of `by_task` look by look under the params' latency plan; the names of the tasks
    it sent (the caller sends the rest)."""
    plan = session.params.run.latency
    sized = [name for name, items in by_task.items()
             if plan.sized and items and items[0].task is not None and items[0].task.graded is None
             and items[0].request is not None and load_pass(name)[1] == 1]
    looks = []
    for name in sized:
        items, started, number = by_task[name], time.monotonic(), 1
        while True:
            pending = [p for p in items if p.record.request_key not in done]
            if pending:
                bar.set_postfix_str(f"{name} · look {number}")
                with session.window(name, kind="task"):
                    session.execute(pending, concurrency=1, progress=bar)
                done |= {p.record.request_key for p in pending}
            found = latency_precision.look(name, number, _values(session, name, plan.metric), plan.metric,
                                           plan.percentile, plan.relative, plan.max_requests,
                                           over_budget=plan.budget_s is not None
                                           and time.monotonic() - started >= plan.budget_s)
            looks.append({"run_id": session.run_id, **asdict(found)})
            print(found.line(), flush=True)
            if found.stop:
                break
            size = latency_precision.next_size(len(items), plan.percentile, plan.growth, plan.max_requests)
            more = _more(session, items, size)
            bar.total += len(more)
            bar.refresh()
            items.extend(more)
            number += 1
    if looks:
        write_csv_atomic(session.out_dir / LATENCY_PLAN_CSV, pd.DataFrame(looks))
    return set(sized)


def _values(session: SuiteSession, task: str, metric: str) -> pd.Series:
    """The task's measured values of `metric` in this run so far (ok, not warm-up)."""
    rows = session.run_requests()
    if not len(rows) or metric not in rows:
        return pd.Series(dtype=float)
    mine = rows[(rows["task"] == task) & (rows["status"] == STATUS_OK) & ~rows["is_warmup"].map(flag)]
    return pd.to_numeric(mine[metric], errors="coerce").dropna()


def _more(session: SuiteSession, items: list, size: int) -> list:
    """Planned requests from len(items) up to `size`, the next repeats cycling through the task's variants (the
    first item's task; its record and request built as the runner builds them)."""
    first = items[0]
    task = first.task
    out = []
    for repeat in range(len(items), size):
        variant = task.variants[repeat % len(task.variants)]
        record = session.base_record(task.name, variant.id, repeat, modality=task.requires)
        out.append(replace(first, record=record, request=session.build(task, variant, record), variant=variant))
    return out
