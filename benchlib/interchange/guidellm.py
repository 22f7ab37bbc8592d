"""GuideLLM's benchmarks.json (`--output kind=json`) as a ForeignRun (benchlib.interchange.foreign)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping

from benchlib.interchange.foreign import (
    AGGREGATES_ONLY,
    NEVER_GIVEN,
    ForeignError,
    ForeignRun,
    as_dict,
    finish,
    head,
    json_file,
    row,
    to_count,
    to_number,
    to_stamp,
    whole,
)
from benchlib.measure.client.timing import compute_rates, finite
from benchlib.records.rows import STATUS_FAILED, STATUS_OK, RequestRecord
from benchlib.records.secrets import clean_text, redact

# ---- GuideLLM ----------------------------------------------------------------------------------------------------
GUIDELLM_VERSIONS = ("0.8",)
GUIDELLM_FILE_VERSIONS = (2,)  # benchmarks.json's metadata.version
GUIDELLM_STATUS = {"successful": STATUS_OK, "errored": STATUS_FAILED, "incomplete": STATUS_FAILED}
# GuideLLM's per-request metric -> ours; its inter_token_latency is (last token − first token) ÷ (tokens − 1), our
# tpot_s; it keeps no single gap, so our itl_s stays empty
GUIDELLM_AGGREGATES = {"time_to_first_token_ms": "ttft_s", "time_to_first_output_token_ms": "ttfo_s",
                       "inter_token_latency_ms": "tpot_s", "request_latency": "e2e_s"}

TOOL = "guidellm"
FILES = "GuideLLM benchmarks.json (--output kind=json)"


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
    start = to_stamp(timings.get("request_start"), f"{where} request_start")
    first = to_number(timings.get("first_token_iteration"), f"{where} first_token_iteration")
    last = to_number(timings.get("last_token_iteration"), f"{where} last_token_iteration")
    ms = {ours: to_number(item.get(theirs), f"{where} {theirs}") for theirs, ours in GUIDELLM_AGGREGATES.items()}
    ok = status == STATUS_OK
    error = item["info"].get("error")
    kept = {k: v for k, v in item.items() if k not in ("output", "reasoning_output", "request_args", "info",
                                                         *GUIDELLM_AGGREGATES)}
    kept["info"] = {k: v for k, v in item["info"].items() if k != "traceback"}
    record = row("guidellm", task, index, concurrency, status=status,
                  error_kind="" if ok else ("tool_reported_error" if error else "incomplete"),
                  error_message="" if ok else str(error or "GuideLLM marked it incomplete").strip()[:300],
                  started_at_unix=start or 0.0, start_ns=int(start * 1e9) if start else 0,
                  ttft_s=ms["ttft_s"] / 1e3 if ok and ms["ttft_s"] is not None else None,
                  ttfo_s=ms["ttfo_s"] / 1e3 if ok and ms["ttfo_s"] is not None else None,
                  e2e_s=ms["e2e_s"] if ok else None,
                  prompt_tokens=to_count(item.get("prompt_tokens"), f"{where} prompt_tokens"),
                  cached_tokens=to_count(item.get("cached_tokens"), f"{where} cached_tokens"),
                  completion_tokens=to_count(item.get("output_tokens"), f"{where} output_tokens"),
                  client_deltas=to_count(timings.get("token_iterations"), f"{where} token_iterations") or 0,
                  client_chunks=to_count(timings.get("request_iterations"), f"{where} request_iterations") or 0,
                  response_text=str(item.get("output") or ""), reasoning_text=str(item.get("reasoning_output") or ""),
                  extra=kept)
    finish(record, "guidellm")
    if ok and first is not None and last is not None:  # our TPOT from its first and last token instants
        decode = RequestRecord(completion_tokens=record.completion_tokens, itl_s=[last - first])
        compute_rates(decode)
        record.tpot_s, record.decode_tps = decode.tpot_s, decode.decode_tps
    return record


def _guidellm_figures(metrics: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    out = {}
    for theirs, ours in GUIDELLM_AGGREGATES.items():
        entry = as_dict(as_dict(metrics.get(theirs)).get("successful"))
        if finite(entry.get("mean")) is None:
            continue
        scale = 1e3 if theirs.endswith("_ms") else 1.0
        pct = as_dict(entry.get("percentiles"))
        out[ours] = {k: number / scale for k, v in (("mean", entry.get("mean")), ("sd", entry.get("std_dev")),
                                                    ("p50", entry.get("median")), ("p90", pct.get("p90")),
                                                    ("p99", pct.get("p99"))) if (number := finite(v)) is not None}
        out[ours]["count"] = float(whole(entry.get("count")))
    return out


def read(path: Path) -> ForeignRun:
    """GuideLLM's benchmarks.json (`--output kind=json`): one benchmark per strategy it ran, each with its requests
    (successful, errored, incomplete) and their timings on the wall clock (time.time()). Its version is
    metadata.guidellm_version; the file keeps the run's whole configuration (config.spec), not its command line."""
    path = Path(path / "benchmarks.json" if Path(path).is_dir() else path)
    data = json_file(path)
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
    spec = as_dict(as_dict(data.get("config")).get("spec"))
    run = ForeignRun(tool="guidellm", version=clean_text(version), command="", files=[path],
                     model=clean_text(str(as_dict(spec.get("backend")).get("model") or "")),
                     aggregates=redact({"config": spec, "benchmarks": [
                         {"strategy": as_dict(b.get("config")).get("strategy"), "duration": b.get("duration"),
                          "metrics": {k: (v or {}).get("successful") if isinstance(v, dict) else v
                                      for k, v in as_dict(b.get("metrics")).items()
                                      if k in (*GUIDELLM_AGGREGATES, "request_totals", "requests_per_second",
                                               "output_tokens_per_second")}} for b in benchmarks
                         if isinstance(b, dict)]}))
    del data, spec
    groups = []  # (benchmark number, task, concurrency, group, status, its items)
    for number, bench in enumerate(benchmarks):
        if not isinstance(bench, dict) or not isinstance(bench.get("requests"), dict):
            raise ForeignError(f"{path}: benchmark {number} has no 'requests'")
        task, concurrency = _guidellm_task(as_dict(as_dict(bench.get("config")).get("strategy")))
        for group, status in GUIDELLM_STATUS.items():
            items = bench["requests"].get(group) or []
            if not isinstance(items, list):
                raise ForeignError(f"{path}: benchmark {number} requests.{group} is not a list")
            groups.append((number, task, concurrency, group, status, items))
        if number == 0:
            run.figures = _guidellm_figures(as_dict(bench.get("metrics")))

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
    starts = [to_stamp(b["start_time"], f"{path}: benchmark {i} start_time") for i, b in enumerate(benchmarks)
              if isinstance(b.get("start_time"), (int, float))]
    ends = [to_stamp(b["end_time"], f"{path}: benchmark {i} end_time") for i, b in enumerate(benchmarks)
            if isinstance(b.get("end_time"), (int, float))]
    run.started_unix, run.finished_unix = (min(starts) if starts else None), (max(ends) if ends else None)
    gap = "itl_s (GuideLLM keeps each request's first and last token instants, not each inter-token gap)"
    run.cannot_give = ([gap] if run.per_request else list(AGGREGATES_ONLY)) + list(NEVER_GIVEN)
    if len(benchmarks) > 1:
        run.figures = {}  # one set of aggregates per strategy: the rows carry them, no single set stands for all
    return run


def looks_like(path: Path) -> bool:
    """GuideLLM's benchmarks.json, or a folder holding it: its metadata, first in the file, names guidellm_version."""
    return (path / "benchmarks.json").is_file() if path.is_dir() else '"guidellm_version"' in head(path)
