"""A tiny random-weights multimodal projector (mmproj GGUF) for llama-server's mtmd, written with the `gguf` package
for any language model's width: images and audio then travel through llama.cpp's real multimodal path (payload
decoding, image preprocessing, Whisper log-mel features, media markers, the embeddings' prefill) on a model that
has no projector of its own. Its answers are noise; deployments using it declare `server.weights: random`.

mtmd checks only that the projector's output width equals the text model's n_embd (mtmd.cpp, "mismatch between
text model and mmproj"); the projector type does not depend on the model's architecture. One file holds both
encoders, each naming its own type (clip.vision.projector_type / clip.audio.projector_type, read when the shared
clip.projector_type is absent):

- vision, type gemma3 (tools/mtmd/models/siglip.cpp): a SigLIP ViT over IMAGE_SIZE² pixels in PATCH_SIZE² patches,
  pooled by clip.vision.projector.scale_factor, RMS-normed (mm.soft_emb_norm) and projected (mm.input_projection).
  16×16 patches pooled by 1 give 256 tokens per image, Gemma 3's own count (its 896 px / 14 px patches pooled 4×4).
- audio, type qwen2a (tools/mtmd/models/whisper-enc.cpp): two conv1d over 128 mel bins (the second with stride 2),
  a Whisper encoder block, an average pool of 2, then mm.a.fc. mtmd pads every clip to 30 s, so each clip gives the
  same 750 tokens (3000 frames / 2 / 2) plus its <|audio_bos|>/<|audio_eos|> markers.

Tensor shapes are numpy's (ggml's ne reversed). Matrices and convolution kernels are f16 and vectors f32, as
llama.cpp's converters write them; every value is drawn from a fixed seed, so the same width gives the same file.
"""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np

from benchlib.measure.models.gguf_header import read_header

FORMAT_VERSION = 1  # bump when the layout below changes: part of the cached file's name
IMAGE_SIZE = 224
PATCH_SIZE = 14
MERGE = 1
WIDTH = 64  # the encoders' own width (both)
HEADS = 4
FFN = 128  # != WIDTH: clip.cpp swaps ffn up/down of gemma3 files whose down projection is WIDTH wide
LAYERS = 1
MEL_BINS = 128
AUDIO_POSITIONS = 1500  # Whisper's 30 s window after the stride-2 conv
SEED = 31
EPS = 1e-6


def text_width(model: Path | str) -> int:
    """The language model's n_embd: `<general.architecture>.embedding_length` of its GGUF."""
    fields = read_header(model).fields
    arch = fields.get(gguf.Keys.General.ARCHITECTURE)
    if not isinstance(arch, str):
        raise ValueError(f"{model}: no general.architecture in the GGUF")
    width = fields.get(f"{arch}.embedding_length")
    if not isinstance(width, int):
        raise ValueError(f"{model}: no {arch}.embedding_length in the GGUF")
    return width


def image_tokens() -> int:
    """Embeddings one image becomes (the <start_of_image>/<end_of_image> markers come on top)."""
    side = IMAGE_SIZE // PATCH_SIZE // MERGE
    return side * side


def audio_tokens() -> int:
    """Embeddings one clip becomes: 30 s of 10 ms mel frames, halved by the conv's stride, halved by the pool."""
    return 3000 // 2 // 2


def _block(writer: gguf.GGUFWriter, prefix: str, rng: np.random.Generator, *, k_bias: bool) -> None:
    for il in range(LAYERS):
        name = f"{prefix}.blk.{il}"
        for proj in ("attn_q", "attn_k", "attn_v", "attn_out"):
            writer.add_tensor(f"{name}.{proj}.weight", _matrix(rng, WIDTH, WIDTH))
            if proj != "attn_k" or k_bias:  # Whisper's key projection has no bias (whisper-enc.cpp asserts it)
                writer.add_tensor(f"{name}.{proj}.bias", np.zeros(WIDTH, np.float32))
        for norm in ("ln1", "ln2"):
            writer.add_tensor(f"{name}.{norm}.weight", np.ones(WIDTH, np.float32))
            writer.add_tensor(f"{name}.{norm}.bias", np.zeros(WIDTH, np.float32))
        writer.add_tensor(f"{name}.ffn_up.weight", _matrix(rng, FFN, WIDTH))
        writer.add_tensor(f"{name}.ffn_up.bias", np.zeros(FFN, np.float32))
        writer.add_tensor(f"{name}.ffn_down.weight", _matrix(rng, WIDTH, FFN))
        writer.add_tensor(f"{name}.ffn_down.bias", np.zeros(WIDTH, np.float32))
    writer.add_tensor(f"{prefix}.post_ln.weight", np.ones(WIDTH, np.float32))
    writer.add_tensor(f"{prefix}.post_ln.bias", np.zeros(WIDTH, np.float32))


