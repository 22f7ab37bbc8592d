"""Aggregation over a small synthetic requests frame with warm-up, failed and unsupported rows."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from benchlib.analysis import decisions, deployments, frontier, stats, task_stats
from benchlib.published import reference
from benchlib.records.rows import COLUMNS, RequestLog, RequestRecord


def _rec(task: str, modality: str = "text", status: str = "ok", tps: float | None = None, ttft: float | None = None,
         e2e: float | None = None, passed: bool | None = None, warmup: bool = False, truncated: bool = False,
         error_kind: str = "", tokens: int | None = None, model: str = "m1", repeat: int = 0,
         suite: str = "", score: float | None = None) -> RequestRecord:
    return RequestRecord(run_id="r", host="h", model=model, suite=suite or modality, modality=modality, task=task,
                         repeat=repeat, is_warmup=warmup, request_key=f"{model}/{task}/{repeat}/{warmup}/{status}",
                         status=status, error_kind=error_kind, decode_tps=tps, ttft_s=ttft, e2e_s=e2e,
                         prefill_tps=None if tps is None else tps * 10, passed=passed, truncated=truncated,
                         completion_tokens=tokens, score=score)


def _records(model: str = "m1", scale: float = 1.0) -> list[RequestRecord]:
    return [
        # basic_qa: a warm-up that must not count, three ok (one unscored, one truncated), one timeout
        _rec("basic_qa", tps=999.0, ttft=9.0, e2e=9.0, passed=True, warmup=True, tokens=5, model=model),
        _rec("basic_qa", tps=10.0 * scale, ttft=0.1, e2e=1.0, passed=True, tokens=10, model=model, repeat=1),
        _rec("basic_qa", tps=20.0 * scale, ttft=0.2, e2e=2.0, passed=False, truncated=True, tokens=20, model=model,
             repeat=2),
        _rec("basic_qa", tps=30.0 * scale, ttft=0.3, e2e=3.0, passed=None, tokens=30, model=model, repeat=3),
        _rec("basic_qa", status="failed", error_kind="timeout", model=model, repeat=4),
        # transcription: the deployment has no audio input
        _rec("transcription", modality="audio", status="unsupported", model=model, repeat=1),
        _rec("transcription", modality="audio", status="unsupported", model=model, repeat=2),
        # reasoning: every request failed
        _rec("reasoning", status="failed", error_kind="http_500", model=model, repeat=1),
        _rec("reasoning", status="failed", error_kind="http_500", model=model, repeat=2),
    ]


@pytest.fixture
def requests_frame() -> pd.DataFrame:
    return pd.DataFrame([r.to_row() for r in _records()])


def test_summary_excludes_warmup_and_failed_rows(requests_frame):
    summary = task_stats.summarize_requests(requests_frame).set_index("task")
    qa = summary.loc["basic_qa"]
    assert (qa["n_requests"], qa["n_ok"], qa["n_failed"], qa["n_warmup"]) == (4, 3, 1, 1)
    assert qa["decode_tps_count"] == 3
    assert qa["decode_tps_mean"] == pytest.approx(20.0)
    assert qa["decode_tps_sd"] == pytest.approx(10.0)
    # three samples bound no percentile on both sides (the median needs 6): none is shown, and the note says so
    assert all(math.isnan(qa[f"decode_tps_{p}{part}"])
               for p in ("p50", "p90", "p95", "p99") for part in ("", "_lo", "_hi"))
    assert qa["percentile_note"] == ("n=3 too small for p50 (needs 6), p90 (needs 36), p95 (needs 72), "
                                     "p99 (needs 368)")
    assert qa["decode_tps_mean_lo"] <= 20.0 <= qa["decode_tps_mean_hi"] and qa["decode_tps_mean_hi"] <= 30.0
    assert qa["decode_tps_mean_lo"] >= 10.0
    assert (qa["accuracy_lo"], qa["accuracy_hi"]) == pytest.approx((0.0945, 0.9055), abs=1e-3)  # Wilson, 1 of 2
    assert qa["ttft_s_mean"] == pytest.approx(0.2) and math.isnan(qa["e2e_s_p50"])
    assert qa["prefill_tps_mean"] == pytest.approx(200.0)
    assert (qa["n_scored"], qa["n_passed"], qa["accuracy"]) == (2, 1, 0.5)
    assert qa["n_truncated"] == 1
    assert qa["error_rate"] == pytest.approx(0.25)
    assert qa["failures"] == "timeout: 1"
    assert qa["completion_tokens_sum"] == 60
    assert bool(qa["valid"]) is True


def test_unsupported_and_all_failed_tasks(requests_frame):
    summary = task_stats.summarize_requests(requests_frame, max_error_rate=0.2).set_index("task")
    audio = summary.loc["transcription"]
    assert (audio["n_ok"], audio["n_unsupported"], audio["n_failed"]) == (0, 2, 0)
    assert math.isnan(audio["error_rate"]) and math.isnan(audio["decode_tps_mean"])
    assert not audio["valid"] and audio["note"] == "not supported by this deployment"
    failed = summary.loc["reasoning"]
    assert (failed["n_failed"], failed["error_rate"], failed["failures"]) == (2, 1.0, "http_500: 2")
    assert math.isnan(failed["decode_tps_mean"]) and math.isnan(failed["accuracy"])
    assert not failed["valid"] and failed["note"] == "every request failed"
    qa = summary.loc["basic_qa"]
    assert not qa["valid"] and qa["note"] == "error rate 25% above 20%"


def test_empty_frames():
    for frame in (pd.DataFrame(), pd.DataFrame(columns=COLUMNS)):
        summary = task_stats.summarize_requests(frame)
        assert summary.empty and {"n_ok", "decode_tps_p99", "error_rate", "valid"} <= set(summary.columns)
    assert task_stats.join_windows(task_stats.summarize_requests(pd.DataFrame()), pd.DataFrame()).empty


def test_csv_roundtrip_gives_the_same_summary(requests_frame, tmp_path):
    log = RequestLog(tmp_path / "requests.csv")
    log.append_many(_records())
    from_disk = task_stats.summarize_requests(log.read())
    in_memory = task_stats.summarize_requests(requests_frame)
    pd.testing.assert_frame_equal(from_disk, in_memory, check_dtype=False)


def test_join_windows_combines_task_windows(requests_frame):
    summary = task_stats.summarize_requests(requests_frame)
    windows = pd.DataFrame([
        {"window": "idle", "kind": "idle", "duration_s": 2.0, "energy_j": 20.0, "avg_power_w": 10.0},
        {"window": "basic_qa", "kind": "task", "duration_s": 4.0, "energy_j": 400.0, "avg_power_w": 100.0,
         "peak_power_w": 150.0, "temp_peak_c": 60.0, "mem_peak_bytes": 8e9},
        {"window": "basic_qa", "kind": "task", "duration_s": 1.0, "energy_j": 200.0, "avg_power_w": 200.0,
         "peak_power_w": 250.0, "temp_peak_c": 65.0, "mem_peak_bytes": 9e9},
    ])
    joined = task_stats.join_windows(summary, windows).set_index("task")
    qa = joined.loc["basic_qa"]
    assert qa["energy_j"] == 600.0 and qa["duration_s"] == 5.0
    assert qa["avg_power_w"] == pytest.approx(120.0)  # energy ÷ duration, not a mean of window means
    assert (qa["peak_power_w"], qa["temp_peak_c"], qa["mem_peak_gb"]) == (250.0, 65.0, 9.0)
    assert qa["tokens_per_joule"] == pytest.approx(60 / 600)
    assert qa["tps_per_w"] == pytest.approx(20.0 / 120.0)
    assert math.isnan(joined.loc["reasoning", "energy_j"])  # no window: telemetry columns stay empty
    assert len(joined) == len(summary)


def test_join_windows_keeps_window_efficiency_when_single(requests_frame):
    summary = task_stats.summarize_requests(requests_frame)
    windows = pd.DataFrame([{"window": "basic_qa", "kind": "task", "energy_j": 100.0, "avg_power_w": 50.0,
                             "tokens_per_joule": 0.55, "tps_per_w": 0.4, "decode_tps_mean": 1.0}])
    qa = task_stats.join_windows(summary, windows).set_index("task").loc["basic_qa"]
    assert (qa["tokens_per_joule"], qa["tps_per_w"]) == (0.55, 0.4)
    assert qa["decode_tps_mean"] == pytest.approx(20.0)  # the summary's own statistic is not overwritten


def test_to_long_matches_reference_schema(requests_frame):
    summary = task_stats.summarize_requests(requests_frame)
    long = deployments.to_long(summary, meta={"hardware": "test GPU", "quantization": "bf16"})
    assert list(long.columns) == reference.REFERENCE_COLUMNS
    assert set(long["source"]) == {"this run"}
    qa = long[(long["task"] == "basic_qa")].set_index("metric")
    assert qa.loc["decode_tps", "value"] == pytest.approx(20.0) and qa.loc["decode_tps", "unit"] == "tok/s"
    assert qa.loc["ttft", "unit"] == "s" and qa.loc["accuracy", "value"] == 0.5
    assert (qa["host"] == "h").all() and (qa["hardware"] == "test GPU").all()
    assert "decode_tps" not in set(long.loc[long["task"] == "reasoning", "metric"])  # nothing measured
    both = pd.concat([reference.harmonize_units(reference.load_reference(["000"])), long], ignore_index=True)
    assert set(both.loc[both["metric"] == "decode_tps", "source"]) == {"000_341285de21da4f3a.txt", "this run"}


def _quality_records(model: str, vision: bool) -> list[RequestRecord]:
    tools = [_rec("tool_calling", suite="quality", tps=1000.0, passed=i < 7, model=model, repeat=i) for i in range(8)]
    entity = [_rec("entity_extraction", suite="quality", tps=1000.0, passed=True, score=0.9, model=model)]
    image = [_rec("image_description", modality="vision", tps=30.0, passed=True, model=model)] if vision else \
        [_rec("image_description", modality="vision", status="unsupported", model=model)]
    return tools + entity + image


def test_systems_and_decision_inputs_feed_frontier():
    frame = pd.DataFrame([r.to_row() for r in _records("fast", 2.0) + _quality_records("fast", True)
                          + _records("slow", 1.0) + _quality_records("slow", False)])
    summary = task_stats.summarize_requests(frame)
    assert summary.set_index(["model", "task"]).loc[("fast", "entity_extraction"), "score_mean"] == 0.9
    windows = pd.DataFrame([{"window": "basic_qa", "kind": "task", "energy_j": 100.0, "duration_s": 1.0,
                             "avg_power_w": 100.0, "temp_peak_c": 70.0, "model": m} for m in ("fast", "slow")])
    windows.loc[1, ["avg_power_w", "temp_peak_c"]] = [20.0, 50.0]
    joined = task_stats.join_windows(summary, windows, on=["model"])
    systems = deployments.systems_from_summary(joined, context_window_k={"fast": 128, "slow": 256})
    # quality-suite tasks (1000 tok/s here) stay out of the speed average
    assert systems.set_index("model")["avg_decode_tps"].to_dict() == pytest.approx({"fast": 35.0, "slow": 20.0})
    assert systems.set_index("model")["modality_count"].to_dict() == {"fast": 2, "slow": 1}
    for key, member in (("workstation", "fast · h"), ("edge", "slow · h")):
        marked = frontier.pareto_frontier(systems, frontier.REGIMES[key].axes)
        assert marked.loc[marked["on_frontier"], "system"].tolist() == [member]
    cands = deployments.decision_inputs(joined, model_memory_gb={"fast": 10.0})
    decided = decisions.decide(cands, {"min_decode_tps": 30, "max_ttft_ms": 500, "max_model_memory_gb": 25})
    assert decided.set_index("candidate")["verdict"].to_dict() == {"fast · h": decisions.SWAP,
                                                                 "slow · h": decisions.WAIT}
    by_model = cands.set_index("model")
    assert np.isnan(by_model.loc["slow", "model_memory_gb"])
    assert by_model.loc["fast", "decode_tps"] == pytest.approx(40.0)  # text suite only
    assert (by_model.loc["fast", "tools_passed"], by_model.loc["fast", "entity_recall"]) == (7.0, 0.9)
    assert bool(by_model.loc["fast", "vision_works"]) and not bool(by_model.loc["slow", "vision_works"])
    heros = decisions.decide(cands, decisions.HEROS_SWAP_THRESHOLDS).set_index("candidate")
    assert heros.loc["fast · h", ["status_decode_tps", "status_model_memory_gb", "status_tools_passed",
                                  "status_vision_works"]].tolist() == ["PASS"] * 4
    assert heros.loc["slow · h", ["status_model_memory_gb", "status_vision_works"]].tolist() == ["NO DATA", "FAIL"]


def test_itl_tpot_ttfo_are_summarised_itl_over_every_gap():
    gaps_a, gaps_b = [0.01] * 200, [0.01] * 192 + [0.5] * 8  # eight 0.5 s stalls among 400 gaps
    rows = [RequestRecord(task="t", request_key=f"k{i}", itl_s=g, tpot_s=sum(g) / len(g), ttfo_s=0.2 + i,
                          ttft_s=0.1, decode_tps=50.0).to_row() for i, g in enumerate((gaps_a, gaps_b))]
    summary = task_stats.summarize_requests(pd.DataFrame(rows)).iloc[0]
    assert summary["itl_s_count"] == 400
    assert (summary["itl_s_p50"], summary["itl_s_p50_lo"], summary["itl_s_p50_hi"]) == pytest.approx((0.01,) * 3)
    # the stalls show at p99, its interval from the order statistics (400 gaps: enough for p99's 368)
    assert summary["itl_s_p99"] == pytest.approx(0.5) and summary["itl_s_p99_lo"] <= 0.5 <= summary["itl_s_p99_hi"]
    assert summary["ttfo_s_mean"] == pytest.approx(0.7) and summary["tpot_s_count"] == 2
    assert summary["ttft_s_count"] == 2


def test_prefill_rate_counts_computed_tokens_at_concurrency_one_only():
    from benchlib.measure.client.timing import compute_rates

    record = RequestRecord(prompt_tokens=100, cached_tokens=60, ttft_s=0.2, completion_tokens=2, itl_s=[0.1])
    compute_rates(record)
    assert record.prefill_tps == pytest.approx(40 / 0.2)  # the 60 cached tokens were not computed
    queued = RequestRecord(prompt_tokens=100, ttft_s=0.2, concurrency=4, completion_tokens=2, itl_s=[0.1])
    compute_rates(queued)
    assert queued.prefill_tps is None  # TTFT at 4 streams includes queueing


def test_implausible_server_counts_are_counted_and_kept_out_of_token_rates():
    """A row flagged at measurement (implausible_counts) and a row written elsewhere whose count is impossible for
    its deltas (10,000,000 tokens in 3: the 485,367,620 tok/s of the report) give no token rate and no token sum;
    their TTFT is still the client's own measurement."""
    rows = [_rec("basic_qa", tps=10.0, ttft=0.1, tokens=10, repeat=1),
            _rec("basic_qa", tps=485_367_620.0, ttft=0.2, tokens=10_000_000, repeat=2),
            _rec("basic_qa", tps=None, ttft=0.3, repeat=3)]
    rows[0].client_deltas = rows[1].client_deltas = rows[2].client_deltas = 3
    rows[2].implausible_counts = "completion_tokens inf is not a count"
    frame = pd.DataFrame([r.to_row() for r in rows])
    qa = task_stats.summarize_requests(frame, max_error_rate=0.2).set_index("task").loc["basic_qa"]
    assert qa["n_implausible"] == 2 and qa["decode_tps_count"] == 1 and qa["decode_tps_mean"] == pytest.approx(10.0)
    assert qa["prefill_tps_count"] == 1 and qa["completion_tokens_sum"] == 10 and qa["ttft_s_count"] == 3
    assert not bool(qa["valid"]) and "implausible server token counts in 67%" in qa["note"]
    lenient = task_stats.summarize_requests(frame)
    assert "left out of token rates" in lenient.set_index("task").loc["basic_qa", "note"]


