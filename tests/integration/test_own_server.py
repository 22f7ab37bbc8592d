"""The README's own-server walk, as a new user takes it, against llama-cpp-python's own server started with its
defaults (it cuts a running answer when another request arrives): `frontier-bench models` for the GGUF, the server,
`make run PARAMS=params/own-server.yaml` (the file as committed; only its port is this test's). Every graded request
is answered or the run stops non-zero with its reason; the manifest names SmolLM2's weights, never the embedded
default's. Then a study pointed at a port where nothing listens fails, and, once the server is up there, its rerun
measures the deployment without --fresh (round four's N12)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure.servers.llama_cpp import free_port
from benchlib.records.rows import read_requests
from tests.helpers import start_server
from tests.project.test_readme import fenced_commands, readme, section

VENV_BIN = Path(sys.executable).parent
README_PORT = "http://127.0.0.1:8011/v1"


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "frontier-bench"), *args], capture_output=True, text=True, env=env,
                          cwd=PROJECT_ROOT, timeout=900)


def _serve(command: str, port: int, log: Path) -> subprocess.Popen:
    """The README's server command, its port and its log this test's: llama-cpp-python's server with its
    defaults."""
    command = command.rstrip("& ").replace("8011", str(port)).replace("own-server.log", str(log))
    return start_server(["bash", "-c", "exec " + command], f"http://127.0.0.1:{port}/v1/models", cwd=PROJECT_ROOT)


def _params_at(port: int, tmp_path: Path, name: str, host: str = "", **run: object) -> Path:
    """params/own-server.yaml as committed, its port this test's (and `host`, `run` merged in where given)."""
    text = (PROJECT_ROOT / "params" / "own-server.yaml").read_text(encoding="utf-8")
    assert README_PORT in text
    data = yaml.safe_load(text.replace(README_PORT, f"http://127.0.0.1:{port}/v1"))
    data["run"].update(run)
    data["host"]["name"] = host or data["host"]["name"]
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("own-server")
    env = {**os.environ, "FRONTIER_BENCH_OUTPUTS": str(tmp / "outputs")}
    models_cmd, serve_cmd, run_cmd = [c for c in fenced_commands(section(readme(), "Measure your own server"))
                                      if "mine.yaml" not in c]
    assert models_cmd == ".venv/bin/frontier-bench models" and run_cmd == "make run PARAMS=params/own-server.yaml"
    models = subprocess.run(models_cmd, shell=True, capture_output=True, text=True, env=env, cwd=PROJECT_ROOT)
    assert models.returncode == 0 and "smollm2" in models.stdout, models.stdout + models.stderr
    gguf = _cli("models", "--path", "smollm2", env=env).stdout.strip()
    port = free_port()
    # a study pointed at a port where nothing listens yet: it fails in the pre-flight, with the reason
    study = tmp / "study.yaml"
    study.write_text(yaml.safe_dump({"name": "own", "notebooks": ["quality"], "deployments": [
        {"params": str(_params_at(port, tmp, "study-own.yaml", host="study-host",
                                         graded_items={"arithmetic": 3, "*": 0}))}],
        "overrides": {"tasks": ["arithmetic"]}}), encoding="utf-8")
    dead = _cli("study", str(study), "--no-paper", "--quiet", env=env)
    assert "> own-server.log 2>&1" in serve_cmd  # the server's log kept out of the run's terminal
    server = _serve(serve_cmd, port, tmp / "own-server.log")
    try:
        rerun = _cli("study", str(study), "--no-paper", "--quiet", env=env)
        own = run_cmd.replace("params/own-server.yaml", str(_params_at(port, tmp, "own.yaml")))
        make = subprocess.run([own.split()[0], "-o", ".venv/.installed-run", *own.split()[1:], "ARGS=--no-paper"],
                              capture_output=True, text=True, env=env,
                              cwd=PROJECT_ROOT, timeout=900)
        cut = _cli("run", str(_params_at(port, tmp, "cut.yaml", host="cut-host", graded_in_flight=4,
                                         graded_items={"arithmetic": 4, "*": 0})),
                   "--only", "quality", "--no-paper", "--quiet", env=env)
    finally:
        server.kill()
        server.wait()
    return {"gguf": gguf, "dead": dead, "rerun": rerun, "make": make, "cut": cut, "outputs": tmp / "outputs",
            "study": study}


def test_the_walk_answers_every_graded_item_and_names_smollm2s_weights(walk):
    make = walk["make"]
    assert make.returncode == 0, make.stdout[-3000:] + make.stderr[-3000:]
    assert "pre-flight" in make.stdout and "2 at once: cuts" in make.stdout and "one at a time" in make.stdout
    folder = walk["outputs"] / "my-machine" / "smollm2"
    rows = read_requests(folder / "quality" / "requests.csv")
    graded = rows[~rows["is_warmup"].astype(bool)]
    assert len(graded) == 20 and (graded["status"] == "ok").all(), graded["error_kind"].value_counts()
    assert (graded["concurrency"] == 1).all()
    manifest = json.loads((folder / "quality" / "manifest.json").read_text(encoding="utf-8"))
    weights = manifest["server"]["model"]
    assert Path(weights["path"]).name == Path(walk["gguf"]).name and weights["weights_source"] == \
        "reported by the server" and weights["size_bytes"] == Path(walk["gguf"]).stat().st_size
    assert "gemma" not in json.dumps(manifest).lower()
    assert manifest["preflight"]["overlap"] == "cuts" and manifest["preflight"]["in_flight"] == 1


def test_an_in_flight_the_server_cuts_exits_non_zero_with_the_reason_and_the_fix(walk):
    cut = walk["cut"]
    out = cut.stdout + cut.stderr
    assert cut.returncode == 1, out[-3000:]
    assert "run.graded_in_flight 4 is more than this server served whole" in out
    assert "graded requests failed (above run.max_error_rate 20%): stream_cut" in out
    assert "likely fix:" in out and "one request at a time" in out
    here = str(walk["outputs"])  # a path of this test's temporary folder is as long as it is
    table = ("[95% CI]", "±")  # the per-task table's width is the terminal summary's concern (issue 55), not this
    long = [line for line in cut.stdout.splitlines() if len(line) > 120 and "Executing" not in line
            and here not in line and not any(mark in line for mark in table)]
    assert not long, long


def test_a_study_rerun_after_the_server_came_up_measures_it_without_fresh(walk):
    dead, rerun = walk["dead"], walk["rerun"]
    assert dead.returncode == 1 and "pre-flight: no answer from" in dead.stdout + dead.stderr
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    state = json.loads(next(walk["outputs"].rglob("study.json")).read_text(encoding="utf-8"))
    assert [entry["status"] for entry in state["deployments"].values()] == ["done"]
    (folder,) = (walk["outputs"] / "study-host").glob("smollm2*/quality")  # the study names it by its settings
    rows = read_requests(folder / "requests.csv")
    assert (rows[~rows["is_warmup"].astype(bool)]["status"] == "ok").sum() == 3
