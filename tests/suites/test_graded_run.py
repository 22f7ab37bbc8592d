"""Graded sets end to end through the fake server: each item one request, scored by its set's scorer; known answers
all right, all wrong or right only for some give the exact graded accuracy with its n and interval, and two
deployments that answered the same items get a paired verdict."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchlib.analysis import paired, stats
from benchlib.config.graded_run import AUTO_GRADED_IN_FLIGHT
from benchlib.config.params import load_params
from benchlib.config.paths import PARAMS_DIR
from benchlib.config.tasks import load_tasks
from benchlib.scoring.graded import stop_refusal
from benchlib.suites.runner import run_suite
from benchlib.views import suite_report
from tests.fakes.servers import FakeServer
from tests.helpers import make_params

SETS = ["arithmetic", "word_sorting", "humaneval"]
ITEMS = 4


def right(task, variant) -> str:
    expected = variant.expected
    if task.checker == "human_eval":
        return f"```python\n{expected['prompt']}{expected['canonical_solution']}```"
    return str(expected["answer"])


def wrong(task, variant) -> str:
    if task.checker == "human_eval":
        return f"```python\n{variant.expected['prompt']}    return None\n```"
    return "I do not know."


def replies_for(name: str, items: int) -> list[dict]:
    """The right answer to each of a set's first `items` items."""
    task = load_tasks()[name]
    return [{"when": variant.prompt, "text": right(task, variant)} for variant in task.variants[:items]]


def replies(correct: dict[str, set[int]]) -> list[dict]:
    """A reply per planned item: right for the item indexes in correct[task], wrong otherwise."""
    tasks = load_tasks()
    out = []
    for name in SETS:
        task = tasks[name]
        for index, variant in enumerate(task.variants[:ITEMS]):
            text = right(task, variant) if index in correct.get(name, set()) else wrong(task, variant)
            out.append({"when": variant.prompt, "text": text})
    return out


def run(params_for, correct: dict[str, set[int]], host: str = "test-host", fresh: bool = True):
    params = params_for({"replies": replies(correct), "itl": 0.0005, "ttft": 0.001}, host={"name": host},
                        run={"graded_items": ITEMS, "repeats": 3, "max_tokens": 1024}, tasks=SETS)
    return run_suite(params, "quality", fresh=fresh, progress=False)


def accuracy(result, task: str) -> pd.Series:
    return result.summary.set_index("task").loc[task]


@pytest.mark.usefixtures("bounded_sandbox")
def test_all_right_all_wrong_and_some_right_give_the_exact_graded_accuracy(params_for, outputs):
    every = {name: set(range(ITEMS)) for name in SETS}
    good = run(params_for, every)
    rows = good.requests
    assert len(rows) == ITEMS * len(SETS)  # each item once: repeats does not apply to a graded set
    assert rows.groupby("task")["variant"].nunique().to_dict() == {name: ITEMS for name in SETS}
    for name in SETS:
        line = accuracy(good, name)
        assert (line["n_scored"], line["n_passed"], line["accuracy"]) == (ITEMS, ITEMS, 1.0)
        assert (line["accuracy_lo"], line["accuracy_hi"]) == pytest.approx(stats.wilson_interval(ITEMS, ITEMS))
    assert rows.loc[rows["task"] == "arithmetic", "check_detail"].str.contains("read last_number").all()

    bad = run(params_for, {})
    for name in SETS:
        line = accuracy(bad, name)
        assert (line["n_scored"], line["accuracy"]) == (ITEMS, 0.0) and line["accuracy_lo"] == 0.0
    humaneval = bad.requests[bad.requests["task"] == "humaneval"]
    assert humaneval["check_detail"].str.contains(r"HumanEval/\d+ \(fenced block\): \w+Error").all()  # its own tests
    assert humaneval["check_detail"].str.contains("code is run whole").all()  # restating the stub is no echo cut

    some = run(params_for, {"arithmetic": {0, 2}, "word_sorting": {1}, "humaneval": {0, 1, 3}})
    for name, passed in (("arithmetic", 2), ("word_sorting", 1), ("humaneval", 3)):
        line = accuracy(some, name)
        assert line["n_passed"] == passed and line["accuracy"] == passed / ITEMS
        assert (line["accuracy_lo"], line["accuracy_hi"]) == pytest.approx(stats.wilson_interval(passed, ITEMS))
    graded = some.requests.set_index(["task", "repeat"])
    assert bool(graded.loc[("arithmetic", 2), "passed"]) and not bool(graded.loc[("arithmetic", 1), "passed"])


