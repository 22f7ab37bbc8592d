"""Run one suite (text, quality, vision, audio, video) of a params file and write its tidy results.

outputs/<host>/<model>/<suite>/
    run.json        run id (hash of the params) and prompt salt; a changed params file never resumes an old run
    requests.csv    one row per request, appended and fsynced as they finish, batched within 50 ms (resume skips
                    finished keys)
    summary.csv     per-task statistics, rewritten atomically at the end
    windows.csv     telemetry windows (idle, loaded, one per task) with energy and tokens per joule
    telemetry.csv   the sampler's time series
    manifest.json   provenance: params (no secrets), versions, server, git commit
    server.log      the embedded server's log
    transcription.csv  per clip word errors, e2e and real-time factor, and each task's corpus WER (audio suite)
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
from tqdm.auto import tqdm

from benchlib.analysis import crosscheck, task_stats, transcription
from benchlib.config.params import BenchParams, task_set_hash
from benchlib.config.tasks import Task, Variant, load_pass, tasks_for, under_load
from benchlib.measure import provenance
from benchlib.measure.client import payloads
from benchlib.measure.client.backends import Backend, ChatRequest, make_backend
from benchlib.measure.client.payloads import UnsupportedMedia
from benchlib.measure.client.timing import compute_rates
from benchlib.measure.client.transcription import TranscriptionRequest
from benchlib.measure.pacing import event_loop
from benchlib.measure.selfcheck import calibration
from benchlib.measure.servers import launchers
from benchlib.measure.servers.prometheus import (
    SERVER_METRICS_CSV,
    SERVER_METRICS_LOG,
    ServerMetrics,
    read_server_metrics,
)
from benchlib.measure.telemetry import RemoteTelemetry, Telemetry, WindowKind
from benchlib.records import store
from benchlib.records.rows import (
    STATUS_OK,
    STATUS_UNSUPPORTED,
    BatchedAppends,
    RequestLog,
    RequestRecord,
    read_requests,
    request_key,
    write_csv_atomic,
)
from benchlib.records.run_folder import REQUESTS_CSV, SERVER_LOG, SUMMARY_CSV, WINDOWS_CSV, prepare_out_dir, run_lock
from benchlib.records.secrets import scrub_fields
from benchlib.scoring import checkers
from benchlib.scoring.answers import strip_thinking
from benchlib.scoring.echo import strip_echo
from benchlib.scoring.graded import CODE_CHECKERS, stop_refusal
from benchlib.suites import latency_looks, quality_looks

TRANSCRIPTION_CSV = "transcription.csv"
# HTTP statuses that, on a request carrying media, mean "this deployment does not take that input".
UNSUPPORTED_MEDIA_STATUSES = {400, 415, 422, 501}


@dataclass
class Planned:
    """A request to send: its record (identity filled) and what to send."""

    record: RequestRecord
    request: ChatRequest | None
    task: Task | None = None
    variant: Variant | None = None


@dataclass
class SuiteResult:
    out_dir: Path
    requests: pd.DataFrame
    summary: pd.DataFrame
    windows: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def ok(self) -> bool:
        return bool((self.requests.get("status") == STATUS_OK).any()) if len(self.requests) else False


class Session:
    """A suite's live context: output folder, run id, backend, telemetry, and the embedded server if any."""

    def __init__(self, params: BenchParams, suite: str, out_dir: Path, run_id: str, salt: str):
        self.params = params
        self.suite = suite
        self.out_dir = out_dir
        self.run_id = run_id
        self.salt = salt
        self.log = RequestLog(out_dir / REQUESTS_CSV)
        self.server = None  # EmbeddedServer when we started one
        self.backend: Backend | None = None
        self.telemetry = None
        self.metrics: ServerMetrics | None = None  # the server's own /metrics, when it has them
        self.server_before: dict[str, Any] | None = None
        self.client_calibration: dict[str, Any] | None = None  # the manifest's client_calibration
        self.loop_lag = event_loop.LoopLagSampler()  # running while the session is open: each request's client_stall_ms
        self.started_unix = time.time()
        self.task_set = task_set_hash()
        self.graded_plan: dict[str, Any] = {}  # the manifest's `graded`: items sent of each set's pool (graded_plan)
        self._secret = params.server.secret()

    @contextlib.contextmanager
    def window(self, name: str, kind: WindowKind = "task") -> Iterator[None]:
        """One measured window: telemetry (energy, power, memory) and the server's /metrics deltas together."""
        with self.telemetry.window(name, kind=kind), \
                (self.metrics.window(name, kind) if self.metrics is not None else contextlib.nullcontext()):
            yield

    def server_windows(self) -> pd.DataFrame:
        """Every /metrics window of this run folder (earlier processes' too, for resume)."""
        return read_server_metrics(self.out_dir / SERVER_METRICS_LOG)

    # ---- prompts -------------------------------------------------------------------------------------
    def unique_prompt(self, prompt: str, key: str) -> str:
        """Prefix a short id derived from (salt, key): a prompt no cache has seen, yet stable on resume."""
        if not self.params.run.unique_prompts:
            return prompt
        nonce = hashlib.sha256(f"{self.salt}/{key}".encode()).hexdigest()[:8]
        return f"(ref {nonce})\n{prompt}"

    def base_record(self, task: str, variant: str, repeat: int, concurrency: int = 1, warmup: bool = False,
                    modality: str = "text", extra_key: str = "") -> RequestRecord:
        p = self.params
        return RequestRecord(
            run_id=self.run_id, host=p.host.name, model=p.server.model, server_kind=p.server.kind,
            server_software=p.server.software or p.server.kind, suite=self.suite, modality=modality, task=task,
            variant=variant, repeat=repeat, concurrency=concurrency, is_warmup=warmup,
            request_key=request_key(self.suite, task, variant, repeat, concurrency, warmup, extra_key),
            task_set=self.task_set,
            thinking=p.run.thinking)

    def build(self, task: Task, variant: Variant, record: RequestRecord) -> ChatRequest | TranscriptionRequest:
        """Messages for one task variant; media go through benchlib.measure.client.payloads's payload builders. A speech
        model (server.api transcription) gets the variant's audio file alone, for tasks whose answer is its
        transcript (Task.transcribes); any other task is unsupported there, with the reason."""
        run = self.params.run
        if self.params.server.api == "transcription":
            return self.build_transcription(task, variant, record)
        text = self.unique_prompt(variant.prompt, record.request_key)
        record.prompt = text
        record.max_tokens = min(task.max_tokens or run.max_tokens, run.max_tokens)
        media = task.media_paths(variant)
        messages: list[dict[str, Any]] = []
        if task.system:
            messages.append({"role": "system", "content": task.system})
        if media:
            if self.params.server.kind == "ollama":
                payload = payloads.build_ollama_message(text, media, self.params.server)
                messages.append(payload.message)
            else:
                payload = payloads.build_openai_content(text, media, self.params.server)
                messages.append({"role": "user", "content": payload.content})
            record.media_count, record.payload_bytes = payload.media_count, payload.payload_bytes
        else:
            messages.append({"role": "user", "content": text})
        refused = stop_refusal(task.checker, task.checker_args, task.stop)
        if refused:  # a stop that cuts what the checker reads would score the cut, not the model
            raise ValueError(f"task {task.name}: {refused}")
        return ChatRequest(messages=messages, max_tokens=record.max_tokens, temperature=run.temperature,
                           seed=run.seed, thinking=run.thinking, tools=task.tools, tool_choice=task.tool_choice,
                           stop=list(task.stop))

    def build_transcription(self, task: Task, variant: Variant, record: RequestRecord) -> TranscriptionRequest:
        server = self.params.server
        media = task.media_paths(variant)
        if not task.transcribes or set(media) != {"audio"}:
            asks = "something else of its audio" if "audio" in media else "no audio"
            raise UnsupportedMedia(f"{server.model} is a speech model behind a transcription endpoint "
                                   f"(server.api: transcription): it returns what an audio clip says, so it takes "
                                   f"only tasks whose answer is that transcript (transcribes: true); task "
                                   f"{task.name} asks {asks}")
        record.request_kind, record.prompt = "transcription", ""  # the task's prompt is not sent: none to echo
        record.media_count, record.payload_bytes = 1, media["audio"].stat().st_size
        return TranscriptionRequest(audio=media["audio"], language=server.language,
                                    temperature=self.params.run.temperature)

    # ---- execution -----------------------------------------------------------------------------------
    def execute(self, planned: list[Planned], concurrency: int = 1, progress: Any = None,
                offsets: list[float] | None = None) -> list[RequestRecord]:
        """Send planned requests (at most `concurrency` in flight); each row is appended as it finishes, batched
        with the rows that finish within rows.APPEND_EVERY_S of it (rows.BatchedAppends); returns once all are on
        disk.

        Closed loop (offsets None): a request leaves as soon as a slot is free. Open loop: request i is due
        `offsets[i]` seconds after the first; a pacing thread (event_loop.paced) starts it there (then
        it waits for a slot if `concurrency` are in flight; a backend whose path can hand its write on gets each
        request event_loop.SEND_LEAD_S ahead, prepared by the loop, and the sending process (send_process) sends it
        at its instant).
        Each record keeps the instant it was due
        (scheduled_ns), the wait for a slot (queue_wait_s) and the rest of its way to the wire (schedule_lag_s =
        wire start − due − slot wait): how well one client process held the schedule."""
        return event_loop.run(self._execute(planned, concurrency, progress, offsets))

    async def _execute(self, planned: list[Planned], concurrency: int, progress: Any,
                       offsets: list[float] | None = None) -> list[RequestRecord]:
        gate = asyncio.Semaphore(max(concurrency, 1))
        done: list[RequestRecord] = []
        appends, unfinished = BatchedAppends(self.log), len(planned)

        async def one(item: Planned, due_ns: int = 0) -> None:
            nonlocal unfinished
            record = item.record
            async with event_loop.slot(gate, due_ns) as queued_ns:  # ~0 unless `concurrency` were in flight
                if due_ns:
                    record.scheduled_ns, record.queue_wait_s = due_ns, queued_ns / 1e9
                if item.request is not None:
                    await self.backend.execute(item.request, record)
                    if record.start_ns:
                        stall = self.loop_lag.max_lag_ms(record.start_ns, time.perf_counter_ns())
                        record.client_stall_ms = None if stall != stall else round(stall, 3)
                    if due_ns and record.start_ns:  # late waking, task start, request building, connecting
                        record.schedule_lag_s = (record.start_ns - due_ns - queued_ns) / 1e9
                if concurrency > 1 and item.task is not None and item.task.checker in CODE_CHECKERS:
                    # a sandboxed program runs up to its timeout: off the loop, whose other streams are being stamped
                    await asyncio.get_running_loop().run_in_executor(None, self.after_request, item, concurrency)
                else:
                    self.after_request(item, concurrency)
            unfinished -= 1
            if not unfinished:  # the last request: its batch goes out at once, inside the caller's window
                appends.finish()
            # The fsync'd append runs off the loop (a loop blocked on the disk delays every other stream's reads,
            # and their chunks then coalesce under one late stamp), batched with the rows finishing beside it, and
            # after the slot is given back: a row waiting for its batch holds no request of a closed loop back.
            await appends.append(record)
            done.append(record)
            if progress is not None:
                progress.update(1)

        if offsets is None:
            await asyncio.gather(*(one(item) for item in planned))
            return done
        if len(offsets) != len(planned):
            raise ValueError(f"{len(planned)} requests but {len(offsets)} send offsets")
        lead_ns = 0
        if self.backend is not None:
            await self.backend.ready_to_pace()
            lead_ns = self.backend.pacing_lead_ns()
        # the schedule starts one lead from now, so its first requests are prepared ahead like the rest
        started = await event_loop.paced(offsets, time.perf_counter_ns() + lead_ns,
                                  lambda i, due_ns: asyncio.create_task(one(planned[i], due_ns)), lead_ns=lead_ns)
        await asyncio.gather(*started)
        return done

    def run_requests(self) -> pd.DataFrame:
        """Every row this run has appended so far (other runs in the same requests.csv left out)."""
        requests = read_requests(self.log.path)
        return requests[requests["run_id"] == self.run_id].reset_index(drop=True) if "run_id" in requests \
            else requests

    def after_request(self, item: Planned, concurrency: int) -> None:
        """Server-side figures, cross-checks, unsupported-media classification and scoring."""
        record = item.record
        record.replace_unencodable()  # the checker judges the text that is written
        self._scrub(record)  # a server may echo the key into any field it controls, whole or split
        if self.server is not None and concurrency == 1 and item.request is not None:
            self._attach_embedded_timings(record)
        crosscheck.flag_record(record, cold_load_s=self.params.run.cold_load_s,
                               cache_share=self.params.run.cache_suspect_share)
        if record.status != STATUS_OK and record.media_count and record.http_status in UNSUPPORTED_MEDIA_STATUSES:
            record.status = STATUS_UNSUPPORTED  # the server's own reason stays in error_message
        if record.status == STATUS_OK and item.task is not None and not record.is_warmup:
            if self.params.server.weights == "random":  # timings and payload acceptance are real, answers are not
                record.checker, record.check_detail = item.task.checker, "random weights: not scored"
            else:
                try:
                    self._score(record, item.task, item.variant)
                except Exception as exc:  # noqa: BLE001 — an answer a checker cannot take is a row, not the suite's end
                    check_error(record, item.task.checker, exc)
                self._scrub(record)  # and so may the checker's words (check_detail, answer_read: code it ran)

    def _scrub(self, record: RequestRecord) -> None:
        """Every field of the row with the key, whole or split across fields, replaced by ***: none reaches a file."""
        if self._secret:
            clean = scrub_fields({f.name: getattr(record, f.name) for f in fields(record)}, self._secret)
            for name, value in clean.items():
                setattr(record, name, value)

    def _attach_embedded_timings(self, record: RequestRecord) -> None:
        timings = self.server.read_new_timings(expected=1)
        if not timings:
            return
        t = timings[-1]
        # The log's "eval time" leaves out sampling, detokenizing and streaming: the decode wall time
        # (total − prompt eval) is the server's figure comparable with the client's. Without a plausible prompt
        # time there is no comparable server decode rate either: record none (the log's eval-time rate runs
        # fast and would be flagged as a mismatch it is not).
        record.server_prefill_tps = t.prefill_tps
        record.server_decode_tps = t.decode_wall_tps
        record.server_prompt_tokens = t.prompt_eval_tokens
        if record.prompt_tokens is None and t.prompt_tokens is not None:
            record.prompt_tokens, record.cached_tokens = t.prompt_tokens, t.cached_tokens
        tokens = t.completion_tokens(record.finish_reason)  # runs + 1 when cut by max_tokens, runs at EOS
        if record.token_source in ("", "client_deltas") and tokens:
            record.completion_tokens, record.token_source = tokens, "server_log"
        compute_rates(record)

    def _score(self, record: RequestRecord, task: Task, variant: Variant) -> None:
        """The checker judges only the answer the model added: inline thinking is left out and echoed prompt spans
        are cut first (benchlib.scoring.echo) — except for code, which runs whole against its tests (a repeated
        prompt passes none; benchlib.scoring.graded). response_text keeps the raw answer."""
        answer = strip_thinking(record.response_text)
        added = strip_echo(answer, [record.prompt, variant.prompt, task.system])
        whole = task.checker in CODE_CHECKERS
        text = answer if whole else added.text
        response = checkers.Response(text=text, reasoning=record.reasoning_text,
                                    tool_calls=record.tool_calls, finish_reason=record.finish_reason)
        verdict = checkers.score(task.checker, response, variant.expected, task.checker_args,
                                empty_is_answer=record.request_kind == "transcription")
        record.checker, record.passed, record.score = task.checker, verdict.passed, verdict.score
        record.answer_read = verdict.answer
        record.check_detail = "; ".join(p for p in (added.note(cut=not whole), verdict.detail) if p)
        record.echo = added.found
        record.looping = checkers.detect_looping(record.response_text)

    # ---- planning ------------------------------------------------------------------------------------
    def plan_suite(self, tasks: list[Task]) -> tuple[list[Planned], dict[str, list[Planned]]]:
        """Warm-ups, then per task `repeats` requests cycling through its variants, or a graded task's first
        run.graded_count items once each (Task.planned_variants), params.graded_in_flight() of them in flight (each
        row records that, or the set's size where smaller, as its concurrency); unsupported tasks become one row
        each with the reason, without a request. With run.graded_concurrency N > 1 every graded set follows a second
        time, N in flight, as its own task (config.tasks.under_load): accuracy under load, on the same items."""
        run, server = self.params.run, self.params.server
        warmups: list[Planned] = []
        by_task: dict[str, list[Planned]] = {}
        supported = [t for t in tasks if t.requires in server.modalities]
        if supported:
            first = supported[0]
            for index in range(run.warmups):
                record = self.base_record(first.name, first.variants[0].id, index, warmup=True,
                                          modality=first.requires)
                warmups.append(self._planned(first, first.variants[0], record))
        for task in tasks:
            if task.requires not in server.modalities:
                record = self.base_record(task.name, "*", 0, modality=task.requires, extra_key="unsupported")
                record.status = STATUS_UNSUPPORTED
                record.error_kind = "modality_not_supported"
                record.error_message = (f"{server.model} on {server.software or server.kind} is declared without "
                                        f"'{task.requires}' input (server.modalities={server.modalities} in "
                                        f"{self.params.source or 'params'}); no request sent")
                by_task[task.name] = [Planned(record, None, task, None)]
                continue
            by_task[task.name] = self._plan_task(task, self.params.graded_in_flight() if task.graded else 1)
        self.graded_plan = graded_plan(self.params, [t for t in supported if t.graded is not None])
        if run.graded_concurrency > 1:  # accuracy under load: the graded sets again, after every first pass
            for task in supported:
                if task.graded is not None:
                    loaded = under_load(task, run.graded_concurrency)
                    by_task[loaded.name] = self._plan_task(loaded, run.graded_concurrency)
        return warmups, by_task

    def _plan_task(self, task: Task, concurrency: int = 1) -> list[Planned]:
        """One task's requests; `concurrency` in flight, recorded as at most the number of requests (a set of 3
        items sent 16 at a time had 3 in flight), so the keys stay the same when a run resumes."""
        run = self.params.run
        variants = task.planned_variants(run.repeats, run.graded_count(load_pass(task.name)[0], len(task.variants)))
        concurrency = max(1, min(concurrency, len(variants)))
        items = []
        for repeat, variant in enumerate(variants):
            record = self.base_record(task.name, variant.id, repeat, concurrency=concurrency, modality=task.requires)
            items.append(self._planned(task, variant, record))
        return items

    def _planned(self, task: Task, variant: Variant, record: RequestRecord) -> Planned:
        try:
            request = self.build(task, variant, record)
        except Exception as exc:  # noqa: BLE001 — e.g. Ollama cannot carry audio: a row, not a crash
            if isinstance(exc, UnsupportedMedia):
                record.status, record.error_kind = STATUS_UNSUPPORTED, "modality_not_supported"
            else:
                record.status, record.error_kind = "failed", "payload_error"
            record.error_message = str(exc)
            return Planned(record, None, task, variant)
        return Planned(record, request, task, variant)


