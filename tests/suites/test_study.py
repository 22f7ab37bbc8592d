"""Studies: a study file expands into named deployments (grids with linked pairs), runs them one after another,
records a deployment that fails with its reason and goes on, waits for the previous server to let go, and a
rerun skips what finished."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchlib.config.paths import PROJECT_ROOT
from benchlib.suites import study


def write(tmp_path: Path, data: dict, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def fake_params(model: str = "fake-model") -> dict:
    return {"host": {"name": "study-host"},
            "server": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": model, "software": "fake"}}


def test_a_grid_with_a_linked_pair_expands_into_named_deployments(tmp_path):
    path = write(tmp_path, {
        "name": "grid", "notebooks": ["text"], "overrides": {"run": {"repeats": 2}},
        "grids": [{"params": fake_params(),
                   "axes": {"server.extra_body.max_num_seqs": [1, 4], "sweep.rate.max_concurrency": [1, 4],
                            "run.max_tokens": [16, 32]},
                   "linked": [["server.extra_body.max_num_seqs", "sweep.rate.max_concurrency"]]}]})
    plan = study.load_study(path)
    variants = [d.params.server.variant for d in plan.deployments]
    assert variants == ["max_num_seqs=1,max_concurrency=1,max_tokens=16", "max_num_seqs=1,max_concurrency=1,max_tokens=32",
                        "max_num_seqs=4,max_concurrency=4,max_tokens=16", "max_num_seqs=4,max_concurrency=4,max_tokens=32"]
    last = plan.deployments[-1].params
    assert last.server.extra_body["max_num_seqs"] == 4 and last.sweep.rate.max_concurrency == 4
    assert last.run.max_tokens == 32 and last.run.repeats == 2
    assert len({d.params.identity() for d in plan.deployments}) == 4
    assert len({d.params.suite_dir("text") for d in plan.deployments}) == 4, "each point has its own folder"
    assert plan.deployments[0].label == "fake-model · fake · max_num_seqs=1,max_concurrency=1,max_tokens=16 · study-host"


def test_the_shipped_studies_load(tmp_path):
    default = study.load_study(PROJECT_ROOT / "params" / "studies" / "default.yaml")
    models = [d.params.server.model for d in default.deployments]
    assert "gemma3-270m-q4_k_m" in models and "smollm2-135m-instruct-q4_1" in models
    threads = study.load_study(PROJECT_ROOT / "params" / "studies" / "threads.yaml")
    assert [d.params.server.embedded.n_threads for d in threads.deployments] == [1, 2]


@pytest.mark.parametrize("data,expected", [
    ({"name": "x"}, "needs at least one deployment or grid"),
    ({"name": "x", "deployments": [{"params": "nowhere.yaml"}]}, "params file 'nowhere.yaml' not found"),
    ({"name": "x", "deployments": [{"params": fake_params()}], "bogus": 1}, "bogus"),
    ({"name": "x", "deployments": [{"params": fake_params(), "overrides": {"run": {"repeats": 0}}}]}, "repeats"),
    ({"name": "x", "deployments": [{"params": fake_params(), "notebooks": ["nope"]}]}, "unknown notebook"),
    ({"name": "x", "deployments": [{"params": fake_params()}, {"params": fake_params()}]}, "same folder"),
    ({"name": "x", "grids": [{"params": fake_params(), "axes": {"run.repeats": [1, 2], "run.max_tokens": [8]},
                              "linked": [["run.repeats", "run.max_tokens"]]}]}, "same number of values"),
    ({"name": "x", "deployments": [  # a compare plan's baseline must run first: its answers are compared with
        {"params": fake_params("b"), "overrides": {"run": {"quality": {"plan": "compare", "baseline": "a"}}}},
        {"params": fake_params("a")}]}, "baseline 'a' is not a deployment that runs before it"),
])
def test_a_bad_study_file_is_one_line(tmp_path, data, expected):
    with pytest.raises(study.StudyError, match=expected) as caught:
        study.load_study(write(tmp_path, data))
    assert "\n" not in str(caught.value)


def test_a_compare_plan_names_an_earlier_deployment(tmp_path):
    path = write(tmp_path, {"name": "x", "deployments": [
        {"params": fake_params("a")},
        {"params": fake_params("b"), "overrides": {"run": {"quality": {"plan": "compare", "baseline": "a"}}}}]})
    plan = study.load_study(path)
    assert plan.deployments[1].params.run.quality.baseline == "a"


def test_failed_deployments_are_recorded_the_study_goes_on_and_a_rerun_skips_what_finished(tmp_path, monkeypatch):
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(tmp_path / "outputs"))
    path = write(tmp_path, {"name": "two", "notebooks": ["text"], "settle": {"timeout_s": 0},
                            "deployments": [{"params": fake_params("broken")}, {"params": fake_params("fine")}]})
    plan = study.load_study(path)
    calls, lines = [], []

    def runner(params, notebooks, fresh):
        calls.append(params.server.model)
        if params.server.model == "broken" and len(calls) == 1:
            return {"text": "EmbeddedServerError: the server did not start"}, []
        return {}, []

    first = study.run_study(plan, runner, progress=lines.append)
    assert calls == ["broken", "fine"], "the study went on after the failure"
    assert first.failed == {plan.deployments[0].label: "text: EmbeddedServerError: the server did not start"}
    assert lines[0].startswith("■ deployment 1/2: broken") and lines[-1].startswith("■ deployment 2/2: fine")
    record = json.loads((plan.folder / study.STUDY_JSON).read_text())["deployments"]
    assert record["study-host/broken"]["status"] == "failed"
    assert "did not start" in record["study-host/broken"]["reason"]
    assert record["study-host/fine"]["status"] == "done"
    assert record["study-host/fine"]["run_id"] == plan.deployments[1].params.identity()

    second = study.run_study(study.load_study(path), runner, progress=lines.append)
    assert calls == ["broken", "fine", "broken"], "only the failed deployment ran again"
    assert second.skipped == [plan.deployments[1].label] and second.done == [plan.deployments[0].label]


def test_settle_waits_until_the_server_group_is_gone_and_memory_is_back():
    clock = iter(i * 0.2 for i in range(1000))
    alive = {"polls": 0}

    def members(group):
        alive["polls"] += 1
        return [group] if alive["polls"] <= 3 else []

    memory = iter([100.0, 100.0, 100.0, 100.0, 600.0, 990.0, 990.0])
    seen = study.settle([4242], 1000.0, study.SettleSpec(timeout_s=30, memory_tolerance_mb=50), members=members,
                        available=lambda: next(memory), sleep=lambda s: None, clock=lambda: next(clock))
    assert seen["settled"] and seen["alive_groups"] == [] and seen["mem_available_mb"] == 990.0
    assert alive["polls"] == 6


def test_settle_gives_up_after_its_timeout_and_says_so():
    clock = iter(i * 1.0 for i in range(100))
    seen = study.settle([4242], 1000.0, study.SettleSpec(timeout_s=3, memory_tolerance_mb=0),
                        members=lambda g: [g], available=lambda: 10.0, sleep=lambda s: None,
                        clock=lambda: next(clock))
    assert not seen["settled"] and seen["alive_groups"] == [4242] and seen["waited_s"] >= 3
