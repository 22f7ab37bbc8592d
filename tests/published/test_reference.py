"""Reference data: schema, transcription against the seed text, and the wide tables built from it."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from benchlib.config.paths import PROJECT_ROOT, REFERENCE_DIR
from benchlib.published import reference, transcription

SEEDS_PRESENT = reference.SEEDS_DIR.is_dir() and any(reference.SEEDS_DIR.glob("00*_*.txt"))

# (seed snippet as printed, seed prefix, section prefix, filters, expected value)
SPOT_CHECKS = [
    ("Average throughput 41.1 tok/s 33.9 tok/s 15.2 tok/s", "000", "§6",
     dict(model="Gemma 4 E2B", metric="decode_tps"), 41.1),
    ("Average inference power 204.8 W 156.5 W 25.8 W", "000", "§6",
     dict(model="Qwen3.5-4B", metric="avg_power"), 25.8),
    ("Tokens per second per watt 0.20 0.22 0.59", "000", "§6",
     dict(model="Phi-4 Multimodal", metric="tps_per_w"), 0.22),
    ("Transcription (ASR) 33.4 13.9 Not applicable", "000", "§4",
     dict(model="Phi-4 Multimodal", task="Transcription (ASR)", metric="decode_tps"), 33.4),
    ("Text Basic Q&A 2.24s 0.68s 1.20s", "000", "§5",
     dict(model="Gemma 4 E2B", task="Basic Q&A", metric="e2e_latency"), 0.68),
    ("Reported GPU memory bandwidth 936 GB/s 273 GB/s", "000", "§3",
     dict(host="RTX 3090 host", metric="memory_bandwidth"), 936),
    ("| TTFT | 836 ms (±113) |", "001", "§6 Phase 1",
     dict(metric="ttft"), 836),
    ("| VRAM | 35.3 GB |", "001", "§6 Phase 1",
     dict(metric="vram"), 35.3),
    ("| tok/s | 50.4 | ≥40 | PASS |", "001", "§12 Phase 3: Decision",
     dict(metric="decode_tps"), 50.4),
    ("| Model VRAM | 15.74 GB | ≤25 GB | PASS |", "001", "§12 Phase 3: Decision",
     dict(metric="model_memory"), 15.74),
    ("| Throughput | 16.0 tok/s (0.0 stddev, 25 runs) |", "001", "§9 Phase 2 Super",
     dict(metric="decode_tps", host="Beast"), 16.0),
    ("GX10NVIDIA GB10128 GB273 GB/s0.20.0", "002", "The Setup",
     dict(host="GX10", metric="memory_bandwidth"), 273),
    ("MBP (M1 Max 32GB)400 GB/s81 tok/s52 tok/s+54%", "002", "Generation Speed",
     dict(host="MBP", model="Gemma 4 E4B", metric="decode_tps"), 52),
    ("M4            120         42            0.350*", "002", "Why Bandwidth",
     dict(host="openclaw", model="Gemma 4 E2B", metric="tps_per_gbs"), 0.350),
    ("NVFP4A169.8 GB49.92.6x", "004", "The Full Picture",
     dict(quantization="nvfp4a16", metric="model_memory"), 9.8),
    ("FP8 online11.4 GB36.01.9x", "004", "The Full Picture",
     dict(quantization="fp8 (online)", metric="decode_tps"), 36.0),
]


@pytest.fixture(scope="module")
def ref() -> pd.DataFrame:
    return reference.load_reference()


def test_files_have_the_documented_columns():
    for prefix, name in reference.REFERENCE_FILES.items():
        frame = pd.read_csv(REFERENCE_DIR / name, dtype=str, keep_default_na=False)
        assert list(frame.columns) == reference.REFERENCE_COLUMNS, name
        assert len(frame) > 20, name
        assert frame["source"].str.startswith(prefix).all(), name
        assert (frame["section"] != "").all() and (frame["metric"] != "").all() and (frame["value_text"] != "").all()
    readme = (REFERENCE_DIR / "README.md").read_text(encoding="utf-8")
    for column in reference.REFERENCE_COLUMNS:
        assert f"`{column}`" in readme


def test_value_matches_the_printed_text(ref):
    assert transcription.check_values(ref) == []


def test_not_applicable_rows_are_empty_with_a_note(ref):
    na = ref[ref["value_text"].isin(["Not applicable", "N/A"])]
    assert len(na) >= 8
    assert na["value"].isna().all()
    assert na["note"].str.startswith("Not applicable").all()
    qwen_audio = reference.select(ref, "§4", model="Qwen3.5-4B", modality="audio")
    assert len(qwen_audio) == 2 and qwen_audio["value"].isna().all()


@pytest.mark.parametrize("snippet,prefix,section,filters,expected", SPOT_CHECKS)
def test_spot_values(ref, snippet, prefix, section, filters, expected):
    rows = ref[ref["source"].str.startswith(prefix)]
    assert reference.value(rows, section, **filters) == pytest.approx(expected)
    text = _seed(prefix)
    if text is not None:
        assert snippet in text


def test_seed_location_is_beside_the_repository():
    assert reference.SEEDS_DIR == PROJECT_ROOT.parent / "shared" / "seeds"


def test_harmonize_units_converts_milliseconds(ref):
    heros = reference.harmonize_units(ref[ref["source"].str.startswith("001")])
    assert reference.value(heros, "§6 Phase 1", metric="ttft") == pytest.approx(0.836)
    assert set(heros.loc[heros["metric"] == "ttft", "unit"]) == {"s"}
    super_range = reference.select(heros, "§9 Phase 2 Super", metric="ttft", host="DGX Spark (community)")
    assert super_range["value_low"].iloc[0] == pytest.approx(0.2)


def test_task_ids_map_paper_tasks(ref):
    paper = reference.select(ref[ref["source"].str.startswith("000")], "§4")
    assert set(paper["task_id"]) == {"basic_qa", "reasoning", "coding", "multilingual", "summarization",
                                     "image_description", "color_identification", "transcription", "audio_qa"}


def test_paper_systems_table(ref):
    systems = reference.paper_systems(ref).set_index("model")
    assert list(systems.index) == ["Gemma 4 E2B", "Phi-4 Multimodal", "Qwen3.5-4B"]
    assert systems.loc["Gemma 4 E2B", "modality_count"] == 4
    assert systems.loc["Qwen3.5-4B", "context_window_k"] == 262
    assert systems.loc["Gemma 4 E2B", "video_support"] == 1
    assert systems.loc["Phi-4 Multimodal", "asr_decode_tps"] == 33.4
    assert math.isnan(systems.loc["Qwen3.5-4B", "asr_decode_tps"])
    assert systems.loc["Gemma 4 E2B", "vision_decode_tps"] == pytest.approx((48.7 + 47.2) / 2)
    assert systems.loc["Qwen3.5-4B", "memory_bandwidth_gbs"] == 273


def test_heros_decision_candidates(ref):
    cands = reference.heros_decision_candidates(ref).set_index("section")
    assert len(cands) == 5
    phase1 = cands.loc["§6 Decision Against Plan Criteria (table)"]
    assert (phase1["decode_tps"], phase1["ttft_ms"], phase1["model_memory_gb"]) == (59.7, 836, 35.3)
    assert phase1["tools_passed"] == 8 and phase1["entity_recall"] == 1.0
    phase3 = cands.loc["§12 Phase 3: Decision (table)"]
    assert (phase3["decode_tps"], phase3["ttft_ms"], phase3["model_memory_gb"], phase3["tools_passed"]) == \
        (50.4, 83.9, 15.74, 7)
    assert phase3["vision_works"] is True
    community = cands.loc["§10 Decision framework re-evaluation (table)"]
    assert math.isnan(community["tools_passed"])


def test_bandwidth_and_quant_tables(ref):
    runs = reference.bandwidth_runs(ref)
    assert len(runs) == 6
    assert runs.set_index(["host", "model"]).loc[("MBP", "Gemma 4 E2B"), "memory_bandwidth_gbs"] == 400
    quant = reference.quant_runs(ref).set_index("quantization")
    assert list(quant["decode_tps"]) == [19.2, 36.0, 49.9]
    assert list(quant["model_memory_gb"]) == [15.0, 11.4, 9.8]
    assert quant.loc["bf16", "napkin_ceiling_tps"] == 27


def test_unknown_seed_prefix_is_an_error():
    with pytest.raises(KeyError):
        reference.load_reference(["003"])


def _seed(prefix: str) -> str | None:
    if not SEEDS_PRESENT:
        return None
    path = next(reference.SEEDS_DIR.glob(f"{prefix}_*.txt"), None)
    return reference.seed_text(path.name) if path else None


def test_every_metric_is_documented(ref):
    readme = (REFERENCE_DIR / "README.md").read_text(encoding="utf-8")
    prefixes = ("threshold_", "status_", "weights_")
    undocumented = [m for m in ref["metric"].unique() if f"`{m}`" not in readme and not m.startswith(prefixes)]
    assert not undocumented
