"""The deployments a plan predicts (benchlib.analysis.plan.Candidate), from what a user has at hand:

    a GGUF file      weights and bytes read per token from its own tensor table (benchlib.analysis.weights), the KV
                     cache per token from its header (<arch>.block_count, .attention.head_count_kv, .key_length and
                     .value_length, else embedding_length ÷ head_count)
    a config.json    a Hugging Face config: parameters counted from its shapes (a decoder of `num_hidden_layers`
                     blocks: attention q/k/v/o, a gated MLP of three matrices, or `num_experts` of them of which
                     `num_experts_per_tok` are active; embeddings, and a separate output matrix unless
                     `tie_word_embeddings`), bytes per weight from `quantization_config` (its quant_method or
                     bits) or `torch_dtype`
    a catalog entry  parameters, active parameters and bytes per weight (or a quantization label) as given, with
                     its source (an entry naming a seed's model is completed from that seed's printed sizes by
                     the caller: benchlib.published.reference.published_model)

Bytes read per token: the GGUF's tensor rule; elsewhere active parameters × bytes per weight, and where the
active count is below the total (experts, per-layer embeddings) the total is the larger reading the decode
interval reaches down to (plan.Candidate.read_gb_high)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from benchlib.analysis.plan import Candidate, kv_bytes_per_token
from benchlib.analysis.roofline import bytes_per_param
from benchlib.analysis.weights import read_gguf
from benchlib.measure.models.gguf_header import quantization_name, read_header

GB = 1e9
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float8_e4m3fn": "fp8"}  # torch names


class CandidateError(ValueError):
    """A candidate that cannot be read (one line, naming the file or entry)."""


def gguf_kv_bytes(fields: Mapping[str, Any]) -> float:
    """KV cache bytes per context token from a GGUF header; NaN when the keys are missing."""
    arch = fields.get("general.architecture")
    if not isinstance(arch, str):
        return math.nan

    def get(key: str) -> float:
        value = fields.get(f"{arch}.{key}")
        if isinstance(value, list):  # per-layer lists (some hybrids): their largest entry
            value = max((v for v in value if isinstance(v, (int, float))), default=None)
        return float(value) if isinstance(value, (int, float)) else math.nan

    layers, heads, kv_heads = get("block_count"), get("attention.head_count"), get("attention.head_count_kv")
    kv_heads = heads if math.isnan(kv_heads) else kv_heads
    head_dim = get("embedding_length") / heads if heads > 0 else math.nan
    key = get("attention.key_length")
    value = get("attention.value_length")
    key, value = (head_dim if math.isnan(key) else key), (head_dim if math.isnan(value) else value)
    return kv_bytes_per_token(layers, kv_heads, key, value)


def from_gguf(path: str | Path, name: str = "") -> Candidate:
    path = Path(path)
    try:
        weights = read_gguf(path)
        header = read_header(path)
    except (OSError, ValueError) as exc:
        raise CandidateError(str(exc)) from None
    quant = quantization_name(weights.file_type) or weights.file_type
    notes = []
    fields = header.fields
    if isinstance(fields.get("gemma3.attention.sliding_window"), int):
        notes.append("KV cache counted in full on every layer: sliding-window layers hold less (an upper bound)")
    return Candidate(
        name=name or path.stem, origin="gguf", quantization=quant, params_b=weights.n_params / GB,
        active_params_b=weights.n_params / GB, weights_gb=weights.tensor_bytes / GB,
        read_gb=weights.read_per_token_gb, read_basis="GGUF tensor table", kv_bytes_per_token=gguf_kv_bytes(fields),
        path=str(path), weights_key=path.name, notes=tuple(notes))


def _config_bytes(config: Mapping[str, Any]) -> tuple[float, str]:
    quant = config.get("quantization_config") or {}
    if isinstance(quant, Mapping) and quant:
        method = str(quant.get("quant_method") or quant.get("format") or "")
        bits = quant.get("bits") or quant.get("weight_bits")
        found = bytes_per_param(method)
        if found is not None:
            return found, method
        if isinstance(bits, (int, float)):
            return bits / 8 + 0.03, f"{bits}-bit {method}".strip()  # + group scales (group of 128, fp16)
        raise CandidateError(f"quantization_config {method or quant!r}: bytes per weight unknown")
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    label = DTYPES.get(dtype, dtype)
    found = bytes_per_param(label) or bytes_per_param(dtype)
    if found is None:
        raise CandidateError(f"torch_dtype {dtype!r}: bytes per weight unknown")
    return found, label


def config_params(config: Mapping[str, Any]) -> tuple[float, float]:
    """(total, active) parameters of a decoder-only config, counted from its shapes (module docstring)."""
    text = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else config
    try:
        hidden = int(text["hidden_size"])
        layers = int(text["num_hidden_layers"])
        vocab = int(text["vocab_size"])
        heads = int(text["num_attention_heads"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CandidateError(f"config.json lacks {exc} (hidden_size, num_hidden_layers, vocab_size, "
                             "num_attention_heads)") from None
    kv_heads = int(text.get("num_key_value_heads") or heads)
    head_dim = int(text.get("head_dim") or hidden // heads)
    attention = hidden * head_dim * (2 * heads + 2 * kv_heads)
    experts = int(text.get("num_experts") or text.get("num_local_experts") or 0)
    routed = int(text.get("num_experts_per_tok") or 0)
    expert_size = int(text.get("moe_intermediate_size") or text.get("intermediate_size") or 0)
    if experts and routed:
        shared = int(text.get("shared_expert_intermediate_size") or 0)
        mlp_total = 3 * hidden * (experts * expert_size + shared)
        mlp_active = 3 * hidden * (routed * expert_size + shared)
    else:
        mlp_total = mlp_active = 3 * hidden * int(text.get("intermediate_size") or 4 * hidden)
    embed = vocab * hidden * (1 if text.get("tie_word_embeddings", config.get("tie_word_embeddings", True)) else 2)
    total = layers * (attention + mlp_total) + embed
    active = layers * (attention + mlp_active) + embed
    return total / GB, active / GB


def from_config(path: str | Path, name: str = "") -> Candidate:
    path = Path(path)
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CandidateError(f"{path}: not a readable config.json ({exc})") from None
    total, active = config_params(config)
    per_weight, label = _config_bytes(config)
    text = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else config
    heads = int(text["num_attention_heads"])
    head_dim = int(text.get("head_dim") or int(text["hidden_size"]) // heads)
    kv = kv_bytes_per_token(int(text["num_hidden_layers"]), int(text.get("num_key_value_heads") or heads),
                            head_dim, head_dim)
    return Candidate(
        name=name or str(config.get("_name_or_path") or path.parent.name), origin="config.json", quantization=label,
        params_b=total, active_params_b=active, weights_gb=total * per_weight, read_gb=active * per_weight,
        read_basis=f"active params (from the config's shapes) × {per_weight:g} B", kv_bytes_per_token=kv,
        read_gb_high=total * per_weight if active < total else math.nan, path=str(path),
        notes=("parameters counted from the config's shapes (norms and biases left out)",))


def from_entry(entry: Mapping[str, Any]) -> Candidate:
    """A catalog entry (module docstring): name, params_b, active_params_b, quantization or bytes_per_weight,
    source, and optionally layers, kv_heads and head_dim (the KV cache) and notes. An entry naming a seed's model
    is completed from the seed's printed sizes first (benchlib.published.reference.published_model)."""
    entry = dict(entry)
    name = str(entry.get("name") or entry.get("model") or "")
    notes = list(entry.get("notes") or [])
    try:
        total = float(entry["params_b"])
        active = float(entry.get("active_params_b") or total)
    except (KeyError, TypeError, ValueError):
        raise CandidateError(f"catalog entry {name!r}: params_b (and active_params_b) needed") from None
    quant = str(entry.get("quantization") or "")
    per_weight = entry.get("bytes_per_weight")
    per_weight = float(per_weight) if per_weight is not None else bytes_per_param(quant)
    if per_weight is None:
        raise CandidateError(f"catalog entry {name!r}: bytes_per_weight, or a quantization the roofline knows "
                             f"(not {quant!r})")
    kv = math.nan
    if all(k in entry for k in ("layers", "kv_heads", "head_dim")):
        kv = kv_bytes_per_token(entry["layers"], entry["kv_heads"], entry["head_dim"], entry["head_dim"])
    return Candidate(
        name=name, origin="catalog", quantization=quant or f"{per_weight:g} B/weight", params_b=total,
        active_params_b=active, weights_gb=total * per_weight, read_gb=active * per_weight,
        read_basis=f"active params × {per_weight:g} B ({entry.get('source', 'catalog')})",
        read_gb_high=total * per_weight if active < total else math.nan, kv_bytes_per_token=kv,
        weights_key=str(entry.get("weights_key") or ""), notes=tuple(notes))
