"""Load sweeps (the load notebook): concurrency levels and prompt lengths, each level with a client self-check.

Concurrency sweep — for each level in params.sweep.concurrency, max(requests_per_level, level) requests with at
most `level` in flight (Session.execute's gate), task "concurrency", variant "c<level>", concurrency=<level>.
Per level: aggregate output tok/s = completion tokens of the ok requests ÷ the level's wall span (first wire
start → last end), per-request decode tok/s, TTFT / e2e p50/p90/p99, failures, and the saturation knee:

    KNEE RULE: the knee is the first level L whose next level N adds less than 10 % aggregate throughput
    (thr_N < 1.10 × thr_L) while p50 TTFT or p50 e2e grows at least 1.5× (max of both ratios ≥ 1.5). Levels
    above it are `saturated`. No such pair → no knee within the sweep (throughput still scaling).

Context sweep — for each length in params.sweep.context_lengths (clipped to the context window minus the
completion budget and a 64-token margin), a prompt whose *server-counted* length is the target: text is fitted
with the server's tokenizer endpoint (llama-cpp-python POST /extras/tokenize {"input"} → {"tokens"};
llama.cpp POST /tokenize {"content"} → {"tokens"}; vLLM POST /tokenize {"model", "prompt"} → {"count",
"tokens"}), plus the chat template's own tokens measured by one calibration request; without a tokenizer, a
chars-per-token model calibrated from the server's prompt_tokens (refitted after every length). The server's
reported prompt_tokens is recorded beside the target (token_error, exact). TTFT and prefill tok/s per length.

Client self-check — every level records the client's own health: event-loop lag (a coroutine on the client's
loop sleeps 10 ms and records how late it wakes; p50/p99/max), client CPU per request (process CPU over the
level ÷ requests) and its share of one core; a level is `client_bound` when loop lag p99 > 5 ms or the client
used > 50 % of one core: then the client, not the server, may have set the pace and the figures of that level
carry client delay.

Outputs (outputs/<host>/<model>/load/): requests.csv (one row per request, suite "load"), sweep_concurrency.csv
and sweep_context.csv (per level, written atomically), summary.csv (per task, with max_concurrency_ok /
max_context_ok: the largest level / length that ran with no failures), figures load_concurrency.png and
load_context.png.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd

from benchlib import aio
from benchlib.client import ChatRequest
from benchlib.params import BenchParams
from benchlib.records import STATUS_FAILED, STATUS_OK, read_requests, write_atomic, write_csv_atomic

SUITE = "load"
CONCURRENCY_TASK = "concurrency"
CONTEXT_TASK = "context"
KNEE_GAIN = 0.10  # throughput gain below which adding streams no longer pays ...
KNEE_LATENCY_GROWTH = 1.5  # ... while p50 TTFT or e2e grows at least this much
LAG_INTERVAL_S = 0.010
CLIENT_LAG_P99_MS = 5.0
CLIENT_CPU_SHARE = 0.5
CONTEXT_MARGIN = 64  # tokens kept free besides the completion budget
CONCURRENCY_CSV = "sweep_concurrency.csv"
CONTEXT_CSV = "sweep_context.csv"
CONTEXT_PLAN = "context_plan.json"
CONCURRENCY_PROMPT = "Count from 1 to 1000, one number per line, without stopping:"
CONTEXT_INSTRUCTION = "Summarize the notes below in one sentence.\n\nNotes:"
# Filler vocabulary: common words that most tokenizers keep as one token each (with their leading space).
FILLER_WORDS = ("the", "of", "and", "to", "in", "is", "was", "for", "on", "as", "with", "by", "at", "from",
                "this", "that", "it", "not", "are", "be", "or", "an", "which", "have", "one", "all", "new", "more",
                "time", "year", "work", "day", "city", "water", "house", "world", "light", "road", "music", "paper",
                "river", "stone", "field", "table", "window", "garden", "market", "school", "winter", "summer")

HEALTH_COLUMNS = ["wall_s", "client_cpu_s", "client_cpu_per_request_ms", "client_cpu_share", "loop_lag_p50_ms",
                  "loop_lag_p99_ms", "loop_lag_max_ms", "loop_lag_samples", "client_bound", "client_bound_reason"]
CONCURRENCY_COLUMNS = (["run_id", "host", "model", "server_software", "concurrency", "n_requests", "n_ok",
                        "n_failed", "failures", "span_s", "completion_tokens", "throughput_tps", "decode_tps_mean",
                        "decode_tps_p50", "ttft_s_p50", "ttft_s_p90", "ttft_s_p99", "e2e_s_p50", "e2e_s_p90",
                        "e2e_s_p99", "throughput_gain", "latency_growth", "knee", "saturated"] + HEALTH_COLUMNS)
CONTEXT_COLUMNS = (["run_id", "host", "model", "server_software", "target_tokens", "requested_tokens", "method",
                    "template_tokens", "content_tokens", "prompt_tokens", "token_error", "exact", "n_requests",
                    "n_ok", "n_failed", "failures", "ttft_s_p50", "ttft_s_min", "e2e_s_p50", "prefill_tps",
                    "server_prefill_tps", "cached_tokens", "note"] + HEALTH_COLUMNS)


# ---- client self-check ------------------------------------------------------------------------------------
class LoopLagSampler:
    """Event-loop lag: a coroutine sleeps `interval_s` on the client's loop and records how late it woke.

    Idle baseline ≈ 0.1–1 ms (epoll waits in whole milliseconds); a loop busy parsing or blocked by a
    synchronous call shows up as lag of that length. start()/stop() run on benchlib.aio's background loop
    (the one every client uses); astart()/astop() inside a running loop."""

    def __init__(self, interval_s: float = LAG_INTERVAL_S):
        self.interval_s = interval_s
        self.lags_ns: list[int] = []
        self._task: asyncio.Task | None = None
        self._running = False

    async def _run(self) -> None:
        interval_ns = int(self.interval_s * 1e9)
        while self._running:
            t0 = time.perf_counter_ns()
            await asyncio.sleep(self.interval_s)
            self.lags_ns.append(max(0, time.perf_counter_ns() - t0 - interval_ns))

    async def astart(self) -> "LoopLagSampler":
        self.lags_ns = []
        self._running = True
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def astop(self) -> dict[str, float]:
        self._running = False
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        return self.summary()

    def start(self) -> "LoopLagSampler":
        return aio.run(self.astart())

    def stop(self) -> dict[str, float]:
        return aio.run(self.astop())

    def summary(self) -> dict[str, float]:
        lags = np.asarray(self.lags_ns, dtype=float) / 1e6
        if not len(lags):
            return {"loop_lag_p50_ms": np.nan, "loop_lag_p99_ms": np.nan, "loop_lag_max_ms": np.nan,
                    "loop_lag_samples": 0}
        return {"loop_lag_p50_ms": float(np.percentile(lags, 50)), "loop_lag_p99_ms": float(np.percentile(lags, 99)),
                "loop_lag_max_ms": float(lags.max()), "loop_lag_samples": int(len(lags))}


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """Collect once, then freeze what exists (gc.freeze): a level's collections then scan only the objects it
    creates, not the notebook's whole heap (pandas, matplotlib), so no full collection pauses the loop mid-level."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def health_figures(cpu_s: float, wall_s: float, n_requests: int, lag: dict[str, float]) -> dict[str, Any]:
    """Client health columns of one level; client_bound when lag p99 > 5 ms or CPU > 50 % of one core."""
    share = cpu_s / wall_s if wall_s > 0 else np.nan
    reasons = []
    p99 = lag.get("loop_lag_p99_ms", np.nan)
    if p99 == p99 and p99 > CLIENT_LAG_P99_MS:
        reasons.append(f"loop lag p99 {p99:.1f} ms > {CLIENT_LAG_P99_MS:g} ms")
    if share == share and share > CLIENT_CPU_SHARE:
        reasons.append(f"client CPU {share:.0%} of one core > {CLIENT_CPU_SHARE:.0%}")
    return {"wall_s": wall_s, "client_cpu_s": cpu_s,
            "client_cpu_per_request_ms": cpu_s / n_requests * 1000 if n_requests else np.nan,
            "client_cpu_share": share, **lag, "client_bound": bool(reasons),
            "client_bound_reason": "; ".join(reasons)}