def test_thinking_is_left_out_and_the_raw_answer_kept(params_for, outputs):
    task = load_tasks()["arithmetic"]
    first, second = (int(v.expected["answer"]) for v in task.variants[:2])
    items = [{"when": task.variants[0].prompt, "text": f"<think>perhaps {first + 5}?</think>{first}"},
             {"when": task.variants[1].prompt, "text": f"{second}<think>or rather {second + 1}"}]  # cut off
    params = params_for({"replies": items, "itl": 0.0005, "ttft": 0.001},
                        run={"graded_items": 2, "max_tokens": 256}, tasks=["arithmetic"])
    rows = run_suite(params, "quality", fresh=True, progress=False).requests.set_index("repeat")
    assert rows["passed"].astype(bool).all(), rows["check_detail"].tolist()
    assert rows.loc[0, "response_text"].startswith("<think>perhaps")  # the row keeps what the model said
    assert f"read last_number: '{first}'" in rows.loc[0, "check_detail"]
    assert f"read last_number: '{second}'" in rows.loc[1, "check_detail"]


@pytest.mark.usefixtures("bounded_sandbox")
def test_two_deployments_on_the_same_items_get_a_paired_verdict(params_for, outputs):
    strong = run(params_for, {name: set(range(ITEMS)) for name in SETS}, host="strong")
    weak = run(params_for, {"arithmetic": {0}, "humaneval": {0}}, host="weak")
    items = paired.item_results(pd.concat([strong.requests, weak.requests], ignore_index=True))
    assert len(items) == 2 * ITEMS * len(SETS) and set(items["system"]) == {"fake-model · strong", "fake-model · weak"}
    table = paired.pairwise(items).iloc[0]
    assert (table["n"], table["both"], table["a_only"], table["b_only"], table["neither"]) == (12, 2, 10, 0, 0)
    assert table["verdict"] == "fake-model · strong beats fake-model · weak" and table["difference_lo"] > 0
    assert table["p_value"] == pytest.approx(2 * 0.5 ** 10)
    one_set = paired.pairwise(items, tasks=["arithmetic"]).iloc[0]  # 3 of 4 discordant: not enough to tell
    assert one_set["n"] == ITEMS and one_set["verdict"] == "undecided" and one_set["p_value"] == pytest.approx(0.25)


