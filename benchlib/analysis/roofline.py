"""Memory-bandwidth roofline for decode: every generated token reads the active weights (and the KV cache).

ceiling tok/s = memory bandwidth ÷ bytes read per token,
bytes per token = active parameters × bytes per parameter (+ context tokens × KV bytes per token).
GB here is 10^9 bytes, as in vendor bandwidth figures. The ceiling ignores compute, kernel efficiency,
embeddings that are looked up rather than multiplied (Gemma PLE), vision/audio encoders and batching,
so measured ÷ ceiling is an efficiency indicator, not a prediction.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

import numpy as np
import pandas as pd

from benchlib.records.schema import number

# Approximate weight bytes per parameter, scales included. Block formats: bits per weight ÷ 8.
BYTES_PER_PARAM: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,       # E4M3 weights; per-tensor/channel scales negligible
    "int8": 1.0,
    "w8a8": 1.0,
    "q8_0": 1.0625,   # 32 x int8 + fp16 scale = 8.5 bits
    "q6_k": 0.8203,   # 6.5625 bits
    "q5_k_m": 0.71,   # ~5.7 bits (Q5_K with some Q6_K tensors)
    "q4_k_m": 0.61,   # ~4.85 bits: Q4_K (4.5 bits) with some tensors in Q6_K; llama.cpp reports ~4.8-4.9 BPW
    "q4_k_s": 0.57,   # ~4.6 bits
    "q4_k": 0.5625,   # 4.5 bits
    "q4_0": 0.5625,   # 32 x 4 bit + fp16 scale = 4.5 bits
    "nvfp4": 0.5625,  # 4-bit E2M1 + FP8 scale per 16 weights = 4.5 bits
    "nvfp4a16": 0.5625,
    "mxfp4": 0.53125,  # 4 bit + E8M0 scale per 32 weights = 4.25 bits
    "int4": 0.53,     # AWQ/GPTQ group-128 int4 with fp16 scales (+ zeros) ~4.2 bits
    "awq": 0.53,
    "gptq": 0.53,
}
QUANT_ALIASES = {"fp8_e4m3": "fp8", "e4m3": "fp8", "nf4": "int4", "w4a16": "int4", "modelopt": "nvfp4"}


def bytes_per_param(quantization: str) -> float | None:
    """Approximate bytes per weight for a quantization label ('BF16', 'fp8 (online)', 'Q4_K_M', ...); None if unknown."""
    text = re.sub(r"\(.*?\)", " ", str(quantization).lower()).strip()
    if text in BYTES_PER_PARAM:
        return BYTES_PER_PARAM[text]
    for token in re.split(r"[^a-z0-9_]+", text):
        token = QUANT_ALIASES.get(token, token)
        if token in BYTES_PER_PARAM:
            return BYTES_PER_PARAM[token]
    return None



def roofline_table(runs: pd.DataFrame, tps_col: str = "decode_tps") -> pd.DataFrame:
    """Add the ceiling and measured ÷ ceiling to each run, stating every input in the row.

    Needs memory_bandwidth_gbs and active_params_b; bytes_per_param is taken from the column when given,
    else looked up from `quantization` (bytes_per_param_source says which); a `weights_read_gb` column (GB of
    weights read per token, from the model file's tensors) replaces active params × bytes per param where set. Optional context_tokens and
    kv_bytes_per_token add the KV read. Rows lacking an input get NaN ceilings, not errors.
    """
    out = runs.copy()
    given = pd.to_numeric(out["bytes_per_param"], errors="coerce") if "bytes_per_param" in out else \
        pd.Series(np.nan, index=out.index)
    looked_up = out["quantization"].map(bytes_per_param) if "quantization" in out else pd.Series(None, index=out.index)
    out["bytes_per_param"] = given.fillna(pd.to_numeric(looked_up, errors="coerce"))
    out["bytes_per_param_source"] = np.where(given.notna(), "given",
                                             np.where(out["bytes_per_param"].notna(), "quantization table", "unknown"))
    for column in ("context_tokens", "kv_bytes_per_token"):
        out[column] = pd.to_numeric(out[column], errors="coerce").fillna(0.0) if column in out else 0.0
    weights = pd.to_numeric(out["active_params_b"], errors="coerce") * 1e9 * out["bytes_per_param"]
    if "weights_read_gb" in out:  # measured from the model file's tensor table (benchlib.analysis.weights): used as is
        read = pd.to_numeric(out["weights_read_gb"], errors="coerce")
        weights = (read * 1e9).fillna(weights)
        out["bytes_per_param_source"] = np.where(read.notna(), "GGUF tensor table", out["bytes_per_param_source"])
    out["bytes_per_token_gb"] = (weights + out["context_tokens"] * out["kv_bytes_per_token"]) / 1e9
    out["ceiling_tps"] = pd.to_numeric(out["memory_bandwidth_gbs"], errors="coerce") / out["bytes_per_token_gb"]
    out["efficiency"] = pd.to_numeric(out[tps_col], errors="coerce") / out["ceiling_tps"]
    return out


def above_ceiling(efficiency: Any) -> str:
    """What a point measured faster than its ceiling says (the ceiling, not the run, is wrong: no machine decodes
    faster than it reads its weights), or "" for any other efficiency, unknown included."""
    if not number(efficiency) > 1:  # NaN compares false
        return ""
    return ("faster than the ceiling allows, so the bandwidth it rests on is too low for this machine now (a busy "
            "machine's measurement; `make ladder` measures it again)")



def run_inputs(host: Any, server: Any) -> dict[str, Any]:
    """Roofline inputs of one of our runs, from its params (HostParams / ServerParams, or the same sections as
    dicts in a manifest): bandwidth, active parameters, quantization and bytes per parameter (given, else
    looked up from the quantization). Missing numbers are NaN."""
    def get(section: Any, key: str) -> Any:
        return section.get(key) if isinstance(section, Mapping) else getattr(section, key, None)

    quantization = str(get(server, "quantization") or "")
    given = number(get(server, "bytes_per_param"))
    looked_up = bytes_per_param(quantization)
    return {
        "memory_bandwidth_gbs": number(get(host, "memory_bandwidth_gbs")),
        "active_params_b": number(get(server, "active_params_b")),
        "quantization": quantization,
        "bytes_per_param": given if not math.isnan(given) else (looked_up if looked_up is not None else math.nan),
    }