@contextlib.contextmanager
def client_health(n_requests: int, interval_s: float = LAG_INTERVAL_S) -> Iterator[dict[str, Any]]:
    """Measure a block that sends `n_requests` on benchlib's loop; the yielded dict is filled at exit."""
    figures: dict[str, Any] = {}
    sampler = LoopLagSampler(interval_s)
    with quiet_gc():
        sampler.start()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        try:
            yield figures
        finally:
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            lag = sampler.stop()
            figures.update(health_figures(cpu, wall, n_requests, lag))


# ---- shared helpers -----------------------------------------------------------------------------------------
def _num(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame:
        return pd.Series(np.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[column], errors="coerce")


def _quantile(series: pd.Series, q: float) -> float:
    values = series.dropna()
    return float(values.quantile(q)) if len(values) else np.nan


def _failures(rows: pd.DataFrame) -> str:
    failed = rows[rows["status"] == STATUS_FAILED]
    if failed.empty:
        return ""
    kinds = failed["error_kind"].fillna("").replace("", "unknown")
    return "; ".join(f"{k}: {n}" for k, n in kinds.value_counts().sort_index().items())


def _is_warmup(frame: pd.DataFrame) -> pd.Series:
    if "is_warmup" not in frame:
        return pd.Series(False, index=frame.index)
    return frame["is_warmup"].map(lambda v: str(v).strip().lower() == "true")


def _measured(requests: pd.DataFrame, task: str) -> pd.DataFrame:
    if requests is None or requests.empty or "task" not in requests:
        return pd.DataFrame(columns=list(requests.columns) if requests is not None else [])
    rows = requests[(requests["task"] == task) & ~_is_warmup(requests)]
    return rows


def _read_previous(path: Path, run_id: str, key: str) -> dict[Any, dict[str, Any]]:
    """Health columns of levels written by an earlier (resumed) run of the same run id."""
    if not path.is_file():
        return {}
    try:
        frame = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError):
        return {}
    if "run_id" in frame:
        frame = frame[frame["run_id"].astype(str) == str(run_id)]
    return {row[key]: {c: row[c] for c in HEALTH_COLUMNS if c in row} for _, row in frame.iterrows()}


