"""The context (prompt-length) sweep: one calibration request, then for each length a prompt fitted to the
server-counted target; writes sweep_context.csv and context_plan.json."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from benchlib.analysis.attribution import level_attribution
from benchlib.analysis.load_levels import (
    CONTEXT_CSV,
    CONTEXT_TASK,
    context_levels,
    level_energy,
    level_server_metrics,
    level_window,
)
from benchlib.measure.selfcheck.client_health import client_health
from benchlib.measure.traffic.prompt_fitting import (
    ServerTokenizer,
    context_targets,
    context_window,
    fit_to_tokens,
)
from benchlib.records.rows import read_requests, write_atomic, write_csv_atomic
from benchlib.suites.load.common import calibrate, context_text, read_previous, row_identity, simple_request
from benchlib.suites.runner import Planned, Session, progress_bar

CONTEXT_PLAN = "context_plan.json"


@dataclass
class ContextPlan:
    """How one target length was built; kept in context_plan.json so a resumed run reports it."""

    target_tokens: int
    requested_tokens: int
    method: str
    template_tokens: float
    content_tokens: float
    note: str = ""
    texts: list[str] = field(default_factory=list)


def run_context_sweep(session: Session, lengths: list[int] | None = None, max_tokens: int | None = None,
                      repeats: int = 1, progress: bool = True) -> pd.DataFrame:
    """Fit and send the prompt lengths (resuming finished keys), then write sweep_context.csv."""
    params = session.params
    max_tokens = max_tokens or params.sweep.max_tokens
    targets = context_targets(lengths or params.sweep.context_lengths, context_window(params), max_tokens)
    plan_path = session.out_dir / CONTEXT_PLAN
    stored = json.loads(plan_path.read_text(encoding="utf-8")) if plan_path.is_file() else {}
    plans: dict[int, dict] = {int(k): v for k, v in stored.get(session.run_id, {}).items()}
    done = session.log.done_keys(session.run_id)
    health = read_previous(session.out_dir / CONTEXT_CSV, session.run_id, "target_tokens")

    def key_of(target: int, index: int) -> str:
        return session.base_record(CONTEXT_TASK, f"n{target}", index).request_key

    pending_targets = [t for t in targets if any(key_of(t["target_tokens"], i) not in done for i in range(repeats))]
    desc = f"load · context · {params.server.model}"
    tokenizer = ServerTokenizer.detect(params) if pending_targets else None
    try:
        with progress_bar(len(pending_targets) * repeats, desc, progress) as bar:
            template, cpt, points = None, None, []
            if pending_targets:  # calibration and tokenizer probing stay outside every measured window
                calib_tokens, calib_chars, calib_text = calibrate(session, done)
                if tokenizer is not None and calib_tokens is not None:
                    template = calib_tokens - tokenizer.count(calib_text)
                elif calib_tokens is not None:
                    points.append((calib_chars, calib_tokens))
                    cpt = calib_chars / calib_tokens
            for target in pending_targets:
                n = target["target_tokens"]
                plan = _plan_length(session, target, repeats, tokenizer, template, cpt, points, key_of)
                plans[n] = {k: v for k, v in plan.__dict__.items() if k != "texts"}
                with session.window(level_window(CONTEXT_TASK, n), kind="level"):
                    _execute_length(session, plan, repeats, key_of, done, health, bar, max_tokens)
                if tokenizer is None:  # refit chars per token (and the fixed template) from every length so far
                    points.extend(_observed_points(session, n, plan))
                    cpt, template = _fit_chars(points, cpt)
    finally:
        if tokenizer is not None:
            tokenizer.close()
    stored[session.run_id] = {str(k): v for k, v in plans.items()}
    write_atomic(plan_path, json.dumps(stored, indent=2))
    requests = session.run_requests()
    frame = context_levels(requests, plans, health, identity=row_identity(session))
    windows = session.telemetry.windows_frame()
    frame = level_energy(frame, windows, CONTEXT_TASK, "target_tokens")
    frame = level_attribution(frame, session.run_requests(), windows, session.telemetry.samples_frame(),
                              CONTEXT_TASK, "target_tokens")
    frame = level_server_metrics(frame, session.server_windows(), CONTEXT_TASK, "target_tokens")
    write_csv_atomic(session.out_dir / CONTEXT_CSV, frame)
    return frame


def _plan_length(session: Session, target: dict[str, Any], repeats: int, tokenizer: ServerTokenizer | None,
                 template: float | None, cpt: float | None, points: list, key_of: Callable) -> ContextPlan:
    n = target["target_tokens"]
    texts, counts = [], []
    if tokenizer is not None:
        overhead = template if template is not None else 0.0
        content_target = max(1, int(round(n - overhead)))
        for index in range(repeats):
            key = key_of(n, index)
            text, counted, _ = fit_to_tokens(tokenizer.count, lambda w, k=key, s=index: context_text(
                session, k, w, s), content_target)
            texts.append(text)
            counts.append(counted)
        method = tokenizer.name + ("" if template is not None else " (template tokens unknown: server gives no "
                                                                   "prompt_tokens)")
        return ContextPlan(n, target["requested_tokens"], method, overhead, float(np.mean(counts)),
                           target["note"], texts)
    chars_per_token = cpt or 4.0
    overhead = template or 0.0
    for index in range(repeats):
        key = key_of(n, index)
        want_chars = max(1.0, (n - overhead) * chars_per_token)
        lo, hi = 0, max(1, int(want_chars))  # most words whose text stays within want_chars (length grows with n)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if len(context_text(session, key, mid, index)) <= want_chars:
                lo = mid
            else:
                hi = mid
        texts.append(context_text(session, key, lo, index))
    method = f"calibrated ({chars_per_token:.2f} chars/token" + (f", template {overhead:.0f} tokens)" if template
                                                                  else ")")
    return ContextPlan(n, target["requested_tokens"], method, overhead, np.nan, target["note"], texts)


def _execute_length(session: Session, plan: ContextPlan, repeats: int, key_of: Callable, done: set[str],
                    health: dict, bar: Any, max_tokens: int) -> None:
    items = []
    for index in range(repeats):
        record = session.base_record(CONTEXT_TASK, f"n{plan.target_tokens}", index)
        if record.request_key in done:
            continue
        items.append(Planned(record, simple_request(session, record, plan.texts[index], max_tokens, unique=False)))
    if not items:
        return
    bar.set_postfix_str(f"{plan.target_tokens} tokens")
    with client_health(len(items)) as figures:
        session.execute(items, concurrency=1, progress=bar)
    health[plan.target_tokens] = figures


def _observed_points(session: Session, target: int, plan: ContextPlan) -> list[tuple[int, float]]:
    requests = read_requests(session.log.path)
    rows = requests[(requests["variant"] == f"n{target}") & (requests["task"] == CONTEXT_TASK)]
    points = []
    for _, row in rows.iterrows():
        tokens = pd.to_numeric(pd.Series([row.get("prompt_tokens")]), errors="coerce").iloc[0]
        if tokens == tokens and tokens:
            points.append((len(str(row["prompt"])), float(tokens)))
    return points


def _fit_chars(points: list[tuple[int, float]], fallback: float | None) -> tuple[float | None, float | None]:
    """tokens ≈ template + chars / cpt, least squares over every (chars, tokens) observed; (cpt, template)."""
    if len(points) < 2 or len({c for c, _ in points}) < 2:
        if points:
            chars, tokens = points[-1]
            return chars / tokens, None
        return fallback, None
    chars = np.array([c for c, _ in points], dtype=float)
    tokens = np.array([t for _, t in points], dtype=float)
    slope, intercept = np.polyfit(chars, tokens, 1)
    if slope <= 0:
        return fallback, None
    return 1.0 / slope, max(0.0, float(intercept))
