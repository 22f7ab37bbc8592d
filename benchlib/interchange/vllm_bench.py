"""vLLM's `vllm bench serve --save-result [--save-detailed]` JSON as a ForeignRun (benchlib.interchange.foreign)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping

from benchlib.interchange.foreign import (
    AGGREGATES_ONLY,
    NEVER_GIVEN,
    ForeignError,
    ForeignRun,
    finish,
    head,
    json_file,
    row,
    to_count,
    to_number,
    to_stamp,
)
from benchlib.measure.client.timing import finite
from benchlib.records.rows import STATUS_FAILED, STATUS_OK, RequestRecord
from benchlib.records.secrets import clean_text, redact

# ---- vLLM bench serve ---------------------------------------------------------------------------------------
VLLM_KEYS = ("duration", "completed", "total_input_tokens", "total_output_tokens")
VLLM_DETAIL = ("ttfts", "itls", "input_lens", "output_lens", "errors")
VLLM_AGGREGATES = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_s", "e2el": "e2e_s"}

TOOL = "vllm-bench"
FILES = "vllm bench serve result JSON (--save-result)"


def _vllm_figures(data: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    figures = {}
    for theirs, ours in VLLM_AGGREGATES.items():
        if f"mean_{theirs}_ms" not in data:
            continue
        figures[ours] = {stat: value / 1e3 for key, stat in (("mean", "mean"), ("std", "sd"), ("median", "p50"),
                                                             ("p90", "p90"), ("p99", "p99"))
                         if (value := finite(data.get(f"{key}_{theirs}_ms"))) is not None}
    return figures


def read(path: Path) -> ForeignRun:
    """`vllm bench serve --save-result --save-detailed` JSON (vllm/benchmarks/serve.py: its result dict, the lists
    `ttfts`, `itls`, `input_lens`, `output_lens`, `errors`, `generated_texts`, and in recent versions `latencies` and
    `start_times`). Without --save-detailed it holds aggregates only. Its file names no vLLM version unless the run
    was given `--metadata vllm_version=…` (such KEY=VALUE pairs land at the top of the file)."""
    path = Path(path)
    data = json_file(path)
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
                     totals=(int(to_count(data["completed"], f"{path}: completed") or 0),
                             int(to_count(data.get("failed", 0), f"{path}: failed") or 0)),
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
    itl_s = [to_number(v, f"{where} itls") for v in itl]
    ttft = to_number(lists["ttfts"][i], f"{where} ttfts")
    latency = to_number(lists["latencies"][i], f"{where} latencies") if lists["latencies"] else None
    start = to_stamp(lists["start_times"][i], f"{where} start_times") if lists["start_times"] else None
    queue = to_number(lists["queue_times"][i], f"{where} queue_times") if lists["queue_times"] else None
    failed = bool(error)
    lines = str(error).strip().splitlines() if failed else []
    record = row("vllm-bench", task, i, concurrency or 1,
                  status=STATUS_FAILED if failed else STATUS_OK,
                  error_kind="tool_reported_error" if failed else "",
                  error_message=lines[-1][:300] if lines else ("the tool reported an error" if failed else ""),
                  start_ns=int(start * 1e9) if start is not None else 0,
                  ttft_s=None if failed else ttft, itl_s=[] if failed else itl_s,
                  e2e_s=None if failed else (latency if latency is not None else
                                             (ttft or 0.0) + sum(itl_s) if ttft is not None else None),
                  prompt_tokens=(to_count(lists["input_lens"][i], f"{where} input_lens")
                                 if lists["input_lens"] else None),
                  completion_tokens=None if failed else
                  to_count(lists["output_lens"][i], f"{where} output_lens") if lists["output_lens"] else None,
                  client_deltas=0 if failed else len(itl_s) + 1, client_chunks=0 if failed else len(itl_s) + 1,
                  response_text=str(lists["generated_texts"][i] or "") if lists["generated_texts"] else "",
                  extra=({"queue_times": queue} if lists["queue_times"] else {}) | {"start_time_s": start})
    return finish(record, "vllm-bench")


def looks_like(path: Path) -> bool:
    """A JSON file whose opening names vllm bench serve's result fields (they come before its per-request lists)."""
    opening = head(path)
    return path.suffix == ".json" and all(f'"{key}"' in opening for key in VLLM_KEYS)
