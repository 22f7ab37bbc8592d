"""Interrupted runs lose nothing: SIGKILL mid-run, rerun, and every request is there exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from benchlib.config.params import load_params
from benchlib.config.paths import PROJECT_ROOT
from benchlib.records.rows import read_requests
from benchlib.records.run_folder import RunConflict
from benchlib.suites.runner import run_suite

RUNNER = textwrap.dedent("""
    import sys
    from benchlib.config.params import load_params
    from benchlib.suites.runner import run_suite
    run_suite(load_params(sys.argv[1]), "text", progress=False)
""")


def write_params(tmp_path: Path, url: str, **run) -> Path:
    data = {"host": {"name": "resume-host"},
            "server": {"kind": "openai", "base_url": url, "model": "fake-model",
                       "extra_body": {"fake": {"ttft": 0.25, "itl": 0.01, "tokens": 5}}},
            "run": {"warmups": 1, "repeats": 4, "max_tokens": 32, **run},
            "tasks": ["basic_qa", "summarization"],
            "telemetry": {"idle_baseline_s": 0, "loaded_baseline_s": 0, "power_hz": 5}}
    path = tmp_path / "resume.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def rows_on_disk(path: Path) -> int:
    return len(read_requests(path)) if path.is_file() else 0


def test_sigkill_mid_run_then_rerun_loses_and_duplicates_nothing(fake_server, outputs, tmp_path):
    params_path = write_params(tmp_path, fake_server.url)
    env = {**os.environ, "FRONTIER_BENCH_OUTPUTS": str(outputs)}
    requests_csv = outputs / "resume-host" / "fake-model" / "text" / "requests.csv"
    child = subprocess.Popen([sys.executable, "-c", RUNNER, str(params_path)], env=env, cwd=PROJECT_ROOT)
    deadline = time.monotonic() + 30
    while rows_on_disk(requests_csv) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    killed_at = rows_on_disk(requests_csv)
    assert 3 <= killed_at < 9, f"kill landed at {killed_at} rows; the test needs a mid-run kill"

    result = run_suite(load_params(params_path), "text", progress=False)  # the rerun resumes
    keys = result.requests["request_key"]
    assert len(keys) == 9  # 1 warm-up + 2 tasks × 4 repeats
    assert keys.is_unique, "a finished request was redone"
    assert set(result.requests["status"]) == {"ok"}
    assert len(set(result.requests["prompt"])) == 9, "every request carried a distinct prompt"
    summary = result.summary.set_index("task")
    assert summary.loc["basic_qa", "n_ok"] == 4 and summary.loc["summarization", "n_ok"] == 4


def test_changed_params_refuse_to_mix_and_fresh_archives(fake_server, outputs, tmp_path):
    params_path = write_params(tmp_path, fake_server.url, repeats=1)
    params = load_params(params_path)
    first = run_suite(params, "text", progress=False)
    assert len(first.requests) == 3
    changed = params.model_copy(deep=True)
    changed.run.max_tokens = 16
    with pytest.raises(RunConflict, match="--fresh"):
        run_suite(changed, "text", progress=False)
    again = run_suite(changed, "text", progress=False, fresh=True)
    assert len(again.requests) == 3 and (again.requests["max_tokens"] <= 16).all()
    archived = [p.name for p in first.out_dir.parent.iterdir() if p.name.startswith("text.archived-")]
    assert len(archived) == 1, "the old run was archived, not overwritten"


def test_summary_is_replaced_atomically(fake_server, outputs, tmp_path):
    params = load_params(write_params(tmp_path, fake_server.url, repeats=1))
    result = run_suite(params, "text", progress=False)
    leftovers = [p.name for p in result.out_dir.iterdir() if p.name.startswith(".")]
    assert leftovers == [], f"temporary files left behind: {leftovers}"
    assert (result.out_dir / "summary.csv").read_text().startswith("host,")
