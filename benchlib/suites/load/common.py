"""What every load sweep builds on, kept apart so no sweep imports another: the client health of levels an earlier
(resumed) run wrote (read_previous), the identity columns of a sweep's rows (row_identity), one plain chat request
(simple_request), and the calibration request that measures how the server counts a known text (calibrate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from benchlib.analysis.load_levels import CONTEXT_TASK
from benchlib.measure.client.backends import ChatRequest
from benchlib.measure.selfcheck.client_health import HEALTH_COLUMNS
from benchlib.measure.traffic.prompt_fitting import CONTEXT_INSTRUCTION, filler_words
from benchlib.records.rows import STATUS_OK, RequestRecord
from benchlib.records.schema import read_csv
from benchlib.suites.runner import Planned, Session


def read_previous(path: Path, run_id: str, key: str) -> dict[Any, dict[str, Any]]:
    """Health columns of levels written by an earlier (resumed) run of the same run id."""
    frame = read_csv(path, label=str(path))
    if "run_id" in frame:
        frame = frame[frame["run_id"].astype(str) == str(run_id)]
    return {row[key]: {c: row[c] for c in HEALTH_COLUMNS if c in row} for _, row in frame.iterrows()}


def row_identity(session: Session) -> dict[str, Any]:
    """The columns that say whose a sweep's level rows are: run, host, model, server software."""
    p = session.params
    return {"run_id": session.run_id, "host": p.host.name, "model": p.server.model,
            "server_software": p.server.software or p.server.kind}


def simple_request(session: Session, record: RequestRecord, prompt: str, max_tokens: int,
                   unique: bool = True) -> ChatRequest:
    """One user message under the run's sampling settings; the prompt (made cache-unique unless `unique` is off)
    and the completion budget are noted on the record."""
    run = session.params.run
    record.prompt = session.unique_prompt(prompt, record.request_key) if unique else prompt
    record.max_tokens = max_tokens
    return ChatRequest(messages=[{"role": "user", "content": record.prompt}], max_tokens=max_tokens,
                       temperature=run.temperature, seed=run.seed, thinking=run.thinking)


def context_text(session: Session, key: str, n_words: int, seed: int) -> str:
    """The context instruction and n_words seeded filler words, made unique to the request key."""
    body = CONTEXT_INSTRUCTION + " " + " ".join(filler_words(n_words, seed))
    return session.unique_prompt(body, key)


def calibrate(session: Session, done: set[str]) -> tuple[float | None, int, str]:
    """One warm-up request (1 completion token) with a known text: (server prompt_tokens, chars, text).
    On resume the recorded row answers instead."""
    record = session.base_record(CONTEXT_TASK, "calibrate", 0, warmup=True)
    key = record.request_key
    text = context_text(session, key, 60, seed=7)
    if key in done:
        rows = session.run_requests()
        rows = rows[rows["request_key"] == key]
        tokens = pd.to_numeric(rows["prompt_tokens"], errors="coerce").dropna() if len(rows) else pd.Series()
        return (float(tokens.iloc[-1]) if len(tokens) else None), len(text), text
    request = simple_request(session, record, text, 1, unique=False)
    session.execute([Planned(record, request)], concurrency=1)
    tokens = record.prompt_tokens if record.status == STATUS_OK else None
    return (float(tokens) if tokens else None), len(text), text
