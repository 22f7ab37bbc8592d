"""Workloads that look like traffic (params sweep.workloads), on the load session after the rate sweep; each off
unless enabled, each seeded and resumable like the rate sweep (finished request keys are skipped, never sent
twice), every request a row of the same requests.csv.

multiturn   `sessions` conversations of `turns` turns, at most `max_concurrency` conversations in flight. Turn t
            sends every earlier user message and the model's own answers (read back from requests.csv on resume),
            then a new user message of `user_tokens` server tokens; between an answer and the next turn a think
            time (fixed, or exponential with mean think_time_s, seeded per conversation). Task "multiturn",
            variant "t<turn>", repeat = the conversation's index. A conversation stops at a failed turn: the next
            turn would carry a history the model never wrote. The first turn starts with a run-unique id, so a
            later turn's only cache hits are its own conversation's history.
prefix      `prefixes` × `suffixes` requests: each prompt is one of k prefix texts (`prefix_tokens` server tokens,
            run-unique), then a tail of its own up to prefix_tokens + suffix_tokens (template included); sent in a
            seeded interleaved order (or grouped), closed loop at max_concurrency. Task "prefix", variant
            "p<prefix>", repeat = the suffix's index.
trace       a Mooncake JSONL trace (benchlib.measure.traffic.traces) replayed open loop at its scaled offsets through
            the same dispatcher as the rate sweep's open-loop levels (Session.execute with offsets): each record
            keeps the instant it was due, so replay accuracy is planned vs actual offset per request. Task "trace",
            variant the trace's name, repeat = its line number.

Per workload (sweep_workloads.csv, one row each, written atomically): requests, ok, failures, span, output tok/s,
TTFT / ITL / e2e p50 and p99, goodput under sweep.slo (when an SLO is set), the measured cache-hit share —
sum(cached_tokens) ÷ sum(prompt_tokens) over the requests whose server reported cached tokens — and the server's
own prefix-cache hit share from /metrics where it exposes one (vLLM's prefix_cache_hits / _queries counters over
the level), client health, energy and the server's view from the level's window as the rate sweep has them.
workload_turns.csv: TTFT per turn (median with a 95 % bootstrap interval, n) and "later" (every turn after the
first) against turn 1, with each turn's cached share. workload_replay.csv: per trace request, the planned offset,
the actual one (planned + how late it went on the wire) and its prompt's blocks."""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from benchlib.analysis import stats
from benchlib.analysis.load_levels import failure_text, level_energy, level_server_metrics, level_window, measured_rows
from benchlib.analysis.serving import meets_slo, pooled_gaps, slo_text
from benchlib.config import metrics
from benchlib.config.params import SloParams, WorkloadParams
from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure.client.backends import ChatRequest
from benchlib.measure.selfcheck.client_health import HEALTH_COLUMNS, client_health
from benchlib.measure.traffic.prompt_fitting import (
    CONTEXT_MARGIN,
    ServerTokenizer,
    context_window,
    filler_words,
    fit_to_tokens,
)
from benchlib.measure.traffic.traces import (
    TraceRequest,
    read_trace,
    reuse_share,
    scaled_tokens,
    send_offsets,
    whole_blocks,
)
from benchlib.measure.traffic.workload import rng_for
from benchlib.records.rows import STATUS_OK, write_atomic, write_csv_atomic
from benchlib.records.schema import numeric_column
from benchlib.suites.load.common import calibrate, read_previous, row_identity
from benchlib.suites.runner import Planned, Session, progress_bar

MULTITURN_TASK, PREFIX_TASK, TRACE_TASK = "multiturn", "prefix", "trace"
WORKLOADS_CSV, TURNS_CSV, REPLAY_CSV = "sweep_workloads.csv", "workload_turns.csv", "workload_replay.csv"
WORKLOAD_PLAN = "workload_plan.json"
INSTRUCTION = "Reply briefly to the notes:"
NS = 1e9
# vLLM's (v1 engine) prefix-cache counters, in prompt tokens: queried and found in the cache
PREFIX_CACHE_COUNTERS = ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")

