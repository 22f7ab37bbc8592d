"""A random-weights language model GGUF of an architecture llama.cpp serves (llama), written with the `gguf` package at
any size: a deployment of a given size class (the seed paper's ~4B models) on hardware where no such model can be
carried in (the GPU machines take 64 MiB a command). Its timings, memory, power and bandwidth are a real model's of
that shape; its answers are noise, so deployments serving it declare `server.weights: random` (never scored, off every
frontier), as the random projector's do (benchlib.measure.models.projector).

The tokenizer is copied from a packaged model's GGUF (every `tokenizer.*` key: vocabulary, merges, special tokens, chat
template), so prompts tokenize as that model's would and the vocabulary sets the embedding's size. `tokenizer_only`
writes just those keys into a small vocab GGUF (as llama.cpp's own models/ggml-vocab-*.gguf), which is what travels.

Weights are BF16 or F16 (F32 norms, as llama.cpp's converters write them), drawn once into a pool of POOL values
(normal, sd 0.02, fixed seed) that every matrix is tiled from at its own offset: a 4B model is written at disk speed
instead of spending minutes in the random generator, and the same shape and seed give the same file. Tensors are
streamed to the file one at a time (gguf's add_tensor_info / write_tensor_data), so memory holds one matrix at most.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import gguf
import numpy as np

ARCH = "llama"
POOL = 1 << 22  # values drawn once; every tensor is a window of this pool repeated
SEED = 41
DTYPES = {"bf16": gguf.GGMLQuantizationType.BF16, "f16": gguf.GGMLQuantizationType.F16}
FILE_TYPES = {"bf16": gguf.LlamaFileType.MOSTLY_BF16, "f16": gguf.LlamaFileType.MOSTLY_F16}


@dataclass(frozen=True)
class Shape:
    """A decoder's hyperparameters (llama's GGUF keys); vocabulary size comes from the tokenizer."""
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_ctx_train: int = 32768
    rope_base: float = 1_000_000.0
    eps: float = 1e-6

    def params(self, n_vocab: int) -> int:
        """Weights in the file: untied embedding and output, every block's matrices and norms."""
        q, kv = self.n_head * self.head_dim, self.n_head_kv * self.head_dim
        block = self.n_embd * (q + 2 * kv) + q * self.n_embd + 3 * self.n_embd * self.n_ff + 2 * self.n_embd
        return 2 * n_vocab * self.n_embd + self.n_layer * block + self.n_embd


# "4b": Qwen3-4B's widths (2560 wide, 36 blocks, 32 query and 8 KV heads of 128, FFN 9728) under the llama
# architecture; with SmolLM2's 49,152-token vocabulary 3.9 B weights, 7.8 GB in BF16. "tiny": what tests load.
SHAPES = {
    "4b": Shape(n_embd=2560, n_layer=36, n_head=32, n_head_kv=8, head_dim=128, n_ff=9728),
    "tiny": Shape(n_embd=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=16, n_ff=128, n_ctx_train=4096),
}


