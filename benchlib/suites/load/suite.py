"""The load suite end to end: one server start, the concurrency sweep, the context sweep, the rate sweep, the
workloads (multi-turn, shared prefix, trace replay; each off unless enabled), then the suite's summary
(runner.finish_suite) with the sweep figures that feed the frontier."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from benchlib.analysis.load_levels import SUITE, frontier_figures
from benchlib.analysis.serving import RATE_COLUMNS, serving_figures
from benchlib.config.params import BenchParams
from benchlib.records.rows import STATUS_OK, write_csv_atomic
from benchlib.records.run_folder import SUMMARY_CSV
from benchlib.suites.load.concurrency import run_concurrency_sweep
from benchlib.suites.load.context import run_context_sweep
from benchlib.suites.load.rate import run_rate_sweep
from benchlib.suites.load.workloads import REPLAY_COLUMNS, TURN_COLUMNS, WORKLOAD_COLUMNS, run_workloads
from benchlib.suites.runner import Session, finish_suite, open_session


@dataclass
class LoadResult:
    out_dir: Path
    requests: pd.DataFrame
    summary: pd.DataFrame
    concurrency: pd.DataFrame
    context: pd.DataFrame
    figures: dict[str, float]
    windows: pd.DataFrame = field(default_factory=pd.DataFrame)
    rate: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=RATE_COLUMNS))
    workloads: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=WORKLOAD_COLUMNS))
    turns: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=TURN_COLUMNS))
    replay: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=REPLAY_COLUMNS))

    @property
    def ok(self) -> bool:
        return bool((self.requests.get("status") == STATUS_OK).any()) if len(self.requests) else False


def finish_load(session: Session, concurrency: pd.DataFrame, context: pd.DataFrame,
                rate: pd.DataFrame | None = None) -> LoadResult:
    """runner.finish_suite (summary, windows, manifest), plus the sweep figures on every summary row."""
    result = finish_suite(session)
    rate = rate if rate is not None else pd.DataFrame(columns=RATE_COLUMNS)
    figures = {**frontier_figures(concurrency, context), **serving_figures(rate)}
    summary = result.summary.copy()
    for name, value in figures.items():
        summary[name] = value
    write_csv_atomic(session.out_dir / SUMMARY_CSV, summary)
    return LoadResult(result.out_dir, result.requests, summary, concurrency, context, figures, result.windows, rate)


def run_load(params: BenchParams, *, fresh: bool = False, root: Path | None = None, progress: bool = True,
             context_repeats: int = 1) -> LoadResult:
    """The load notebook's work: one session (server started once), the concurrency, context and rate sweeps,
    the workloads, then the summary."""
    sweep = params.sweep
    top = max(sweep.concurrency + ([sweep.rate.max_concurrency] if sweep.rate.enabled else [])
              + workload_concurrency(params) or [1])
    with open_session(params, SUITE, fresh=fresh, root=root, concurrency=top) as session:
        concurrency = run_concurrency_sweep(session, progress=progress)
        context = run_context_sweep(session, repeats=context_repeats, progress=progress)
        rate = run_rate_sweep(session, progress=progress)
        workloads, turns, replay = run_workloads(session, progress=progress)
        result = finish_load(session, concurrency, context, rate)
        result.workloads, result.turns, result.replay = workloads, turns, replay
        return result


def workload_concurrency(params: BenchParams) -> list[int]:
    """The in-flight caps of the enabled workloads (the client's connection pool is sized to the largest)."""
    wp = params.sweep.workloads
    return [section.max_concurrency for section in (wp.multiturn, wp.shared_prefix, wp.trace) if section.enabled]