def _matrix(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) * 0.02).astype(np.float16)


def _sizes(writer: gguf.GGUFWriter, modality: str, n_embd: int) -> None:
    writer.add_uint32(f"clip.{modality}.embedding_length", WIDTH)
    writer.add_uint32(f"clip.{modality}.feed_forward_length", FFN)
    writer.add_uint32(f"clip.{modality}.block_count", LAYERS)
    writer.add_uint32(f"clip.{modality}.attention.head_count", HEADS)
    writer.add_uint32(f"clip.{modality}.projection_dim", n_embd)
    writer.add_float32(f"clip.{modality}.attention.layer_norm_epsilon", EPS)


def write_projector(path: Path | str, n_embd: int) -> Path:
    """Write the projector for a language model `n_embd` wide to `path` (atomically: a temp file renamed)."""
    if n_embd <= 0:
        raise ValueError(f"n_embd must be positive, not {n_embd}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    rng = np.random.default_rng(SEED)
    writer = gguf.GGUFWriter(str(tmp), "clip")
    try:
        writer.add_name(f"frontier-bench random projector ({n_embd})")
        writer.add_description("random weights: gemma3-type vision and qwen2a-type audio encoders for mtmd; "
                               "payloads and token counts are real, the embeddings are noise")
        writer.add_bool("clip.has_vision_encoder", True)
        writer.add_bool("clip.has_audio_encoder", True)
        writer.add_bool("clip.use_gelu", True)
        writer.add_string("clip.vision.projector_type", "gemma3")
        writer.add_string("clip.audio.projector_type", "qwen2a")
        _sizes(writer, "vision", n_embd)
        writer.add_uint32("clip.vision.image_size", IMAGE_SIZE)
        writer.add_uint32("clip.vision.patch_size", PATCH_SIZE)
        writer.add_uint32("clip.vision.projector.scale_factor", MERGE)
        writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
        writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
        _sizes(writer, "audio", n_embd)
        writer.add_uint32("clip.audio.num_mel_bins", MEL_BINS)

        patches = (IMAGE_SIZE // PATCH_SIZE) ** 2
        writer.add_tensor("v.patch_embd.weight", _matrix(rng, WIDTH, 3, PATCH_SIZE, PATCH_SIZE))
        writer.add_tensor("v.patch_embd.bias", np.zeros(WIDTH, np.float32))
        writer.add_tensor("v.position_embd.weight", (rng.standard_normal((patches, WIDTH)) * 0.02).astype(np.float32))
        _block(writer, "v", rng, k_bias=True)
        writer.add_tensor("mm.soft_emb_norm.weight", np.ones(WIDTH, np.float32))
        writer.add_tensor("mm.input_projection.weight", _matrix(rng, WIDTH, n_embd))

        writer.add_tensor("a.conv1d.1.weight", _matrix(rng, WIDTH, MEL_BINS, 3))
        writer.add_tensor("a.conv1d.1.bias", np.zeros((WIDTH, 1), np.float32))
        writer.add_tensor("a.conv1d.2.weight", _matrix(rng, WIDTH, WIDTH, 3))
        writer.add_tensor("a.conv1d.2.bias", np.zeros((WIDTH, 1), np.float32))
        writer.add_tensor("a.position_embd.weight",
                          (rng.standard_normal((AUDIO_POSITIONS, WIDTH)) * 0.02).astype(np.float32))
        _block(writer, "a", rng, k_bias=False)
        writer.add_tensor("mm.a.fc.weight", _matrix(rng, n_embd, WIDTH))
        writer.add_tensor("mm.a.fc.bias", np.zeros(n_embd, np.float32))

        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    try:
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def projector_for(model: Path | str, cache: Path) -> Path:
    """The projector matching `model`'s width, under `cache` (written now when absent: well under a second)."""
    n_embd = text_width(model)
    target = Path(cache) / f"random-mmproj-v{FORMAT_VERSION}-{n_embd}.gguf"
    return target if target.is_file() else write_projector(target, n_embd)