def _identity(session: Any) -> dict[str, Any]:
    p = session.params
    return {"run_id": session.run_id, "host": p.host.name, "model": p.server.model,
            "server_software": p.server.software or p.server.kind}


def _progress(total: int, desc: str, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="req", disable=not enabled)


# ---- concurrency sweep --------------------------------------------------------------------------------------
def plan_concurrency(session: Any, levels: list[int], requests_per_level: int, max_tokens: int) -> dict[int, list]:
    """Planned requests per level: max(requests_per_level, level) each, unique prompts, keys distinct per level."""
    from benchlib.runner import Planned

    plan: dict[int, list] = {}
    for level in levels:
        items = []
        for index in range(max(requests_per_level, level)):
            record = session.base_record(CONCURRENCY_TASK, f"c{level}", index, concurrency=level)
            items.append(Planned(record, _simple_request(session, record, CONCURRENCY_PROMPT, max_tokens)))
        plan[level] = items
    return plan


def _simple_request(session: Any, record: Any, prompt: str, max_tokens: int, unique: bool = True) -> ChatRequest:
    run = session.params.run
    record.prompt = session.unique_prompt(prompt, record.request_key) if unique else prompt
    record.max_tokens = max_tokens
    return ChatRequest(messages=[{"role": "user", "content": record.prompt}], max_tokens=max_tokens,
                       temperature=run.temperature, seed=run.seed, thinking=run.thinking)


def _warmups(session: Any, task: str, max_tokens: int) -> list:
    from benchlib.runner import Planned

    items = []
    for index in range(session.params.run.warmups):
        record = session.base_record(task, "warmup", index, warmup=True)
        items.append(Planned(record, _simple_request(session, record, CONCURRENCY_PROMPT, max_tokens)))
    return items


def run_concurrency_sweep(session: Any, levels: list[int] | None = None, requests_per_level: int | None = None,
                          max_tokens: int | None = None, progress: bool = True) -> pd.DataFrame:
    """Send every level (resuming finished keys), then write sweep_concurrency.csv; returns its frame."""
    sweep = session.params.sweep
    levels = sorted(set(levels or sweep.concurrency))
    requests_per_level = requests_per_level or sweep.requests_per_level
    max_tokens = max_tokens or sweep.max_tokens
    done = session.log.done_keys(session.run_id)
    plan = plan_concurrency(session, levels, requests_per_level, max_tokens)
    warmups = [p for p in _warmups(session, CONCURRENCY_TASK, max_tokens) if p.record.request_key not in done]
    health = _read_previous(session.out_dir / CONCURRENCY_CSV, session.run_id, "concurrency")
    total = len(warmups) + sum(1 for items in plan.values() for p in items if p.record.request_key not in done)
    bar = _progress(total, f"load · concurrency · {session.params.server.model}", progress)
    with bar, session.telemetry.window(CONCURRENCY_TASK, kind="task"):
        if warmups:
            session.execute(warmups, concurrency=1, progress=bar)
        for level, items in plan.items():
            pending = [p for p in items if p.record.request_key not in done]
            if not pending:
                continue
            bar.set_postfix_str(f"{level} in flight")
            with client_health(len(pending)) as figures:
                session.execute(pending, concurrency=level, progress=bar)
            health[level] = figures
    requests = read_requests(session.log.path)
    requests = requests[requests["run_id"] == session.run_id] if "run_id" in requests else requests
    frame = concurrency_levels(requests, health, identity=_identity(session))
    write_csv_atomic(session.out_dir / CONCURRENCY_CSV, frame)
    return frame


def concurrency_levels(requests: pd.DataFrame, health: dict[int, dict[str, Any]] | None = None,
                       identity: dict[str, Any] | None = None) -> pd.DataFrame:
    """Per-level statistics from requests.csv rows (task 'concurrency'), health columns and the knee."""
    rows = _measured(requests, CONCURRENCY_TASK)
    out = []
    for level, group in rows.groupby(_num(rows, "concurrency").astype("Int64"), sort=True):
        ok = group[group["status"] == STATUS_OK]
        start = _num(group, "start_ns")
        end = start + _num(group, "e2e_s").fillna(0) * 1e9
        valid = start > 0
        span = float((end[valid].max() - start[valid].min()) / 1e9) if valid.any() else np.nan
        tokens = float(_num(ok, "completion_tokens").fillna(0).sum())
        row = {**(identity or {}), "concurrency": int(level), "n_requests": len(group), "n_ok": len(ok),
               "n_failed": int((group["status"] == STATUS_FAILED).sum()), "failures": _failures(group),
               "span_s": span, "completion_tokens": tokens,
               "throughput_tps": tokens / span if span and span > 0 and len(ok) else np.nan,
               "decode_tps_mean": float(_num(ok, "decode_tps").mean()) if len(ok) else np.nan,
               "decode_tps_p50": _quantile(_num(ok, "decode_tps"), 0.5)}
        for metric in ("ttft_s", "e2e_s"):
            for q in (50, 90, 99):
                row[f"{metric}_p{q}"] = _quantile(_num(ok, metric), q / 100)
        row.update({c: np.nan for c in HEALTH_COLUMNS})
        row.update((health or {}).get(int(level), {}))
        out.append(row)
    if not out:
        return pd.DataFrame(columns=CONCURRENCY_COLUMNS)
    frame = mark_knee(pd.DataFrame(out))
    return frame[[c for c in CONCURRENCY_COLUMNS if c in frame]]