def test_accuracy_under_load_is_paired_with_the_first_pass_and_has_its_own_energy_window(params_for, outputs):
    """A server whose answers go wrong when requests overlap: right one at a time, wrong with 4 in flight (each set's
    4 items are one batch of 4)."""
    tasks, sets, n = load_tasks(), ["arithmetic", "word_sorting"], 4
    items = [{"when": v.prompt, "text": right(tasks[name], v), "busy_text": "I do not know."}
             for name in sets for v in tasks[name].variants[:n]]
    params = params_for({"replies": items, "itl": 0.0005, "ttft": 0.001, "busy_wait": 0.3},
                        run={"graded_items": n, "graded_concurrency": 4, "max_tokens": 64}, tasks=sets)
    result = run_suite(params, "quality", fresh=True, progress=False)
    rows = result.requests[~result.requests["is_warmup"].astype(bool)]
    assert rows.groupby("task")["concurrency"].unique().map(list).to_dict() == {
        "arithmetic": [1], "word_sorting": [1], "arithmetic@c4": [4], "word_sorting@c4": [4]}
    loaded = rows[rows["task"] == "arithmetic@c4"]
    assert sorted(loaded["variant"]) == sorted(rows.loc[rows["task"] == "arithmetic", "variant"])  # the same items
    assert len(set(rows["prompt"])) == len(rows)  # and still prompts no cache has seen
    summary = result.summary.set_index("task")
    assert summary.loc[sets, "accuracy"].tolist() == [1.0, 1.0]
    assert summary.loc[[f"{name}@c4" for name in sets], "accuracy"].tolist() == [0.0, 0.0]
    assert set(result.windows["window"]) >= {"arithmetic", "arithmetic@c4"}  # each pass its own energy window

    table = paired.under_load(paired.item_results(result.requests)).set_index("task")
    one = table.loc["arithmetic"]  # 4 items of one set: a difference, but too few to call
    assert (one["concurrency"], one["n"], one["a_only"], one["b_only"], one["verdict"]) == (4, n, n, 0, "undecided")
    pooled = table.loc[paired.ALL_SETS]  # both sets' 8 items: all discordant one way
    assert (pooled["n"], pooled["a_only"], pooled["verdict"]) == (2 * n, 2 * n, "c1 beats c4")
    assert pooled["p_value"] == pytest.approx(2 * 0.5 ** (2 * n)) and pooled["difference_lo"] > 0
    shown = suite_report.accuracy_under_load(result.requests, result.summary).set_index("set")
    assert shown.loc[paired.ALL_SETS, "verdict"] == "c1 beats c4" and shown.loc["arithmetic", "items"] == n
    assert (shown.loc["arithmetic", "accuracy at 1"], shown.loc["arithmetic", "accuracy under load"]) == ("100%", "0%")


def test_without_graded_concurrency_nothing_is_sent_twice(params_for, outputs):
    params = params_for({"replies": replies({}), "itl": 0.0005, "ttft": 0.001},
                        run={"graded_items": 2, "max_tokens": 64}, tasks=["arithmetic"])
    rows = run_suite(params, "quality", fresh=True, progress=False).requests
    # one pass; its 2 items went together (a server that is not embedded takes 16 at once): 2 in flight
    assert set(rows["task"]) == {"arithmetic"} and set(rows["concurrency"]) == {2} and len(rows) == 2


@pytest.fixture
def own_server():
    """A fake server of this test's own: its peak of requests streamed at once is this test's alone."""
    server = FakeServer().start_thread()
    yield server
    server.stop()


@pytest.mark.parametrize("in_flight, expected", [(None, AUTO_GRADED_IN_FLIGHT), (1, 1), (5, 5)])
def test_graded_items_go_to_the_server_as_many_at_once_as_it_takes(own_server, outputs, in_flight, expected):
    """The first pass sends run.graded_in_flight items at once (a server that is not embedded: 16 unless set), and
    every row records that as its concurrency; the answers are scored as one at a time."""
    items = 2 * AUTO_GRADED_IN_FLIGHT
    params = make_params(own_server.url, {"replies": replies_for("arithmetic", items), "itl": 0.001, "ttft": 0.15},
                         run={"graded_items": items, "max_tokens": 32, "graded_in_flight": in_flight},
                         tasks=["arithmetic"])
    result = run_suite(params, "quality", fresh=True, progress=False)
    rows = result.requests
    assert len(rows) == items and set(rows["concurrency"]) == {expected}
    assert own_server.peak_running == expected  # 150 ms to the first token: a whole batch overlaps
    assert rows["passed"].astype(bool).all()
    manifest = json.loads((result.out_dir / "manifest.json").read_text())
    assert manifest["graded"]["in_flight"] == expected


def test_a_set_smaller_than_the_batch_records_its_own_size_as_in_flight(own_server, outputs):
    params = make_params(own_server.url, {"replies": replies_for("arithmetic", 3), "itl": 0.001, "ttft": 0.15},
                         run={"graded_items": 3, "max_tokens": 32}, tasks=["arithmetic"])
    rows = run_suite(params, "quality", fresh=True, progress=False).requests
    assert set(rows["concurrency"]) == {3} and own_server.peak_running == 3


