"""The graded sets sent look by look under a sized quality plan (params run.quality; the stopping rule is
benchlib.analysis.sequential): at each look every graded set sends the next share of its planned items, then the
rule says whether the evidence so far settles it. Each look is recorded in the suite folder's quality_plan.csv
(n, planned n, the figures the rule read, and why it stopped), which the paper reads.

A `compare` plan judges the items the baseline deployment answered (its quality suite's requests.csv under the
same host folder, this run of it): only those are sent, since an item the baseline never answered says nothing
about the comparison. Without the baseline's answers the plan sends every planned item and says why.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd

from benchlib.analysis import paired, sequential
from benchlib.config.identity import Deployment
from benchlib.config.paths import slug
from benchlib.config.tasks import load_pass
from benchlib.records.rows import write_csv_atomic
from benchlib.records.run_folder import RunFolder, suite_folders
from benchlib.records.schema import read_csv
from benchlib.suites.session_api import SuiteSession

QUALITY_PLAN_CSV = "quality_plan.csv"


def baseline_folder(host_dir: Path, baseline: str, suite: str) -> Path | None:
    """The baseline's `suite` folder under `host_dir` (named by its model folder, server.model[+variant], or its
    full name, as a compare plan names it); None when it has no such run (yet)."""
    found = suite_folders(host_dir.parent)[0] if host_dir.is_dir() and baseline else []
    for folder in (path for path in found if path.parent.parent == host_dir and path.name == suite):
        model_dir = folder.parent
        run = RunFolder(folder)
        if not run.has_requests():
            continue
        names = {model_dir.name, Deployment.from_recorded(run.params, host_dir.name, model_dir.name).name}
        if baseline in names or slug(baseline) == model_dir.name:
            return folder
    return None


def baseline_outcomes(host_dir: Path, baseline: str, suite: str) -> dict[tuple[str, str], bool] | None:
    """The baseline's (task, item) -> passed in its current run of `suite`; None when it has no such run (yet)."""
    folder = baseline_folder(host_dir, baseline, suite)
    return None if folder is None else paired.outcomes(run_items(folder), folder.parent.name)


def run_items(folder: Path) -> pd.DataFrame:
    """paired.item_results of a suite folder's current run (its run.json's run_id), system = its model folder."""
    run = RunFolder(folder)
    run_id, rows = run.run_id, run.requests()
    if run_id and "run_id" in rows:
        rows = rows[rows["run_id"] == run_id]
    return paired.item_results(rows.assign(system=folder.parent.name))


def compare_plans(suite_dirs: Iterable[Path], name_of: Callable[[Path], str]) -> pd.DataFrame:
    """The last look of every compare plan among `suite_dirs` (their quality_plan.csv), with `system` (the
    deployment that ran it) and `against` (its baseline), each named by `name_of(suite folder)`, and `tasks` (the
    graded sets it judged, comma-separated): the plans paired.verdicts reads so that the pair's verdict is the
    plan's."""
    rows = []
    for folder in suite_dirs:
        path = folder / QUALITY_PLAN_CSV
        looks = read_csv(path, label=str(path)) if path.is_file() else pd.DataFrame()
        if not len(looks) or "plan" not in looks or looks["plan"].iloc[-1] != "compare":
            continue
        last = looks.iloc[-1].to_dict()
        found = baseline_folder(folder.parent.parent, str(last.get("baseline") or ""), folder.name)
        if found is not None:
            items = run_items(folder)
            tasks = ",".join(sorted(set(items.loc[items["basis"] == paired.GRADED, "task"])))
            rows.append({**last, "system": name_of(folder), "against": name_of(found), "tasks": tasks})
    return pd.DataFrame(rows)


def run_looks(session: SuiteSession, by_task: dict[str, list], done: set[str], bar: Any) -> set[str]:
    """Send the graded sets of `by_task` look by look under the params' quality plan; the names of the tasks it
    sent (the caller sends the rest). A fixed plan sends nothing here. A set's pass under load is cut to the items
    its first pass used."""
    plan = session.params.run.quality
    graded = [name for name, items in by_task.items()
              if items and items[0].task is not None and items[0].task.graded is not None
              and items[0].request is not None and load_pass(name)[1] == 1]
    if not plan.sequential or not graded:
        return set()
    baseline, kind = None, plan.plan
    if kind == "compare":
        baseline = baseline_outcomes(session.out_dir.parent.parent, plan.baseline, session.suite)
        if baseline is None:
            print(f"quality plan: baseline {plan.baseline!r} has no {session.suite} results on this host yet; "
                  "sending every planned item", flush=True)
            kind = "fixed"
        else:
            for name in graded:  # an item the baseline did not answer cannot inform the comparison
                by_task[name] = [p for p in by_task[name] if (name, _item(p)) in baseline]
    planned = {name: len(by_task[name]) for name in graded}
    total = sum(planned.values())
    started, earlier, looks = time.monotonic(), [], []
    fractions = plan.looks if kind != "fixed" else [1.0]
    for number, share in enumerate(fractions, 1):
        for name in graded:
            upto = math.ceil(share * planned[name] - 1e-9)
            pending = [p for p in by_task[name][:upto] if p.record.request_key not in done]
            if pending:
                bar.set_postfix_str(f"{name} · look {number}")
                with session.window(name, kind="task"):
                    session.execute(pending, concurrency=max(p.record.concurrency for p in pending), progress=bar)
                done |= {p.record.request_key for p in pending}
        sent = {(name, _item(p)) for name in graded
                for p in by_task[name][:math.ceil(share * planned[name] - 1e-9)]}
        mine = {key: ok for key, ok in paired.outcomes(paired.item_results(session.run_requests().assign(
            system="this")), "this").items() if key in sent}
        a_only = sum(ok and not baseline[key] for key, ok in mine.items()) if baseline else 0
        b_only = sum(baseline[key] and not ok for key, ok in mine.items()) if baseline else 0
        look = sequential.decide(
            kind, number, len(mine), total, sum(mine.values()), a_only=a_only, b_only=b_only, earlier=earlier,
            alpha=plan.alpha, target_half_width=plan.half_width, baseline=plan.baseline if baseline else "", last=share >= 1.0,
            over_budget=plan.budget_s is not None and time.monotonic() - started >= plan.budget_s)
        looks.append({"run_id": session.run_id, **look.__dict__})
        print("quality plan · " + look.line(), flush=True)
        earlier.append(len(mine))
        if look.stop:
            break
    write_csv_atomic(session.out_dir / QUALITY_PLAN_CSV, pd.DataFrame(looks))
    used = {name: {p.record.variant for p in by_task[name][:math.ceil(share * planned[name] - 1e-9)]}
            for name in graded}
    for name in list(by_task):
        base, level = load_pass(name)
        if level > 1 and base in used:
            by_task[name] = [p for p in by_task[name] if p.record.variant in used[base]]
    return set(graded)


def _item(planned: Any) -> str:
    """The item key paired.item_results gives a planned request."""
    return f"{planned.record.variant}#{planned.record.repeat}"
