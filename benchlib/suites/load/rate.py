"""The rate sweep: open-loop serving levels on one server start; writes sweep_rate.csv and rate_plan.json.

Levels (params sweep.rate; rules in benchlib.analysis.serving):
    sync        closed loop, one request at a time, min_requests requests: the synchronous rate
    throughput  closed loop at max_concurrency, max(min_requests, 4 × max_concurrency) requests
    r<rate>     open loop at each rate between the two (SWEEP RATES), or at each of sweep.rate.rates when given
                (then sync and throughput are not run): arrivals drawn by benchlib.measure.traffic.workload, capped at
                max_concurrency in flight, rate × duration_s requests (at least min_requests)
Each request's prompt is fitted to a drawn server-counted length (the server's tokenizer and the chat
template's tokens from the context sweep's calibration request; without a tokenizer a chars-per-token
estimate, and `prompt_exact_share` shows it) and its max_tokens is a drawn output length. With
shared_prefix > 0 every prompt starts with the same text of that share of the mean prompt length, the unique
request id after it, so a server's prefix cache can take it (cached_tokens shows whether it did).

Workers (sweep.rate.workers, benchlib.measure.traffic.workers): an open-loop level with more than one worker is sent
from that many processes at one common schedule (started before its window opens); the rows come back to this
process, which scores and appends them as they arrive. The count is resolved per level ("auto": by its offered
rate) and kept in rate_plan.json, so a resume splits a level as before.

Search (sweep.rate.search; SEARCH RULE in benchlib.analysis.serving): instead of `points` rates, after the
throughput level each next open-loop level is the bisection's next rate, decided from the levels run so far; the
levels and the search's state are stored in rate_plan.json after each level, so a run cut mid-search resumes at
the level it was cut in and goes on from there.

Resume: finished keys are skipped; an open-loop level cut short sends its missing requests at their own
offsets (from the first missing one) and is marked `resumed` (its rates then mix two sessions). The rates
between synchronous and throughput are stored in rate_plan.json, so a resumed run uses the same ones."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from benchlib.analysis.attribution import level_attribution
from benchlib.analysis.load_levels import level_energy, level_server_metrics, level_steady, level_window
from benchlib.analysis.serving import (
    RATE_COLUMNS,
    RATE_CSV,
    RATE_TASK,
    SYNC,
    THROUGHPUT,
    level_name,
    passes,
    rate_levels,
    search_next,
    sweep_rates,
)
from benchlib.config.params import RateParams, SloParams
from benchlib.measure.client.backends import ChatRequest
from benchlib.measure.selfcheck.client_health import client_health
from benchlib.measure.traffic.prompt_fitting import ServerTokenizer, filler_words, fit_to_tokens
from benchlib.measure.traffic.workers import WorkerPool, merged_health, resolve_workers, split_jobs
from benchlib.measure.traffic.workload import lengths, level_size, offsets
from benchlib.records.rows import write_atomic, write_csv_atomic
from benchlib.suites.load.common import calibrate, read_previous, row_identity
from benchlib.suites.load.fleet_levels import client_nodes, send_level_from_nodes
from benchlib.suites.runner import Planned, Session, progress_bar

RATE_PLAN = "rate_plan.json"


RATE_INSTRUCTION = "Keep listing words, one per line:"


PREFIX_SEED = 4242  # the shared prefix's filler words (the same text for every request of a run)


def level_plans(rp: RateParams) -> list[dict[str, Any]]:
    """The levels known before any is run: given rates, or sync and throughput (the sweep's between-rates come
    from their results)."""
    if rp.rates:
        return [open_plan(rp, rate) for rate in rp.rates]
    return [{"level": SYNC, "mode": "synchronous", "offered_rps": None, "max_concurrency": 1,
             "n": rp.min_requests},
            {"level": THROUGHPUT, "mode": "throughput", "offered_rps": None, "max_concurrency": rp.max_concurrency,
             "n": max(rp.min_requests, 4 * rp.max_concurrency)}]


def open_plan(rp: RateParams, rate: float) -> dict[str, Any]:
    n = level_size(rate, rp.duration_s, rp.min_requests)
    return {"level": level_name(rate), "mode": rp.arrival, "offered_rps": rate, "max_concurrency": rp.max_concurrency,
            "n": n, "workers": resolve_workers(rp.workers, rate, n)}


class PromptMaker:
    """Prompts of drawn server-counted lengths: [shared prefix] + request id + instruction + filler words."""

    def __init__(self, session: Session, tokenizer: ServerTokenizer | None, template: float | None,
                 chars_per_token: float | None, prefix_words: int):
        self.session, self.tokenizer = session, tokenizer
        self.template = template or 0.0
        self.cpt = chars_per_token or 4.0
        self.prefix = " ".join(filler_words(prefix_words, PREFIX_SEED)) if prefix_words else ""
        self.method = (tokenizer.name if tokenizer is not None else f"calibrated ({self.cpt:.2f} chars/token)")

    def text(self, key: str, words: int, seed: int) -> str:
        body = self.session.unique_prompt(RATE_INSTRUCTION + " " + " ".join(filler_words(words, seed)), key)
        return f"{self.prefix}\n{body}" if self.prefix else body

    def make(self, key: str, target: int, seed: int) -> str:
        content = max(1, int(round(target - self.template)))
        if self.tokenizer is not None:
            return fit_to_tokens(self.tokenizer.count, lambda w: self.text(key, w, seed), content)[0]
        lo, hi = 0, max(1, int(content * self.cpt))
        while hi - lo > 1:  # most words whose text stays within the estimated characters
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if len(self.text(key, mid, seed)) <= content * self.cpt else (lo, mid)
        return self.text(key, lo, seed)


def prefix_words(session: Session, rp: RateParams, tokenizer: ServerTokenizer | None) -> int:
    """Filler words of the shared prefix: shared_prefix × the mean prompt length in tokens."""
    want = int(round(rp.shared_prefix * rp.prompt_tokens.mean))
    if want <= 0:
        return 0
    if tokenizer is None:
        return max(1, int(want / 1.3))
    text, _, _ = fit_to_tokens(tokenizer.count, lambda w: " ".join(filler_words(w, PREFIX_SEED)), want)
    return len(text.split())


def plan_items(session: Session, rp: RateParams, plan: dict[str, Any], maker: PromptMaker,
               done: set[str]) -> tuple[list[Planned], list[float] | None, int]:
    """The level's pending requests, their send offsets (open loop) and how many were already done."""
    name, n = plan["level"], int(plan["n"])
    prompt_lengths = lengths(rp.prompt_tokens, n, rp.seed, f"{name}/prompt")
    output_lengths = lengths(rp.output_tokens, n, rp.seed, f"{name}/output")
    due = offsets(rp.arrival, plan["offered_rps"], n, rp.burstiness, rp.seed, name) if plan["offered_rps"] else None
    run = session.params.run
    items, times = [], []
    for index in range(n):
        record = session.base_record(RATE_TASK, name, index, concurrency=int(plan["max_concurrency"]))
        if record.request_key in done:
            continue
        record.prompt = maker.make(record.request_key, prompt_lengths[index], seed=index)
        record.max_tokens, record.target_prompt_tokens = output_lengths[index], prompt_lengths[index]
        request = ChatRequest(messages=[{"role": "user", "content": record.prompt}], max_tokens=record.max_tokens,
                              temperature=run.temperature, seed=run.seed, thinking=run.thinking)
        items.append(Planned(record, request))
        times.append(due[index] if due else 0.0)
    shifted = [t - times[0] for t in times] if due and times else None
    return items, shifted, n - len(items)