def graded_plan(params: BenchParams, graded: list[Task]) -> dict[str, Any]:
    """What the manifest says of a run's graded sets: per set the items sent and its pool, the totals, the items in
    flight, `reduced` — fewer than the pools — and the quality plan that sized them (paper.runs.reduced_note says
    which, beside the accuracy)."""
    if not graded:
        return {}
    sets = {t.name: {"sent": params.run.graded_count(t.name, len(t.variants)), "pool": len(t.variants)}
            for t in graded}
    sent, pool = sum(s["sent"] for s in sets.values()), sum(s["pool"] for s in sets.values())
    return {"reduced": sent < pool, "items": sent, "pool": pool, "in_flight": params.graded_in_flight(),
            "sets": sets, "plan": params.run.quality.plan, "baseline": params.run.quality.baseline}


def check_error(record: RequestRecord, checker: str, exc: BaseException) -> None:
    """A checker that raised on an answer (a RecursionError on "[" * 1000, a MemoryError in ast.parse, ...): the row
    is scored as not passed, error_kind `check_error` with the reason; the request itself stays `ok` (its timings
    are real)."""
    lines = str(exc).strip().splitlines()
    reason = f"{type(exc).__name__}: {lines[0][:200]}" if lines else type(exc).__name__
    record.checker, record.passed, record.score = checker, False, 0.0
    record.error_kind, record.error_message = "check_error", reason
    record.check_detail = f"check_error: {reason}"


