"""Other tools' results as our requests.csv rows: AIPerf's `profile_export.jsonl` (with `profile_export_aiperf.json`
beside it), GuideLLM's `benchmarks.json` and `vllm bench serve --save-result [--save-detailed]` JSON.

Each reader returns a ForeignRun: one RequestRecord per request the tool recorded (every field with a meaning here
mapped; the rest of the tool's record kept in the row's `extra`), the tool's name, version and command line where
its files give them, its own aggregate figures as it wrote them, and the figures of ours it cannot give.

Times: each tool's stamps are subtracted on the clock they were taken on (AIPerf's and GuideLLM's wall-clock
stamps give durations and `started_at_unix`; vLLM's are durations already, its start times on its own
perf_counter), never mixed with ours; `start_ns` holds the tool's own monotonic or wall stamp in ns, for order
only. Tokens are as the tool counted them (its tokenizer or the server's usage, as it was run), and `token_source`
names the tool. TPOT and decode rate follow our definition (benchlib.measure.client.timing.compute_rates: t_last − t_first
over completion tokens − 1), from the tool's per-chunk intervals where it gives them.

A file of a version this reader was not written for, or a record of the wrong shape, raises ForeignError: one line
naming the file and the record. Files are read within benchlib.records.outside's bounds (regular files only, a
size cap, strict JSON), a stamp beyond benchlib.records.plausible.MAX_STAMP_S is a malformed record (it would
overflow a nanosecond stamp), and every string kept from the tool's files — its command line, configuration,
error messages, the records' own fields — goes through benchlib.records.secrets.redact, the one rule for what
comes from outside, before anything holds it.

Records are streamed: `ForeignRun.rows()` yields them one at a time (AIPerf's JSONL is read a line at a time; a
vLLM or GuideLLM file is one JSON document, held parsed while its rows are made), so an import holds a batch of
rows, not the run; `ForeignRun.records` is the whole list, for a caller that wants it."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from benchlib.measure.client.timing import check_counts, compute_rates, finite
from benchlib.records import outside, plausible
from benchlib.records.plausible import MAX_STAMP_S
from benchlib.records.rows import STATUS_FAILED, STATUS_OK, RequestRecord, request_key
from benchlib.records.secrets import clean_text, redact, redact_command

TOOLS = ("aiperf", "guidellm", "vllm-bench")
# What no other tool's file gives: they are measured around the request by our own client and sensors.
NEVER_GIVEN = ("energy and power (no telemetry windows)", "answer quality (no checker ran)",
               "client self-check (client_prep_s, client_stall_ms)", "server-side timings and counts")
AGGREGATES_ONLY = ("per-request rows (TTFT, ITL, end-to-end of each request)", "intervals of means and medians "
                   "(bootstrap over requests)", "ITL gaps pooled over requests")


MAX_LINE_BYTES = 16 * 2**20  # one AIPerf record is ~2.7 kB; a line of 16 MiB is no record of it


class ForeignError(ValueError):
    """A file of another tool that cannot be imported as it is: one line naming the file and the record. The line
    is cleaned by the secrets rule: it may quote a value of the file."""

    def __init__(self, message: str):
        super().__init__(clean_text(" ".join(str(message).split())))


def _no_rows() -> Iterator[RequestRecord]:
    return iter(())


@dataclass
class ForeignRun:
    tool: str
    version: str  # "" when its files do not say
    command: str  # the tool's command line, "" when its files do not give it
    rows: Callable[[], Iterator[RequestRecord]] = _no_rows  # the records, one at a time, read afresh at each call
    aggregates: dict[str, Any] = field(default_factory=dict)  # the tool's own figures, as it wrote them
    cannot_give: list[str] = field(default_factory=list)  # our figures this import lacks
    files: list[Path] = field(default_factory=list)
    model: str = ""  # as the tool named it
    started_unix: float | None = None
    finished_unix: float | None = None
    # aggregates as ours: metric -> {count, mean, sd, p50, p90, p99} (seconds; decode_tps in tok/s)
    figures: dict[str, dict[str, float]] = field(default_factory=dict)
    totals: tuple[int, int] | None = None  # (ok, failed) requests as the tool counted them
    per_request: bool = False  # the files hold per-request records (rows() yields them)
    _records: list[RequestRecord] | None = field(default=None, init=False, repr=False)

    @property
    def records(self) -> list[RequestRecord]:
        """Every record at once (read once and kept): for a caller that wants the list; an import streams rows()."""
        if self._records is None:
            self._records = list(self.rows())
        return self._records


def _json(path: Path) -> Any:
    try:
        return outside.load_json(path)
    except outside.OutsideError as exc:
        raise ForeignError(str(exc)) from None
    except OSError as exc:
        raise ForeignError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}… ({len(text)} characters)"


def _num(value: Any, where: str) -> float | None:
    """A finite number or None; anything else (text, a bool, NaN, an integer too large for a float) is a malformed
    record."""
    if value is None:
        return None
    try:
        number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    except OverflowError:
        number = math.nan
    if not math.isfinite(number):
        raise ForeignError(f"{where}: {_shown(value)} is not a number")
    return number


def _stamp(value: Any, where: str) -> float | None:
    """A start time in seconds (wall clock or the tool's own monotonic clock): a number between 0 and
    MAX_STAMP_S, or None."""
    number = _num(value, where)
    if number is not None and not 0 <= number <= MAX_STAMP_S:
        raise ForeignError(f"{where}: {_shown(value)} is no start time (seconds >= 0 and at most {MAX_STAMP_S:g})")
    return number


def _count(value: Any, where: str) -> int | None:
    number = _num(value, where)
    if number is None:
        return None
    if number < 0 or not number.is_integer():
        raise ForeignError(f"{where}: {_shown(value)} is not a token count")
    return int(number)


def _finish(record: RequestRecord, tool: str) -> RequestRecord:
    """Our derived fields from the tool's: counts checked as ours are, then TPOT, decode and prefill rates; every
    text and structure the tool gave under the secrets rule."""
    record.token_source = tool if record.completion_tokens is not None or record.prompt_tokens is not None else ""
    check_counts(record)
    if record.status == STATUS_OK:
        compute_rates(record)
    for name in ("task", "request_key", "error_kind", "error_message", "response_text", "reasoning_text"):
        setattr(record, name, clean_text(getattr(record, name)))
    record.extra = redact(record.extra)
    return record


def _row(tool: str, task: str, index: int, concurrency: int, **values: Any) -> RequestRecord:
    suite = tool
    return RequestRecord(suite=suite, modality="text", task=task, repeat=index, concurrency=concurrency,
                         request_key=request_key(suite, task, "", index, concurrency), **values)


# ---- vLLM bench serve ---------------------------------------------------------------------------------------
VLLM_KEYS = ("duration", "completed", "total_input_tokens", "total_output_tokens")
VLLM_DETAIL = ("ttfts", "itls", "input_lens", "output_lens", "errors")
VLLM_AGGREGATES = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_s", "e2el": "e2e_s"}


def _vllm_figures(data: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    figures = {}
    for theirs, ours in VLLM_AGGREGATES.items():
        if f"mean_{theirs}_ms" not in data:
            continue
        figures[ours] = {stat: value / 1e3 for key, stat in (("mean", "mean"), ("std", "sd"), ("median", "p50"),
                                                             ("p90", "p90"), ("p99", "p99"))
                         if (value := finite(data.get(f"{key}_{theirs}_ms"))) is not None}
    return figures


def read_vllm(path: Path) -> ForeignRun:
    """`vllm bench serve --save-result --save-detailed` JSON (vllm/benchmarks/serve.py: its result dict, the lists
    `ttfts`, `itls`, `input_lens`, `output_lens`, `errors`, `generated_texts`, and in recent versions `latencies` and
    `start_times`). Without --save-detailed it holds aggregates only. Its file names no vLLM version unless the run
    was given `--metadata vllm_version=…` (such KEY=VALUE pairs land at the top of the file)."""
    path = Path(path)
    data = _json(path)
    if not isinstance(data, dict) or not all(k in data for k in VLLM_KEYS):
        missing = [k for k in VLLM_KEYS if not isinstance(data, dict) or k not in data]
        raise ForeignError(f"{path}: not a vllm bench serve result of a known version (no {', '.join(missing)})")
    aggregates = redact({k: v for k, v in data.items() if not isinstance(v, list)})
    concurrency = data.get("max_concurrency")
    concurrency = int(concurrency) if isinstance(concurrency, int) and not isinstance(concurrency, bool) \
        and 0 < concurrency <= 10**9 else 0
    rate = data.get("request_rate", "inf")
    task = clean_text(f"rate={rate if isinstance(rate, (int, float, str)) else 'inf'}"[:60]) + \
        (f",concurrency={concurrency}" if concurrency else "")
    run = ForeignRun(tool="vllm-bench", version=clean_text(str(data.get("vllm_version", "") or "")), command="",
                     aggregates=aggregates, files=[path], model=clean_text(str(data.get("model_id") or "")),
                     totals=(int(_count(data["completed"], f"{path}: completed") or 0),
                             int(_count(data.get("failed", 0), f"{path}: failed") or 0)),
                     figures=_vllm_figures(data))
    if not any(k in data for k in VLLM_DETAIL):
        run.cannot_give = list(AGGREGATES_ONLY) + list(NEVER_GIVEN)
        return run
    lists = {k: data.get(k) for k in (*VLLM_DETAIL, "generated_texts", "latencies", "start_times", "queue_times")}
    del data  # the lists are all the rows need; the rest of the document goes now
    n = len(lists["ttfts"] or [])
    for key, value in lists.items():
        if value is not None and (not isinstance(value, list) or len(value) != n):
            raise ForeignError(f"{path}: '{key}' is not a list of {n} entries, one per request as 'ttfts' is")

    def rows() -> Iterator[RequestRecord]:
        for i in range(n):
            yield _vllm_record(lists, i, path, task, concurrency)

    run.rows, run.per_request = rows, True
    run.cannot_give = ["started_at_unix (vLLM's start times are on its own perf_counter; its file gives only the "
                       "local date it ended)"] + list(NEVER_GIVEN)
    return run


def _vllm_record(lists: Mapping[str, Any], i: int, path: Path, task: str, concurrency: int) -> RequestRecord:
    where = f"{path}: request {i}"
    error = lists["errors"][i] if lists["errors"] else ""
    itl = lists["itls"][i] if lists["itls"] else []
    if not isinstance(itl, list):
        raise ForeignError(f"{where}: 'itls' entry is not a list")
    itl_s = [_num(v, f"{where} itls") for v in itl]
    ttft = _num(lists["ttfts"][i], f"{where} ttfts")
    latency = _num(lists["latencies"][i], f"{where} latencies") if lists["latencies"] else None
    start = _stamp(lists["start_times"][i], f"{where} start_times") if lists["start_times"] else None
    queue = _num(lists["queue_times"][i], f"{where} queue_times") if lists["queue_times"] else None
    failed = bool(error)
    lines = str(error).strip().splitlines() if failed else []
    record = _row("vllm-bench", task, i, concurrency or 1,
                  status=STATUS_FAILED if failed else STATUS_OK,
                  error_kind="tool_reported_error" if failed else "",
                  error_message=lines[-1][:300] if lines else ("the tool reported an error" if failed else ""),
                  start_ns=int(start * 1e9) if start is not None else 0,
                  ttft_s=None if failed else ttft, itl_s=[] if failed else itl_s,
                  e2e_s=None if failed else (latency if latency is not None else
                                             (ttft or 0.0) + sum(itl_s) if ttft is not None else None),
                  prompt_tokens=_count(lists["input_lens"][i], f"{where} input_lens") if lists["input_lens"] else None,
                  completion_tokens=None if failed else
                  _count(lists["output_lens"][i], f"{where} output_lens") if lists["output_lens"] else None,
                  client_deltas=0 if failed else len(itl_s) + 1, client_chunks=0 if failed else len(itl_s) + 1,
                  response_text=str(lists["generated_texts"][i] or "") if lists["generated_texts"] else "",
                  extra=({"queue_times": queue} if lists["queue_times"] else {}) | {"start_time_s": start})
    return _finish(record, "vllm-bench")


# ---- AIPerf ----------------------------------------------------------------------------------------------------
AIPERF_RECORDS, AIPERF_AGGREGATE = "profile_export.jsonl", "profile_export_aiperf.json"
AIPERF_VERSIONS = ("0.13",)  # major.minor this reader was written against (their record and export models)
# AIPerf's metric (ms unless a count) -> our column
AIPERF_TIMES = {"time_to_first_token": "ttft_s", "time_to_first_output_token": "ttfo_s", "request_latency": "e2e_s"}
AIPERF_AGGREGATE_METRICS = {"time_to_first_token": "ttft_s", "time_to_first_output_token": "ttfo_s",
                            "request_latency": "e2e_s", "inter_token_latency": "tpot_s",
                            "inter_chunk_latency": "itl_s", "output_token_throughput_per_user": "decode_tps"}


def _aiperf_files(path: Path) -> tuple[Path | None, Path | None]:
    """(profile_export.jsonl, profile_export_aiperf.json) of an artifact folder or of either file's folder; a name
    that is there but no regular file (a FIFO, a link to a device) is kept, to be refused by name when read."""
    folder = path if path.is_dir() else path.parent
    records, aggregate = folder / AIPERF_RECORDS, folder / AIPERF_AGGREGATE
    if not path.is_dir() and path.name not in (AIPERF_RECORDS, AIPERF_AGGREGATE):
        records = path if path.suffix == ".jsonl" else records
        aggregate = path if path.suffix == ".json" else aggregate
    return (records if os.path.lexists(records) else None), (aggregate if os.path.lexists(aggregate) else None)


def _aiperf_value(metrics: Mapping[str, Any], name: str, where: str) -> Any:
    entry = metrics.get(name)
    if entry is None:
        return None
    if not isinstance(entry, dict) or "value" not in entry:
        raise ForeignError(f"{where}: metric '{name}' is not a {{value, unit}} object")
    return entry["value"]


def _aiperf_seconds(metrics: Mapping[str, Any], name: str, where: str) -> float | None:
    value = _num(_aiperf_value(metrics, name, where), f"{where} {name}")
    unit = (metrics.get(name) or {}).get("unit", "ms")
    if value is None:
        return None
    if unit not in ("ms", "ns", "sec", "s"):
        raise ForeignError(f"{where}: metric '{name}' is in {unit!r}, not a time unit")
    return value / {"ms": 1e3, "ns": 1e9, "sec": 1.0, "s": 1.0}[unit]


def _aiperf_record(line: str, number: int, path: Path, phases: Mapping[str, int], first_task: str) -> RequestRecord:
    where = f"{path}: record {number}"
    try:
        data = outside.loads_json(line, where, "record")
    except outside.OutsideError as exc:
        raise ForeignError(str(exc)) from None
    meta, metrics = (data.get("metadata"), data.get("metrics")) if isinstance(data, dict) else (None, None)
    if not isinstance(meta, dict) or not isinstance(metrics, dict) or "request_start_ns" not in meta:
        raise ForeignError(f"{where}: not an AIPerf metric record (no metadata.request_start_ns or metrics)")
    start_ns = meta.get("request_start_ns")  # kept exact: a float cannot hold a nanosecond stamp
    if isinstance(start_ns, bool) or not isinstance(start_ns, int) or not 0 <= start_ns <= MAX_STAMP_S * 1e9:
        raise ForeignError(f"{where} request_start_ns: {_shown(start_ns)} is not a nanosecond stamp (>= 0 and at "
                           f"most {MAX_STAMP_S * 1e9:g})")
    warmup = meta.get("phase_kind", meta.get("benchmark_phase")) == "warmup"
    task = first_task if warmup else str(meta.get("phase_name") or "profiling")
    error = data.get("error")
    if error is not None and not isinstance(error, dict):
        raise ForeignError(f"{where}: 'error' is not an object")
    cancelled = bool(meta.get("was_cancelled"))
    failed = error is not None or cancelled
    gaps = _aiperf_value(metrics, "inter_chunk_latency", where)
    if gaps is not None and not isinstance(gaps, list):
        raise ForeignError(f"{where}: metric 'inter_chunk_latency' is not a list")
    scale = {"ms": 1e3, "ns": 1e9}.get((metrics.get("inter_chunk_latency") or {}).get("unit", "ms"), 1e3)
    itl_s = [_num(g, f"{where} inter_chunk_latency") / scale for g in gaps or []]
    times = {ours: _aiperf_seconds(metrics, theirs, where) for theirs, ours in AIPERF_TIMES.items()}
    chunks = _count(_aiperf_value(metrics, "http_req_chunks_received", where), f"{where} http_req_chunks_received")
    code = error.get("code") if error else None
    index = _count(meta.get("session_num"), f"{where} session_num") or 0
    concurrency = phases.get(task, 1)
    kept = {"metadata": {k: v for k, v in meta.items() if k != "request_start_ns"},
            "metrics": {k: v for k, v in metrics.items() if k not in (*AIPERF_TIMES, "inter_chunk_latency")}}
    record = RequestRecord(
        suite="aiperf", modality="text", task=task, repeat=index, concurrency=concurrency, is_warmup=warmup,
        request_key=request_key("aiperf", task, "", index, concurrency, warmup,
                                extra=str(meta.get("x_request_id") or number)),
        status=STATUS_FAILED if failed else STATUS_OK,
        error_kind=(f"http_{code}" if isinstance(code, int) else str((error or {}).get("type") or "cancelled"))
        if failed else "",
        error_message=str((error or {}).get("message") or ("cancelled by AIPerf" if cancelled else ""))[:300],
        http_status=code if isinstance(code, int) else None,
        started_at_unix=start_ns / 1e9, start_ns=start_ns,
        ttft_s=None if failed else times["ttft_s"], ttfo_s=None if failed else times["ttfo_s"],
        e2e_s=None if failed else times["e2e_s"], itl_s=[] if failed else itl_s,
        prompt_tokens=_count(_aiperf_value(metrics, "input_sequence_length", where), f"{where} input_sequence_length"),
        completion_tokens=_count(_aiperf_value(metrics, "output_sequence_length", where),
                                 f"{where} output_sequence_length"),
        reasoning_tokens=_count(_aiperf_value(metrics, "reasoning_token_count", where),
                                f"{where} reasoning_token_count"),
        client_deltas=len(itl_s) + 1 if times["ttft_s"] is not None else 0, client_chunks=chunks or 0, extra=kept)
    return _finish(record, "aiperf")


def _aiperf_figures(aggregate: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Our metrics from AIPerf's aggregate statistics (seconds, or tok/s for the decode rate)."""
    out = {}
    for theirs, ours in AIPERF_AGGREGATE_METRICS.items():
        entry = aggregate.get(theirs)
        if not isinstance(entry, dict):
            continue
        scale = 1.0 if ours == "decode_tps" else {"ms": 1e3, "ns": 1e9}.get(entry.get("unit", "ms"), 1.0)
        out[ours] = {ours_stat: value / scale for theirs_stat, ours_stat in
                     (("avg", "mean"), ("std", "sd"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99"))
                     if (value := finite(entry.get(theirs_stat))) is not None}
        if finite(entry.get("count")) is not None:
            out[ours]["count"] = finite(entry["count"])
    return out


def _whole(value: Any) -> int:
    """A count the tool gave as an aggregate; 0 where it is no whole number >= 0."""
    number = finite(value)
    return int(number) if number is not None and number >= 0 and number.is_integer() else 0


def _aiperf_totals(aggregate: Mapping[str, Any]) -> tuple[int, int]:
    summary = aggregate.get("error_summary")
    errors = sum(_whole(e.get("count")) for e in (summary if isinstance(summary, list) else [])
                 if isinstance(e, dict))
    count = aggregate.get("request_count")
    return _whole(count.get("avg") if isinstance(count, dict) else 0), errors


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def read_aiperf(path: Path) -> ForeignRun:
    """An AIPerf artifact folder (or its profile_export.jsonl / profile_export_aiperf.json): the per-request
    records of the jsonl, and from the aggregate JSON the version (`aiperf_version`), the command line
    (`run_info.cli_command`), the concurrency of each phase and its own statistics. With the aggregate JSON alone
    (--export-level summary) the import keeps AIPerf's aggregates."""
    path = Path(path)
    records_file, aggregate_file = _aiperf_files(path)
    if aggregate_file is None:
        raise ForeignError(f"{path}: no {AIPERF_AGGREGATE} there, so the AIPerf version is unknown; import the "
                           f"artifact folder AIPerf wrote")
    aggregate = _json(aggregate_file)
    version = str(aggregate.get("aiperf_version") or "") if isinstance(aggregate, dict) else ""
    if not version or ".".join(version.split(".")[:2]) not in AIPERF_VERSIONS:
        raise ForeignError(f"{aggregate_file}: AIPerf version {version or 'unknown'} (this reader knows "
                           f"{', '.join(v + '.x' for v in AIPERF_VERSIONS)}); its record format may differ")
    config = _dict(aggregate.get("input_config"))
    declared = [p for p in _list(config.get("phases")) if isinstance(p, dict)]
    phases = {clean_text(str(p.get("name"))): _count(p.get("concurrency"), f"{aggregate_file}: phase concurrency")
              or 1 for p in declared}
    profiling = [clean_text(str(p.get("name"))) for p in declared if p.get("kind") != "warmup"]
    models = [m.get("name") for m in _list(_dict(config.get("models")).get("items")) if isinstance(m, dict)]
    command = redact_command(str(_dict(aggregate.get("run_info")).get("cli_command") or ""))
    run = ForeignRun(tool="aiperf", version=clean_text(version), command=command,
                     aggregates=redact({k: v for k, v in aggregate.items() if k not in ("telemetry_data",
                                                                                        "run_info")}),
                     files=[f for f in (records_file, aggregate_file) if f],
                     model=clean_text(str(models[0] if models else "")),
                     figures=_aiperf_figures(aggregate), totals=_aiperf_totals(aggregate))
    run.aggregates["run_info"] = redact({**_dict(aggregate.get("run_info")), "cli_command": command})
    del aggregate
    if records_file is None:
        run.cannot_give = list(AGGREGATES_ONLY) + list(NEVER_GIVEN)
        return run
    first = profiling[0] if profiling else "profiling"

    def rows() -> Iterator[RequestRecord]:
        """Each line's record in turn; the run's first send and last answer follow the lines read."""
        started, finished = math.inf, -math.inf
        try:
            for number, line in outside.lines(records_file, MAX_LINE_BYTES):
                if not line.strip():
                    continue
                record = _aiperf_record(line, number, records_file, phases, first)
                started = min(started, record.started_at_unix)
                finished = max(finished, record.started_at_unix + (record.e2e_s or 0))
                run.started_unix, run.finished_unix = started, finished
                yield record
        except outside.OutsideError as exc:
            raise ForeignError(str(exc)) from None
        except OSError as exc:
            raise ForeignError(f"{records_file}: cannot read it ({exc.strerror or exc})") from None

    run.rows, run.per_request = rows, True
    run.cannot_give = list(NEVER_GIVEN)
    try:
        outside.regular(records_file)  # refused now, not once an import has begun
    except outside.OutsideError as exc:
        raise ForeignError(str(exc)) from None
    except OSError as exc:
        raise ForeignError(f"{records_file}: cannot read it ({exc.strerror or exc})") from None
    return run


# ---- GuideLLM ----------------------------------------------------------------------------------------------------
GUIDELLM_VERSIONS = ("0.8",)
GUIDELLM_FILE_VERSIONS = (2,)  # benchmarks.json's metadata.version
GUIDELLM_STATUS = {"successful": STATUS_OK, "errored": STATUS_FAILED, "incomplete": STATUS_FAILED}
# GuideLLM's per-request metric -> ours; its inter_token_latency is (last token − first token) ÷ (tokens − 1), our
# tpot_s; it keeps no single gap, so our itl_s stays empty
GUIDELLM_AGGREGATES = {"time_to_first_token_ms": "ttft_s", "time_to_first_output_token_ms": "ttfo_s",
                       "inter_token_latency_ms": "tpot_s", "request_latency": "e2e_s"}


def _guidellm_task(strategy: Mapping[str, Any]) -> tuple[str, int]:
    """(task name, concurrency) of a benchmark's strategy: 'synchronous', 'concurrent@8', 'constant@2.5/s' …"""
    kind = str(strategy.get("type_") or "unknown")[:60]
    streams, rate = finite(strategy.get("streams")), finite(strategy.get("rate"))
    name = f"{kind}@{streams:g}" if streams else f"{kind}@{rate:g}/s" if rate else kind
    limit = finite(strategy.get("max_concurrency")) or streams or 1
    return clean_text(name), int(limit) if 1 <= limit <= 10**9 else 1


def _guidellm_record(item: Any, status: str, where: str, task: str, concurrency: int, index: int) -> RequestRecord:
    if not isinstance(item, dict) or not isinstance(item.get("info"), dict):
        raise ForeignError(f"{where}: not a GuideLLM request record (no 'info')")
    timings = item["info"].get("timings") or {}
    if not isinstance(timings, dict):
        raise ForeignError(f"{where}: 'info.timings' is not an object")
    start = _stamp(timings.get("request_start"), f"{where} request_start")
    first = _num(timings.get("first_token_iteration"), f"{where} first_token_iteration")
    last = _num(timings.get("last_token_iteration"), f"{where} last_token_iteration")
    ms = {ours: _num(item.get(theirs), f"{where} {theirs}") for theirs, ours in GUIDELLM_AGGREGATES.items()}
    ok = status == STATUS_OK
    error = item["info"].get("error")
    kept = {k: v for k, v in item.items() if k not in ("output", "reasoning_output", "request_args", "info",
                                                         *GUIDELLM_AGGREGATES)}
    kept["info"] = {k: v for k, v in item["info"].items() if k != "traceback"}
    record = _row("guidellm", task, index, concurrency, status=status,
                  error_kind="" if ok else ("tool_reported_error" if error else "incomplete"),
                  error_message="" if ok else str(error or "GuideLLM marked it incomplete").strip()[:300],
                  started_at_unix=start or 0.0, start_ns=int(start * 1e9) if start else 0,
                  ttft_s=ms["ttft_s"] / 1e3 if ok and ms["ttft_s"] is not None else None,
                  ttfo_s=ms["ttfo_s"] / 1e3 if ok and ms["ttfo_s"] is not None else None,
                  e2e_s=ms["e2e_s"] if ok else None,
                  prompt_tokens=_count(item.get("prompt_tokens"), f"{where} prompt_tokens"),
                  cached_tokens=_count(item.get("cached_tokens"), f"{where} cached_tokens"),
                  completion_tokens=_count(item.get("output_tokens"), f"{where} output_tokens"),
                  client_deltas=_count(timings.get("token_iterations"), f"{where} token_iterations") or 0,
                  client_chunks=_count(timings.get("request_iterations"), f"{where} request_iterations") or 0,
                  response_text=str(item.get("output") or ""), reasoning_text=str(item.get("reasoning_output") or ""),
                  extra=kept)
    _finish(record, "guidellm")
    if ok and first is not None and last is not None:  # our TPOT from its first and last token instants
        decode = RequestRecord(completion_tokens=record.completion_tokens, itl_s=[last - first])
        compute_rates(decode)
        record.tpot_s, record.decode_tps = decode.tpot_s, decode.decode_tps
    return record


def _guidellm_figures(metrics: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    out = {}
    for theirs, ours in GUIDELLM_AGGREGATES.items():
        entry = _dict(_dict(metrics.get(theirs)).get("successful"))
        if finite(entry.get("mean")) is None:
            continue
        scale = 1e3 if theirs.endswith("_ms") else 1.0
        pct = _dict(entry.get("percentiles"))
        out[ours] = {k: number / scale for k, v in (("mean", entry.get("mean")), ("sd", entry.get("std_dev")),
                                                    ("p50", entry.get("median")), ("p90", pct.get("p90")),
                                                    ("p99", pct.get("p99"))) if (number := finite(v)) is not None}
        out[ours]["count"] = float(_whole(entry.get("count")))
    return out


def read_guidellm(path: Path) -> ForeignRun:
    """GuideLLM's benchmarks.json (`--output kind=json`): one benchmark per strategy it ran, each with its requests
    (successful, errored, incomplete) and their timings on the wall clock (time.time()). Its version is
    metadata.guidellm_version; the file keeps the run's whole configuration (config.spec), not its command line."""
    path = Path(path / "benchmarks.json" if Path(path).is_dir() else path)
    data = _json(path)
    meta = data.get("metadata") if isinstance(data, dict) else None
    version = str((meta or {}).get("guidellm_version") or "")
    if not isinstance(meta, dict) or ".".join(version.split(".")[:2]) not in GUIDELLM_VERSIONS \
            or meta.get("version") not in GUIDELLM_FILE_VERSIONS:
        raise ForeignError(f"{path}: GuideLLM {version or 'version unknown'}, file format "
                           f"{(meta or {}).get('version', 'unknown')} (this reader knows GuideLLM "
                           f"{', '.join(v + '.x' for v in GUIDELLM_VERSIONS)}, format "
                           f"{', '.join(map(str, GUIDELLM_FILE_VERSIONS))})")
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        raise ForeignError(f"{path}: no benchmarks in it")
    spec = _dict(_dict(data.get("config")).get("spec"))
    run = ForeignRun(tool="guidellm", version=clean_text(version), command="", files=[path],
                     model=clean_text(str(_dict(spec.get("backend")).get("model") or "")),
                     aggregates=redact({"config": spec, "benchmarks": [
                         {"strategy": _dict(b.get("config")).get("strategy"), "duration": b.get("duration"),
                          "metrics": {k: (v or {}).get("successful") if isinstance(v, dict) else v
                                      for k, v in _dict(b.get("metrics")).items()
                                      if k in (*GUIDELLM_AGGREGATES, "request_totals", "requests_per_second",
                                               "output_tokens_per_second")}} for b in benchmarks
                         if isinstance(b, dict)]}))
    del data, spec
    groups = []  # (benchmark number, task, concurrency, group, status, its items)
    for number, bench in enumerate(benchmarks):
        if not isinstance(bench, dict) or not isinstance(bench.get("requests"), dict):
            raise ForeignError(f"{path}: benchmark {number} has no 'requests'")
        task, concurrency = _guidellm_task(_dict(_dict(bench.get("config")).get("strategy")))
        for group, status in GUIDELLM_STATUS.items():
            items = bench["requests"].get(group) or []
            if not isinstance(items, list):
                raise ForeignError(f"{path}: benchmark {number} requests.{group} is not a list")
            groups.append((number, task, concurrency, group, status, items))
        if number == 0:
            run.figures = _guidellm_figures(_dict(bench.get("metrics")))

    def rows() -> Iterator[RequestRecord]:
        index, last = 0, -1
        for number, task, concurrency, group, status, items in groups:
            index = 0 if number != last else index
            last = number
            for i, item in enumerate(items):
                yield _guidellm_record(item, status, f"{path}: benchmark {number} {group} request {i}", task,
                                       concurrency, index)
                index += 1

    run.rows, run.per_request = rows, any(items for *_, items in groups)
    starts = [_stamp(b["start_time"], f"{path}: benchmark {i} start_time") for i, b in enumerate(benchmarks)
              if isinstance(b.get("start_time"), (int, float))]
    ends = [_stamp(b["end_time"], f"{path}: benchmark {i} end_time") for i, b in enumerate(benchmarks)
            if isinstance(b.get("end_time"), (int, float))]
    run.started_unix, run.finished_unix = (min(starts) if starts else None), (max(ends) if ends else None)
    gap = "itl_s (GuideLLM keeps each request's first and last token instants, not each inter-token gap)"
    run.cannot_give = ([gap] if run.per_request else list(AGGREGATES_ONLY)) + list(NEVER_GIVEN)
    if len(benchmarks) > 1:
        run.figures = {}  # one set of aggregates per strategy: the rows carry them, no single set stands for all
    return run


READERS: dict[str, Callable[[Path], ForeignRun]] = {"aiperf": read_aiperf, "guidellm": read_guidellm,
                                                    "vllm-bench": read_vllm}


def _check_figures(run: ForeignRun) -> None:
    """The tool's own aggregates held to the plausibility rule rows are held to (a mean TTFT of −5 s is none)."""
    where = str(run.files[0]) if run.files else run.tool
    for metric, figures in run.figures.items():
        for stat, value in figures.items():
            if stat != "count":
                plausible.check_value(metric, value, f"{where}: the tool's {stat}", ForeignError)
    for stamp in (run.started_unix, run.finished_unix):
        if stamp is not None:
            plausible.check_value("started_at_unix", stamp, f"{where}: the run's start or end", ForeignError)


def read(tool: str, path: str | Path) -> ForeignRun:
    """The ForeignRun of `tool`'s results at `path` (ForeignError: one line naming the file and the record)."""
    if tool not in READERS:
        raise ForeignError(f"unknown tool {tool!r} (known: {', '.join(TOOLS)})")
    if not Path(path).exists():
        raise ForeignError(f"{path}: no such file or folder")
    run = READERS[tool](Path(path))
    _check_figures(run)
    return run
