"""The command line as a user meets it: bad input, secrets, exit codes (through papermill)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from benchlib import cli as cli_module
from benchlib.config.paths import PROJECT_ROOT, TASKS_DIR
from benchlib.views import run_summary

SECRET = "sk-fbtest-DISTINCTIVE-9f8e7d6c5b4a3210"


def cli(*args: str, env: dict | None = None, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchlib.cli", *args], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, env={**os.environ, **(env or {})}, timeout=timeout)


def cli_in_process(capture, *args: str) -> subprocess.CompletedProcess:
    """benchlib.cli.main in this process: the same exit code and output as the command (`capture`: capsys, or capfd
    to take what its kernels and servers write too), without the 5–10 s a fresh interpreter takes to import the CLI
    (test_missing_media_file_is_named and test_api_key_never_reaches_outputs_or_the_terminal keep the real entry
    point)."""
    code = cli_module.main(list(args))
    out, err = capture.readouterr()
    return subprocess.CompletedProcess(["frontier-bench", *args], code, out, err)


def params_file(tmp_path: Path, data: dict | str, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


GOOD = {"host": {"name": "cli-host"},
        "server": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "fake-model"}}


@pytest.mark.parametrize("data, expected", [
    (None, "params file not found"),
    ("host: {name: x\n", "invalid YAML at line"),
    ({**GOOD, "run": {"repeat": 2}}, "unknown key 'run.repeat' (did you mean 'repeats'?)"),
    ({**GOOD, "run": {"max_tokens": "lots"}}, "run.max_tokens: Input should be a valid integer"),
    ({**GOOD, "server": {**GOOD["server"], "base_url": "ftp://x"}}, "server.base_url: not an http(s) URL"),
    ({**GOOD, "tasks": ["basic_qa", "no_such_task"]}, "tasks: unknown task 'no_such_task'"),
])
def test_bad_input_is_one_clear_line_exit_2_nothing_written(tmp_path, monkeypatch, capsys, data, expected):
    path = tmp_path / "missing.yaml" if data is None else params_file(tmp_path, data)
    outputs = tmp_path / "outputs"
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(outputs))
    result = cli_in_process(capsys, "run", str(path), "--no-paper")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(path) in lines[0], result.stderr
    assert expected in lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    assert not outputs.exists(), "bad input must write nothing"


def test_missing_media_file_is_named(tmp_path):
    tasks = tmp_path / "tasks"
    shutil.copytree(TASKS_DIR, tasks)
    (tasks / "extra.yaml").write_text(yaml.safe_dump([{
        "name": "broken_image", "suite": "vision", "requires": "vision", "checker": "contains_any",
        "variants": [{"id": "v1", "prompt": "What is this?", "image": "image/nope.png", "expected": ["x"]}]}]))
    result = cli("run", str(params_file(tmp_path, GOOD)), "--no-paper",
                 env={"FRONTIER_BENCH_TASKS": str(tasks), "FRONTIER_BENCH_OUTPUTS": str(tmp_path / "o")}, timeout=60)
    assert result.returncode == 2
    assert "extra.yaml: task 'broken_image' variant 'v1': image file not found" in result.stderr
    assert "nope.png" in result.stderr and "Traceback" not in result.stderr


def test_unknown_notebook_is_rejected(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(tmp_path / "outputs"))
    result = cli_in_process(capsys, "run", str(params_file(tmp_path, GOOD)), "--only", "text,sound")
    assert result.returncode == 2 and "unknown notebook(s) sound" in result.stderr


def fake_params(tmp_path, url, fake, **extra):
    data = {"host": {"name": "cli-host"},
            "server": {"kind": "openai", "base_url": url, "model": "fake-model", "api_key_env": "FB_TEST_API_KEY",
                       "extra_body": {"fake": fake}},
            "run": {"warmups": 1, "repeats": 3, "max_tokens": 16, "timeout_s": 5},
            "tasks": ["basic_qa"],
            "telemetry": {"idle_baseline_s": 0.2, "loaded_baseline_s": 0.2}, **extra}
    return params_file(tmp_path, data)


def test_api_key_never_reaches_outputs_or_the_terminal(fake_server, tmp_path):
    """The key lives only in the environment; even a server echoing it back in an error is scrubbed."""
    outputs = tmp_path / "outputs"
    path = fake_params(tmp_path, fake_server.url, {"fault": "http_401_echo", "fault_when": "Japan", "tokens": 4},
                       run={"warmups": 1, "repeats": 3, "max_tokens": 16, "timeout_s": 5,
                            "max_error_rate": 0.5})  # the one echoed failure is the point here
    result = cli("run", str(path), "--only", "text", "--no-paper", "--quiet",
                 env={"FB_TEST_API_KEY": SECRET, "FRONTIER_BENCH_OUTPUTS": str(outputs)})
    assert result.returncode == 0, result.stderr[-3000:]
    files = [p for p in outputs.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"requests.csv", "summary.csv", "manifest.json", "text.ipynb"} <= names
    for file in files:
        assert SECRET not in file.read_bytes().decode("utf-8", "replace"), f"key leaked into {file}"
    assert SECRET not in result.stdout + result.stderr
    requests = (outputs / "cli-host" / "fake-model" / "text" / "requests.csv").read_text()
    assert "invalid API key: Bearer ***" in requests  # the echo happened, and was scrubbed
    assert "FB_TEST_API_KEY" in (outputs / "cli-host" / "fake-model" / "text" / "text.ipynb").read_text()


def test_exit_code_is_nonzero_when_more_than_max_error_rate_failed(fake_server, tmp_path, monkeypatch, capfd):
    """A suite whose failed share is above run.max_error_rate (default 20 %) ends the run with exit 1, the counts by
    kind and the likely fix; at or under it, 0."""
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(tmp_path / "outputs"))
    failing = fake_params(tmp_path, fake_server.url, {"fault": "http_500"})  # stopped by the pre-flight
    result = cli_in_process(capfd, "run", str(failing), "--only", "text", "--no-paper", "--quiet")
    assert result.returncode == 1
    assert "pre-flight: a short chat request to" in result.stdout and "failed (http_500: fake 500" in result.stdout
    mixed = fake_params(tmp_path, fake_server.url, {"fault": "http_500", "fault_when": "Japan", "tokens": 4},
                        host={"name": "cli-host-2"})  # 1 of 3 measured requests fails: 33 % > 20 %
    result = cli_in_process(capfd, "run", str(mixed), "--only", "text", "--no-paper", "--quiet")
    assert result.returncode == 1
    assert "1 of 3 requests failed (above run.max_error_rate 20%): http_500 1" in result.stdout
    assert "likely fix: the server failed: its log says why" in result.stdout
    assert "INVALID text · basic_qa: error rate 33% above 20%" in result.stdout
    tolerant = fake_params(tmp_path, fake_server.url, {"fault": "http_500", "fault_when": "Japan", "tokens": 4},
                           host={"name": "cli-host-3"},
                           run={"warmups": 1, "repeats": 3, "max_tokens": 16, "timeout_s": 5, "max_error_rate": 0.5})
    result = cli_in_process(capfd, "run", str(tolerant), "--only", "text", "--no-paper", "--quiet")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def test_explore_opens_a_working_copy_not_the_committed_notebook(tmp_path, monkeypatch):
    from benchlib import cli

    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(tmp_path / "outputs"))
    assert cli.main(["explore", "--no-lab"]) == 0
    copy = tmp_path / "outputs" / "explore.ipynb"
    assert copy.read_bytes() == (PROJECT_ROOT / "notebooks" / "explore.ipynb").read_bytes()
    copy.write_text(copy.read_text() + " ")  # the user's saved edits survive the next call
    cli.main(["explore", "--no-lab"])
    assert copy.read_text().endswith(" ")


def test_explore_serves_jupyterlab_on_loopback_as_any_user_and_says_how_to_tunnel_to_it(tmp_path):
    """`make explore` as root (the normal user in containers) once stopped at Jupyter's "Running as root is not
    recommended"; it now starts whoever runs it, listens on 127.0.0.1 only and prints the SSH tunnel that reaches it."""
    env = {**os.environ, "FRONTIER_BENCH_OUTPUTS": str(tmp_path / "outputs"), "JUPYTER_RUNTIME_DIR": str(tmp_path),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "explore.log"
    with log.open("w") as sink:
        lab = subprocess.Popen([sys.executable, "-m", "benchlib.cli", "explore"], cwd=PROJECT_ROOT, env=env,
                               stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        address = None
        while time.monotonic() < deadline and lab.poll() is None:
            found = re.search(r"explorer: (http://127\.0\.0\.1:(\d+))/lab", log.read_text())
            if found:
                try:
                    with urllib.request.urlopen(f"{found.group(1)}/api", timeout=2) as answer:
                        address = found.group(1) if answer.status == 200 and b"version" in answer.read() else None
                except OSError:
                    pass
            if address:
                break
            time.sleep(0.5)
        text = log.read_text()
        assert address, f"JupyterLab did not answer (exit {lab.poll()}):\n{text[-3000:]}"
        port = address.rsplit(":", 1)[1]
        assert f"ssh -N -L {port}:127.0.0.1:{port} " in text
        assert "Running as root is not recommended" not in text
    finally:
        if lab.poll() is None:
            os.killpg(lab.pid, signal.SIGTERM)
            try:
                lab.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(lab.pid, signal.SIGKILL)
                lab.wait()


@pytest.mark.parametrize("http_client", ["wire", "sdk"])
def test_a_key_echoed_into_every_server_field_never_reaches_a_file(fake_server, tmp_path, http_client, monkeypatch,
                                                                   capfd):
    """A careless server puts the Authorization header into the answer, the reasoning, a tool call's name and
    arguments, and an error body: every one is scrubbed, on both HTTP paths. (The command in this process, its
    kernels' and servers' output read at the file descriptors: test_api_key_never_reaches_outputs_or_the_terminal
    runs the real entry point.)"""
    outputs = tmp_path / "outputs"
    monkeypatch.setenv("FB_TEST_API_KEY", SECRET)
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(outputs))
    path = fake_params(tmp_path, fake_server.url, {"leak": True, "tokens": 4}, tasks=["basic_qa", "tool_calling"],
                       run={"warmups": 0, "repeats": 1, "max_tokens": 16, "timeout_s": 5, "http_client": http_client})
    result = cli_in_process(capfd, "run", str(path), "--only", "text,quality", "--no-paper", "--quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    for file in (p for p in outputs.rglob("*") if p.is_file()):
        assert SECRET not in file.read_bytes().decode("utf-8", "replace"), f"key leaked into {file}"
    assert SECRET not in result.stdout + result.stderr
    text = (outputs / "cli-host" / "fake-model" / "text" / "requests.csv").read_text()
    quality = (outputs / "cli-host" / "fake-model" / "quality" / "requests.csv").read_text()
    assert "answer Bearer *** end" in text and "thinking Bearer ***" in text  # the echo happened, scrubbed
    assert "lookup Bearer ***" in quality and '""q"":""Bearer ***""' in quality


def test_run_with_a_store_url_mirrors_the_suite_and_its_notebook_and_the_paper_reads_the_url(fake_server, tmp_path):
    """`run.store` as a file:// URL: the suite runs in the store's local staging copy, the folder (executed notebook
    included) lands in the store, and the paper assembles from the URL."""
    store_dir = tmp_path / "store"
    env = {"FRONTIER_BENCH_OUTPUTS": str(tmp_path / "outputs"), "FRONTIER_BENCH_CACHE": str(tmp_path / "cache")}
    path = fake_params(tmp_path, fake_server.url, {"tokens": 4})
    data = yaml.safe_load(path.read_text())
    data["run"]["store"] = store_dir.as_uri()
    path.write_text(yaml.safe_dump(data))
    result = cli("run", str(path), "--only", "text", "--no-paper", "--quiet", env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    suite = store_dir / "cli-host" / "fake-model" / "text"
    for name in ("requests.csv", "summary.csv", "manifest.json", "run.json", "text.ipynb"):
        assert (suite / name).is_file(), name
    assert f"store: {store_dir.as_uri()}" in result.stdout
    assert not (tmp_path / "outputs" / "cli-host").exists()  # staged under the cache, not outputs/
    out = tmp_path / "paper-out"
    result = subprocess.run([sys.executable, "-c", "from benchlib import paper; import sys; "
                             "p = paper.assemble(outputs_dir=sys.argv[1], out_dir=sys.argv[2]); "
                             "print(paper.runs_text(p.runs))", store_dir.as_uri(), str(out)],
                            capture_output=True, text=True, cwd=PROJECT_ROOT, env={**os.environ, **env}, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"1 run(s) from 1 host(s) under {store_dir.as_uri()}" in result.stdout
    assert (out / "report.md").is_file()


def test_the_terminal_says_which_runs_sent_part_of_the_graded_pools(tmp_path):
    params = {"host": {"name": "h"}, "server": {"model": "m", "kind": "embedded", "software": "llama-cpp-python"}}
    reduced, full = tmp_path / "h" / "m" / "quality", tmp_path / "h" / "n" / "quality"
    for folder, plan in ((reduced, {"reduced": True, "items": 33, "pool": 964}),
                         (full, {"reduced": False, "items": 964, "pool": 964})):
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text(json.dumps({"params": params, "graded": plan}))
    lines = run_summary.reduced_lines([reduced, full, tmp_path / "missing"])
    assert len(lines) == 1 and lines[0].endswith(": reduced: 33 of 964 items (run.graded_items)")
