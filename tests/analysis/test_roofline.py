"""Bandwidth roofline: bytes per parameter, ceilings, and the seeds' bandwidth ratios."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from benchlib.published import reference
from benchlib.analysis import roofline
from benchlib.config.params import HostParams, ServerParams


@pytest.mark.parametrize("label,expected", [
    ("BF16", 2.0), ("bf16", 2.0), ("fp16/bf16 (auto)", 2.0), ("fp8 (online)", 1.0), ("FP8", 1.0),
    ("nvfp4", 0.5625), ("NVFP4A16", 0.5625), ("nvfp4 (community)", 0.5625), ("Q4_K_M", 0.61),
    ("q8_0", 1.0625), ("mxfp4", 0.53125), ("ollama default", None), ("", None),
])
def test_bytes_per_param(label, expected):
    assert roofline.bytes_per_param(label) == expected


def test_ceiling_arithmetic():
    assert roofline.decode_ceiling_tps(273, 4.0, 2.0) == pytest.approx(34.125)
    kv = roofline.kv_bytes_per_token(n_layers=32, n_kv_heads=8, head_dim=128, kv_bytes=2.0)
    assert kv == 131072
    assert roofline.bytes_per_token(4.0, 2.0, context_tokens=8192, kv_bytes_per_token=kv) == 8e9 + 8192 * kv
    assert roofline.decode_ceiling_tps(273, 4.0, 2.0, 8192, kv) < 34.125
    # 004's napkin math: ~10 GB read per token at 273 GB/s ≈ 37 ms/token ≈ 27 tok/s
    assert roofline.decode_ceiling_tps(273, 10.0, 1.0) == pytest.approx(27.3)


def test_tok_s_per_bandwidth_reproduces_002():
    runs = reference.bandwidth_runs()
    ratio = roofline.tps_per_bandwidth(runs)
    # printed to 3 decimals, rounded half up (81/400 = 0.2025 -> 0.203)
    assert ratio.tolist() == pytest.approx(runs["tps_per_gbs_reported"].tolist(), abs=5.01e-4)
    e2b = runs.assign(r=roofline.tps_per_bandwidth(runs)).query("model == 'Gemma 4 E2B'").set_index("host")["r"]
    assert e2b.to_dict() == pytest.approx({"MBP": 81 / 400, "GX10": 53 / 273, "openclaw": 42 / 120})
    assert e2b.tolist() == pytest.approx([0.203, 0.194, 0.350], abs=5.01e-4)


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