def mark_knee(levels: pd.DataFrame, gain: float = KNEE_GAIN, growth: float = KNEE_LATENCY_GROWTH) -> pd.DataFrame:
    """Add throughput_gain, latency_growth (vs the previous level), knee and saturated (see KNEE RULE above)."""
    frame = levels.sort_values("concurrency").reset_index(drop=True).copy()
    frame["throughput_gain"] = np.nan
    frame["latency_growth"] = np.nan
    frame["knee"] = False
    frame["saturated"] = False
    knee_at = find_knee(frame, gain, growth)
    thr = _num(frame, "throughput_tps")
    ttft, e2e = _num(frame, "ttft_s_p50"), _num(frame, "e2e_s_p50")
    for i in range(1, len(frame)):
        frame.loc[i, "throughput_gain"] = thr[i] / thr[i - 1] - 1 if thr[i - 1] > 0 else np.nan
        ratios = [b / a for a, b in ((ttft[i - 1], ttft[i]), (e2e[i - 1], e2e[i])) if a > 0 and b == b]
        frame.loc[i, "latency_growth"] = max(ratios) if ratios else np.nan
    if knee_at is not None:
        frame["knee"] = frame["concurrency"] == knee_at
        frame["saturated"] = frame["concurrency"] > knee_at
    return frame


def find_knee(levels: pd.DataFrame, gain: float = KNEE_GAIN, growth: float = KNEE_LATENCY_GROWTH) -> int | None:
    """The first level after which aggregate throughput grows < `gain` while p50 TTFT or e2e grows ≥ `growth`×."""
    frame = levels[_num(levels, "n_ok").fillna(0) > 0] if "n_ok" in levels else levels
    frame = frame.sort_values("concurrency").reset_index(drop=True)
    thr = _num(frame, "throughput_tps")
    ttft, e2e = _num(frame, "ttft_s_p50"), _num(frame, "e2e_s_p50")
    for i in range(1, len(frame)):
        if not (thr[i - 1] > 0 and thr[i] == thr[i]):
            continue
        ratios = [b / a for a, b in ((ttft[i - 1], ttft[i]), (e2e[i - 1], e2e[i])) if a > 0 and b == b]
        if thr[i] < (1 + gain) * thr[i - 1] and ratios and max(ratios) >= growth:
            return int(frame.loc[i - 1, "concurrency"])
    return None


# ---- context sweep ------------------------------------------------------------------------------------------
def context_window(params: BenchParams) -> int | None:
    """server.context_window, else the embedded server's n_ctx; None when unknown (no clipping)."""
    if params.server.context_window:
        return int(params.server.context_window)
    if params.server.kind == "embedded":
        return int(params.server.embedded.n_ctx)
    return None


def context_targets(lengths: list[int], window: int | None, max_tokens: int,
                    margin: int = CONTEXT_MARGIN) -> list[dict[str, Any]]:
    """Prompt-token targets: lengths beyond window − max_tokens − margin are dropped and that limit itself is
    run once instead (so the sweep still probes the largest prompt the deployment should take)."""
    lengths = sorted(set(int(n) for n in lengths if n >= 1))
    if window is None:
        return [{"target_tokens": n, "requested_tokens": n, "note": ""} for n in lengths]
    limit = window - max_tokens - margin
    if limit < 1:
        return []
    out = [{"target_tokens": n, "requested_tokens": n, "note": ""} for n in lengths if n <= limit]
    clipped = [n for n in lengths if n > limit]
    if clipped and all(o["target_tokens"] != limit for o in out):
        out.append({"target_tokens": limit, "requested_tokens": clipped[0],
                    "note": f"clipped: {', '.join(map(str, clipped))} exceed the window {window} − max_tokens "
                            f"{max_tokens} − margin {margin}"})
    return out


