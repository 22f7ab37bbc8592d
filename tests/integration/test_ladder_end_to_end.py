"""The quantization ladder end to end on the real embedded llama.cpp server (`frontier-bench ladder`): two rungs
quantized, run and recorded, and a second call served from the cache. `make test-ladder` runs it (CI: after
`make test`, like the other real-server integration targets): quantizing and serving two rungs is 2–3 minutes
of `make test`'s 25."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchlib.analysis import bandwidth_law
from benchlib.config.paths import PROJECT_ROOT
from benchlib.paper.runs import load_runs
from tests.helpers import ladder_params


@pytest.mark.e2e
@pytest.mark.ladder
def test_frontier_bench_ladder_end_to_end(tmp_path):
    """Two rungs on the real embedded server: quantized, run, recorded; a second call reuses the cache."""
    env = {**os.environ, "FRONTIER_BENCH_OUTPUTS": str(tmp_path / "outputs"),
           "FRONTIER_BENCH_CACHE": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "benchlib.cli", "ladder", str(ladder_params(tmp_path)), "--types", "q4_0",
               "--no-paper", "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=PROJECT_ROOT, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "q4_0    made" in done.stdout and "GB read per token" in done.stdout
    record = json.loads((tmp_path / "outputs" / "ladder-host" / "ladder.json").read_text())
    assert [r["qtype"] for r in record["rungs"]] == ["q4_0", "q4_k_m"]
    assert record["bandwidth"]["read_gbs"] > 0 and record["source"]["sha256"]
    for model in ("gemma3-270m-q4_0", "gemma3-270m-q4_k_m"):
        manifest = json.loads((tmp_path / "outputs" / "ladder-host" / model / "text" / "manifest.json").read_text())
        assert manifest["params"]["server"]["model"] == model
    q4_0 = json.loads((tmp_path / "outputs" / "ladder-host" / "gemma3-270m-q4_0" / "text" / "manifest.json").read_text())
    assert q4_0["params"]["server"]["embedded"]["model_path"].endswith("-q4_0.gguf")
    points = bandwidth_law.ladder_points(bandwidth_law.read_ladders(tmp_path / "outputs"),
                                         load_runs(tmp_path / "outputs").requests)
    assert (points["decode_tps"] > 0).all() and (points["n_decode"] == 1).all()
    again = subprocess.run(command, capture_output=True, text=True, cwd=PROJECT_ROOT, env=env, timeout=600)
    assert again.returncode == 0 and "q4_0    cached" in again.stdout
