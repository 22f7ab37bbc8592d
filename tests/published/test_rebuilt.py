"""The seeds' tables rebuilt from their transcribed cells: 002's law fitted, 004's napkin ceiling beside ours,
001's decisions under their own thresholds, and the contradictions quoted verbatim from the seeds."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from benchlib.published import rebuilt, reference, transcription


@pytest.fixture(scope="module")
def ref() -> pd.DataFrame:
    return reference.load_reference()


def test_002_law_is_fitted_per_model_and_flags_the_m4(ref):
    law = rebuilt.law_002(ref).set_index(["model", "host"])
    # the printed ratio beside ours, recomputed from the same cells
    assert (law["ratio"] - law["ratio_printed"]).abs().max() < 0.0015
    e2b = law.loc["Gemma 4 E2B"]
    assert e2b["k_tps_per_gbs"].iloc[0] == pytest.approx((400 * 81 + 273 * 53 + 120 * 42) / (400**2 + 273**2 + 120**2))
    assert e2b.loc["openclaw", "outlier"] and not e2b.loc["MBP", "outlier"]  # as 002 says: the M4
    assert law.loc[("Gemma 4 E4B", "openclaw"), "outlier"]
    # without the outlier the two remaining machines lie on the law's slope of 1 within ±0.15
    assert e2b["loglog_slope_without_outlier"].iloc[0] == pytest.approx(math.log(81 / 53) / math.log(400 / 273))
    assert abs(law["loglog_slope_without_outlier"] - 1).max() < 0.15
    assert (law["loglog_slope"] < 0.7).all()  # with it, the three-point slope is far from 1


def test_002_tok_s_per_bandwidth_reproduces_the_printed_ratios(ref):
    law = rebuilt.law_002(ref)
    # printed to 3 decimals, rounded half up (81/400 = 0.2025 -> 0.203)
    assert law["ratio"].tolist() == pytest.approx(law["ratio_printed"].tolist(), abs=5.01e-4)
    e2b = law[law["model"] == "Gemma 4 E2B"].set_index("host")["ratio"]
    assert e2b.to_dict() == pytest.approx({"MBP": 81 / 400, "GX10": 53 / 273, "openclaw": 42 / 120})
    assert e2b.tolist() == pytest.approx([0.203, 0.194, 0.350], abs=5.01e-4)


def test_002_prefill_table_keeps_the_cached_artefact_and_cold_runs(ref):
    table = rebuilt.prefill_002(ref)
    assert len(table[table["prefill_tps"].notna() & table["prompt"].str.startswith(("short", "long"))]) == 8
    cached = table[table["prompt"].str.contains("cached")]
    assert 5345 in cached["prefill_tps"].tolist() and 1065 in cached["prefill_tps"].tolist()
    assert table.loc[table["prompt"].str.startswith("cold reload"), "decode_tps"].tolist() == [38]


def test_004_napkin_ceiling_beside_our_model_and_the_ple_cost(ref):
    napkin = rebuilt.napkin_004(ref).set_index("reading")
    blog = napkin.loc["the blog's napkin: PLE lookups + decoder weights"]
    ours = napkin.loc["our roofline: active parameters × 2 bytes (BF16)"]
    assert blog["ceiling_tps"] == pytest.approx(27.3) and ours["ceiling_tps"] == pytest.approx(273 / 8)
    assert blog["measured_tps"] == pytest.approx((19.2 + 19.2 + 19.1) / 3)
    every = napkin.loc["every BF16 weight (15 GB)"]
    assert not every["possible"] and every["ceiling_tps"] < every["measured_tps"]  # a token cannot read it all
    ple = napkin.loc["decoder + one PLE row per token (lookups read one row)"]
    assert ple["gb_per_token"] - 4.0 == pytest.approx(5.4 / 262_144)


def test_001_tables_under_their_own_thresholds(ref):
    verdicts = rebuilt.verdicts_001(ref)
    by = verdicts.set_index(["seed_table", "criterion"])
    assert by.loc[("001-phase1-decision", "ttft"), "threshold"] == "< 500ms"
    assert by.loc[("001-phase1-decision", "vram"), "status"] == "FAIL"
    assert by.loc[("001-31b-decision", "decode_tps"), "threshold"] == "5-15 range"
    assert by.loc[("001-31b-decision", "decode_tps"), "status"] == "PASS"
    assert by.loc[("001-fp8-decision", "vram"), "threshold"] == "> 35 GB"
    printed = verdicts[verdicts["agrees"].notna()]
    assert len(printed) >= 12 and printed["agrees"].astype(bool).all()  # every printed status reproduced
    assert verdicts.groupby("seed_table")["verdict"].first().to_dict() == {
        "001-phase1-decision": "fails ttft 836 vs < 500ms; vram 35.3 vs < 20 GB",
        "001-31b-decision": "fails vram 45.95 vs ≤30 GB",
        "001-fp8-decision": "fails tools_passed 0 vs printed",
        "001-community-decision": "every printed threshold passes",
        "001-nvfp4-decision": "every printed threshold passes"}
    assert rebuilt.threshold_status(25.0, "> 25 tok/s") == "FAIL"
    assert rebuilt.threshold_status(25.0, "≥ 25") == "PASS"


def test_every_contradiction_is_quoted_verbatim_from_its_seed():
    table = rebuilt.contradictions()
    # ../shared/seeds: a missing folder fails loudly (FileNotFoundError), never skips
    texts = transcription.seed_texts(sorted(set(table["seed_a"]) | set(table["seed_b"])))
    assert len(table) >= 5
    for row in table.itertuples():
        for seed, quote in ((row.seed_a, row.says_a), (row.seed_b, row.says_b)):
            assert quote in texts[seed], f"{seed}: {quote!r}"
        assert row.reading