class ServerTokenizer:
    """The server's own tokenizer over HTTP (count of tokens of a text), found by probing known endpoints."""

    ENDPOINTS = (
        ("llama-cpp-python /extras/tokenize", "/extras/tokenize", lambda model, text: {"input": text}),
        ("llama.cpp /tokenize", "/tokenize", lambda model, text: {"content": text}),
        ("vLLM /tokenize", "/tokenize", lambda model, text: {"model": model, "prompt": text}),
    )

    def __init__(self, root: str, name: str, path: str, body: Callable[[str, str], dict], model: str,
                 headers: dict[str, str], timeout: float = 30.0):
        import httpx

        self.root, self.name, self.path, self.body, self.model = root, name, path, body, model
        self.http = httpx.Client(base_url=root, headers=headers, timeout=timeout)
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        response = self.http.post(self.path, json=self.body(self.model, text))
        response.raise_for_status()
        data = response.json()
        tokens = data.get("tokens")
        if isinstance(tokens, list):
            return len(tokens)
        if isinstance(data.get("count"), int):
            return int(data["count"])
        raise ValueError(f"{self.name}: no 'tokens' in {str(data)[:200]}")

    def close(self) -> None:
        self.http.close()

    @classmethod
    def detect(cls, params: BenchParams) -> "ServerTokenizer | None":
        """Probe the endpoints (most likely first for the declared software); None when none answers sensibly."""
        import httpx

        base = params.server.base_url.rstrip("/")
        root = base[:-3] if base.endswith("/v1") else base
        headers = {"Authorization": f"Bearer {params.server.api_key()}"} if params.server.api_key_env else {}
        software = f"{params.server.software} {params.server.kind}".lower()
        order = list(cls.ENDPOINTS)
        if "vllm" in software or "sglang" in software:
            order = [order[2], order[1], order[0]]
        elif "llama.cpp" in software or "llama-server" in software:
            order = [order[1], order[0], order[2]]
        if params.server.kind == "ollama":
            return None  # Ollama has no tokenizer endpoint: calibrate
        probe = "The quick brown fox jumps over the lazy dog near the river bank."
        for name, path, body in order:
            tokenizer = cls(root, name, path, body, params.server.model, headers, timeout=10.0)
            try:
                n = tokenizer.count(probe)
            except (httpx.HTTPError, ValueError, json.JSONDecodeError):
                tokenizer.close()
                continue
            if 3 <= n <= len(probe):
                tokenizer.calls = 0
                return tokenizer
            tokenizer.close()
        return None


def filler_words(n: int, seed: int = 0) -> list[str]:
    """n words drawn (deterministically per seed) from FILLER_WORDS, with a full stop every 12 words."""
    rng = random.Random(seed)
    words = []
    for i in range(n):
        word = rng.choice(FILLER_WORDS)
        words.append(word + "." if i % 12 == 11 else word)
    return words


def fit_to_tokens(count: Callable[[str], int], make_text: Callable[[int], str], target: int,
                  max_words: int | None = None) -> tuple[str, int, int]:
    """make_text(n words) with count() == target: binary search over n (counts grow with n), then one-token
    suffixes to close a gap a two-token word left; else the closest text. Returns (text, counted, calls)."""
    calls = 0
    cache: dict[int, int] = {}

    def measured(n: int) -> int:
        nonlocal calls
        if n not in cache:
            cache[n] = count(make_text(n))
            calls += 1
        return cache[n]

    base = measured(0)
    if base >= target:  # the instruction alone reaches the target
        return make_text(0), base, calls
    limit = max_words or 8 * target + 64
    hi = max(1, target - base)
    while measured(hi) < target and hi < limit:
        hi = min(limit, hi * 2)
    if measured(hi) < target:
        return make_text(hi), measured(hi), calls
    lo = 0  # invariant: measured(lo) <= target <= measured(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if measured(mid) <= target:
            lo = mid
        else:
            hi = mid
    for n in (lo, hi):
        if measured(n) == target:
            return make_text(n), target, calls
    for suffix in (" a", " I", ".", " ok", " a a", " a a a"):
        candidate = make_text(lo) + suffix
        counted = count(candidate)
        calls += 1
        if counted == target:
            return candidate, counted, calls
    best = lo if target - measured(lo) <= measured(hi) - target else hi
    return make_text(best), measured(best), calls


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


def _context_text(session: Any, key: str, n_words: int, seed: int) -> str:
    body = CONTEXT_INSTRUCTION + " " + " ".join(filler_words(n_words, seed))
    return session.unique_prompt(body, key)


def _calibrate(session: Any, done: set[str]) -> tuple[float | None, int, str]:
    """One warm-up request (1 completion token) with a known text: (server prompt_tokens, chars, text).
    On resume the recorded row answers instead."""
    from benchlib.runner import Planned

    record = session.base_record(CONTEXT_TASK, "calibrate", 0, warmup=True)
    key = record.request_key
    text = _context_text(session, key, 60, seed=7)
    if key in done:
        rows = read_requests(session.log.path)
        rows = rows[(rows["request_key"] == key) & (rows["run_id"] == session.run_id)]
        tokens = pd.to_numeric(rows["prompt_tokens"], errors="coerce").dropna() if len(rows) else pd.Series()
        return (float(tokens.iloc[-1]) if len(tokens) else None), len(text), text
    request = _simple_request(session, record, text, 1, unique=False)
    session.execute([Planned(record, request)], concurrency=1)
    tokens = record.prompt_tokens if record.status == STATUS_OK else None
    return (float(tokens) if tokens else None), len(text), text