def test_a_row_written_elsewhere_with_a_prompt_count_past_any_context_gives_no_prefill_rate():
    """The report's row: usage prompt_tokens 10^40, its prefill rate 9.4e41 tok/s, no implausible_counts (written
    by another tool): counted implausible like a completion count, kept out of the prefill figures."""
    rows = [_rec("basic_qa", tps=10.0, ttft=0.1, tokens=10, repeat=r) for r in (1, 2, 3)]
    for r in rows:
        r.client_deltas, r.prompt_tokens = 10, 50
    rows[2].prompt_tokens, rows[2].prefill_tps = 10**40, 9.4e41
    frame = pd.DataFrame([r.to_row() for r in rows])
    qa = task_stats.summarize_requests(frame, max_error_rate=0.2).set_index("task").loc["basic_qa"]
    assert qa["n_implausible"] == 1 and qa["prefill_tps_count"] == 2 and qa["prefill_tps_mean"] == pytest.approx(100)
    assert not bool(qa["valid"]) and "implausible server token counts in 33%" in qa["note"]


def test_every_percentile_has_a_distribution_free_interval_that_brackets_it():
    rng = np.random.default_rng(7)
    ttft = rng.lognormal(-2.0, 0.5, 400)
    rows = [RequestRecord(task="t", request_key=f"k{i}", ttft_s=float(v)).to_row() for i, v in enumerate(ttft)]
    summary = task_stats.summarize_requests(pd.DataFrame(rows)).iloc[0]
    ordered = np.sort(ttft)
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99)):
        low, high = stats.order_ranks(400, q)
        assert summary[f"ttft_s_{name}"] == pytest.approx(np.quantile(ttft, q))
        # the bounds are the order statistics X(l) and X(u): both sides miss the quantile with chance <= 2.5 %
        assert (summary[f"ttft_s_{name}_lo"], summary[f"ttft_s_{name}_hi"]) == (ordered[low - 1], ordered[high - 1])
        assert summary[f"ttft_s_{name}_lo"] <= summary[f"ttft_s_{name}"] <= summary[f"ttft_s_{name}_hi"]
    assert summary["percentile_note"] == ""