# The workloads' columns; each line's comment is its columns' meaning (docs/columns.md is written from them; a column
# without one means what it means in sweep_concurrency.csv, sweep_rate.csv or requests.csv)
WORKLOAD_COLUMNS = (["run_id", "host", "model", "server_software",
                     "workload", "level",  # multiturn, prefix or trace; its window's name (4x4, 2x4, the trace's name)
                     "max_concurrency",  # the cap on requests (multiturn: conversations) in flight
                     "n_requests", "n_ok", "n_failed", "failures",  # the workload's requests; ok; failed; by kind
                     "span_s",  # the workload's first wire start → its last answer's end, s
                     "completion_tokens", "throughput_tps",  # the ok requests' completion tokens; ÷ span_s
                     # the ok requests' TTFT, pooled inter-token gaps and e2e, p50 and p99 (p99 from 100 samples)
                     "ttft_s_p50", "ttft_s_p99", "itl_s_p50", "itl_s_p99", "e2e_s_p50", "e2e_s_p99",
                     "slos", "slo_met_share",  # the SLOs set, in words; the share of requests meeting every one
                     # requests meeting every SLO per second of span, and their output tokens per second (empty
                     # when no SLO is set)
                     "goodput_rps", "goodput_tps",
                     "prompt_tokens", "cached_tokens",  # the ok requests' prompt and cached tokens, summed
                     "cache_reported_share",  # the share of ok requests whose server reported cached tokens
                     "cache_hit_share",  # Σ cached_tokens ÷ Σ prompt_tokens over those requests
                     # the server's own prefix-cache hits ÷ queries over the workload (vLLM's /metrics counters)
                     "server_cache_hit_share",
                     # the share of the trace's prompt tokens a prefix cache with room for everything could serve
                     "trace_reuse_share",
                     "ttft_first_s_p50", "ttft_later_s_p50",  # multi-turn: median TTFT of first turns; of later ones
                     # how late sends left after their due instants, ms: p50, p99, worst
                     "send_late_p50_ms", "send_late_p99_ms", "send_late_max_ms",
                     "clipped",  # trace requests whose prompt was cut to the context window
                     "resumed"]  # the workload was cut short and finished by a resumed run
                    + HEALTH_COLUMNS)
TURN_COLUMNS = ["turn",  # the turn (1, 2, …), or later: every turn after the first
                "n",  # answered requests of that turn
                "ttft_s_median", "ttft_s_low", "ttft_s_high",  # their median TTFT with its 95 % bootstrap interval, s
                "ttft_s_mean", "e2e_s_median",  # their mean TTFT; median e2e, s
                "prompt_tokens_mean", "cached_tokens_mean",  # prompt and cached tokens per request
                "cached_share",  # Σ cached ÷ Σ prompt tokens where the server reported cached tokens
                "vs_first"]  # ttft_s_median ÷ turn 1's
REPLAY_COLUMNS = ["line", "request_key",  # the trace's line; the request's key
                  "planned_offset_s",  # when the trace (scaled by time_scale) said to send it, s after the first
                  "actual_offset_s", "late_ms",  # planned + how late it went on the wire; that lateness, ms
                  "input_length",  # the trace's prompt length, before length_scale
                  "target_prompt_tokens", "prompt_tokens", "cached_tokens",
                  "whole_blocks",  # the leading hash ids whose blocks went into the prompt whole
                  "status", "ttft_s"]


# ---- prompt text -------------------------------------------------------------------------------------------
class Prompts:
    """Texts of a server-counted length: the server's tokenizer where it has one, else a chars-per-token estimate
    from the calibration request (template: the chat template's own tokens, counted into a whole prompt)."""

    def __init__(self, session: Session, tokenizer: ServerTokenizer | None, template: float | None,
                 chars_per_token: float | None, seed: int):
        self.session, self.tokenizer, self.seed = session, tokenizer, seed
        self.template = template or 0.0
        self.cpt = chars_per_token or 4.0
        self._fixed: dict[str, str] = {}

    def fit(self, make: Callable[[int], str], tokens: int) -> str:
        """make(n words) with `tokens` server tokens (no template)."""
        tokens = max(1, int(tokens))
        if self.tokenizer is not None:
            return fit_to_tokens(self.tokenizer.count, make, tokens)[0]
        lo, hi = 0, max(1, int(tokens * self.cpt))
        while hi - lo > 1:  # most words whose text stays within the estimated characters
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if len(make(mid)) <= tokens * self.cpt else (lo, mid)
        return make(lo)

    def words(self, n: int, name: str) -> str:
        return " ".join(filler_words(n, int(rng_for(self.seed, name).integers(2**31))))

    def fixed(self, name: str, tokens: int) -> str:
        """The run-unique text `name` of `tokens` tokens; the same text each time it is asked for."""
        if name not in self._fixed:
            self._fixed[name] = self.fit(lambda w: self.session.unique_prompt(self.words(w, name), name), tokens)
        return self._fixed[name]

    def with_tail(self, head: str, key: str, target: int) -> str:
        """head, then a tail unique to `key`, the whole prompt `target` server tokens with the template's."""
        def make(w: int) -> str:
            tail = self.session.unique_prompt(f"{INSTRUCTION} {self.words(w, key)}", key)
            return f"{head}\n{tail}" if head else tail
        return self.fit(make, target - self.template)