def test_the_embedded_demo_sends_one_at_a_time_by_default():
    params = load_params(PARAMS_DIR / "embedded.yaml")
    assert params.run.graded_in_flight is None and params.graded_in_flight() == 1
    assert make_params("http://127.0.0.1:9/v1").graded_in_flight() == AUTO_GRADED_IN_FLIGHT


@pytest.mark.parametrize("kind", ["openai", "ollama"])
def test_a_one_line_set_stops_at_its_first_line_break_and_the_others_do_not(own_server, outputs, kind):
    """word_sorting's answer is its first line (read first_line): the request carries stop ["\n"] and a model that
    goes on after the list stops there; arithmetic (read last_number: its number may sit on a later line) sends no
    stop, and its answer arrives whole."""
    tasks = load_tasks()
    sort_item, sum_item = tasks["word_sorting"].variants[0], tasks["arithmetic"].variants[0]
    listed = right(tasks["word_sorting"], sort_item)
    said = [{"when": sort_item.prompt, "text": f"{listed}\nThat is the list, sorted by ASCII code.\nMore words"},
            {"when": sum_item.prompt, "text": f"Let me see.\n{sum_item.expected['answer']}"}]
    params = make_params(own_server.url, {"replies": said, "itl": 0.001, "ttft": 0.01}, kind=kind,
                         run={"graded_items": 1, "max_tokens": 64}, tasks=["arithmetic", "word_sorting"])
    rows = run_suite(params, "quality", fresh=True, progress=False).requests.set_index("task")
    assert rows.loc["word_sorting", "response_text"].strip() == listed and rows.loc["word_sorting", "passed"]
    assert rows.loc["word_sorting", "finish_reason"] == "stop"
    assert rows.loc["arithmetic", "response_text"].startswith("Let me see.\n") and rows.loc["arithmetic", "passed"]
    sent = {("word_sorting" if "sort" in entry["prompt"] else "arithmetic"): entry["request"]
            for entry in own_server.log}
    assert len(own_server.log) == 2
    stop_of = (lambda r: (r.get("options") or {}).get("stop")) if kind == "ollama" else (lambda r: r.get("stop"))
    assert stop_of(sent["word_sorting"]) == ["\n"] and stop_of(sent["arithmetic"]) is None


def test_every_stop_a_task_file_declares_cuts_nothing_its_checker_reads():
    declared = {name: task for name, task in load_tasks().items() if task.stop}
    assert "word_sorting" in declared
    for name, task in declared.items():
        assert stop_refusal(task.checker, task.checker_args, task.stop) == "", name
    assert "would cut" in stop_refusal("reasoning_gym", {"read": "last_number"}, ["\n"])
    assert "reads the whole answer" in stop_refusal("human_eval", {}, ["\n"])
    assert "only line breaks" in stop_refusal("reasoning_gym", {"read": "first_line"}, [","])


def test_the_manifest_says_a_run_is_reduced_and_by_how_much(params_for, outputs):
    params = params_for({"replies": replies({}), "itl": 0.0005, "ttft": 0.001},
                        run={"graded_items": {"arithmetic": 3, "word_sorting": "all", "*": 0}, "max_tokens": 64},
                        tasks=["arithmetic", "word_sorting", "humaneval"])
    result = run_suite(params, "quality", fresh=True, progress=False)
    counts = result.requests.groupby("task").size().to_dict()
    pools = {name: len(load_tasks()[name].variants) for name in ("arithmetic", "word_sorting", "humaneval")}
    assert counts == {"arithmetic": 3, "word_sorting": pools["word_sorting"]}  # '*': 0 sends no HumanEval item
    plan = json.loads((result.out_dir / "manifest.json").read_text())["graded"]
    assert plan["sets"] == {"arithmetic": {"sent": 3, "pool": pools["arithmetic"]},
                            "word_sorting": {"sent": pools["word_sorting"], "pool": pools["word_sorting"]},
                            "humaneval": {"sent": 0, "pool": pools["humaneval"]}}
    assert plan["reduced"] is True and (plan["items"], plan["pool"]) == (3 + pools["word_sorting"], sum(pools.values()))