def test_percentile_bounds_need_their_samples_and_cover():
    """GuideLLM's figures: p95 needs 72 samples, p99 368; the bounds' exact coverage is at least 95 %."""
    assert stats.INTERVAL_N == {"p50": 6, "p90": 36, "p95": 72, "p99": 368}
    assert stats.order_ranks(367, 0.99) is None and stats.order_ranks(368, 0.99) is not None
    for n, q in ((6, 0.5), (36, 0.9), (200, 0.95), (1000, 0.99)):
        low, high = stats.order_ranks(n, q)
        coverage = scipy_stats.binom.cdf(high - 1, n, q) - scipy_stats.binom.cdf(low - 1, n, q)
        assert coverage >= 0.95


def test_a_summary_of_many_gaps_holds_no_resampling_matrix():
    """Issue 53 item 3: 2,000 bootstrap resamples of 200,000 pooled ITL gaps were a 3.2 GB matrix. Now the
    summary holds the gaps once (1.6 MB here) plus a bounded batch: its traced peak stays under 64 MB."""
    gaps = np.full(100, 0.01)
    frame = pd.DataFrame({"task": "t", "status": "ok", "itl_s": [gaps + i * 1e-6 for i in range(2000)],
                          "ttft_s": np.linspace(0.1, 0.2, 2000)})
    tracemalloc.start()
    try:
        summary = task_stats.summarize_requests(frame).iloc[0]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert summary["itl_s_count"] == 200_000 and summary["itl_s_p99_lo"] <= summary["itl_s_p99_hi"]
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB"


