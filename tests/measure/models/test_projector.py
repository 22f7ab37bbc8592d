"""The random-weights projector for llama-server's mtmd, read back with gguf's own reader: the keys and tensors
clip.cpp loads for a gemma3-type vision and a qwen2a-type audio encoder in one file, widths that make mtmd accept it
for a language model of any n_embd, and a file small and reproducible enough to write at run time. The real
llama-server taking it is in tests/integration/test_llama_server_real.py."""

import gguf
import numpy as np
import pytest

from benchlib.measure.models import projector
from benchlib.measure.servers.llama_cpp import default_model_path


def tiny_model(path, arch="llama", width=96):
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_uint32(f"{arch}.embedding_length", width)
    writer.add_tensor("token_embd.weight", np.zeros((8, width), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def fields(path):
    reader = gguf.GGUFReader(str(path))
    values = {name: field for name, field in reader.fields.items()}
    tensors = {t.name: t for t in reader.tensors}
    return values, tensors


def test_the_width_comes_from_the_model_s_own_architecture_key(tmp_path):
    assert projector.text_width(tiny_model(tmp_path / "m.gguf", "qwen2", 96)) == 96
    assert projector.text_width(default_model_path()) == 640  # Gemma 3 270M


def test_a_gguf_without_the_width_is_a_clear_error(tmp_path):
    path = tmp_path / "m.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="no llama.embedding_length"):
        projector.text_width(path)


def test_both_encoders_name_their_own_projector_type(tmp_path):
    values, _ = fields(projector.write_projector(tmp_path / "p.gguf", 576))
    assert values["general.architecture"].contents() == "clip"
    # one shared clip.projector_type would give both modalities the same type
    assert "clip.projector_type" not in values
    assert values["clip.vision.projector_type"].contents() == "gemma3"
    assert values["clip.audio.projector_type"].contents() == "qwen2a"
    assert values["clip.has_vision_encoder"].contents() is True and values["clip.has_audio_encoder"].contents() is True
    for modality in ("vision", "audio"):  # clip.cpp reads these with get_u32, which asserts the type
        for key in ("embedding_length", "feed_forward_length", "block_count", "attention.head_count",
                    "projection_dim"):
            field = values[f"clip.{modality}.{key}"]
            assert field.types == [gguf.GGUFValueType.UINT32], key
        assert values[f"clip.{modality}.projection_dim"].contents() == 576
    assert values["clip.audio.num_mel_bins"].contents() == 128
    assert values["clip.vision.image_mean"].contents() == [0.5, 0.5, 0.5]


def test_the_outputs_are_as_wide_as_the_language_model(tmp_path):
    _, tensors = fields(projector.write_projector(tmp_path / "p.gguf", 640))
    # shapes below are ggml's ne (what clip.cpp checks): clip_n_mmproj_embd is ne[0] of gemma3's projection and
    # ne[1] of qwen2a's fc, and mtmd refuses a projector whose width differs from the model's n_embd
    assert list(tensors["mm.input_projection.weight"].shape) == [640, projector.WIDTH]
    assert list(tensors["mm.a.fc.weight"].shape) == [projector.WIDTH, 640]
    assert list(tensors["mm.a.fc.bias"].shape) == [640]


def test_the_tensors_clip_cpp_requires_are_there_with_its_shapes(tmp_path):
    _, tensors = fields(projector.write_projector(tmp_path / "p.gguf", 640))
    w = projector.WIDTH
    assert list(tensors["v.patch_embd.weight"].shape) == [projector.PATCH_SIZE, projector.PATCH_SIZE, 3, w]
    assert list(tensors["v.position_embd.weight"].shape) == [w, (projector.IMAGE_SIZE // projector.PATCH_SIZE) ** 2]
    assert list(tensors["mm.soft_emb_norm.weight"].shape) == [w]
    assert list(tensors["a.conv1d.1.weight"].shape) == [3, projector.MEL_BINS, w]
    assert list(tensors["a.conv1d.2.weight"].shape) == [3, w, w]
    assert list(tensors["a.conv1d.1.bias"].shape) == [1, w]  # broadcast over the frames
    assert int(tensors["a.position_embd.weight"].shape[1]) >= 1500  # whisper-enc.cpp asserts n_pos rows
    for prefix in ("v", "a"):
        for name in ("attn_q", "attn_k", "attn_v", "attn_out", "ln1", "ln2", "ffn_up", "ffn_down"):
            assert f"{prefix}.blk.0.{name}.weight" in tensors, (prefix, name)
        assert f"{prefix}.post_ln.weight" in tensors and f"{prefix}.post_ln.bias" in tensors
        # clip.cpp swaps up and down of gemma3-type files whose down projection starts WIDTH wide
        assert int(tensors[f"{prefix}.blk.0.ffn_down.weight"].shape[0]) == projector.FFN != w
    # whisper-enc.cpp asserts Whisper's bias layout: q and v biased, k not
    assert "a.blk.0.attn_q.bias" in tensors and "a.blk.0.attn_v.bias" in tensors
    assert "a.blk.0.attn_k.bias" not in tensors and "v.blk.0.attn_k.bias" in tensors


def test_token_counts_match_gemma3_and_whisper():
    assert projector.image_tokens() == 256  # Gemma 3's own count per image
    assert projector.audio_tokens() == 750  # a 30 s window: 3000 frames, stride-2 conv, pool of 2


def test_the_file_is_small_and_reproducible(tmp_path):
    first = projector.write_projector(tmp_path / "a.gguf", 640)
    second = projector.write_projector(tmp_path / "b.gguf", 640)
    assert 0.5e6 < first.stat().st_size < 1.5e6
    assert first.read_bytes() == second.read_bytes()
    assert not list(tmp_path.glob(".*.tmp"))  # written through a temp file renamed


def test_the_projector_is_cached_per_width(tmp_path):
    model = tiny_model(tmp_path / "m.gguf", "llama", 96)
    made = projector.projector_for(model, tmp_path / "cache")
    assert made.name == f"random-mmproj-v{projector.FORMAT_VERSION}-96.gguf"
    made.write_bytes(b"kept")  # a second call must not write it again
    assert projector.projector_for(model, tmp_path / "cache").read_bytes() == b"kept"
    other = projector.projector_for(tiny_model(tmp_path / "n.gguf", "llama", 128), tmp_path / "cache")
    assert other != made and other.stat().st_size > 1000


def test_a_width_of_zero_is_refused(tmp_path):
    with pytest.raises(ValueError, match="n_embd must be positive"):
        projector.write_projector(tmp_path / "p.gguf", 0)
