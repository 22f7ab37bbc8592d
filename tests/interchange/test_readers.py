"""Other tools' files as our rows (benchlib.interchange.readers), read from files the real tools wrote
(tests/fixtures/<tool>/README.md gives the command that made each): every imported figure is the tool's own,
on its own clock, so the medians of the rows equal the medians the tool itself reported; a malformed record or
an unknown version is one line naming the file and the record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from benchlib.interchange import readers
from benchlib.measure.pacing import event_loop
from benchlib.measure.selfcheck import calibration
from benchlib.records.rows import STATUS_FAILED, STATUS_OK
from tests.fakes.servers import DEFAULTS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
AIPERF, GUIDELLM, VLLM = FIXTURES / "aiperf", FIXTURES / "guidellm" / "benchmarks.json", \
    FIXTURES / "vllm-bench" / "result.json"


def measured(run: readers.ForeignRun) -> list:
    return [r for r in run.records if not r.is_warmup and r.status == STATUS_OK]


def median(values) -> float:
    return float(np.median([v for v in values if v is not None]))


# ---- AIPerf -----------------------------------------------------------------------------------------------------
def test_aiperf_rows_give_aiperfs_own_ttft_itl_and_end_to_end():
    run = readers.read("aiperf", AIPERF)
    aggregate = json.loads((AIPERF / "profile_export_aiperf.json").read_text())
    lines = [json.loads(line) for line in (AIPERF / "profile_export.jsonl").read_text().splitlines()]
    assert (run.tool, run.version) == ("aiperf", "0.13.0")
    assert run.command.startswith("aiperf profile --model fake-model --url http://127.0.0.1:18431 ")  # re-joined from its shell words
    assert len(run.records) == len(lines) == 32
    assert sum(r.is_warmup for r in run.records) == 2 and len(measured(run)) == 30
    ok = measured(run)
    # the medians of the rows are AIPerf's own p50s (ms in its file, seconds in ours)
    assert median(r.ttft_s for r in ok) == pytest.approx(aggregate["time_to_first_token"]["p50"] / 1e3, rel=1e-9)
    assert median(r.e2e_s for r in ok) == pytest.approx(aggregate["request_latency"]["p50"] / 1e3, rel=1e-9)
    # ITL: each request's chunk gaps are its inter_chunk_latency, in seconds, in order
    first = next(line for line in lines if line["metadata"]["phase_kind"] == "profiling")
    row = next(r for r in run.records if r.request_key.endswith(first["metadata"]["x_request_id"]))
    assert row.itl_s == pytest.approx([v / 1e3 for v in first["metrics"]["inter_chunk_latency"]["value"]], rel=1e-12)
    # our TPOT is t_last − t_first over tokens − 1: the chunk gaps' sum over AIPerf's output length − 1
    assert row.tpot_s == pytest.approx(sum(row.itl_s) / (row.completion_tokens - 1), rel=1e-12)
    assert row.completion_tokens == first["metrics"]["output_sequence_length"]["value"] == 16
    assert row.token_source == "aiperf" and row.extra["metrics"]["usage_prompt_tokens"]["value"] == 12
    # on AIPerf's clock: its wall-clock start stamp, unchanged
    assert row.start_ns == first["metadata"]["request_start_ns"]
    assert row.started_at_unix == pytest.approx(first["metadata"]["request_start_ns"] / 1e9)


def test_aiperf_aggregate_alone_is_kept_as_aggregates_and_says_what_it_cannot_give(tmp_path):
    shutil.copy(AIPERF / "profile_export_aiperf.json", tmp_path)
    run = readers.read("aiperf", tmp_path)
    assert run.records == [] and run.totals == (30, 0)
    assert run.figures["ttft_s"]["p50"] == pytest.approx(
        json.loads((AIPERF / "profile_export_aiperf.json").read_text())["time_to_first_token"]["p50"] / 1e3)
    assert any(line.startswith("per-request rows") for line in run.cannot_give)


def _write_jsonl(tmp_path: Path, edit) -> Path:
    shutil.copy(AIPERF / "profile_export_aiperf.json", tmp_path)
    lines = (AIPERF / "profile_export.jsonl").read_text().splitlines()
    lines[4] = edit(lines[4])
    (tmp_path / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


@pytest.mark.parametrize("edit,says", [
    (lambda line: line[:40], "record 5: not JSON"),
    (lambda line: json.dumps({**json.loads(line), "metrics": {**json.loads(line)["metrics"],
                                                               "time_to_first_token": {"value": "x", "unit": "ms"}}}),
     "record 5 time_to_first_token: 'x' is not a number"),
    (lambda line: json.dumps({"metrics": {}}), "record 5: not an AIPerf metric record"),
])
def test_aiperf_malformed_record_is_one_line_naming_file_and_record(tmp_path, edit, says):
    folder = _write_jsonl(tmp_path, edit)
    with pytest.raises(readers.ForeignError) as caught:
        readers.read("aiperf", folder).records  # records are read as they are streamed
    message = str(caught.value)
    assert "\n" not in message and str(folder / "profile_export.jsonl") in message and says in message


def test_aiperf_unknown_version_is_refused_by_name(tmp_path):
    shutil.copy(AIPERF / "profile_export.jsonl", tmp_path)
    data = json.loads((AIPERF / "profile_export_aiperf.json").read_text())
    data["aiperf_version"] = "0.99.1"
    (tmp_path / "profile_export_aiperf.json").write_text(json.dumps(data))
    with pytest.raises(readers.ForeignError, match=r"profile_export_aiperf.json: AIPerf version 0\.99\.1"):
        readers.read("aiperf", tmp_path)


# ---- GuideLLM ---------------------------------------------------------------------------------------------------
def test_guidellm_rows_give_guidellms_own_ttft_itl_and_end_to_end():
    run = readers.read("guidellm", GUIDELLM)
    data = json.loads(GUIDELLM.read_text())
    metrics = data["benchmarks"][0]["metrics"]
    requests = data["benchmarks"][0]["requests"]["successful"]
    assert (run.tool, run.version) == ("guidellm", "0.8.1") and len(run.records) == len(requests) == 20
    ok = measured(run)
    # GuideLLM's mean is the rows' mean; its median is a sample of the middle (numpy's averages the middle two)
    for ours, theirs, scale in (("ttft_s", "time_to_first_token_ms", 1e3), ("e2e_s", "request_latency", 1.0)):
        values = sorted(getattr(r, ours) for r in ok)
        stats = metrics[theirs]["successful"]
        assert float(np.mean(values)) == pytest.approx(stats["mean"] / scale, rel=1e-9)
        assert values[len(values) // 2 - 1] <= stats["median"] / scale * (1 + 1e-9)
        assert stats["median"] / scale <= values[len(values) // 2] * (1 + 1e-9)
    # GuideLLM's per-request ITL is (last token − first token) ÷ (tokens − 1): our TPOT, from its own instants
    for row, item in zip(ok, requests):
        assert row.tpot_s == pytest.approx(item["inter_token_latency_ms"] / 1e3, rel=1e-6)
        assert row.started_at_unix == item["info"]["timings"]["request_start"]
    assert ok[0].itl_s == [] and any(line.startswith("itl_s") for line in run.cannot_give)
    assert (ok[0].prompt_tokens, ok[0].completion_tokens, ok[0].task, ok[0].concurrency) == (12, 16, "synchronous", 1)


def test_guidellm_unknown_version_and_malformed_request(tmp_path):
    data = json.loads(GUIDELLM.read_text())
    data["metadata"]["guidellm_version"] = "0.9.0"
    (tmp_path / "new.json").write_text(json.dumps(data))
    with pytest.raises(readers.ForeignError, match=r"new.json: GuideLLM 0\.9\.0"):
        readers.read("guidellm", tmp_path / "new.json")
    data = json.loads(GUIDELLM.read_text())
    data["benchmarks"][0]["requests"]["successful"][3]["time_to_first_token_ms"] = "fast"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(readers.ForeignError, match=r"bad.json: benchmark 0 successful request 3 "
                                                   r"time_to_first_token_ms: 'fast' is not a number"):
        readers.read("guidellm", tmp_path / "bad.json").records


# ---- vLLM bench serve -------------------------------------------------------------------------------------------
def test_vllm_rows_give_vllms_own_ttft_itl_and_end_to_end():
    run = readers.read("vllm-bench", VLLM)
    data = json.loads(VLLM.read_text())
    ok = measured(run)
    assert len(run.records) == len(data["ttfts"]) and len(ok) == data["completed"]
    assert median(r.ttft_s for r in ok) * 1e3 == pytest.approx(data["median_ttft_ms"], rel=1e-6)
    assert [r.e2e_s for r in ok] == data["latencies"]  # its end-to-end per request (e2el), unchanged
    assert [r.start_ns for r in ok] == [int(t * 1e9) for t in data["start_times"]]  # on its perf_counter
    assert all(r.started_at_unix == 0 for r in ok)  # no wall clock in its file: left unknown, not invented
    gaps = [g for r in ok for g in r.itl_s]
    assert float(np.median(gaps)) * 1e3 == pytest.approx(data["median_itl_ms"], rel=1e-6)
    assert [r.completion_tokens for r in ok] == [n for n, e in zip(data["output_lens"], data["errors"]) if not e]


def test_vllm_without_detail_is_aggregates_and_a_foreign_file_is_refused(tmp_path):
    data = json.loads(VLLM.read_text())
    for key in ("ttfts", "itls", "input_lens", "output_lens", "errors", "generated_texts", "start_times", "latencies"):
        data.pop(key, None)
    (tmp_path / "summary.json").write_text(json.dumps(data))
    run = readers.read("vllm-bench", tmp_path / "summary.json")
    assert run.records == [] and run.figures["ttft_s"]["p50"] == pytest.approx(data["median_ttft_ms"] / 1e3)
    (tmp_path / "other.json").write_text(json.dumps({"results": []}))
    with pytest.raises(readers.ForeignError, match=r"other.json: not a vllm bench serve result of a known version"):
        readers.read("vllm-bench", tmp_path / "other.json")


def test_a_tool_reported_failure_is_a_failed_row_with_its_reason(tmp_path):
    """vLLM records a failed request as an error text beside ttft 0 and no gaps (RequestFuncOutput's defaults)."""
    data = json.loads(VLLM.read_text())
    data["errors"][2] = "Traceback ...\nClientPayloadError: Response payload"
    data["ttfts"][2], data["itls"][2] = 0.0, []
    (tmp_path / "failed.json").write_text(json.dumps(data))
    rows = readers.read("vllm-bench", tmp_path / "failed.json").records
    assert [r.status for r in rows].count(STATUS_FAILED) == 1
    assert (rows[2].status, rows[2].error_message, rows[2].ttft_s, rows[2].e2e_s) == \
        (STATUS_FAILED, "ClientPayloadError: Response payload", None, None)


# ---- beside our own client, on the same fake server ---------------------------------------------------------------
def test_both_tools_and_our_client_keep_to_the_fake_servers_schedule(params_for):
    """The fixtures were made against tests/fakes/servers.py at its defaults: no answer can start before its
    TTFT nor end before its last token is due, whoever measured it; and all count the same tokens (AIPerf its
    tokenizer's, GuideLLM the server's usage, ours the server's usage)."""
    params = params_for()
    ours = event_loop.run(calibration.drive(params.server, params.run, 1, [f"t{i}" for i in range(5)],
                                     lambda tag: [{"role": "user", "content": f"[{tag}] hello"}], 64))
    due_first, due_last = DEFAULTS["ttft"], DEFAULTS["ttft"] + (DEFAULTS["tokens"] - 1) * DEFAULTS["itl"]
    for rows in (measured(readers.read("aiperf", AIPERF)), measured(readers.read("guidellm", GUIDELLM)), ours):
        assert all(r.ttft_s >= due_first and r.e2e_s >= due_last for r in rows)
        assert {r.completion_tokens for r in rows} == {DEFAULTS["tokens"]}