def run_rate_sweep(session: Session, progress: bool = True) -> pd.DataFrame:
    """Send every level (resuming finished keys), then write sweep_rate.csv; returns its frame."""
    params = session.params
    rp, slo = params.sweep.rate, params.sweep.slo
    if not rp.enabled:
        return pd.DataFrame(columns=RATE_COLUMNS)
    plan_path = session.out_dir / RATE_PLAN
    stored = json.loads(plan_path.read_text(encoding="utf-8")) if plan_path.is_file() else {}
    mine = stored.get(session.run_id, {})
    plans = mine.get("levels") or level_plans(rp)
    done = session.log.done_keys(session.run_id)
    health = read_previous(session.out_dir / RATE_CSV, session.run_id, "level")

    client_nodes(session)  # before anything is sent: sweep.nodes > 1 without Ray stops here
    tokenizer = ServerTokenizer.detect(params)
    try:
        template, cpt = None, None
        calib_tokens, calib_chars, calib_text = calibrate(session, done)  # outside every level window; once a run
        if calib_tokens is not None:
            template = calib_tokens - tokenizer.count(calib_text) if tokenizer is not None else None
            cpt = calib_chars / calib_tokens
        words = mine.get("prefix_words")
        words = prefix_words(session, rp, tokenizer) if words is None else int(words)
        maker = PromptMaker(session, tokenizer, template, cpt, words)
        desc = f"load · rate · {params.server.model}"
        with progress_bar(sum(int(p["n"]) for p in plans), desc, progress) as bar:
            index = 0
            while index < len(plans):
                plan = plans[index]
                items, due, already = plan_items(session, rp, plan, maker, done)
                bar.update(already)
                if items:
                    plan["resumed"] = bool(already) or plan.get("resumed", False)
                    bar.set_postfix_str(plan["level"])
                    health[plan["level"]] = send_level(session, plan, items, due, bar)
                if rp.search and index == len(plans) - 1 and (plan["level"] == THROUGHPUT or "search_step" in plan):
                    step = next_step(session, plans, slo, rp, health)
                    mine["search"] = {k: None if v != v else v for k, v in step.items() if k != "next"}  # JSON
                    if step["next"] is not None:
                        extra = {**open_plan(rp, step["next"]), "search_step": int(step["levels"]) + 1}
                        plans.append(extra)
                        bar.total += int(extra["n"])
                        bar.refresh()
                elif not rp.search and plan["level"] == THROUGHPUT and not any(
                        p["mode"] not in ("synchronous", "throughput") for p in plans):
                    extra = [open_plan(rp, r) for r in between(session, plans, slo, rp)]
                    plans.extend(extra)
                    bar.total += sum(int(p["n"]) for p in extra)
                    bar.refresh()
                stored[session.run_id] = {"levels": plans, "prefix_words": words, "method": maker.method,
                                          **({"search": mine["search"]} if "search" in mine else {})}
                write_atomic(plan_path, json.dumps(stored, indent=2))
                index += 1
    finally:
        if tokenizer is not None:
            tokenizer.close()
    frame = rate_levels(session.run_requests(), plans, slo, rp.ramp_share, health, identity=row_identity(session))
    windows = session.telemetry.windows_frame()
    frame = level_energy(frame, windows, RATE_TASK, "level")
    frame = level_attribution(frame, session.run_requests(), windows, session.telemetry.samples_frame(), RATE_TASK,
                              "level")
    frame = level_steady(frame, session.run_requests(), RATE_TASK, "level", session.telemetry, rp.ramp_share)
    frame = level_server_metrics(frame, session.server_windows(), RATE_TASK, "level")
    write_csv_atomic(session.out_dir / RATE_CSV, frame)
    return frame


