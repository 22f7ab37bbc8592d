"""Studies: a study file expands into named deployments (grids with linked pairs), runs them one after another,
records a deployment that fails with its reason and goes on, waits for the previous server to let go, and a
rerun skips what finished."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchlib.config.params import load_params
from benchlib.config.paths import PROJECT_ROOT
from benchlib.suites import ladder, study


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
    points = ["max_num_seqs=1,max_concurrency=1,max_tokens=16", "max_num_seqs=1,max_concurrency=1,max_tokens=32",
              "max_num_seqs=4,max_concurrency=4,max_tokens=16", "max_num_seqs=4,max_concurrency=4,max_tokens=32"]
    assert variants == [f"repeats=2,{point}" for point in points], "the study's override, then the grid point"
    last = plan.deployments[-1].params
    assert last.server.extra_body["max_num_seqs"] == 4 and last.sweep.rate.max_concurrency == 4
    assert last.run.max_tokens == 32 and last.run.repeats == 2
    assert len({d.params.identity() for d in plan.deployments}) == 4
    assert len({d.params.suite_dir("text") for d in plan.deployments}) == 4, "each point has its own folder"
    assert plan.deployments[0].label == \
        "fake-model · fake · repeats=2,max_num_seqs=1,max_concurrency=1,max_tokens=16 · study-host"


def test_the_shipped_studies_load(tmp_path):
    default = study.load_study(PROJECT_ROOT / "params" / "studies" / "default.yaml")
    models = [d.params.server.model for d in default.deployments]
    assert "gemma3-270m-q4_k_m" in models and "smollm2-135m-instruct-q4_1" in models
    threads = study.load_study(PROJECT_ROOT / "params" / "studies" / "threads.yaml")
    assert [d.params.server.embedded.n_threads for d in threads.deployments] == [1, 2]


def params_file(tmp_path: Path, model: str = "fake-model") -> Path:
    return write(tmp_path, fake_params(model), "fake.yaml")


def only(tmp_path: Path, data: dict, name: str) -> study.Deployment:
    plan = study.load_study(write(tmp_path, {"name": name, "notebooks": ["text"], **data}, f"{name}.yaml"))
    assert len(plan.deployments) == 1
    return plan.deployments[0]


def test_the_settings_a_study_changes_name_its_folder_and_a_plain_run_keeps_the_files(tmp_path):
    """Issue 43.7 / 46.1: a quick and a fuller study of one params file, and a plain run of it, each get their own
    folder; a study that changes nothing shares the plain run's folder and run id (it resumes there)."""
    file = params_file(tmp_path)
    plain = load_params(file)
    quick = only(tmp_path, {"overrides": {"run": {"graded_items": 3}}, "deployments": [{"params": str(file)}]}, "quick")
    full = only(tmp_path, {"deployments": [{"params": str(file), "overrides": {"run.graded_items": 20}}]}, "full")
    same = only(tmp_path, {"overrides": {"run": {"graded_items": plain.run.graded_items}},
                           "deployments": [{"params": str(file)}]}, "same")
    assert quick.params.server.variant == "graded_items=3" and full.params.server.variant == "graded_items=20"
    assert quick.label == "fake-model · fake · graded_items=3 · study-host"
    folders = {plain.suite_dir("text"), quick.params.suite_dir("text"), full.params.suite_dir("text")}
    assert len(folders) == 3, "each of the three has its own folder"
    assert len({plain.identity(), quick.params.identity(), full.params.identity()}) == 3
    assert same.params.server.variant == "" and same.params.suite_dir("text") == plain.suite_dir("text")
    assert same.params.identity() == plain.identity(), "same settings, same folder, same run: it resumes"


def test_a_settings_label_is_the_same_however_the_study_writes_the_settings(tmp_path):
    file = params_file(tmp_path)
    one = only(tmp_path, {"overrides": {"run": {"repeats": 5, "graded_items": 7}},
                          "deployments": [{"params": str(file)}]}, "one")
    two = only(tmp_path, {"overrides": {"run.graded_items": 7},
                          "deployments": [{"params": str(file), "overrides": {"run": {"repeats": 5}}}]}, "two")
    assert one.params.server.variant == two.params.server.variant == "repeats=5,graded_items=7"
    assert one.key == two.key and one.params.identity() == two.params.identity()


