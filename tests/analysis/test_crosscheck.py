"""Cross-check rules on synthetic request tables: every flag asserted exactly, boundaries included."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import crosscheck
from benchlib.records.rows import RequestRecord


def row(task="basic_qa", **values):
    base = {"run_id": "r1", "host": "h", "model": "m", "suite": "text", "modality": "text", "task": task,
            "concurrency": 1, "is_warmup": False, "status": "ok", "decode_tps": 50.0, "server_decode_tps": 50.0,
            "prefill_tps": 100.0, "server_prefill_tps": 1000.0, "prompt_tokens": 20, "cached_tokens": 0,
            "server_load_s": 0.01}
    base.update(values)
    return base


def test_decode_ratio_and_ten_percent_boundary():
    assert crosscheck.decode_ratio(45.0, 50.0) == pytest.approx(0.9)
    assert crosscheck.decode_ratio(None, 50.0) is None and crosscheck.decode_ratio(40.0, 0) is None
    assert crosscheck.decode_ratio(float("nan"), 50.0) is None and crosscheck.decode_ratio("", 50.0) is None
    assert not crosscheck.is_rate_mismatch(0.9) and not crosscheck.is_rate_mismatch(1.1)
    assert crosscheck.is_rate_mismatch(0.8999) and crosscheck.is_rate_mismatch(1.1001)
    assert not crosscheck.is_rate_mismatch(None)


def test_short_answers_get_a_ratio_but_no_rate_flag():
    # 10 tokens: llama-server's n / predicted_ms is 10/9 of the client's rate over the same tokens
    short = crosscheck.flag_record(RequestRecord(decode_tps=90.0, server_decode_tps=100.0 * 10 / 9,
                                                 completion_tokens=10))
    assert short.decode_ratio == pytest.approx(0.81) and not short.rate_mismatch
    long = crosscheck.flag_record(RequestRecord(decode_tps=90.0, server_decode_tps=112.0, completion_tokens=16))
    assert long.rate_mismatch
    frame = pd.DataFrame([row(decode_tps=40.0, completion_tokens=15), row(decode_tps=40.0, completion_tokens=16),
                          row(decode_tps=40.0, completion_tokens=None)])
    assert crosscheck.flag_requests(frame)["rate_mismatch"].tolist() == [False, True, True]


def test_flag_record_single_request_rules():
    record = RequestRecord(decode_tps=40.0, server_decode_tps=50.0, cached_tokens=8, server_load_s=2.5)
    crosscheck.flag_record(record, cold_load_s=1.0)
    assert record.decode_ratio == pytest.approx(0.8)
    assert record.rate_mismatch and record.cache_suspect and record.cold
    clean = crosscheck.flag_record(RequestRecord(decode_tps=49.0, server_decode_tps=50.0, cached_tokens=0,
                                                 server_load_s=0.004))
    assert clean.decode_ratio == pytest.approx(0.98)
    assert not (clean.rate_mismatch or clean.cache_suspect or clean.cold)
    warm = crosscheck.flag_record(RequestRecord(cached_tokens=8, is_warmup=True, server_load_s=1.0))
    assert not warm.cache_suspect  # warm-ups absorb first-request effects
    assert not warm.cold  # exactly at the bound is not above it
    assert warm.decode_ratio is None and not warm.rate_mismatch


def test_a_shared_template_prefix_is_not_a_cache_hit_but_a_reused_prompt_is():
    template = crosscheck.flag_record(RequestRecord(cached_tokens=10, prompt_tokens=35))  # ~30 %: chat template
    reused = crosscheck.flag_record(RequestRecord(cached_tokens=34, prompt_tokens=35))
    strict = crosscheck.flag_record(RequestRecord(cached_tokens=10, prompt_tokens=35), cache_share=0.0)
    assert not template.cache_suspect and reused.cache_suspect and strict.cache_suspect
    table = crosscheck.flag_requests(pd.DataFrame([row(cached_tokens=10, prompt_tokens=35),
                                                   row(cached_tokens=34, prompt_tokens=35)]))
    assert table["cache_suspect"].tolist() == [False, True]


def test_flag_requests_every_rule():
    rows = [row(prefill_tps=p) for p in (100.0, 110.0, 95.0, 105.0)]
    rows.append(row(prefill_tps=520.0))                                    # 5.2x the median
    rows.append(row(decode_tps=40.0))                                      # client 20 % below server
    rows.append(row(cached_tokens=12, prompt_tokens=24))                  # server says: half came from cache
    rows.append(row(server_load_s=2.5))                                    # Ollama load_duration 2.5 s
    rows.append(row(is_warmup=True, prefill_tps=5000.0, cached_tokens=3))  # warm-up: never cache-flagged
    flagged = crosscheck.flag_requests(pd.DataFrame(rows), cold_load_s=1.0)
    assert flagged["rate_mismatch"].tolist() == [False] * 5 + [True] + [False] * 3
    assert flagged["decode_ratio"].iloc[5] == pytest.approx(0.8)
    assert flagged["cache_suspect"].tolist() == [False] * 4 + [True, False, True, False, False]
    assert flagged["prefill_outlier"].tolist() == [False] * 4 + [True] + [False] * 4
    assert flagged["cold"].tolist() == [False] * 7 + [True, False]
    # 8 measured rates (95, 100 x4, 105, 110, 520): median 100; the warm-up's 5000 is left out
    assert flagged["prefill_ratio"].iloc[4] == pytest.approx(5.2)
    assert flagged["cached_share"].iloc[6] == pytest.approx(0.5)
    assert flagged["flags"].iloc[0] == ""
    assert flagged["flags"].iloc[4] == "client prefill 5.2x group median"
    assert flagged["flags"].iloc[5] == "decode client/server 0.80"
    assert flagged["flags"].iloc[6] == "12 of 24 prompt tokens cached"
    assert flagged["flags"].iloc[7] == "load 2.50 s > 1 s"


def test_prefill_rule_needs_three_rates_and_is_strict():
    pair = pd.DataFrame([row(prefill_tps=100.0), row(prefill_tps=900.0)])  # two rates: no median to trust
    assert not crosscheck.flag_requests(pair)["prefill_outlier"].any()
    exact = pd.DataFrame([row(prefill_tps=100.0), row(prefill_tps=100.0), row(prefill_tps=300.0)])
    assert not crosscheck.flag_requests(exact)["prefill_outlier"].any()  # exactly 3x is not above 3x
    above = pd.DataFrame([row(prefill_tps=100.0), row(prefill_tps=100.0), row(prefill_tps=300.1)])
    assert crosscheck.flag_requests(above)["prefill_outlier"].tolist() == [False, False, True]


def test_prefill_median_leaves_warmups_out():
    rows = [row(prefill_tps=p) for p in (100.0, 120.0, 400.0)]
    rows += [row(is_warmup=True, prefill_tps=1000.0) for _ in range(2)]  # with them the median would be 400
    flagged = crosscheck.flag_requests(pd.DataFrame(rows))
    assert flagged["prefill_ratio"].iloc[2] == pytest.approx(400.0 / 120.0)
    assert flagged["prefill_outlier"].tolist() == [False, False, True, False, False]


def test_prefill_rule_uses_the_server_rate_too_and_groups_by_task_and_concurrency():
    rows = [row(server_prefill_tps=s) for s in (1000.0, 1100.0, 5500.0)]  # Ollama's 5x cached prefill
    rows += [row(task="coding", prefill_tps=p) for p in (10.0, 11.0, 12.0)]  # another task, its own median
    rows += [row(concurrency=4, prefill_tps=p) for p in (400.0, 410.0, 420.0)]  # another level, its own median
    flagged = crosscheck.flag_requests(pd.DataFrame(rows))
    assert flagged["prefill_outlier"].tolist() == [False, False, True] + [False] * 6
    assert flagged["server_prefill_ratio"].iloc[2] == pytest.approx(5.0)
    assert flagged["flags"].iloc[2] == "server prefill 5.0x group median"


def test_failed_rows_and_missing_columns_are_tolerated():
    frame = pd.DataFrame([{"task": "t", "status": "failed", "decode_tps": np.nan},
                          {"task": "t", "status": "ok", "decode_tps": 10.0}])
    flagged = crosscheck.flag_requests(frame)
    assert not flagged[["rate_mismatch", "cache_suspect", "cold", "prefill_outlier"]].any().any()
    assert flagged["decode_ratio"].isna().all() and flagged["flags"].tolist() == ["", ""]
    empty = crosscheck.flag_requests(pd.DataFrame(columns=["task", "status"]))
    assert {"decode_ratio", "rate_mismatch", "cache_suspect", "cold", "flags"} <= set(empty.columns)
    assert crosscheck.flag_counts(pd.DataFrame(columns=["task", "status"])).empty


def test_flag_counts_per_task_for_the_summary():
    rows = [row(decode_tps=d) for d in (50.0, 49.0, 40.0)]            # ratios 1.0, 0.98, 0.8
    rows.append(row(cached_tokens=15))  # 15 of 20 prompt tokens from cache
    rows.append(row(is_warmup=True, server_load_s=9.0, decode_tps=10.0))  # warm-ups are not counted
    rows += [row(task="coding", server_load_s=3.0, decode_tps=None), row(task="coding", decode_tps=None)]
    counts = crosscheck.flag_counts(pd.DataFrame(rows), cold_load_s=1.0).set_index("task")
    assert list(counts.columns[:4]) == ["host", "model", "suite", "modality"]
    qa, coding = counts.loc["basic_qa"], counts.loc["coding"]
    assert (qa.n_flag_checked, qa.n_rate_mismatch, qa.n_cache_suspect, qa.n_cold, qa.n_decode_ratio) == (4, 1, 1, 0, 4)
    assert qa.decode_ratio_median == pytest.approx(0.99) and qa.decode_ratio_min == pytest.approx(0.8)
    assert qa.decode_ratio_max == pytest.approx(1.0)
    assert (coding.n_flag_checked, coding.n_cold, coding.n_decode_ratio) == (2, 1, 0)
    assert math.isnan(coding.decode_ratio_median)


def test_flag_counts_reads_existing_flags_without_reflagging():
    frame = crosscheck.flag_requests(pd.DataFrame([row(server_load_s=0.5)]), cold_load_s=0.1)
    assert frame["cold"].all()
    assert crosscheck.flag_counts(frame)["n_cold"].tolist() == [1]  # not recomputed with the default 1 s bound


def test_csv_round_trip_values_are_understood():
    """requests.csv gives strings for booleans and empty cells for missing numbers."""
    frame = pd.DataFrame([row(is_warmup="False", cached_tokens="", server_load_s="2.0", decode_tps="45")])
    flagged = crosscheck.flag_requests(frame)
    assert flagged["cold"].tolist() == [True] and flagged["cache_suspect"].tolist() == [False]
    assert flagged["decode_ratio"].iloc[0] == pytest.approx(0.9)