# ---- the workloads -----------------------------------------------------------------------------------------
def level_names(wp: WorkloadParams) -> dict[str, str]:
    """Each enabled workload's task → its level name (the telemetry window is 'task:level')."""
    names = {}
    if wp.multiturn.enabled:
        names[MULTITURN_TASK] = f"{wp.multiturn.sessions}x{wp.multiturn.turns}"
    if wp.shared_prefix.enabled:
        names[PREFIX_TASK] = f"{wp.shared_prefix.prefixes}x{wp.shared_prefix.suffixes}"
    if wp.trace.enabled:
        names[TRACE_TASK] = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(wp.trace.path).stem) or "trace"
    return names


def trace_path(wp: WorkloadParams) -> Path:
    path = Path(wp.trace.path).expanduser()
    return path if path.is_absolute() else PROJECT_ROOT / path


def think_times(wp: WorkloadParams, conversation: int) -> list[float]:
    """The pauses before turns 2..T of one conversation (seconds, seeded by the conversation)."""
    mt = wp.multiturn
    count = max(mt.turns - 1, 0)
    if mt.think == "fixed" or mt.think_time_s == 0:
        return [mt.think_time_s] * count
    return rng_for(wp.seed, f"think/{conversation}").exponential(mt.think_time_s, size=count).tolist()