def test_the_bootstrap_resamples_in_bounded_batches():
    """50,000 values: the old single 2,000 × n resample was 800 MB of floats; batches keep it under 48 MB."""
    values = np.random.default_rng(3).exponential(1.0, 50_000)
    tracemalloc.start()
    try:
        low, high = stats.bootstrap_interval(values)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert low < values.mean() < high and high - low < 0.05
    assert peak < 48 * 2**20, f"peak {peak / 2**20:.0f} MiB"


def test_thresholds_are_judged_against_the_interval():
    """Issue 56: 'TTFT 501 vs ≤500 ms: FAIL' with the summary's own interval 350–652 ms is no FAIL: undecided at
    this n. PASS needs the whole interval within the limit, FAIL the whole interval beyond it."""
    cands = pd.DataFrame({"candidate": ["straddles", "clear", "beyond"], "ttft_ms": [501.0, 300.0, 700.0],
                          "ttft_ms_lo": [350.0, 250.0, 600.0], "ttft_ms_hi": [652.0, 350.0, 800.0],
                          "ttft_ms_n": [10, 10, 10]})
    long = decisions.evaluate_thresholds(cands, {"max_ttft_ms": 500}).set_index("candidate")
    assert long["status"].to_dict() == {"straddles": decisions.UNDECIDED, "clear": decisions.PASS,
                                        "beyond": decisions.FAIL}
    decided = decisions.decide(cands, {"max_ttft_ms": 500}).set_index("candidate")
    assert decided.loc["straddles", "verdict"] == decisions.VERIFY
    assert decided.loc["straddles", "decision"] == ("SWAP candidate, needs verification: undecided at this n for "
                                                    "TTFT (501 [350–652] (n 10) vs ≤500 ms)")
    assert decided.loc["beyond", "verdict"] == decisions.WAIT
    no_interval = cands.assign(ttft_ms_lo=np.nan)  # two requests a task: no interval, so no verdict either way
    assert decisions.evaluate_thresholds(no_interval, {"max_ttft_ms": 500})["status"].eq(decisions.UNDECIDED).all()