@contextlib.contextmanager
def open_session(params: BenchParams, suite: str, *, fresh: bool = False, root: Path | None = None,
                 concurrency: int = 1, needs_server: bool = True) -> Iterator[Session]:
    """Output folder + telemetry (idle baseline, then model-loaded baseline) + server + backend.

    needs_server=False (every task unsupported) skips starting the embedded server and the baselines.
    """
    default_root, url = store.results_root(params)
    root = root or default_root
    folder = params.suite_dir(suite, root)
    guard = contextlib.ExitStack()
    guard.enter_context(run_lock(folder))  # before anything in the folder is touched (--fresh archives it)
    try:
        remote = store.sync_from_store(params, suite, fresh, url, root)
        out_dir, run_id, salt = prepare_out_dir(params, suite, fresh, root)
        if remote:  # pushed every run.store_every_s and once more when the session ends, whatever ends it
            guard.enter_context(store.Mirror(out_dir, remote, params.run.store_every_s))
    except BaseException:
        guard.close()
        raise
    session = Session(params, suite, out_dir, run_id, salt)
    session.log.recover()  # a row cut by a crash or a full disk is moved aside before anything is appended
    # before telemetry starts, so its idle baseline never sees the calibration's own load
    session.client_calibration = calibration.for_params(params) if needs_server else None
    # where the server's host is sampled from: this process (local), or an agent / exporters on that host
    session.telemetry = (Telemetry(params.telemetry, out_dir) if params.telemetry.source == "local"
                         else RemoteTelemetry(params.telemetry, out_dir))
    session.telemetry.set_server_url(params.server.base_url)
    try:
        guard.enter_context(event_loop.quiet_gc())  # no full collection of the notebook's heap while a stream is read
        session.loop_lag.start()
        session.telemetry.start()
        if needs_server and params.telemetry.idle_baseline_s:
            session.telemetry.baseline("idle", params.telemetry.idle_baseline_s, kind="idle")
        if needs_server and params.server.kind == "embedded" and not params.server.base_url:
            engine = launchers.launcher(params.server.embedded)
            session.server = engine(params.server.embedded, params.server.model, out_dir / SERVER_LOG)
            base_url = session.server.start()
            session.telemetry.set_server_pid(session.server.pid)
            params = params.model_copy(deep=True)
            params.server.base_url = base_url
            session.params = params
        if needs_server and params.telemetry.loaded_baseline_s:
            session.telemetry.baseline("loaded", params.telemetry.loaded_baseline_s, kind="loaded")
        if params.server.base_url:
            session.backend = make_backend(params.server, params.run, concurrency)
            session.server_before = provenance.server_state(params)  # e.g. Ollama /api/ps before any request
            if params.run.server_metrics_poll_s:
                session.metrics = ServerMetrics(params.server.root_url(),
                                                params.server.auth_headers(), software=params.server.software,
                                                out_dir=out_dir, poll_s=params.run.server_metrics_poll_s,
                                                secret=params.server.secret(),
                                                connect_s=params.run.connect_timeout_s)
        yield session
    finally:
        if session.backend is not None:
            with contextlib.suppress(Exception):
                event_loop.run(session.backend.aclose())
        if session.metrics is not None:
            session.metrics.close()
        if session.server is not None:
            session.server.stop()
        session.telemetry.close()
        session.loop_lag.stop()
        guard.close()


