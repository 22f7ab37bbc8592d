"""The server profile table (benchlib.config.servers): every profile complete, and every place that asks "which
server" — params' engines, the launcher, provenance's identity probes, the tokenizer's endpoint order, the
Prometheus names — answered from it, so a profile added here is picked up everywhere."""

from __future__ import annotations

import json
import threading
import typing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import ValidationError

from benchlib.config import servers
from benchlib.config.params import EmbeddedParams, ServerParams
from benchlib.config.servers import OVERLAPS, PROFILES, TOKENIZERS, UNKNOWN, MetricNames, ServerProfile, profile_for
from benchlib.measure import provenance
from benchlib.measure.servers import launchers, prometheus
from benchlib.measure.servers.llama_cpp import EmbeddedServer
from benchlib.measure.servers.llama_server import LlamaServer
from benchlib.measure.servers.vllm import VllmServer
from benchlib.measure.servers.whisper import WhisperServer
from benchlib.measure.traffic.prompt_fitting import ServerTokenizer
from tests.helpers import make_params


def test_every_profile_is_complete():
    names = [p.name for p in PROFILES]
    assert len(set(names)) == len(names) and all(names)
    prefixes = [p.metrics.prefix for p in PROFILES if p.metrics is not None]
    assert len(set(prefixes)) == len(prefixes) and all(prefixes)
    for profile in PROFILES:
        assert profile.aliases and all(a == a.lower() for a in profile.aliases), profile.name
        assert profile_for("openai", profile.name) is profile, f"{profile.name} does not name its own profile"
        assert profile.overlap in OVERLAPS, profile.name
        assert all(path.startswith("/") and path != "/v1/models" for path in profile.identity), profile.name
        assert all(key in TOKENIZERS for key in profile.tokenizer), profile.name
        assert len(set(profile.tokenizer)) == len(profile.tokenizer), profile.name
        if profile.metrics is not None:
            for field in ("ttft", "itl", "e2e", "running", "waiting", "kv_usage", "preemptions", "prompt_tokens",
                          "generation_tokens", "generation_seconds"):
                assert all(n.startswith(profile.metrics.prefix) for n in getattr(profile.metrics, field)), field
    engines = [p.engine for p in PROFILES if p.engine]
    assert len(set(engines)) == len(engines)
    assert set(engines) == set(launchers.LAUNCHERS), "every engine a profile names has a launcher, and only those"


def test_params_accept_the_engines_of_the_table_and_no_other():
    annotation = EmbeddedParams.model_fields["engine"].annotation
    assert typing.get_args(annotation) == servers.ENGINES == ("llama.cpp", "llama-server", "vllm", "whisper")
    with pytest.raises(ValidationError):
        EmbeddedParams(engine="sglang")
    description = ServerParams.model_fields["software"].description
    assert all(p.name in description for p in PROFILES)


@pytest.mark.parametrize("engine, cls", [("llama.cpp", EmbeddedServer), ("llama-server", LlamaServer),
                                         ("vllm", VllmServer), ("whisper", WhisperServer)])
def test_the_runner_starts_each_engine_with_its_launcher(engine, cls):
    assert launchers.launcher(EmbeddedParams(engine=engine)) is cls


def test_a_deployment_resolves_to_one_profile():
    def server(**values):
        url = {} if values["kind"] == "embedded" else {"base_url": "http://127.0.0.1:8000/v1"}
        return ServerParams(model="m", **url, **values).profile().name

    assert server(kind="openai", software="vLLM 0.11") == "vllm"  # case-insensitive, inside a longer name
    assert server(kind="openai", software="llamacpp b6000") == server(kind="openai", software="llama-server") \
        == "llama.cpp"
    assert server(kind="openai", software="llama-cpp-python") == "llama-cpp-python"
    assert server(kind="ollama") == "ollama"  # Ollama's API is Ollama whatever software says
    assert server(kind="embedded") == "llama-cpp-python"  # the default engine: llama-cpp-python's server
    assert server(kind="embedded", embedded={"engine": "llama-server"}) == "llama.cpp"
    assert server(kind="embedded", software="faster-whisper", api="transcription",
                  embedded={"engine": "whisper"}) == "faster-whisper"
    assert ServerParams(kind="openai", software="tgi", base_url="http://h:1/v1", model="m").profile() is UNKNOWN


NEW = ServerProfile("newserve", aliases=("newserve",), identity=("/props",), tokenizer=("llama.cpp",),
                    metrics=MetricNames("newserve:", running=("newserve:active",)), overlap="queued")


def test_a_new_profile_is_picked_up_by_provenance(monkeypatch, fake_server):
    params = make_params(f"{fake_server.url}/v1", server={"software": "NewServe 2"})
    before = provenance.server_info(params)
    assert list(before["endpoints"]) == ["/v1/models", "/version", "/props"]  # unknown: what several servers answer
    monkeypatch.setattr(servers, "PROFILES", PROFILES + (NEW,))
    info = provenance.server_info(params)
    assert list(info["endpoints"]) == ["/v1/models", "/props"]
    assert info["version"] == "b6000-fake0000" and info["model"]["path"] == "/models/fake-model-Q4_K_M.gguf"


def test_a_new_profile_is_picked_up_by_the_metrics_scraper(monkeypatch):
    values = prometheus.parse_metrics("# TYPE newserve:active gauge\nnewserve:active 3\n")
    assert prometheus.software_of(values) == "" and prometheus.metric_names("newserve") is None
    monkeypatch.setattr(servers, "PROFILES", PROFILES + (NEW,))
    assert prometheus.software_of(values) == "newserve"
    assert prometheus.metric_names("newserve").running == ("newserve:active",)


class _Recorder(BaseHTTPRequestHandler):
    """Answers every tokenizer 404 and records what was asked: the order the endpoints were tried in."""

    tried: list[tuple[str, tuple[str, ...]]] = []

    def do_POST(self):  # noqa: N802 — http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.tried.append((self.path, tuple(sorted(body))))
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


PY, CPP, VLLM = ("/extras/tokenize", ("input",)), ("/tokenize", ("content",)), ("/tokenize", ("model", "prompt"))


@pytest.mark.parametrize("kind, software, order", [
    ("openai", "fake", [PY, CPP, VLLM]),
    ("openai", "llama-cpp-python", [PY, CPP, VLLM]),
    ("openai", "vllm", [VLLM, CPP, PY]),
    ("openai", "sglang", [VLLM, CPP, PY]),
    ("openai", "llama.cpp", [CPP, PY, VLLM]),
    ("ollama", "", []),  # no tokenizer endpoint: the fitter calibrates
])
def test_the_tokenizer_tries_the_profiles_endpoints_in_its_order(recorder, kind, software, order):
    _Recorder.tried = []
    params = make_params(f"http://127.0.0.1:{recorder.server_address[1]}/v1", kind=kind,
                         server={"software": software})
    assert ServerTokenizer.detect(params) is None
    assert _Recorder.tried == order


def test_a_new_profile_is_picked_up_by_the_tokenizer(monkeypatch, recorder):
    _Recorder.tried = []
    params = make_params(f"http://127.0.0.1:{recorder.server_address[1]}/v1", server={"software": "newserve"})
    monkeypatch.setattr(servers, "PROFILES", PROFILES + (NEW,))
    assert ServerTokenizer.detect(params) is None
    assert _Recorder.tried == [CPP]