def run_workloads(session: Session, progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Run every enabled workload (resuming finished keys); write sweep_workloads.csv, workload_turns.csv and
    workload_replay.csv. Returns (levels, turns, replay); empty frames when none is enabled."""
    params = session.params
    wp = params.sweep.workloads
    names = level_names(wp)
    if not names:
        return (pd.DataFrame(columns=WORKLOAD_COLUMNS), pd.DataFrame(columns=TURN_COLUMNS),
                pd.DataFrame(columns=REPLAY_COLUMNS))
    trace = read_trace(trace_path(wp), wp.trace.max_requests) if wp.trace.enabled else []
    plan_path = session.out_dir / WORKLOAD_PLAN
    stored = json.loads(plan_path.read_text(encoding="utf-8")) if plan_path.is_file() else {}
    state: dict[str, dict[str, Any]] = stored.get(session.run_id, {})
    done = session.log.done_keys(session.run_id)
    health = read_previous(session.out_dir / WORKLOADS_CSV, session.run_id, "workload")
    sizes = {MULTITURN_TASK: wp.multiturn.sessions * wp.multiturn.turns,
             PREFIX_TASK: wp.shared_prefix.prefixes * wp.shared_prefix.suffixes, TRACE_TASK: len(trace)}
    tokenizer = ServerTokenizer.detect(params)
    try:
        calib_tokens, calib_chars, calib_text = calibrate(session, done)  # outside every level window
        template = cpt = None
        if calib_tokens is not None:
            template = calib_tokens - tokenizer.count(calib_text) if tokenizer is not None else None
            cpt = calib_chars / calib_tokens
        prompts = Prompts(session, tokenizer, template, cpt, wp.seed)
        runners = {MULTITURN_TASK: run_multiturn, PREFIX_TASK: run_prefix, TRACE_TASK: run_trace}
        desc = f"load · workloads · {params.server.model}"
        with progress_bar(sum(sizes[t] for t in names), desc, progress) as bar:
            for task, level in names.items():
                mine = state.setdefault(task, {"level": level, "resumed": False})
                bar.set_postfix_str(task)
                runners[task](session, wp, level, prompts, done, health, mine, bar, trace)
                stored[session.run_id] = state
                write_atomic(plan_path, json.dumps(stored, indent=2))
    finally:
        if tokenizer is not None:
            tokenizer.close()
    requests = session.run_requests()
    frame = workload_levels(requests, names, state, params.sweep.slo, health, trace, wp,
                            identity=row_identity(session))
    parts = []
    for task in names:
        part = frame[frame["workload"] == task]
        part = level_energy(part, session.telemetry.windows_frame(), task, "level")
        if len(part):
            parts.append(level_server_metrics(part, session.server_windows(), task, "level"))
    frame = pd.concat(parts, ignore_index=True) if parts else frame
    turns = turn_table(requests)
    replay = replay_table(requests, trace, names.get(TRACE_TASK, ""), wp, state.get(TRACE_TASK))
    write_csv_atomic(session.out_dir / WORKLOADS_CSV, frame)
    write_csv_atomic(session.out_dir / TURNS_CSV, turns)
    write_csv_atomic(session.out_dir / REPLAY_CSV, replay)
    return frame, turns, replay


def measured_level(session: Session, task: str, level: str, n_items: int, state: dict[str, Any],
                   health: dict[str, Any], send: Callable[[], None]) -> None:
    """One workload's window: client health, telemetry and /metrics around `send`, and the server's prefix-cache
    counters before and after (summed over a resumed level's parts)."""
    before = server_counters(session)
    with client_health(n_items) as figures, session.window(level_window(task, level), kind="level"):
        send()
    after = server_counters(session)
    health[task] = figures
    if before and after:
        for name in PREFIX_CACHE_COUNTERS:
            state[name] = state.get(name, 0.0) + after[name] - before[name]


def server_counters(session: Session) -> dict[str, float] | None:
    """The server's prefix-cache counters now, or None where its /metrics has none."""
    scraper = getattr(session, "metrics", None)
    if scraper is None or not scraper.available:
        return None
    values = scraper.scrape() or {}
    return {n: values[n] for n in PREFIX_CACHE_COUNTERS} if all(n in values for n in PREFIX_CACHE_COUNTERS) \
        else None


def text_of(value: Any) -> str:
    """A text cell of requests.csv as sent ('' for an empty one, which reads back as missing)."""
    return value if isinstance(value, str) else ""


def chat(session: Session, messages: list[dict[str, str]], max_tokens: int) -> ChatRequest:
    run = session.params.run
    return ChatRequest(messages=messages, max_tokens=max_tokens, temperature=run.temperature, seed=run.seed,
                       thinking=run.thinking)


def run_multiturn(session: Session, wp: WorkloadParams, level: str, prompts: Prompts, done: set[str],
                  health: dict[str, Any], state: dict[str, Any], bar: Any, trace: list) -> None:
    mt = wp.multiturn
    recorded = session.run_requests()
    recorded = recorded[recorded["task"] == MULTITURN_TASK] if len(recorded) else recorded
    rows = {row["request_key"]: row for _, row in recorded.iterrows()}

    def record_of(conversation: int, turn: int) -> Any:
        return session.base_record(MULTITURN_TASK, f"t{turn}", conversation, concurrency=mt.max_concurrency)

    # every user message is known before the first is sent: fitting stays outside the window
    users = {}
    for c in range(mt.sessions):
        for turn in range(1, mt.turns + 1):
            key = record_of(c, turn).request_key
            if key in done:
                continue
            def make(w: int, key: str = key, turn: int = turn) -> str:
                text = f"{INSTRUCTION} {prompts.words(w, key)}"
                return session.unique_prompt(text, key) if turn == 1 else text  # a run-unique conversation
            users[key] = prompts.fit(make, mt.user_tokens)
    already = sum(1 for c in range(mt.sessions) for t in range(1, mt.turns + 1) if record_of(c, t).request_key in done)
    bar.update(already)
    if not users:
        return
    state["resumed"] = bool(already) or state.get("resumed", False)

    def conversation(c: int) -> None:
        history: list[dict[str, str]] = []
        pauses = think_times(wp, c)
        for turn in range(1, mt.turns + 1):
            record = record_of(c, turn)
            row = rows.get(record.request_key)
            if record.request_key in done and row is not None:
                if row["status"] != STATUS_OK:
                    return
                history += [{"role": "user", "content": text_of(row["prompt"])},
                            {"role": "assistant", "content": text_of(row["response_text"])}]
                continue
            if turn > 1 and pauses[turn - 2] > 0:
                time.sleep(pauses[turn - 2])
            record.prompt, record.max_tokens = users[record.request_key], mt.output_tokens
            messages = history + [{"role": "user", "content": record.prompt}]
            session.execute([Planned(record, chat(session, messages, mt.output_tokens))],
                            concurrency=mt.max_concurrency, progress=bar)
            if record.status != STATUS_OK:
                return
            history += [messages[-1], {"role": "assistant", "content": record.response_text}]

    def send() -> None:
        with ThreadPoolExecutor(max_workers=mt.max_concurrency, thread_name_prefix="conversation") as pool:
            for future in [pool.submit(conversation, c) for c in range(mt.sessions)]:
                future.result()

    measured_level(session, MULTITURN_TASK, level, len(users), state, health, send)


def prefix_order(wp: WorkloadParams) -> list[tuple[int, int]]:
    """(prefix, suffix) pairs in sending order: seeded shuffle (interleaved) or prefix by prefix (grouped)."""
    sp = wp.shared_prefix
    pairs = [(p, s) for p in range(sp.prefixes) for s in range(sp.suffixes)]
    if sp.order == "grouped":
        return pairs
    return [pairs[i] for i in rng_for(wp.seed, "shared_prefix/order").permutation(len(pairs))]


def run_prefix(session: Session, wp: WorkloadParams, level: str, prompts: Prompts, done: set[str],
               health: dict[str, Any], state: dict[str, Any], bar: Any, trace: list) -> None:
    sp = wp.shared_prefix
    items, already = [], 0
    for p, s in prefix_order(wp):
        record = session.base_record(PREFIX_TASK, f"p{p}", s, concurrency=sp.max_concurrency)
        if record.request_key in done:
            already += 1
            continue
        head = prompts.fixed(f"{PREFIX_TASK}/prefix{p}", sp.prefix_tokens)
        target = sp.prefix_tokens + sp.suffix_tokens
        record.prompt = prompts.with_tail(head, record.request_key, target)
        record.max_tokens, record.target_prompt_tokens = sp.output_tokens, target
        items.append(Planned(record, chat(session, [{"role": "user", "content": record.prompt}], sp.output_tokens)))
    bar.update(already)
    if not items:
        return
    state["resumed"] = bool(already) or state.get("resumed", False)
    measured_level(session, PREFIX_TASK, level, len(items), state, health,
                   lambda: session.execute(items, concurrency=sp.max_concurrency, progress=bar))


def trace_targets(session: Session, wp: WorkloadParams, request: TraceRequest) -> tuple[int, int, bool]:
    """(prompt tokens, output budget, clipped) of one trace request: scaled, capped by the context window."""
    tp = wp.trace
    output = min(request.output_length, tp.max_output_tokens)
    target = scaled_tokens(request.input_length, tp.length_scale)
    window = context_window(session.params)
    limit = window - output - CONTEXT_MARGIN if window else None
    clipped = bool(limit is not None and target > limit)
    return (max(1, limit) if clipped else target), output, clipped


def run_trace(session: Session, wp: WorkloadParams, level: str, prompts: Prompts, done: set[str],
              health: dict[str, Any], state: dict[str, Any], bar: Any, trace: list[TraceRequest]) -> None:
    tp = wp.trace
    block = scaled_tokens(tp.block_tokens, tp.length_scale)
    planned = send_offsets(trace, tp.time_scale)
    tail = int(np.ceil(prompts.template)) + 16  # the request's id and instruction always fit after the blocks
    items, due, clipped, blocks = [], [], 0, state.setdefault("whole_blocks", {})
    for request, offset in zip(trace, planned):
        record = session.base_record(TRACE_TASK, level, request.line, concurrency=tp.max_concurrency)
        target, output, cut = trace_targets(session, wp, request)
        clipped += cut
        if record.request_key in done:
            continue
        ids = whole_blocks(request, target, block, tail)
        blocks[str(request.line)] = len(ids)
        head = "\n".join(prompts.fixed(f"{TRACE_TASK}/block{h}", block) for h in ids)
        record.prompt = prompts.with_tail(head, record.request_key, target)
        record.max_tokens, record.target_prompt_tokens = output, target
        items.append(Planned(record, chat(session, [{"role": "user", "content": record.prompt}], output)))
        due.append(offset)
    state["clipped"] = clipped
    bar.update(len(trace) - len(items))
    if not items:
        return
    state["resumed"] = len(items) < len(trace) or state.get("resumed", False)
    shifted = [t - due[0] for t in due]  # a resumed replay sends its missing requests at their own offsets
    measured_level(session, TRACE_TASK, level, len(items), state, health,
                   lambda: session.execute(items, concurrency=tp.max_concurrency, progress=bar, offsets=shifted))


# ---- the tables --------------------------------------------------------------------------------------------
def percentile(series: pd.Series, q: float) -> float:
    return stats.percentile(series.dropna().to_numpy(dtype=float), q)


def cache_share(rows: pd.DataFrame) -> tuple[float, float, float, float]:
    """(prompt tokens, cached tokens, share of ok rows whose server reported cached tokens, cached ÷ prompt over
    those rows); NaN share when no server reported any."""
    ok = rows[rows["status"] == STATUS_OK]
    prompt, cached = numeric_column(ok, "prompt_tokens"), numeric_column(ok, "cached_tokens")
    both = prompt.notna() & cached.notna()
    reported = float(both.mean()) if len(ok) else np.nan
    share = float(cached[both].sum() / prompt[both].sum()) if both.any() and prompt[both].sum() > 0 else np.nan
    return float(prompt.sum()), float(cached[both].sum()), reported, share


def workload_level(rows: pd.DataFrame, slo: SloParams) -> dict[str, Any]:
    """One workload's figures from its rows: counts, span (first wire start → last end), output tok/s, latency
    percentiles, goodput under the SLOs (NaN when none is set), cache-hit share, how late sends were."""
    ok = rows[rows["status"] == STATUS_OK]
    start = numeric_column(rows, "start_ns")
    end = start + numeric_column(rows, "e2e_s").fillna(0) * NS
    valid = start > 0
    span = float((end[valid].max() - start[valid].min()) / NS) if valid.any() else np.nan
    tokens = float(numeric_column(ok, "completion_tokens").fillna(0).sum())
    met = meets_slo(rows, slo)
    has_slo = bool(slo.set()) and span == span and span > 0
    gaps = pooled_gaps(ok)
    prompt, cached, reported, share = cache_share(rows)
    scheduled = numeric_column(rows, "scheduled_ns")
    late = ((start - scheduled) / 1e6)[scheduled > 0]
    row = {"n_requests": len(rows), "n_ok": len(ok), "n_failed": int((rows["status"] != STATUS_OK).sum()),
           "failures": failure_text(rows), "span_s": span, "completion_tokens": tokens,
           "throughput_tps": metrics.rate(tokens, span) if len(ok) and span == span else np.nan,
           "itl_s_p50": stats.percentile(gaps, 0.5), "itl_s_p99": stats.percentile(gaps, 0.99),
           "slos": slo_text(slo), "slo_met_share": float(met.mean()) if has_slo else np.nan,
           "goodput_rps": float(met.sum()) / span if has_slo else np.nan,
           "goodput_tps": float(numeric_column(rows[met], "completion_tokens").fillna(0).sum()) / span if has_slo
           else np.nan,
           "prompt_tokens": prompt, "cached_tokens": cached, "cache_reported_share": reported,
           "cache_hit_share": share, "send_late_p50_ms": percentile(late, 0.5),
           "send_late_p99_ms": percentile(late, 0.99), "send_late_max_ms": float(late.max()) if len(late) else np.nan}
    for metric in ("ttft_s", "e2e_s"):
        for q in (50, 99):
            row[f"{metric}_p{q}"] = percentile(numeric_column(ok, metric), q / 100)
    return row


def workload_levels(requests: pd.DataFrame, names: dict[str, str], state: dict[str, dict[str, Any]],
                    slo: SloParams, health: dict[str, Any], trace: list[TraceRequest], wp: WorkloadParams,
                    identity: dict[str, Any] | None = None) -> pd.DataFrame:
    """sweep_workloads.csv: one row per workload that has rows."""
    out = []
    caps = {MULTITURN_TASK: wp.multiturn.max_concurrency, PREFIX_TASK: wp.shared_prefix.max_concurrency,
            TRACE_TASK: wp.trace.max_concurrency}
    for task, level in names.items():
        rows = measured_rows(requests, task)
        if task == TRACE_TASK and len(rows):
            rows = rows[rows["variant"].astype(str) == level]
        if rows.empty:
            continue
        mine = state.get(task, {})
        hits, queries = (mine.get(n) for n in PREFIX_CACHE_COUNTERS)
        row = {**(identity or {}), "workload": task, "level": level, "max_concurrency": caps[task],
               **workload_level(rows, slo), "clipped": mine.get("clipped", 0),
               "server_cache_hit_share": hits / queries if queries else np.nan,
               "trace_reuse_share": reuse_share(trace, wp.trace.block_tokens) if task == TRACE_TASK else np.nan,
               "resumed": bool(mine.get("resumed", False))}
        if task == MULTITURN_TASK:
            ok = rows[rows["status"] == STATUS_OK]
            first = ok["variant"].astype(str) == "t1"
            row["ttft_first_s_p50"] = percentile(numeric_column(ok[first], "ttft_s"), 0.5)
            row["ttft_later_s_p50"] = percentile(numeric_column(ok[~first], "ttft_s"), 0.5)
        row.update({c: np.nan for c in HEALTH_COLUMNS})
        row.update(health.get(task, {}))
        out.append(row)
    return pd.DataFrame(out, columns=WORKLOAD_COLUMNS)


def turn_table(requests: pd.DataFrame) -> pd.DataFrame:
    """TTFT per turn of the multi-turn workload, and 'later' (every turn after the first) against turn 1:
    median with its 95 % bootstrap interval (benchlib.analysis.stats), n, and the cached share per turn."""
    rows = measured_rows(requests, MULTITURN_TASK)
    ok = rows[rows["status"] == STATUS_OK] if len(rows) else rows
    if ok.empty:
        return pd.DataFrame(columns=TURN_COLUMNS)
    turn = pd.to_numeric(ok["variant"].astype(str).str.removeprefix("t"), errors="coerce")
    groups = [(str(int(t)), ok[turn == t]) for t in sorted(turn.dropna().unique())]
    if turn.max() > 1:
        groups.append(("later", ok[turn > 1]))
    out = []
    first_median = np.nan
    for name, group in groups:
        ttft = numeric_column(group, "ttft_s").dropna()
        low, high = stats.bootstrap_interval(ttft, "median")
        median = float(ttft.median()) if len(ttft) else np.nan
        first_median = median if name == "1" else first_median
        _, _, _, share = cache_share(group)
        out.append({"turn": name, "n": len(ttft), "ttft_s_median": median, "ttft_s_low": low, "ttft_s_high": high,
                    "ttft_s_mean": float(ttft.mean()) if len(ttft) else np.nan,
                    "e2e_s_median": float(numeric_column(group, "e2e_s").median()),
                    "prompt_tokens_mean": float(numeric_column(group, "prompt_tokens").mean()),
                    "cached_tokens_mean": float(numeric_column(group, "cached_tokens").mean()),
                    "cached_share": share,
                    "vs_first": median / first_median if first_median and first_median == first_median else np.nan})
    return pd.DataFrame(out, columns=TURN_COLUMNS)


def replay_table(requests: pd.DataFrame, trace: list[TraceRequest], level: str, wp: WorkloadParams,
                 state: dict[str, Any] | None = None) -> pd.DataFrame:
    """Per trace request: planned offset (the trace's, scaled) and actual offset — planned + how late the request
    went on the wire after its due instant (slot wait included) — so the replay's timing accuracy is visible."""
    rows = measured_rows(requests, TRACE_TASK)
    if rows.empty or not trace:
        return pd.DataFrame(columns=REPLAY_COLUMNS)
    rows = rows[rows["variant"].astype(str) == level]
    blocks = (state or {}).get("whole_blocks", {})
    planned = dict(zip((r.line for r in trace), send_offsets(trace, wp.trace.time_scale)))
    by_line = {r.line: r for r in trace}
    out = []
    for _, row in rows.iterrows():
        line = int(row["repeat"])
        if line not in planned:
            continue
        late = (row["start_ns"] - row["scheduled_ns"]) / NS if row["scheduled_ns"] and row["start_ns"] else np.nan
        target = row["target_prompt_tokens"]
        out.append({"line": line, "request_key": row["request_key"], "planned_offset_s": planned[line],
                    "actual_offset_s": planned[line] + late, "late_ms": late * 1e3,
                    "input_length": by_line[line].input_length, "target_prompt_tokens": target,
                    "prompt_tokens": row["prompt_tokens"], "cached_tokens": row["cached_tokens"],
                    "whole_blocks": blocks.get(str(line), np.nan), "status": row["status"], "ttft_s": row["ttft_s"]})
    frame = pd.DataFrame(out, columns=REPLAY_COLUMNS)
    return frame.sort_values(["planned_offset_s", "line"]).reset_index(drop=True)