def between(session: Session, plans: list[dict[str, Any]], slo: SloParams, rp: RateParams) -> list[float]:
    """The sweep's open-loop rates from the synchronous and throughput levels' request rates (a closed loop
    sends as fast as it completes: its sent rate is its completion rate)."""
    frame = rate_levels(session.run_requests(), plans, slo, rp.ramp_share).set_index("level")
    if SYNC not in frame.index or THROUGHPUT not in frame.index:
        return []
    return sweep_rates(float(frame.at[SYNC, "rate_rps"]), float(frame.at[THROUGHPUT, "rate_rps"]), rp.points)


def send_level(session: Session, plan: dict[str, Any], items: list[Planned], due: list[float] | None,
               bar: Any) -> dict[str, Any]:
    """Send a level's pending requests inside its window; returns its client health. With nodes > 1 (sweep.nodes)
    it goes out from that many Ray nodes (fleet_levels); else an open-loop level with more than one worker goes
    through benchlib.measure.traffic.workers (processes started before the window opens); their records are scored and
    appended here, in batches, as they arrive."""
    cap, window = int(plan["max_concurrency"]), level_window(RATE_TASK, plan["level"])
    nodes = client_nodes(session)
    if nodes > 1:
        with session.window(window, kind="level"):
            return send_level_from_nodes(session, RATE_TASK, plan["level"], items, due, cap,
                                         float(plan.get("offered_rps") or 0.0), nodes, bar)
    workers = int(plan.get("workers") or 1)
    if due is None or workers <= 1:
        with client_health(len(items)) as figures, session.window(window, kind="level"):
            session.execute(items, concurrency=cap, progress=bar, offsets=due)
        return figures
    by_key = {item.record.request_key: item for item in items}
    params = session.params

    def arrived(records: list[Any]) -> None:
        for record in records:
            session.after_request(Planned(record, by_key[record.request_key].request), cap)
        session.log.append_many(records)
        bar.update(len(records))

    jobs = split_jobs(params.server, params.run, [(i.record, i.request) for i in items], due, cap, workers)
    with WorkerPool(jobs) as pool, session.window(window, kind="level"):
        per_worker = pool.run(arrived)
    return merged_health(per_worker)


def next_step(session: Session, plans: list[dict[str, Any]], slo: SloParams, rp: RateParams,
              health: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The search's next rate and state from the levels run so far (SEARCH RULE)."""
    frame = rate_levels(session.run_requests(), plans, slo, rp.ramp_share, health).set_index("level")
    if SYNC not in frame.index or THROUGHPUT not in frame.index:
        return search_next(np.nan, np.nan, [], rp.precision, rp.max_levels)
    ok = passes(frame)
    tried = [(float(p["offered_rps"]), bool(ok.get(p["level"], False)))
             for p in sorted((p for p in plans if "search_step" in p), key=lambda p: p["search_step"])]
    return search_next(float(frame.at[SYNC, "rate_rps"]), float(frame.at[THROUGHPUT, "rate_rps"]), tried,
                       rp.precision, rp.max_levels, sync_passes=bool(ok.get(SYNC, False)))
