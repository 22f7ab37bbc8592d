"""Which server this is, and what that server answers where: one profile per server, declared once as data.

Every place that asks "which server" reads PROFILES through `profile_for` (or `by_name`): the embedded engines
params accept (ENGINES), the launcher a suite starts (benchlib.measure.servers.launchers maps `engine` to its
class), the endpoints the manifest asks for the version and weights (benchlib.measure.provenance), the tokenizer
endpoints tried for an exact prompt length (benchlib.measure.traffic.prompt_fitting), and the Prometheus names read
around each window (benchlib.measure.servers.prometheus). docs/servers.md shows the table and how to add a server.

A profile:

    name             what server.software names it, and what rows and manifests record (the metric scraper's
                     software)
    aliases          lower-case substrings of server.software that name it (users write llama-server, llamacpp …)
    engine           server.embedded.engine when this tool starts one itself ("" = only ever started by the user)
    identity         GET endpoints the manifest asks besides /v1/models, for the version and the weights
    version_package  started here: the package whose version is the server's where no endpoint says it
    tokenizer        TOKENIZERS keys in the order tried ((): it has none; the prompt fitter calibrates instead)
    metrics          its Prometheus /metrics names (None: it exposes none)
    overlap          how it takes overlapping requests as started by default: together | queued | cuts
    overlap_setting  the launch setting that changes that

A deployment resolves to one profile (`profile_for`): an embedded one by its engine (what this tool started), any
other by the first profile (in table order) one of whose aliases server.software contains, Ollama's API by kind;
else UNKNOWN, which asks the endpoints several servers answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class TokenizerEndpoint:
    """A tokenizer endpoint: POST `path` with the text under `text_field` (and the model's id where `names_model`);
    its answer holds a token list (`tokens`) or a count."""

    label: str
    path: str
    text_field: str
    names_model: bool = False

    def body(self, model: str, text: str) -> dict[str, str]:
        return ({"model": model} if self.names_model else {}) | {self.text_field: text}


TOKENIZERS: dict[str, TokenizerEndpoint] = {
    "llama-cpp-python": TokenizerEndpoint("llama-cpp-python /extras/tokenize", "/extras/tokenize", "input"),
    "llama.cpp": TokenizerEndpoint("llama.cpp /tokenize", "/tokenize", "content"),
    "vllm": TokenizerEndpoint("vLLM /tokenize", "/tokenize", "prompt", names_model=True),
}


@dataclass(frozen=True)
class MetricNames:
    """One server's Prometheus names (first present wins where a server renamed one; () = not exposed); `prefix`
    tells a scrape's server by its names."""

    prefix: str
    ttft: tuple[str, ...] = ()
    itl: tuple[str, ...] = ()
    e2e: tuple[str, ...] = ()
    running: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    kv_usage: tuple[str, ...] = ()
    preemptions: tuple[str, ...] = ()
    prompt_tokens: tuple[str, ...] = ()
    generation_tokens: tuple[str, ...] = ()
    generation_seconds: tuple[str, ...] = ()


OVERLAPS = ("together", "queued", "cuts")


@dataclass(frozen=True)
class ServerProfile:
    name: str
    aliases: tuple[str, ...] = ()
    engine: str = ""
    identity: tuple[str, ...] = ()
    version_package: str = ""
    tokenizer: tuple[str, ...] = ()
    metrics: MetricNames | None = None
    overlap: str = ""
    overlap_setting: str = ""

    def tokenizer_endpoints(self) -> list[TokenizerEndpoint]:
        return [TOKENIZERS[key] for key in self.tokenizer]


PROFILES: tuple[ServerProfile, ...] = (
    ServerProfile(
        "llama-cpp-python", aliases=("llama-cpp-python",), engine="llama.cpp",
        version_package="llama-cpp-python",  # its server serves /v1/models and /extras/*: no version endpoint
        tokenizer=("llama-cpp-python", "llama.cpp", "vllm"),
        overlap="cuts", overlap_setting="--interrupt_requests False"),
    ServerProfile(
        "sglang", aliases=("sglang",), identity=("/get_server_info", "/get_model_info"),
        tokenizer=("vllm", "llama.cpp", "llama-cpp-python"),
        metrics=MetricNames(
            "sglang:",
            ttft=("sglang:time_to_first_token_seconds",),
            itl=("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
            e2e=("sglang:e2e_request_latency_seconds",),
            running=("sglang:num_running_reqs",), waiting=("sglang:num_queue_reqs",),
            kv_usage=("sglang:token_usage",), preemptions=("sglang:num_retracted_requests_total",),
            prompt_tokens=("sglang:prompt_tokens_total",), generation_tokens=("sglang:generation_tokens_total",)),
        overlap="together", overlap_setting="--max-running-requests"),
    ServerProfile(
        "llama.cpp", aliases=("llama.cpp", "llama-server", "llamacpp"), engine="llama-server",
        identity=("/props", "/health"),
        tokenizer=("llama.cpp", "llama-cpp-python", "vllm"),
        metrics=MetricNames(
            "llamacpp:",
            running=("llamacpp:requests_processing",), waiting=("llamacpp:requests_deferred",),
            kv_usage=("llamacpp:kv_cache_usage_ratio",),
            prompt_tokens=("llamacpp:prompt_tokens_total",), generation_tokens=("llamacpp:tokens_predicted_total",),
            generation_seconds=("llamacpp:tokens_predicted_seconds_total",)),
        overlap="queued", overlap_setting="--parallel"),  # one slot unless -np says more; then together
    ServerProfile(
        "vllm", aliases=("vllm",), engine="vllm", identity=("/version",),
        tokenizer=("vllm", "llama.cpp", "llama-cpp-python"),
        metrics=MetricNames(
            "vllm:",
            ttft=("vllm:time_to_first_token_seconds",),
            itl=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
            e2e=("vllm:e2e_request_latency_seconds",),
            running=("vllm:num_requests_running",), waiting=("vllm:num_requests_waiting",),
            kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
            preemptions=("vllm:num_preemptions_total",),
            prompt_tokens=("vllm:prompt_tokens_total",), generation_tokens=("vllm:generation_tokens_total",)),
        overlap="together", overlap_setting="--max-num-seqs"),
    ServerProfile(
        "ollama", aliases=("ollama",),  # its own API (kind: ollama) is asked by provenance's Ollama probes
        overlap="together", overlap_setting="OLLAMA_NUM_PARALLEL"),
    ServerProfile(
        "faster-whisper", aliases=("faster-whisper",), engine="whisper",
        version_package="faster-whisper",  # our transcription server lists its model and says no version
        overlap="queued"),
)


# A server no profile names: ask the version endpoints several servers answer, try every tokenizer
UNKNOWN = ServerProfile("", identity=("/version", "/props"), tokenizer=("llama-cpp-python", "llama.cpp", "vllm"))


ENGINES: tuple[str, ...] = tuple(p.engine for p in PROFILES if p.engine)


def by_name(name: str) -> ServerProfile | None:
    """The profile called exactly `name`, else None."""
    return next((p for p in PROFILES if p.name == name), None)


def profile_for(kind: str, software: str = "", engine: str = "") -> ServerProfile:
    """The profile of a deployment (server.kind, server.software, server.embedded.engine): embedded by its
    engine, Ollama's API by its kind, any other by the first profile one of whose aliases server.software
    contains (case-insensitive); UNKNOWN where none does."""
    if kind == "embedded":
        found = next((p for p in PROFILES if p.engine and p.engine == engine), None)
        if found is not None:
            return found
    if kind == "ollama" and (ollama := by_name("ollama")) is not None:
        return ollama
    lowered = software.lower()
    return next((p for p in PROFILES if any(alias in lowered for alias in p.aliases)), UNKNOWN)


def by_prefix(names: Iterable[str]) -> ServerProfile | None:
    """The profile whose metric prefix begins one of `names` (a scrape's sample names), else None."""
    names = list(names)
    return next((p for p in PROFILES if p.metrics is not None and any(n.startswith(p.metrics.prefix) for n in names)),
                None)


def cutting() -> list[ServerProfile]:
    """The servers that, started with their defaults, cut a running answer when another arrives."""
    return [p for p in PROFILES if p.overlap == "cuts"]
