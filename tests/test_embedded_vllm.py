"""vLLM as the second embedded server, without vLLM: the chat template it is given, the command line, the cached
Hugging Face copy, and the one-line errors when the environment or the conversion is missing. The real server
runs in the integration tests against a real vLLM."""

import sys
from pathlib import Path

import jinja2
import pytest

from benchlib.embedded import EmbeddedServerError, default_model_path
from benchlib.embedded_vllm import CHAT_TEMPLATE, VllmServer, hf_copy
from benchlib.params import EmbeddedParams
from benchlib.quantize import file_sha256


def render(messages, add_generation_prompt=True) -> str:
    template = jinja2.Environment().from_string(CHAT_TEMPLATE.read_text())
    return template.render(messages=messages, bos_token="<bos>", add_generation_prompt=add_generation_prompt)


def test_the_chat_template_writes_gemma_turns():
    text = render([{"role": "system", "content": "Be brief."},
                   {"role": "user", "content": [{"type": "text", "text": "Name a colour."}]},
                   {"role": "assistant", "content": "Red."},
                   {"role": "user", "content": "Another?"}])
    assert text == ("<bos><start_of_turn>user\nBe brief.\n\nName a colour.<end_of_turn>\n"
                    "<start_of_turn>model\nRed.<end_of_turn>\n"
                    "<start_of_turn>user\nAnother?<end_of_turn>\n<start_of_turn>model\n")
    assert render([{"role": "user", "content": "Hi"}], add_generation_prompt=False) == \
        "<bos><start_of_turn>user\nHi<end_of_turn>\n"


def test_the_command_serves_the_copy_under_the_run_s_model_name(tmp_path):
    settings = EmbeddedParams(engine="vllm", n_ctx=2048, vllm_python=sys.executable, vllm_args=["--seed", "7"])
    server = VllmServer(settings, "gemma3-270m-bf16-of-q4_k_m", tmp_path / "server.log")
    command = server.command("/cache/hf/abc", 8123)
    assert command[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    pairs = dict(zip(command[3::2], command[4::2]))
    assert pairs["--model"] == "/cache/hf/abc" and pairs["--served-model-name"] == "gemma3-270m-bf16-of-q4_k_m"
    assert pairs["--host"] == "127.0.0.1" and pairs["--port"] == "8123" and pairs["--max-model-len"] == "2048"
    assert pairs["--chat-template"] == str(CHAT_TEMPLATE)
    assert "--enable-prompt-tokens-details" in command and command[-2:] == ["--seed", "7"]
    env = server.environment()
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert server.read_new_timings() == [] and server.openmp() == {}


def test_a_missing_vllm_environment_is_one_clear_error(tmp_path):
    settings = EmbeddedParams(engine="vllm", vllm_python=str(tmp_path / "nope" / "python"))
    with pytest.raises(EmbeddedServerError, match=r"does not exist: run `make vllm`"):
        VllmServer(settings, "m", tmp_path / "server.log").start()


def test_the_copy_is_made_once_per_gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("FRONTIER_BENCH_CACHE", str(tmp_path / "cache"))
    gguf = Path(default_model_path())
    sha = file_sha256(gguf)
    made = tmp_path / "cache" / "hf" / sha[:16]
    made.mkdir(parents=True)
    (made / "config.json").write_text("{}")
    assert hf_copy(gguf, Path("/nonexistent/python"), tmp_path / "log", sha=sha) == made  # cached: nothing runs


def test_a_failed_conversion_shows_the_converter_s_own_words(tmp_path, monkeypatch):
    monkeypatch.setenv("FRONTIER_BENCH_CACHE", str(tmp_path / "cache"))
    fake_gguf = tmp_path / "model.gguf"
    fake_gguf.write_bytes(b"GGUF not really")
    stand_in = tmp_path / "python"  # a python that fails the way a missing dependency would
    stand_in.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named transformers' >&2\nexit 1\n")
    stand_in.chmod(0o755)
    with pytest.raises(EmbeddedServerError) as caught:
        hf_copy(fake_gguf, stand_in, tmp_path / "server.log")
    assert "converting model.gguf for vLLM failed (exit 1)" in str(caught.value)
    assert "No module named transformers" in str(caught.value)
    assert not list((tmp_path / "cache" / "hf").glob("*/config.json"))