def run_context_sweep(session: Any, lengths: list[int] | None = None, max_tokens: int | None = None,
                      repeats: int = 1, progress: bool = True) -> pd.DataFrame:
    """Fit and send the prompt lengths (resuming finished keys), then write sweep_context.csv."""
    params = session.params
    max_tokens = max_tokens or params.sweep.max_tokens
    targets = context_targets(lengths or params.sweep.context_lengths, context_window(params), max_tokens)
    plan_path = session.out_dir / CONTEXT_PLAN
    stored = json.loads(plan_path.read_text(encoding="utf-8")) if plan_path.is_file() else {}
    plans: dict[int, dict] = {int(k): v for k, v in stored.get(session.run_id, {}).items()}
    done = session.log.done_keys(session.run_id)
    health = _read_previous(session.out_dir / CONTEXT_CSV, session.run_id, "target_tokens")

    def key_of(target: int, index: int) -> str:
        return session.base_record(CONTEXT_TASK, f"n{target}", index).request_key

    pending_targets = [t for t in targets if any(key_of(t["target_tokens"], i) not in done for i in range(repeats))]
    bar = _progress(len(pending_targets) * repeats, f"load · context · {params.server.model}", progress)
    tokenizer = ServerTokenizer.detect(params) if pending_targets else None
    try:
        with bar, session.telemetry.window(CONTEXT_TASK, kind="task"):
            template, cpt, points = None, None, []
            if pending_targets:
                calib_tokens, calib_chars, calib_text = _calibrate(session, done)
                if tokenizer is not None and calib_tokens is not None:
                    template = calib_tokens - tokenizer.count(calib_text)
                elif calib_tokens is not None:
                    points.append((calib_chars, calib_tokens))
                    cpt = calib_chars / calib_tokens
            for target in pending_targets:
                n = target["target_tokens"]
                plan = _plan_length(session, target, repeats, tokenizer, template, cpt, points, key_of)
                plans[n] = {k: v for k, v in plan.__dict__.items() if k != "texts"}
                _execute_length(session, plan, repeats, key_of, done, health, bar, max_tokens)
                if tokenizer is None:  # refit chars per token (and the fixed template) from every length so far
                    points.extend(_observed_points(session, n, plan))
                    cpt, template = _fit_chars(points, cpt)
    finally:
        if tokenizer is not None:
            tokenizer.close()
    stored[session.run_id] = {str(k): v for k, v in plans.items()}
    write_atomic(plan_path, json.dumps(stored, indent=2))
    requests = read_requests(session.log.path)
    requests = requests[requests["run_id"] == session.run_id] if "run_id" in requests else requests
    frame = context_levels(requests, plans, health, identity=_identity(session))
    write_csv_atomic(session.out_dir / CONTEXT_CSV, frame)
    return frame


