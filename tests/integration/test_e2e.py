"""End to end on the embedded default: the real llama.cpp server with Gemma 3 270M, through papermill."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from benchlib.config.paths import PROJECT_ROOT
from benchlib.records.rows import read_requests

pytestmark = pytest.mark.e2e
import llama_cpp  # noqa: F401, E402 — `make test` installs the embedded extra; its absence must fail, not skip


def embedded_params(tmp_path: Path, name: str = "e2e.yaml", **run) -> Path:
    data = yaml.safe_load((PROJECT_ROOT / "params" / "embedded.yaml").read_text())
    data["host"]["name"] = "e2e-host"
    data["run"] = {"warmups": 1, "repeats": 1, "max_tokens": 16, "timeout_s": 60, **run}
    data["tasks"] = ["basic_qa", "summarization"]
    data["telemetry"] = {"idle_baseline_s": 0.3, "loaded_baseline_s": 0.3}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_text_notebook_through_papermill_writes_real_rows(tmp_path):
    outputs = tmp_path / "outputs"
    result = subprocess.run([sys.executable, "-m", "benchlib.cli", "run", str(embedded_params(tmp_path)),
                             "--only", "text", "--no-paper", "--quiet"], capture_output=True, text=True,
                            cwd=PROJECT_ROOT, env={**os.environ, "FRONTIER_BENCH_OUTPUTS": str(outputs)}, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    run_dir = outputs / "e2e-host" / "gemma3-270m-q4_k_m" / "text"
    for name in ("text.ipynb", "requests.csv", "summary.csv", "windows.csv", "telemetry.csv", "manifest.json",
                 "server.log"):
        assert (run_dir / name).is_file(), f"{name} missing"
    rows = read_requests(run_dir / "requests.csv")
    measured = rows[~rows["is_warmup"]]
    assert len(rows) == 3 and len(measured) == 2 and set(rows["status"]) == {"ok"}
    assert (measured["completion_tokens"] > 0).all() and (measured["completion_tokens"] <= 17).all()
    assert (measured["ttft_s"] > 0).all() and (measured["decode_tps"] > 0).all()
    assert (measured["prompt_tokens"] > 10).all()
    assert measured["response_text"].str.len().gt(0).all()
    assert measured["token_source"].eq("server_log").all()  # llama-cpp-python sends no usage chunk
    # server rates come from the log, except for a request whose prompt pass it logged implausibly (~0.1 ms)
    assert measured["server_decode_tps"].gt(0).any()
    summary = pd.read_csv(run_dir / "summary.csv")
    assert set(summary["task"]) == {"basic_qa", "summarization"}
    assert "decode tok/s" in result.stdout  # the closing summary: one row per deployment; the per-task table is a file
    assert "basic_qa" in (run_dir.parent / "summary.txt").read_text()
    log = (run_dir / "server.log").read_text()
    assert "llama_perf_context_print" in log
    windows = pd.read_csv(run_dir / "windows.csv")
    assert {"idle", "loaded", "basic_qa", "summarization"} <= set(windows["window"])


INTERRUPTED = textwrap.dedent("""
    import sys
    from benchlib.config.params import load_params
    from benchlib.suites.runner import run_suite
    run_suite(load_params(sys.argv[1]), "text", progress=False)
""")


def test_ctrl_c_stops_the_server_and_keeps_finished_rows(tmp_path):
    outputs = tmp_path / "outputs"
    path = embedded_params(tmp_path, repeats=6, max_tokens=48)
    # Ctrl-C as in a terminal: a test run started in the background of a non-interactive shell inherits SIGINT
    # ignored, Python then installs no KeyboardInterrupt handler, and the child would run to its end
    child = subprocess.Popen([sys.executable, "-c", INTERRUPTED, str(path)], cwd=PROJECT_ROOT,
                             env={**os.environ, "FRONTIER_BENCH_OUTPUTS": str(outputs)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    run_dir = outputs / "e2e-host" / "gemma3-270m-q4_k_m" / "text"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (run_dir / "requests.csv").is_file() and len(read_requests(run_dir / "requests.csv")) >= 2:
            break
        time.sleep(0.1)
    port = int(re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", (run_dir / "server.log").read_text())[1])
    child.send_signal(signal.SIGINT)
    child.wait(timeout=30)
    kept = read_requests(run_dir / "requests.csv")
    assert 2 <= len(kept) < 13 and set(kept["status"]) == {"ok"}
    time.sleep(0.5)
    with socket.socket() as probe:  # the embedded server is gone with the run
        assert probe.connect_ex(("127.0.0.1", port)) != 0
