"""The concurrency sweep: warm-ups, then each level with at most that many requests in flight, each level
measured with the client self-check; writes sweep_concurrency.csv."""

from __future__ import annotations

import pandas as pd

from benchlib.analysis.attribution import level_attribution
from benchlib.analysis.load_levels import (
    CONCURRENCY_CSV,
    CONCURRENCY_TASK,
    concurrency_levels,
    level_energy,
    level_server_metrics,
    level_steady,
    level_window,
)
from benchlib.measure.selfcheck.client_health import client_health
from benchlib.records.rows import write_csv_atomic
from benchlib.suites.load.common import read_previous, row_identity, simple_request
from benchlib.suites.load.fleet_levels import client_nodes, send_level_from_nodes
from benchlib.suites.runner import Planned, Session, progress_bar

CONCURRENCY_PROMPT = "Count from 1 to 1000, one number per line, without stopping:"


def plan_concurrency(session: Session, levels: list[int], requests_per_level: int, max_tokens: int) -> dict[int, list]:
    """Planned requests per level: max(requests_per_level, level) each, unique prompts, keys distinct per level."""
    plan: dict[int, list] = {}
    for level in levels:
        items = []
        for index in range(max(requests_per_level, level)):
            record = session.base_record(CONCURRENCY_TASK, f"c{level}", index, concurrency=level)
            items.append(Planned(record, simple_request(session, record, CONCURRENCY_PROMPT, max_tokens)))
        plan[level] = items
    return plan


def _warmups(session: Session, task: str, max_tokens: int) -> list:
    items = []
    for index in range(session.params.run.warmups):
        record = session.base_record(task, "warmup", index, warmup=True)
        items.append(Planned(record, simple_request(session, record, CONCURRENCY_PROMPT, max_tokens)))
    return items


def run_concurrency_sweep(session: Session, levels: list[int] | None = None, requests_per_level: int | None = None,
                          max_tokens: int | None = None, progress: bool = True) -> pd.DataFrame:
    """Send every level (resuming finished keys), then write sweep_concurrency.csv; returns its frame."""
    sweep = session.params.sweep
    levels = sorted(set(levels or sweep.concurrency))
    requests_per_level = requests_per_level or sweep.requests_per_level
    max_tokens = max_tokens or sweep.max_tokens
    nodes = client_nodes(session)  # before anything is sent: sweep.nodes > 1 without Ray stops here
    done = session.log.done_keys(session.run_id)
    plan = plan_concurrency(session, levels, requests_per_level, max_tokens)
    warmups = [p for p in _warmups(session, CONCURRENCY_TASK, max_tokens) if p.record.request_key not in done]
    health = read_previous(session.out_dir / CONCURRENCY_CSV, session.run_id, "concurrency")
    total = len(warmups) + sum(1 for items in plan.values() for p in items if p.record.request_key not in done)
    desc = f"load · concurrency · {session.params.server.model}"
    with progress_bar(total, desc, progress) as bar:
        if warmups:  # outside every measured window: warm-ups are not part of any level's energy
            session.execute(warmups, concurrency=1, progress=bar)
        todo = {level: [p for p in items if p.record.request_key not in done] for level, items in plan.items()}
        if any(todo.values()):
            with session.window(CONCURRENCY_TASK, kind="task"):
                for level, pending in todo.items():
                    if not pending:
                        continue
                    bar.set_postfix_str(f"{level} in flight")
                    if nodes > 1:  # sweep.nodes: the level's streams split over that many Ray nodes
                        with session.window(level_window(CONCURRENCY_TASK, level), kind="level"):
                            health[level] = send_level_from_nodes(session, CONCURRENCY_TASK, level, pending, None,
                                                                  level, 0.0, nodes, bar)
                        continue
                    with client_health(len(pending)) as figures, \
                            session.window(level_window(CONCURRENCY_TASK, level), kind="level"):
                        session.execute(pending, concurrency=level, progress=bar)
                    health[level] = figures
    requests = session.run_requests()
    frame = concurrency_levels(requests, health, identity=row_identity(session))
    windows = session.telemetry.windows_frame()
    frame = level_energy(frame, windows, CONCURRENCY_TASK, "concurrency")
    frame = level_attribution(frame, requests, windows, session.telemetry.samples_frame(), CONCURRENCY_TASK,
                              "concurrency")
    frame = level_steady(frame, requests, CONCURRENCY_TASK, "concurrency", session.telemetry)
    frame = level_server_metrics(frame, session.server_windows(), CONCURRENCY_TASK, "concurrency")
    write_csv_atomic(session.out_dir / CONCURRENCY_CSV, frame)
    return frame