def _plan_length(session: Any, target: dict[str, Any], repeats: int, tokenizer: ServerTokenizer | None,
                 template: float | None, cpt: float | None, points: list, key_of: Callable) -> ContextPlan:
    n = target["target_tokens"]
    texts, counts = [], []
    if tokenizer is not None:
        overhead = template if template is not None else 0.0
        content_target = max(1, int(round(n - overhead)))
        for index in range(repeats):
            key = key_of(n, index)
            text, counted, _ = fit_to_tokens(tokenizer.count, lambda w, k=key, s=index: _context_text(
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
            if len(_context_text(session, key, mid, index)) <= want_chars:
                lo = mid
            else:
                hi = mid
        texts.append(_context_text(session, key, lo, index))
    method = f"calibrated ({chars_per_token:.2f} chars/token" + (f", template {overhead:.0f} tokens)" if template
                                                                  else ")")
    return ContextPlan(n, target["requested_tokens"], method, overhead, np.nan, target["note"], texts)


def _execute_length(session: Any, plan: ContextPlan, repeats: int, key_of: Callable, done: set[str],
                    health: dict, bar: Any, max_tokens: int) -> None:
    from benchlib.runner import Planned

    items = []
    for index in range(repeats):
        record = session.base_record(CONTEXT_TASK, f"n{plan.target_tokens}", index)
        if record.request_key in done:
            continue
        items.append(Planned(record, _simple_request(session, record, plan.texts[index], max_tokens, unique=False)))
    if not items:
        return
    bar.set_postfix_str(f"{plan.target_tokens} tokens")
    with client_health(len(items)) as figures:
        session.execute(items, concurrency=1, progress=bar)
    health[plan.target_tokens] = figures


def _observed_points(session: Any, target: int, plan: ContextPlan) -> list[tuple[int, float]]:
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


def context_levels(requests: pd.DataFrame, plans: dict[int, dict] | None = None,
                   health: dict[int, dict[str, Any]] | None = None,
                   identity: dict[str, Any] | None = None) -> pd.DataFrame:
    """Per-length statistics from requests.csv rows (task 'context'), the plan and health of each length."""
    rows = _measured(requests, CONTEXT_TASK)
    out = []
    if not rows.empty:
        targets = rows["variant"].astype(str).str.extract(r"^n(\d+)$")[0]
        rows = rows.assign(_target=pd.to_numeric(targets, errors="coerce")).dropna(subset=["_target"])
    for target, group in (rows.groupby("_target", sort=True) if not rows.empty else []):
        target = int(target)
        ok = group[group["status"] == STATUS_OK]
        plan = (plans or {}).get(target, {})
        prompt_tokens = _num(ok, "prompt_tokens")
        actual = float(prompt_tokens.median()) if prompt_tokens.notna().any() else np.nan
        ttft = _quantile(_num(ok, "ttft_s"), 0.5)
        row = {**(identity or {}), "target_tokens": target,
               "requested_tokens": plan.get("requested_tokens", target), "method": plan.get("method", ""),
               "template_tokens": plan.get("template_tokens", np.nan),
               "content_tokens": plan.get("content_tokens", np.nan), "prompt_tokens": actual,
               "token_error": actual - target if actual == actual else np.nan,
               "exact": bool(prompt_tokens.notna().any() and (prompt_tokens.dropna() == target).all()),
               "n_requests": len(group), "n_ok": len(ok), "n_failed": int((group["status"] == STATUS_FAILED).sum()),
               "failures": _failures(group), "ttft_s_p50": ttft, "ttft_s_min": float(_num(ok, "ttft_s").min())
               if len(ok) else np.nan, "e2e_s_p50": _quantile(_num(ok, "e2e_s"), 0.5),
               "prefill_tps": actual / ttft if actual == actual and ttft and ttft > 0 else np.nan,
               "server_prefill_tps": float(_num(ok, "server_prefill_tps").mean()) if len(ok) else np.nan,
               "cached_tokens": float(_num(ok, "cached_tokens").mean()) if len(ok) else np.nan,
               "note": plan.get("note", "")}
        row.update({c: np.nan for c in HEALTH_COLUMNS})
        row.update((health or {}).get(target, {}))
        out.append(row)
    return pd.DataFrame(out, columns=CONTEXT_COLUMNS)


# ---- frontier figures, summary, figures ---------------------------------------------------------------------
def max_ok(frame: pd.DataFrame, column: str) -> float:
    """The largest level / length that ran with no failures (and at least one success); NaN when none did."""
    if frame is None or frame.empty or column not in frame:
        return np.nan
    clean = frame[(_num(frame, "n_failed").fillna(0) == 0) & (_num(frame, "n_ok").fillna(0) > 0)]
    return float(clean[column].max()) if len(clean) else np.nan


def _truthy(series: pd.Series) -> pd.Series:
    return series.map(lambda v: str(v).strip().lower() in ("true", "1", "1.0", "yes"))


def frontier_figures(concurrency: pd.DataFrame, context: pd.DataFrame) -> dict[str, float]:
    """max_concurrency_ok, max_context_ok (target prompt tokens), knee_concurrency, peak throughput."""
    knee = concurrency.loc[_truthy(concurrency["knee"]), "concurrency"] if "knee" in concurrency else []
    return {"max_concurrency_ok": max_ok(concurrency, "concurrency"),
            "max_context_ok": max_ok(context, "target_tokens"),
            "knee_concurrency": float(knee.iloc[0]) if len(knee) else np.nan,
            "peak_throughput_tps": float(_num(concurrency, "throughput_tps").max()) if len(concurrency) else np.nan}


def load_figures(out_dir: Path) -> dict[str, float]:
    """frontier_figures() from a finished load folder's sweep CSVs (for the paper / frontier)."""
    out_dir = Path(out_dir)
    read = lambda name: pd.read_csv(out_dir / name) if (out_dir / name).is_file() else pd.DataFrame()  # noqa: E731
    return frontier_figures(read(CONCURRENCY_CSV), read(CONTEXT_CSV))


@dataclass
class LoadResult:
    out_dir: Path
    requests: pd.DataFrame
    summary: pd.DataFrame
    concurrency: pd.DataFrame
    context: pd.DataFrame
    figures: dict[str, float]
    windows: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def ok(self) -> bool:
        return bool((self.requests.get("status") == STATUS_OK).any()) if len(self.requests) else False


def finish_load(session: Any, concurrency: pd.DataFrame, context: pd.DataFrame) -> LoadResult:
    """runner.finish_suite (summary, windows, manifest), plus the sweep figures on every summary row."""
    from benchlib.runner import finish_suite

    result = finish_suite(session)
    figures = frontier_figures(concurrency, context)
    summary = result.summary.copy()
    for name, value in figures.items():
        summary[name] = value
    write_csv_atomic(session.out_dir / "summary.csv", summary)
    return LoadResult(result.out_dir, result.requests, summary, concurrency, context, figures, result.windows)


def run_load(params: BenchParams, *, fresh: bool = False, root: Path | None = None, progress: bool = True,
             context_repeats: int = 1) -> LoadResult:
    """The load notebook's work: one session (server started once), concurrency sweep, context sweep, summary."""
    from benchlib.runner import open_session

    top = max(params.sweep.concurrency) if params.sweep.concurrency else 1
    with open_session(params, SUITE, fresh=fresh, root=root, concurrency=top) as session:
        concurrency = run_concurrency_sweep(session, progress=progress)
        context = run_context_sweep(session, repeats=context_repeats, progress=progress)
        return finish_load(session, concurrency, context)


def plot_concurrency(levels: pd.DataFrame, out_dir: Path | None = None, title: str = "") -> Any:
    """Throughput vs latency per level (the knee marked), and TTFT / e2e percentiles vs concurrency."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    data = levels[_num(levels, "n_ok").fillna(0) > 0].sort_values("concurrency")
    if data.empty:
        return None
    sns.set_theme(style="whitegrid", context="notebook")
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.6))
    ax = axes[0]
    sns.lineplot(data=data, x="e2e_s_p50", y="throughput_tps", marker="o", ax=ax, color="#4C72B0", sort=False)
    for _, row in data.iterrows():
        label = f"{int(row['concurrency'])}" + (" (knee)" if _truthy(pd.Series([row.get("knee")])).iloc[0] else "") \
            + (" (client-bound)" if _truthy(pd.Series([row.get("client_bound")])).iloc[0] else "")
        ax.annotate(label, (row["e2e_s_p50"], row["throughput_tps"]), textcoords="offset points", xytext=(6, 6),
                    fontsize=9)
    knee = data[_truthy(data["knee"])] if "knee" in data else data.iloc[0:0]
    if len(knee):
        ax.scatter(knee["e2e_s_p50"], knee["throughput_tps"], s=180, facecolors="none", edgecolors="#C44E52",
                   linewidths=2, zorder=5, label="saturation knee")
        ax.legend(loc="best")
    ax.set(title="Throughput vs latency (labels: requests in flight)", xlabel="e2e latency p50 (s)",
           ylabel="aggregate output (tokens / s)")
    ax.set_ylim(bottom=0, top=float(data["throughput_tps"].max()) * 1.15)
    ax.set_xlim(left=0, right=float(data["e2e_s_p50"].max()) * 1.15)
    long = data.melt(id_vars="concurrency", value_vars=["ttft_s_p50", "ttft_s_p99", "e2e_s_p50"],
                     var_name="metric", value_name="seconds")
    long["metric"] = long["metric"].map({"ttft_s_p50": "TTFT p50", "ttft_s_p99": "TTFT p99", "e2e_s_p50": "e2e p50"})
    sns.lineplot(data=long, x="concurrency", y="seconds", hue="metric", marker="o", ax=axes[1])
    axes[1].set_xscale("log", base=2)
    axes[1].set_xticks(list(data["concurrency"]))
    axes[1].set_xticklabels([str(int(c)) for c in data["concurrency"]])
    axes[1].set(title="Latency vs concurrency", xlabel="requests in flight", ylabel="seconds")
    axes[1].set_ylim(bottom=0)
    fig.suptitle(title or "Concurrency sweep", fontweight="bold")
    fig.tight_layout()
    if out_dir is not None:
        fig.savefig(Path(out_dir) / "load_concurrency.png", dpi=120)
    return fig


def plot_context(levels: pd.DataFrame, out_dir: Path | None = None, title: str = "") -> Any:
    """TTFT and prefill tok/s vs prompt length (server-counted tokens where reported, else the target)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    data = levels[_num(levels, "n_ok").fillna(0) > 0].copy()
    if data.empty:
        return None
    data["tokens"] = _num(data, "prompt_tokens").fillna(_num(data, "target_tokens"))
    data["ttft_ms"] = _num(data, "ttft_s_p50") * 1000
    sns.set_theme(style="whitegrid", context="notebook")
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.4))
    sns.lineplot(data=data, x="tokens", y="ttft_ms", marker="o", ax=axes[0], color="#DD8452")
    axes[0].set(title="Time to first token vs prompt length", xlabel="prompt tokens (server-counted)",
                ylabel="TTFT p50 (ms)")
    sns.lineplot(data=data, x="tokens", y="prefill_tps", marker="o", ax=axes[1], color="#55A868")
    axes[1].set(title="Prefill speed vs prompt length", xlabel="prompt tokens (server-counted)",
                ylabel="prompt tokens / TTFT (tokens / s)")
    for ax in axes:
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
    fig.suptitle(title or "Context sweep", fontweight="bold")
    fig.tight_layout()
    if out_dir is not None:
        fig.savefig(Path(out_dir) / "load_context.png", dpi=120)
    return fig