def test_decision_inputs_carry_the_interval_of_the_mean_of_task_means():
    rows = [RequestRecord(task=t, request_key=f"{t}{i}", ttft_s=0.1 * (1 + i), decode_tps=20.0 + i, host="h",
                          model="m", suite="text").to_row() for t in ("a", "b") for i in range(4)]
    frame = pd.DataFrame(rows)
    cand = deployments.decision_inputs(task_stats.summarize_requests(frame), requests=frame).iloc[0]
    assert cand["decode_tps"] == pytest.approx(21.5) and cand["decode_tps_n"] == 8
    mean, low, high = stats.stratified_mean_interval([np.arange(20.0, 24.0)] * 2)
    assert (cand["decode_tps_lo"], cand["decode_tps_hi"]) == pytest.approx((low, high))
    assert low < 21.5 < high and cand["ttft_ms_lo"] < 250 < cand["ttft_ms_hi"]


def test_a_time_or_rate_interval_stops_at_zero_where_few_requests_stretch_it_below():
    """Two requests a task of very different TTFT: the t interval runs below 0 ms, which no TTFT can be; the
    deployment's interval is cut at 0 there, its upper end and the mean unchanged."""
    groups = [np.array([50.0, 900.0]), np.array([40.0, 700.0])]
    mean, low, high = stats.stratified_mean_interval(groups)
    assert low < 0
    assert stats.stratified_mean_interval(groups, floor=0.0) == (mean, 0.0, high)
    rows = [RequestRecord(task=t, request_key=f"{t}{i}", ttft_s=v / 1e3, decode_tps=20.0, host="h", model="m",
                          suite="text").to_row() for t, g in zip("ab", groups) for i, v in enumerate(g)]
    frame = pd.DataFrame(rows)
    cand = deployments.decision_inputs(task_stats.summarize_requests(frame), requests=frame).iloc[0]
    assert cand["ttft_ms_lo"] == 0.0 and cand["ttft_ms_hi"] == pytest.approx(high)
