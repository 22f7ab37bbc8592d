"""A study killed mid-way (SIGKILL while its second deployment is measuring) and rerun with the same command
finishes without repeating a done request: the first deployment is skipped whole, the second resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from benchlib.config.paths import PROJECT_ROOT
from benchlib.records.rows import read_requests


def rows(path: Path) -> int:
    return len(read_requests(path)) if path.is_file() else 0


def test_a_killed_study_resumes_without_repeating_a_request(fake_server, tmp_path):
    def deployment(model: str) -> dict:
        return {"params": {
            "host": {"name": "study-host"},
            "server": {"kind": "openai", "base_url": fake_server.url, "model": model, "software": "fake",
                       "extra_body": {"fake": {"ttft": 0.3, "itl": 0.01, "tokens": 5}}},
            "run": {"warmups": 1, "repeats": 4, "max_tokens": 32},
            "tasks": ["basic_qa", "summarization"],
            "telemetry": {"idle_baseline_s": 0, "loaded_baseline_s": 0, "power_hz": 5}}}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({"name": "killed", "notebooks": ["text"], "settle": {"timeout_s": 5},
                                    "deployments": [deployment("fake-a"), deployment("fake-b")]}))
    outputs = tmp_path / "outputs"
    env = {**os.environ, "FRONTIER_BENCH_OUTPUTS": str(outputs)}
    command = [sys.executable, "-m", "benchlib.cli", "study", str(path), "--no-paper", "--quiet"]
    first_csv = outputs / "study-host" / "fake-a" / "text" / "requests.csv"
    second_csv = outputs / "study-host" / "fake-b" / "text" / "requests.csv"

    child = subprocess.Popen(command, env=env, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
    deadline = time.monotonic() + 240
    while rows(second_csv) < 2 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)  # the CLI and its notebook kernel together, as a crash would
    child.wait(timeout=10)
    killed_at = rows(second_csv)
    assert rows(first_csv) == 9 and 2 <= killed_at < 9, f"kill landed at {killed_at} rows of the second deployment"

    again = subprocess.run(command, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "■ deployment 1/2: fake-a — done earlier" in again.stdout  # by their short labels after the plan
    assert "■ deployment 2/2: fake-b · suites text" in again.stdout
    for csv in (first_csv, second_csv):
        requests = read_requests(csv)
        assert len(requests) == 9 and requests["request_key"].is_unique, f"{csv}: a request was lost or redone"
        assert set(requests["status"]) == {"ok"}
    record = yaml.safe_load((outputs / "studies" / "killed" / "study.json").read_text())["deployments"]
    assert {key: entry["status"] for key, entry in record.items()} == {"study-host/fake-a": "done",
                                                                      "study-host/fake-b": "done"}