def health_table(concurrency: pd.DataFrame, context: pd.DataFrame) -> pd.DataFrame:
    """Client self-check of every level, both sweeps."""
    parts = []
    if len(concurrency):
        parts.append(concurrency.assign(sweep="concurrency", level=concurrency["concurrency"].astype(int)))
    if len(context):
        parts.append(context.assign(sweep="context", level=context["target_tokens"].astype(int)))
    if not parts:
        return pd.DataFrame(columns=["sweep", "level"] + HEALTH_COLUMNS)
    frame = pd.concat(parts, ignore_index=True)
    return frame[["sweep", "level"] + [c for c in HEALTH_COLUMNS if c in frame]].round(3)


def fmt(value: Any, spec: str = ".0f") -> str:
    return format(value, spec) if isinstance(value, (int, float)) and not math.isnan(value) else "–"


def concurrency_table(levels: pd.DataFrame) -> pd.DataFrame:
    """The per-level columns a reader scans first."""
    columns = ["concurrency", "n_requests", "n_ok", "n_failed", "throughput_tps", "decode_tps_p50", "ttft_s_p50",
               "ttft_s_p99", "e2e_s_p50", "e2e_s_p99", "throughput_gain", "latency_growth", "knee", "saturated",
               "client_bound"]
    return levels[[c for c in columns if c in levels]].round(3)


def context_table(levels: pd.DataFrame) -> pd.DataFrame:
    """Target vs server-counted prompt length, TTFT and prefill speed per length."""
    columns = ["target_tokens", "prompt_tokens", "token_error", "exact", "method", "n_ok", "n_failed", "ttft_s_p50",
               "prefill_tps", "server_prefill_tps", "client_bound", "note"]
    return levels[[c for c in columns if c in levels]].round(3)
