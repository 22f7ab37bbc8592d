"""vLLM as the second embedded server, without vLLM: the chat template it is given, the command line, the cached
Hugging Face copy (and the random audio checkpoint beside it), the one-line errors when the environment or the
conversion is missing, and what `server.weights: random` does to a run. The real server runs in the integration
tests against a real vLLM."""

import sys
from pathlib import Path

import jinja2
import numpy as np
import pytest

from benchlib.analysis import frontier
from benchlib.config.params import EmbeddedParams, ParamsError, validate
from benchlib.measure.models.quantize import file_sha256
from benchlib.measure.servers.llama_cpp import EmbeddedServerError, default_model_path
from benchlib.measure.servers.vllm import CHAT_TEMPLATE, VllmServer, hf_copy
from benchlib.paper.runs import load_runs
from benchlib.paper.systems import run_systems
from benchlib.suites.runner import run_suite


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
    assert "building the converted checkpoint of model.gguf for vLLM failed (exit 1)" in str(caught.value)
    assert "No module named transformers" in str(caught.value)
    assert not list((tmp_path / "cache" / "hf").glob("*/config.json"))


def test_the_random_audio_checkpoint_is_its_own_cached_folder_served_with_one_audio_per_prompt(tmp_path, monkeypatch):
    monkeypatch.setenv("FRONTIER_BENCH_CACHE", str(tmp_path / "cache"))
    gguf = Path(default_model_path())
    sha = file_sha256(gguf)
    made = tmp_path / "cache" / "hf" / f"{sha[:16]}-random-qwen2-audio"
    made.mkdir(parents=True)
    (made / "config.json").write_text("{}")
    assert hf_copy(gguf, Path("/nonexistent/python"), tmp_path / "log", sha=sha, checkpoint="random-qwen2-audio") \
        == made  # beside, never instead of, the converted copy
    settings = EmbeddedParams(engine="vllm", vllm_python=sys.executable, vllm_checkpoint="random-qwen2-audio")
    command = VllmServer(settings, "random-audio", tmp_path / "server.log").command(str(made), 8124)
    assert command[command.index("--limit-mm-per-prompt") + 1] == '{"audio": 1}'
    plain = VllmServer(EmbeddedParams(engine="vllm", vllm_python=sys.executable), "m", tmp_path / "s.log")
    assert "--limit-mm-per-prompt" not in plain.command("/x", 1)


def test_random_weights_must_be_declared():
    data = {"host": {"name": "h"}, "server": {"kind": "embedded", "model": "m",
                                             "embedded": {"engine": "vllm", "vllm_checkpoint": "random-qwen2-audio"}}}
    with pytest.raises(ParamsError, match="declare server.weights: random"):
        validate(data, source="random.yaml")
    data["server"]["weights"] = "random"
    assert validate(data, source="random.yaml").server.weights == "random"


def test_a_random_weights_run_is_timed_never_scored_and_kept_off_every_frontier(params_for, outputs):
    """What item 5's checkpoint runs are for: payload acceptance and timings. Its answers are not a model's."""
    params = params_for({"tokens": 6}, run={"repeats": 2, "warmups": 0})
    params.tasks, params.server.weights = ["basic_qa"], "random"
    result = run_suite(params, "text", progress=False)
    rows = result.requests
    assert (rows["status"] == "ok").all() and rows["decode_tps"].astype(float).gt(0).all()
    assert rows["passed"].isna().all() and (rows["check_detail"] == "random weights: not scored").all()
    summary = result.summary.set_index("task")
    assert summary.loc["basic_qa", "n_scored"] == 0 and np.isnan(summary.loc["basic_qa", "accuracy"])
    runs = load_runs(outputs)
    assert runs.meta["weights"].tolist() == ["random"]
    systems = run_systems(runs)
    assert systems["excluded"].tolist() == ["random weights (timings only)"]
    for key in frontier.PAPER_REGIMES:
        regime = frontier.REGIMES[key]
        marked = frontier.pareto_frontier(systems, regime.all_axes(), requires=regime.requires,
                                          floors=regime.floors(), missing=regime.missing)
        assert len(marked) and not marked["on_frontier"].any()
        assert (marked["dominated_by"] == "not eligible: random weights (timings only)").all()
