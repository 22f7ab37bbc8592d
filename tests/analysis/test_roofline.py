"""Bandwidth roofline: bytes per parameter, ceilings and measured ÷ ceiling, on the seeds' runs and ours."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from benchlib.analysis import roofline
from benchlib.config.params import HostParams, ServerParams
from benchlib.published import reference


@pytest.mark.parametrize("label,expected", [
    ("BF16", 2.0), ("bf16", 2.0), ("fp16/bf16 (auto)", 2.0), ("fp8 (online)", 1.0), ("FP8", 1.0),
    ("nvfp4", 0.5625), ("NVFP4A16", 0.5625), ("nvfp4 (community)", 0.5625), ("Q4_K_M", 0.61),
    ("q8_0", 1.0625), ("mxfp4", 0.53125), ("ollama default", None), ("", None),
])
def test_bytes_per_param(label, expected):
    assert roofline.bytes_per_param(label) == expected


def test_ceiling_arithmetic():
    kv = 2 * 32 * 8 * 128 * 2.0  # KV bytes per context token: K and V × 32 layers × 8 KV heads × 128 dims × 2 bytes
    runs = pd.DataFrame({"memory_bandwidth_gbs": [273.0] * 3, "active_params_b": [4.0, 4.0, 10.0],
                         "bytes_per_param": [2.0, 2.0, 1.0], "context_tokens": [0, 8192, 0],
                         "kv_bytes_per_token": [0.0, kv, 0.0], "decode_tps": [20.0] * 3})
    table = roofline.roofline_table(runs)
    assert table["bytes_per_token_gb"].tolist() == pytest.approx([8.0, (8e9 + 8192 * kv) / 1e9, 10.0])
    assert table.loc[0, "ceiling_tps"] == pytest.approx(34.125)
    assert table.loc[1, "ceiling_tps"] < 34.125
    # 004's napkin math: ~10 GB read per token at 273 GB/s ≈ 37 ms/token ≈ 27 tok/s
    assert table.loc[2, "ceiling_tps"] == pytest.approx(27.3)


def test_roofline_table_on_004_states_inputs():
    table = roofline.roofline_table(reference.quant_runs()).set_index("quantization")
    assert table["bytes_per_param"].tolist() == [2.0, 1.0, 0.5625]
    assert (table["bytes_per_param_source"] == "quantization table").all()
    assert table["ceiling_tps"].tolist() == pytest.approx([34.125, 68.25, 121.333], abs=1e-3)
    assert table["efficiency"].tolist() == pytest.approx([19.2 / 34.125, 36.0 / 68.25, 49.9 / 121.333], abs=1e-4)
    assert {"memory_bandwidth_gbs", "active_params_b", "bytes_per_token_gb"} <= set(table.columns)
    # measured never exceeds the bandwidth ceiling
    assert (table["efficiency"] < 1).all()


def test_given_bytes_per_param_wins_and_missing_inputs_give_nan():
    runs = pd.DataFrame({"decode_tps": [10.0, 10.0], "memory_bandwidth_gbs": [100.0, None],
                         "active_params_b": [1.0, 1.0], "quantization": ["bf16", "bf16"],
                         "bytes_per_param": [1.0, None]})
    table = roofline.roofline_table(runs)
    assert table["bytes_per_param_source"].tolist() == ["given", "quantization table"]
    assert table["ceiling_tps"].iloc[0] == pytest.approx(100.0)
    assert math.isnan(table["ceiling_tps"].iloc[1])


def test_paper_systems_roofline():
    systems = reference.paper_systems()
    table = roofline.roofline_table(systems, tps_col="avg_decode_tps").set_index("model")
    assert table.loc["Gemma 4 E2B", "ceiling_tps"] == pytest.approx(936 / (2.3 * 2))
    assert table.loc["Qwen3.5-4B", "ceiling_tps"] == pytest.approx(273 / 8)


def test_run_roofline_from_params():
    host = HostParams(name="spark", memory_bandwidth_gbs=273)
    server = ServerParams(kind="openai", base_url="http://localhost:8000/v1", model="m", quantization="nvfp4",
                          active_params_b=3.8)
    summary = pd.DataFrame({"task": ["basic_qa"], "decode_tps_mean": [50.4]})
    out = roofline.roofline_table(summary.assign(**roofline.run_inputs(host, server), context_tokens=1000,
                                                 kv_bytes_per_token=1e5), tps_col="decode_tps_mean")
    assert out["bytes_per_param"].iloc[0] == 0.5625
    assert out["bytes_per_token_gb"].iloc[0] == pytest.approx(3.8 * 0.5625 + 0.1)
    assert out["efficiency"].iloc[0] == pytest.approx(50.4 / (273 / (3.8 * 0.5625 + 0.1)))
