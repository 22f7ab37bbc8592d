"""AIPerf's artifact folder (profile_export.jsonl with profile_export_aiperf.json beside it) as a ForeignRun
(benchlib.interchange.foreign)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterator, Mapping

from benchlib.interchange.foreign import (
    AGGREGATES_ONLY,
    MAX_LINE_BYTES,
    NEVER_GIVEN,
    ForeignError,
    ForeignRun,
    as_dict,
    as_list,
    finish,
    head,
    json_file,
    shown,
    to_count,
    to_number,
    whole,
)
from benchlib.measure.client.timing import finite
from benchlib.records import outside
from benchlib.records.plausible import MAX_STAMP_S
from benchlib.records.rows import STATUS_FAILED, STATUS_OK, RequestRecord, request_key
from benchlib.records.secrets import clean_text, redact, redact_command

# ---- AIPerf ----------------------------------------------------------------------------------------------------
AIPERF_RECORDS, AIPERF_AGGREGATE = "profile_export.jsonl", "profile_export_aiperf.json"
AIPERF_VERSIONS = ("0.13",)  # major.minor this reader was written against (their record and export models)
# AIPerf's metric (ms unless a count) -> our column
AIPERF_TIMES = {"time_to_first_token": "ttft_s", "time_to_first_output_token": "ttfo_s", "request_latency": "e2e_s"}
AIPERF_AGGREGATE_METRICS = {"time_to_first_token": "ttft_s", "time_to_first_output_token": "ttfo_s",
                            "request_latency": "e2e_s", "inter_token_latency": "tpot_s",
                            "inter_chunk_latency": "itl_s", "output_token_throughput_per_user": "decode_tps"}

TOOL = "aiperf"
FILES = "AIPerf artifact folder (profile_export.jsonl, profile_export_aiperf.json)"


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
    value = to_number(_aiperf_value(metrics, name, where), f"{where} {name}")
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
        raise ForeignError(f"{where} request_start_ns: {shown(start_ns)} is not a nanosecond stamp (>= 0 and at "
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
    itl_s = [to_number(g, f"{where} inter_chunk_latency") / scale for g in gaps or []]
    times = {ours: _aiperf_seconds(metrics, theirs, where) for theirs, ours in AIPERF_TIMES.items()}
    chunks = to_count(_aiperf_value(metrics, "http_req_chunks_received", where), f"{where} http_req_chunks_received")
    code = error.get("code") if error else None
    index = to_count(meta.get("session_num"), f"{where} session_num") or 0
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
        prompt_tokens=to_count(_aiperf_value(metrics, "input_sequence_length", where),
                               f"{where} input_sequence_length"),
        completion_tokens=to_count(_aiperf_value(metrics, "output_sequence_length", where),
                                 f"{where} output_sequence_length"),
        reasoning_tokens=to_count(_aiperf_value(metrics, "reasoning_token_count", where),
                                f"{where} reasoning_token_count"),
        client_deltas=len(itl_s) + 1 if times["ttft_s"] is not None else 0, client_chunks=chunks or 0, extra=kept)
    return finish(record, "aiperf")


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


def _aiperf_totals(aggregate: Mapping[str, Any]) -> tuple[int, int]:
    summary = aggregate.get("error_summary")
    errors = sum(whole(e.get("count")) for e in (summary if isinstance(summary, list) else [])
                 if isinstance(e, dict))
    count = aggregate.get("request_count")
    return whole(count.get("avg") if isinstance(count, dict) else 0), errors


def read(path: Path) -> ForeignRun:
    """An AIPerf artifact folder (or its profile_export.jsonl / profile_export_aiperf.json): the per-request
    records of the jsonl, and from the aggregate JSON the version (`aiperf_version`), the command line
    (`run_info.cli_command`), the concurrency of each phase and its own statistics. With the aggregate JSON alone
    (--export-level summary) the import keeps AIPerf's aggregates."""
    path = Path(path)
    records_file, aggregate_file = _aiperf_files(path)
    if aggregate_file is None:
        raise ForeignError(f"{path}: no {AIPERF_AGGREGATE} there, so the AIPerf version is unknown; import the "
                           f"artifact folder AIPerf wrote")
    aggregate = json_file(aggregate_file)
    version = str(aggregate.get("aiperf_version") or "") if isinstance(aggregate, dict) else ""
    if not version or ".".join(version.split(".")[:2]) not in AIPERF_VERSIONS:
        raise ForeignError(f"{aggregate_file}: AIPerf version {version or 'unknown'} (this reader knows "
                           f"{', '.join(v + '.x' for v in AIPERF_VERSIONS)}); its record format may differ")
    config = as_dict(aggregate.get("input_config"))
    declared = [p for p in as_list(config.get("phases")) if isinstance(p, dict)]
    phases = {clean_text(str(p.get("name"))): to_count(p.get("concurrency"), f"{aggregate_file}: phase concurrency")
              or 1 for p in declared}
    profiling = [clean_text(str(p.get("name"))) for p in declared if p.get("kind") != "warmup"]
    models = [m.get("name") for m in as_list(as_dict(config.get("models")).get("items")) if isinstance(m, dict)]
    command = redact_command(str(as_dict(aggregate.get("run_info")).get("cli_command") or ""))
    run = ForeignRun(tool="aiperf", version=clean_text(version), command=command,
                     aggregates=redact({k: v for k, v in aggregate.items() if k not in ("telemetry_data",
                                                                                        "run_info")}),
                     files=[f for f in (records_file, aggregate_file) if f],
                     model=clean_text(str(models[0] if models else "")),
                     figures=_aiperf_figures(aggregate), totals=_aiperf_totals(aggregate))
    run.aggregates["run_info"] = redact({**as_dict(aggregate.get("run_info")), "cli_command": command})
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


def looks_like(path: Path) -> bool:
    """An AIPerf artifact folder, or one of its two files, by their names."""
    return any(_aiperf_files(path)) if path.is_dir() else path.name in (AIPERF_RECORDS, AIPERF_AGGREGATE) \
        or '"aiperf_version"' in head(path)
