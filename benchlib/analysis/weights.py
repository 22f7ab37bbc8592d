"""Bytes a GGUF model reads from memory per generated token, from its own tensor sizes (not a nominal
bits-per-weight).

Rule: decoding one token multiplies the token's hidden state through every weight matrix once, so every tensor is
read once per token, except the token-embedding table, from which one row is looked up. When the model has no
separate `output.weight` (tied embeddings, as in Gemma), the logits are computed against the whole embedding table,
so it is read in full after all. KV-cache reads (which grow with the context) are not included.

For Gemma 3 270M this matters: 170 MiB of its 235 MiB Q4_K_M tensors are the Q8_0 embedding table (262,144 tokens ×
640), so active parameters × 0.61 bytes (4.85 bits) gives 0.165 GB per token where 0.247 GB are read.

Read from the file's tensor table (benchlib.measure.models.gguf_header, which steps over the vocabulary that the `gguf`
package's reader spends ~13 s on); results are still memoised beside the caller's cache (see `read_cached`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchlib.measure.models.gguf_header import file_type_name, read_header
from benchlib.records.rows import write_atomic

EMBEDDING = "token_embd.weight"
OUTPUT = "output.weight"


@dataclass
class GGUFWeights:
    """Tensor bytes of one GGUF file and the bytes one decoded token reads (see the module rule)."""

    path: str
    size_bytes: int
    file_type: str  # llama.cpp's LLAMA_FTYPE name, e.g. MOSTLY_Q4_K_M
    tensor_bytes: int
    n_params: int
    embedding_bytes: int
    embedding_type: str
    tied_embeddings: bool
    read_per_token_bytes: int
    tensor_types: dict[str, int] = field(default_factory=dict)  # ggml type -> tensor count

    @property
    def read_per_token_gb(self) -> float:
        return self.read_per_token_bytes / 1e9

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.tensor_bytes / self.n_params if self.n_params else float("nan")


def read_gguf(path: str | Path) -> GGUFWeights:
    """Read a GGUF file's tensor table; raise ValueError with the path if it is not a GGUF file."""
    path = Path(path)
    header = read_header(path)
    tensors = {t.name: t for t in header.tensors}
    total = sum(t.n_bytes for t in tensors.values())
    params = sum(t.n_elements for t in tensors.values())
    embedding = tensors.get(EMBEDDING)
    tied = OUTPUT not in tensors
    emb_bytes = embedding.n_bytes if embedding is not None else 0
    if embedding is not None and not tied:
        rows = int(embedding.shape[-1])  # GGUF lists dimensions innermost first: [hidden, vocab]
        per_token = total - emb_bytes + emb_bytes // max(rows, 1)
    else:
        per_token = total
    kinds: dict[str, int] = {}
    for tensor in tensors.values():
        kinds[tensor.type_name] = kinds.get(tensor.type_name, 0) + 1
    return GGUFWeights(path=str(path), size_bytes=path.stat().st_size,
                       file_type=file_type_name(header.fields.get("general.file_type", -1)),
                       tensor_bytes=total, n_params=params, embedding_bytes=emb_bytes,
                       embedding_type=embedding.type_name if embedding is not None else "",
                       tied_embeddings=tied, read_per_token_bytes=per_token, tensor_types=dict(sorted(kinds.items())))


def read_cached(path: str | Path, cache: Path) -> GGUFWeights:
    """read_gguf, memoised in `cache` (a JSON file) keyed by the file's path, size and mtime."""
    path = Path(path)
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    try:
        known = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if key in known:
        return GGUFWeights(**known[key])
    weights = read_gguf(path)
    known[key] = asdict(weights)
    write_atomic(cache, json.dumps(known, indent=1))
    return weights