def run_suite(params: BenchParams, suite: str, *, fresh: bool = False, root: Path | None = None,
              progress: bool = True) -> SuiteResult:
    """Run every task of a suite (resuming finished keys), then write summary, windows and manifest."""
    tasks = tasks_for(suite, params.tasks)
    needs_server = any(t.requires in params.server.modalities for t in tasks)
    in_flight = max(params.graded_in_flight(), params.run.graded_concurrency) \
        if any(t.graded is not None for t in tasks) else 1
    with open_session(params, suite, fresh=fresh, root=root, needs_server=needs_server,
                      concurrency=in_flight) as session:
        done = session.log.done_keys(session.run_id)
        warmups, by_task = session.plan_suite(tasks)
        todo = [p for p in warmups if p.record.request_key not in done]
        total = len(todo) + sum(1 for items in by_task.values() for p in items if p.record.request_key not in done)
        with progress_bar(total, f"{suite} · {params.server.model}", progress) as bar:
            if todo:
                session.execute(todo, progress=bar)
            looked = quality_looks.run_looks(session, by_task, done, bar)  # a sized quality plan's graded sets
            looked |= latency_looks.run_looks(session, by_task, done, bar)  # a sized latency plan's tasks
            for name, items in by_task.items():
                if name in looked:
                    continue
                pending = [p for p in items if p.record.request_key not in done]
                if not pending:
                    continue
                bar.set_postfix_str(name)
                with session.window(name, kind="task"):
                    session.execute(pending, concurrency=max(p.record.concurrency for p in pending), progress=bar)
        result = finish_suite(session)
    return result


