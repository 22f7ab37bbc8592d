"""The run id covers the params, the task files' content and the code: editing a prompt or the scoring code
refuses to mix into an old run exactly as a params change does, saying which changed; each row records its
task-set hash; the manifest keeps every process's share of a resumed run."""

from __future__ import annotations

import json
import shutil

import pytest

from benchlib import params as params_module
from benchlib.paths import TASKS_DIR
from benchlib.records import read_requests
from benchlib.runner import RunConflict, run_suite
from benchlib.tasks import _load_dir


@pytest.fixture
def tasks_copy(tmp_path, monkeypatch):
    folder = tmp_path / "tasks"
    shutil.copytree(TASKS_DIR, folder)
    monkeypatch.setenv("FRONTIER_BENCH_TASKS", str(folder))
    _load_dir.cache_clear()
    yield folder
    _load_dir.cache_clear()


def _params(params_for):
    return params_for({"ttft": 0.001, "itl": 0.0005, "tokens": 4}, run={"repeats": 1}, tasks=["basic_qa"])


def test_an_edited_prompt_refuses_to_mix_and_says_so(params_for, outputs, tasks_copy):
    params = _params(params_for)
    first = run_suite(params, "text", progress=False)
    rows = read_requests(first.out_dir / "requests.csv")
    assert set(rows["task_set"]) == {params_module.task_set_hash()} and len(rows["task_set"].iloc[0]) == 12
    text = (tasks_copy / "text.yaml").read_text(encoding="utf-8")
    (tasks_copy / "text.yaml").write_text(text.replace("capital of France", "capital of france"), encoding="utf-8")
    _load_dir.cache_clear()
    assert params.identity() != first.requests["run_id"].iloc[0]
    with pytest.raises(RunConflict, match="made from changed task files"):
        run_suite(params, "text", progress=False)
    fresh = run_suite(params, "text", fresh=True, progress=False)
    assert set(fresh.requests["task_set"]) == {params_module.task_set_hash()}


def test_other_code_refuses_to_mix_and_says_so(params_for, outputs, monkeypatch):
    params = _params(params_for)
    run_suite(params, "text", progress=False)
    monkeypatch.setattr(params_module, "code_version", lambda: "0123456789ab")
    with pytest.raises(RunConflict, match=r"made from other code \(benchlib\)"):
        run_suite(params, "text", progress=False)


def test_the_manifest_keeps_every_part_of_a_resumed_run(params_for, outputs):
    params = _params(params_for)
    first = run_suite(params, "text", progress=False)
    (first.out_dir / "requests.csv").write_text(
        (first.out_dir / "requests.csv").read_text().splitlines(keepends=True)[0])  # every row gone: redo all
    run_suite(params, "text", progress=False)
    manifest = json.loads((first.out_dir / "manifest.json").read_text())
    assert len(manifest["parts"]) == 2
    assert all(part["code_version"] == params_module.code_version() for part in manifest["parts"])
    assert manifest["identity"] == params.identity_parts() and manifest["run_id"] == params.identity()
