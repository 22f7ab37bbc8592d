"""The run id covers the params, the task files' content and the code: editing a prompt or the scoring code
refuses to mix into an old run exactly as a params change does, saying which changed; each row records its
task-set hash; the manifest keeps every process's share of a resumed run."""

from __future__ import annotations

import json
import shutil

import pytest

from benchlib.config import params as params_module
from benchlib.config.paths import TASKS_DIR
from benchlib.config.tasks import _load_dir
from benchlib.records.rows import read_requests
from benchlib.records.run_folder import RunConflict
from benchlib.suites.runner import run_suite


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


def test_the_run_id_follows_the_measuring_code_not_the_paper(tmp_path):
    """Editing a figure or a caption must not orphan a half-done run; editing a checker must start a new one."""
    copy = tmp_path / "benchlib"
    shutil.copytree(params_module.PROJECT_ROOT / "benchlib", copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = params_module.code_version(copy)
    assert before == params_module.code_version()
    figure = copy / "paper" / "frontier_figure.py"
    figure.write_text(figure.read_text(encoding="utf-8") + "\n# a caption edited\n", encoding="utf-8")
    summary = copy / "analysis" / "task_stats.py"
    summary.write_text(summary.read_text(encoding="utf-8") + "\n# a table changed\n", encoding="utf-8")
    assert params_module.code_version(copy) == before
    checkers = copy / "scoring" / "checkers.py"
    checkers.write_text(checkers.read_text(encoding="utf-8") + "\n# a checker changed\n", encoding="utf-8")
    assert params_module.code_version(copy) != before


def test_an_unreadable_run_json_is_one_line_and_the_rows_stay(params_for, outputs):
    params = params_for({"ttft": 0.001, "itl": 0.0005, "tokens": 4}, tasks=["basic_qa"])
    first = run_suite(params, "text", progress=False)
    marker = first.out_dir / "run.json"
    marker.write_text('{"run_id": "abc', encoding="utf-8")  # torn by a crash or a careless edit
    rows = (first.out_dir / "requests.csv").read_bytes()
    with pytest.raises(RunConflict, match=r"run\.json is unreadable .*rerun with --fresh"):
        run_suite(params, "text", progress=False)
    assert (first.out_dir / "requests.csv").read_bytes() == rows and marker.read_text() == '{"run_id": "abc'
    marker.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(RunConflict, match="not a JSON object"):
        run_suite(params, "text", progress=False)
    assert run_suite(params, "text", fresh=True, progress=False).ok  # --fresh archives it and starts over