def progress_line(desc: str, done: int, total: int) -> str:
    """The final count of a progress bar as plain text."""
    return f"{desc}: {done}/{total} requests done" + ("" if done == total else f" ({total - done} not sent)")


@contextlib.contextmanager
def progress_bar(total: int, desc: str, enabled: bool = True) -> Iterator[Any]:
    """A tqdm bar (a widget in notebooks) that ends with a plain text line of the final count: an executed
    notebook that is not trusted shows the widget's first frame ("0/16") but prints the line."""
    bar = tqdm(total=total, desc=desc, unit="req", disable=not enabled)
    try:
        with bar:
            yield bar
    finally:
        if enabled:
            print(progress_line(desc, bar.n, total), flush=True)


def finish_suite(session: Session) -> SuiteResult:
    """Summary (with validity), telemetry windows with tokens per joule, manifest — each written atomically."""
    run = session.params.run
    requests = session.run_requests()
    # whole-run rules (prefill far above its group's median) on top of the per-request flags
    requests = crosscheck.flag_requests(requests, cold_load_s=run.cold_load_s, cache_share=run.cache_suspect_share)
    summary = task_stats.summarize_requests(requests, max_error_rate=run.max_error_rate)
    keys = [k for k in crosscheck.SUMMARY_KEYS if k in summary.columns]
    if len(summary):
        summary = summary.merge(crosscheck.flag_counts(requests), how="left", on=keys)
    session.telemetry.measure_clock("end")  # a remote source's clock offset at the suite's end, for the manifest
    windows = session.telemetry.windows_frame()
    if len(windows):
        windows = task_stats.add_token_efficiency(windows, requests)
        write_csv_atomic(session.out_dir / WINDOWS_CSV, windows)
        summary = task_stats.join_windows(summary, windows)
    server_windows = session.server_windows()
    if len(server_windows):
        server_windows = crosscheck.check_server_metrics(server_windows, requests)
        write_csv_atomic(session.out_dir / SERVER_METRICS_CSV, server_windows)
        summary = task_stats.join_server_metrics(summary, server_windows)
    write_csv_atomic(session.out_dir / SUMMARY_CSV, summary)
    clips = transcription.transcription_frame(requests, tasks_for(session.suite, session.params.tasks))
    if len(clips):  # per clip WER, e2e and real-time factor, and each task's corpus WER (analysis.transcription)
        write_csv_atomic(session.out_dir / TRANSCRIPTION_CSV, clips)
    provenance.write_manifest(session)
    return SuiteResult(session.out_dir, requests, summary, windows)
