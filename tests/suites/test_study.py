"""Studies: a study file expands into named deployments (grids with linked pairs), runs them one after another,
records a deployment that fails with its reason and goes on, waits for the previous server to let go, and a
rerun skips what finished."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from benchlib import cli
from benchlib.config.identity import Deployment
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
    for deployment in default.deployments:  # the reduced demo: the cheap, deciding set sized up, one at a time
        run = deployment.params.run
        assert run.graded_count("arithmetic", 200) > 4 * run.graded_count("word_sorting", 200) > 0
        assert deployment.params.graded_in_flight() == 1
    # issue 56: the full study sends more graded items than the demo and sizes Gemma's by a compare plan against
    # SmolLM2, which runs first (so it is never a 'reduced demo' that decides less than the default)
    full = study.load_study(PROJECT_ROOT / "params" / "studies" / "full.yaml")
    first, second = (d.params for d in full.deployments)
    assert (first.run.quality.plan, second.run.quality.plan) == ("fixed", "compare")
    assert second.run.quality.baseline == first.deployment_parts()[1] and second.run.quality.budget_s
    sizes = [sum(p.run.graded_count(s, 200) for s in ("arithmetic", "letter_counting", "leg_counting",
                                                       "word_sorting")) for p in (default.deployments[0].params, first)]
    assert sizes[1] > 2 * sizes[0]
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
    assert one.params.server.variant == two.params.server.variant == "graded_items=7,repeats=5"
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
    assert gemma.params.server.variant == "demo"  # the study names its settings itself
    assert gemma.params.suite_dir("text") != source.suite_dir("text")
    assert source.suite_dir("text") == embedded.suite_dir("text") and source.identity() == embedded.identity()
    labels = [d.label for d in default.deployments] + [Deployment.from_params(source).name]
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


def test_a_grid_over_the_cap_is_refused_in_one_line_before_it_is_expanded(tmp_path, monkeypatch):
    """A 200 × 100 × 100 grid printed nothing and reached 3.2 GB expanding its 2 million points."""
    def expanded(grid):
        raise AssertionError("the grid was expanded")
    monkeypatch.setattr(study, "grid_points", expanded)
    axes = {"run.max_tokens": list(range(1, 201)), "run.repeats": list(range(1, 101)),
            "run.warmups": list(range(100))}
    with pytest.raises(study.StudyError) as caught:
        study.load_study(write(tmp_path, {"name": "huge", "grids": [{"params": fake_params(), "axes": axes}]}))
    message = str(caught.value)
    assert "2,000,000 deployments (grids[0] 200 × 100 × 100 = 2,000,000 points)" in message and "\n" not in message
    assert f"at most {study.MAX_DEPLOYMENTS:,}" in message
    linked = {"name": "linked", "deployments": [{"params": fake_params("listed")}],
              "grids": [{"params": fake_params(), "axes": {"run.max_tokens": list(range(1, 41)),
                                                           "run.repeats": list(range(1, 41)),
                                                           "run.warmups": list(range(25))},
                         "linked": [["run.max_tokens", "run.repeats"]]}]}
    with pytest.raises(study.StudyError, match="1,001 deployments .*= 1,000 points"):  # linked keys count once
        study.load_study(write(tmp_path, linked))


def test_a_deployment_where_no_request_succeeded_is_failed_and_retried(tmp_path, monkeypatch):
    """A server at a dead port: its suite ran, every request failed. It was "done", the study exited 0 with
    "0 failed" and a resume skipped it for good; as `run` exits 1 for it, the study records it failed."""
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(tmp_path / "outputs"))
    path = write(tmp_path, {"name": "dead", "notebooks": ["text"], "settle": {"timeout_s": 0},
                            "deployments": [{"params": fake_params("dead")}, {"params": fake_params("alive")}]})
    plan = study.load_study(path)
    calls = []

    def runner(params, notebooks, fresh):
        calls.append(params.server.model)
        folder = tmp_path / "suites" / params.server.model / "text"
        folder.mkdir(parents=True, exist_ok=True)
        ok = 0 if params.server.model == "dead" else 3
        pd.DataFrame([{"task": "basic_qa", "n_ok": ok, "n_failed": 3 - ok, "n_unsupported": 0,
                       "failures": "connection_refused × 3" if not ok else ""}]).to_csv(folder / "summary.csv",
                                                                                       index=False)
        return {}, [folder]

    first = study.run_study(plan, runner, progress=lambda line: None)
    dead, alive = (d.label for d in plan.deployments)
    assert first.failed == {dead: "all suites: no request succeeded: text 3 failed, 0 unsupported "
                                  "(connection_refused × 3)"}
    assert first.done == [alive]
    record = json.loads((plan.folder / study.STUDY_JSON).read_text())["deployments"]
    assert record["study-host/dead"]["status"] == "failed" and record["study-host/alive"]["status"] == "done"
    second = study.run_study(study.load_study(path), runner, progress=lambda line: None)
    assert calls == ["dead", "alive", "dead"] and second.skipped == [alive], "the failed one is retried on resume"


def test_the_study_command_says_failed_and_exits_non_zero_for_it(tmp_path, monkeypatch, capsys):
    """The terminal side, beside a deployment that answered: it was "2 done, 0 failed" and exit 0; now it says
    failed and exits 1, as `run` does for a suite with no successful request."""
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(tmp_path / "outputs"))
    path = write(tmp_path, {"name": "dead-cli", "notebooks": ["text"], "settle": {"timeout_s": 0}, "paper": False,
                            "deployments": [{"params": fake_params("dead")}, {"params": fake_params("alive")}]})

    def runner(params, notebooks, fresh):
        folder = tmp_path / "suites" / params.server.model / "text"
        folder.mkdir(parents=True, exist_ok=True)
        ok = 0 if params.server.model == "dead" else 3
        pd.DataFrame([{"task": "basic_qa", "n_ok": ok, "n_failed": 3 - ok, "n_unsupported": 0, "n_scored": ok,
                       "n_passed": ok, "decode_tps_mean": 20.0 if ok else None, "ttft_s_p50": 0.1 if ok else None,
                       "failures": "connection_refused × 3" if not ok else ""}]).to_csv(folder / "summary.csv",
                                                                                       index=False)
        return {}, [folder]

    monkeypatch.setattr(cli, "_suite_runner", lambda quiet: runner)
    assert cli.main(["study", str(path), "--no-paper", "--quiet"]) == 1
    out = capsys.readouterr()
    assert "1 done, 0 done earlier, 1 failed" in out.out
    assert "no request succeeded: text 3 failed" in out.err