def tokenizer_fields(source: Path | str) -> list[tuple[str, object, gguf.GGUFValueType, gguf.GGUFValueType | None]]:
    """Every `tokenizer.*` key of a GGUF as (key, value, type, array element type). Read once per version of the
    file (its size and modification time): GGUFReader takes seconds over a 49k-token vocabulary, and a vocab is read
    again for every model written from it. The values are shared between callers: read them, do not change them."""
    path = Path(source).resolve()
    stat = path.stat()
    return list(_tokenizer_fields(str(path), stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=4)
def _tokenizer_fields(source: str, size: int, mtime_ns: int) -> tuple:
    reader = gguf.GGUFReader(source)
    out = []
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        out.append((key, field.contents(), vtype, sub))
    if not any(key == "tokenizer.ggml.tokens" for key, *_ in out):
        raise ValueError(f"{source}: no tokenizer.ggml.tokens (not a model or vocab GGUF)")
    return tuple(out)


def _vocab_size(fields: list) -> int:
    return next(len(value) for key, value, *_ in fields if key == "tokenizer.ggml.tokens")


def _atomic(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def tokenizer_only(source: Path | str, target: Path | str) -> Path:
    """A vocab GGUF: `source`'s tokenizer keys and no tensors (what the model writer reads on the other machine)."""
    target = Path(target)
    tmp = _atomic(target)
    writer = gguf.GGUFWriter(str(tmp), ARCH)
    try:
        writer.add_name(f"tokenizer of {Path(source).name}")
        for key, value, vtype, sub in tokenizer_fields(source):
            writer.add_key_value(key, value, vtype, sub)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
    finally:
        writer.close()
    os.replace(tmp, target)
    return target


def _tensors(shape: Shape, n_vocab: int) -> Iterator[tuple[str, tuple[int, ...], bool]]:
    """(name, numpy shape, is a matrix) in llama.cpp's names; numpy shapes are ggml's ne reversed."""
    q, kv = shape.n_head * shape.head_dim, shape.n_head_kv * shape.head_dim
    yield "token_embd.weight", (n_vocab, shape.n_embd), True
    for il in range(shape.n_layer):
        blk = f"blk.{il}"
        yield f"{blk}.attn_norm.weight", (shape.n_embd,), False
        yield f"{blk}.attn_q.weight", (q, shape.n_embd), True
        yield f"{blk}.attn_k.weight", (kv, shape.n_embd), True
        yield f"{blk}.attn_v.weight", (kv, shape.n_embd), True
        yield f"{blk}.attn_output.weight", (shape.n_embd, q), True
        yield f"{blk}.ffn_norm.weight", (shape.n_embd,), False
        yield f"{blk}.ffn_gate.weight", (shape.n_ff, shape.n_embd), True
        yield f"{blk}.ffn_up.weight", (shape.n_ff, shape.n_embd), True
        yield f"{blk}.ffn_down.weight", (shape.n_embd, shape.n_ff), True
    yield "output_norm.weight", (shape.n_embd,), False
    yield "output.weight", (n_vocab, shape.n_embd), True


def _pool(dtype: str) -> np.ndarray:
    """POOL weights as the file stores them: bf16 as the top half of each float32's bits, f16 as float16."""
    values = (np.random.default_rng(SEED).standard_normal(POOL, dtype=np.float32) * 0.02)
    if dtype == "bf16":
        return (values.view(np.uint32) >> 16).astype(np.uint16)
    return values.astype(np.float16)


def _matrix(pool: np.ndarray, shape: tuple[int, ...], offset: int) -> np.ndarray:
    n = int(np.prod(shape))
    return np.resize(np.roll(pool, -offset) if offset else pool, n).reshape(shape)


def write_model(path: Path | str, tokenizer: Path | str, shape: Shape, dtype: str = "bf16",
                name: str = "frontier-bench random llama") -> dict:
    """Write the model to `path` (atomically: a temp file renamed); what was written: its shape, weights and bytes."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: one of {', '.join(DTYPES)}")
    path = Path(path)
    fields = tokenizer_fields(tokenizer)
    n_vocab = _vocab_size(fields)
    tmp = _atomic(path)
    writer = gguf.GGUFWriter(str(tmp), ARCH)
    raw = DTYPES[dtype]
    try:
        writer.add_name(name)
        writer.add_description("random weights: timings, memory and power are a real model's of this shape, the "
                               "answers are noise (declare server.weights: random)")
        writer.add_context_length(shape.n_ctx_train)
        writer.add_embedding_length(shape.n_embd)
        writer.add_block_count(shape.n_layer)
        writer.add_feed_forward_length(shape.n_ff)
        writer.add_head_count(shape.n_head)
        writer.add_head_count_kv(shape.n_head_kv)
        writer.add_key_length(shape.head_dim)
        writer.add_value_length(shape.head_dim)
        writer.add_rope_dimension_count(shape.head_dim)
        writer.add_rope_freq_base(shape.rope_base)
        writer.add_layer_norm_rms_eps(shape.eps)
        writer.add_vocab_size(n_vocab)
        writer.add_file_type(FILE_TYPES[dtype])
        for key, value, vtype, sub in fields:
            writer.add_key_value(key, value, vtype, sub)
        tensors = list(_tensors(shape, n_vocab))
        for tensor_name, dims, matrix in tensors:
            itemsize = 2 if matrix else 4
            dims_dtype = np.dtype(np.uint16 if matrix and dtype == "bf16" else np.float16 if matrix else np.float32)
            writer.add_tensor_info(tensor_name, dims, dims_dtype, int(np.prod(dims)) * itemsize,
                                   raw_dtype=raw if matrix else None)
        writer.write_header_to_file(tmp)
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        pool = _pool(dtype)
        for i, (_, dims, matrix) in enumerate(tensors):
            data = _matrix(pool, dims, (i * 7919) % POOL) if matrix else np.ones(dims, np.float32)
            writer.write_tensor_data(data)
    finally:
        writer.close()
    os.replace(tmp, path)
    return {"architecture": ARCH, "dtype": dtype, "n_vocab": n_vocab, "params": shape.params(n_vocab),
            "bytes": path.stat().st_size, **dataclasses.asdict(shape)}
