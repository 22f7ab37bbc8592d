"""The load notebook's level tables show each percentile as 'value [lo–hi]' from its order-statistic bounds,
'value [–]' where the level had too few requests for them, also from a sweep CSV written before the bounds were."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchlib.analysis import load_levels, serving, stats
from benchlib.config.formatting import readable
from benchlib.config.params import SloParams
from benchlib.suites.load.common import read_previous
from benchlib.views import load_display


def concurrency_rows(sizes: dict[int, int]) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    return pd.concat([pd.DataFrame({
        "task": "concurrency", "concurrency": level, "is_warmup": False, "status": "ok",
        "start_ns": 10**9 + np.arange(n) * 10**6, "ttft_s": rng.gamma(2.0, 0.05, n), "e2e_s": rng.gamma(4.0, 0.3, n),
        "decode_tps": rng.normal(50, 5, n), "completion_tokens": 16, "error_kind": ""}) for level, n in sizes.items()],
        ignore_index=True)


def cell(value: float, low: float, high: float) -> str:
    return f"{readable(value)} [{readable(low)}–{readable(high)}]"


def test_concurrency_table_shows_each_percentile_with_its_bounds(tmp_path):
    rows = concurrency_rows({1: 4, 4: 50})
    path = tmp_path / load_levels.CONCURRENCY_CSV
    load_levels.concurrency_levels(rows).to_csv(path, index=False)
    table = load_display.concurrency_table(pd.read_csv(path)).set_index("concurrency")
    big = rows[rows["concurrency"] == 4]
    _, low, high = stats.percentile_bounds(big["ttft_s"].to_numpy(), {"p50": 0.5})["p50"]
    assert table.loc[4, "ttft_s_p50"] == cell(np.median(big["ttft_s"]), low, high)
    _, low, high = stats.percentile_bounds(big["decode_tps"].to_numpy(), {"p50": 0.5})["p50"]
    assert table.loc[4, "decode_tps_p50"] == cell(np.median(big["decode_tps"]), low, high)
    # 50 requests: a p99 needs 100 for its estimate, so the cell is missing; 4: a median with no bounds
    assert table.loc[4, "ttft_s_p99"] == "–"
    assert table.loc[1, "e2e_s_p50"] == f"{readable(np.median(rows.loc[rows['concurrency'] == 1, 'e2e_s']))} [–]"
    assert table.loc[4, "n_ok"] == 50 and table.loc[4, "throughput_tps"] == round(table.loc[4, "throughput_tps"], 3)


def test_a_sweep_csv_written_before_the_bounds_still_reads_and_shows_none(tmp_path):
    rows = concurrency_rows({2: 20})
    levels = load_levels.concurrency_levels(rows).assign(loop_lag_samples=7)
    old = levels[[c for c in levels if not c.endswith(("_lo", "_hi"))]].assign(run_id="r1")
    path = tmp_path / load_levels.CONCURRENCY_CSV
    old.to_csv(path, index=False)
    assert read_previous(path, "r1", "concurrency")[2]["loop_lag_samples"] == 7  # a resumed run's health
    table = load_display.concurrency_table(pd.read_csv(path))
    assert table.loc[0, "ttft_s_p50"] == f"{readable(levels.loc[0, 'ttft_s_p50'])} [–]"
    assert levels.loc[0, "ttft_s_p50_lo"] > 0  # the same level computed now has bounds: the old file lacks them


def test_rate_table_shows_bounds_and_missing_ones():
    rng = np.random.default_rng(5)
    n = 30
    rows = pd.DataFrame({"task": "rate", "variant": "sync", "is_warmup": False, "status": "ok",
                         "start_ns": 10**9 + np.arange(n) * 10**8, "ttft_s": rng.gamma(2.0, 0.05, n),
                         "e2e_s": rng.gamma(4.0, 0.3, n), "tpot_s": rng.gamma(3.0, 0.004, n), "completion_tokens": 14,
                         "itl_s": [list(rng.gamma(3.0, 0.004, 13)) for _ in range(n)], "error_kind": "",
                         "prompt_tokens": np.nan, "target_prompt_tokens": np.nan})
    plan = {"level": "sync", "mode": "synchronous", "max_concurrency": 1}
    levels = serving.rate_levels(rows, [plan], SloParams(), ramp_share=0.0)
    table = load_display.rate_table(levels)
    level = levels.iloc[0]
    assert table.loc[0, "ttft_s_p50"] == cell(level["ttft_s_p50"], level["ttft_s_p50_lo"], level["ttft_s_p50_hi"])
    assert table.loc[0, "itl_s_p99"] == cell(level["itl_s_p99"], level["itl_s_p99_lo"], level["itl_s_p99_hi"])
    assert level["itl_s_p99_lo"] > 0  # 390 pooled gaps: enough for a p99's bounds
    assert table.loc[0, "ttft_s_p99"] == "–"  # 30 requests: no p99 at all
    assert table.loc[0, "tpot_s_p50"].endswith("]") and "[–]" not in table.loc[0, "tpot_s_p50"]