def test_a_study_that_names_its_settings_keeps_its_name_and_a_files_own_variant_comes_first(tmp_path):
    file = params_file(tmp_path)
    named = only(tmp_path, {"overrides": {"server": {"variant": "graded-full"}, "run": {"graded_items": 200}},
                            "deployments": [{"params": str(file)}]}, "named")
    assert named.params.server.variant == "graded-full"
    tagged = write(tmp_path, {**fake_params(), "server": {**fake_params()["server"], "variant": "tp2"}}, "tagged.yaml")
    quick = only(tmp_path, {"overrides": {"run": {"graded_items": 3}}, "deployments": [{"params": str(tagged)}]}, "t")
    assert quick.params.server.variant == "tp2,graded_items=3"


def test_inline_params_the_overrides_complete_are_labelled_by_what_the_overrides_write(tmp_path):
    partial = {"server": fake_params()["server"], "run": {"repeats": 2}}
    dep = only(tmp_path, {"overrides": {"host": {"name": "study-host"}, "run": {"repeats": 4}},
                          "deployments": [{"params": partial}]}, "inline")
    assert dep.params.server.variant == "repeats=4,name=study-host" and dep.params.run.repeats == 4


def test_the_default_study_the_ladders_source_rung_and_a_plain_run_do_not_share_a_folder_unless_identical():
    """`make run`, then `make ladder`, then `make run PARAMS=params/embedded.yaml`: the study's deployments are
    named by their settings, the ladder's source rung is the params file itself (its own folder, shared with the
    plain run of that file, under one run id)."""
    default = study.load_study(PROJECT_ROOT / "params" / "studies" / "default.yaml")
    embedded = load_params(PROJECT_ROOT / "params" / "embedded.yaml")
    source = ladder.rung_params(embedded, embedded.server.quantization, Path("unused.gguf"), "", 0.6)
    gemma = next(d for d in default.deployments if d.params.server.model == embedded.server.model)
    assert gemma.params.server.variant.startswith("graded_items=3,")
    assert gemma.params.suite_dir("text") != source.suite_dir("text")
    assert source.suite_dir("text") == embedded.suite_dir("text") and source.identity() == embedded.identity()
    labels = [d.label for d in default.deployments] + [study.deployment_label(source)]
    assert len(set(labels)) == len(labels), labels
    graded = study.load_study(PROJECT_ROOT / "params" / "studies" / "graded-full.yaml")
    full = study.load_study(PROJECT_ROOT / "params" / "studies" / "full.yaml")
    keys = [d.key for plan in (default, graded, full) for d in plan.deployments] + ["/".join(source.deployment_parts())]
    assert len(set(keys)) == len(keys), "the shipped studies and the ladder write to folders of their own"


@pytest.mark.parametrize("data,expected", [
    ({"name": "x"}, "needs at least one deployment or grid"),
    ({"name": "x", "deployments": [{"params": "nowhere.yaml"}]}, "params file 'nowhere.yaml' not found"),
    ({"name": "x", "deployments": [{"params": fake_params()}], "bogus": 1}, "bogus"),
    ({"name": "x", "deployments": [{"params": fake_params(), "overrides": {"run": {"repeats": 0}}}]}, "repeats"),
    ({"name": "x", "deployments": [{"params": fake_params(), "notebooks": ["nope"]}]}, "unknown notebook"),
    ({"name": "x", "deployments": [{"params": fake_params()}, {"params": fake_params()}]}, "same folder"),
    ({"name": "x", "grids": [{"params": fake_params(), "axes": {"run.repeats": [1, 2], "run.max_tokens": [8]},
                              "linked": [["run.repeats", "run.max_tokens"]]}]}, "same number of values"),
])
def test_a_bad_study_file_is_one_line(tmp_path, data, expected):
    with pytest.raises(study.StudyError, match=expected) as caught:
        study.load_study(write(tmp_path, data))
    assert "\n" not in str(caught.value)


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
