"""Tasks are data: testdata/tasks/<suite>.yaml lists tasks with prompt variants, expected answers and a checker name.

A suite is the notebook that runs it (text, quality, vision, audio, video). `requires` names the input
modality a deployment must accept; a deployment lacking it gets 'unsupported' rows, not a crash.
A graded task declares where its items come from instead of writing variants (`graded:`, benchlib.config.graded):
its variants are generated here, once per process, and a run sends the first run.graded_items of them, each once.
A generated set's pictures or clips (graded sources generated_image, generated_speech) are made when a variant's
media are first asked for (media_paths), not when the files load.

Accuracy under load: with run.graded_concurrency N > 1 a graded set's items are sent a second time, N in flight,
as the task "<name>@c<N>" (under_load): its own rows, summary row and telemetry window, the same item ids, so the
two passes are compared item by item (benchlib.analysis.paired.under_load). load_pass() reads such a name back.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from benchlib.config.graded import GradedSource, graded_variants, render_media
from benchlib.config.paths import resolve_data_path, tasks_dir

Suite = Literal["text", "quality", "vision", "audio", "video"]
LOAD_MARK = "@c"  # "<task>@c<concurrency>": a graded set's second pass under load (task names are [a-z0-9_]+)


class TaskError(ValueError):
    """A task file is malformed or names a missing media file; one line naming file and task."""


class Variant(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    expected: Any = None
    image: str | None = None  # relative to testdata/
    audio: str | None = None
    video: str | None = None


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9_]+$")
    suite: Suite
    requires: Literal["text", "vision", "audio", "video"] = "text"
    title: str = ""
    checker: str = Field(min_length=1, description="Name in benchlib.scoring.checkers.CHECKERS")
    checker_args: dict[str, Any] = Field(default_factory=dict)
    system: str = ""
    max_tokens: int | None = Field(None, ge=1, description="Lower per-task budget; never above run.max_tokens")
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | None = None
    all_variants: bool = Field(False, description="Send every variant once even when repeats is smaller")
    transcribes: bool = Field(False, description="Each variant's answer is its audio's transcript (or nothing, for "
                              "audio without speech): a speech model behind a transcription endpoint "
                              "(server.api: transcription) takes this task, its prompt unused")
    stop: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, max_length=4, description="Stop sequences sent with each request (OpenAI `stop`, "
        "Ollama options.stop): [\"\\n\"] for a set whose answer is one line and whose reading rule reads no further "
        "(checker_args read: first_line), so a model that goes on, or repeats the question, stops at the line's end "
        "instead of its budget")
    graded: GradedSource | None = Field(None, description="Items drawn from a library (generated variants)")
    variants: list[Variant] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _generate(cls, data: Any) -> Any:
        """A graded task's variants come from its source; it writes none of its own."""
        if not isinstance(data, dict) or data.get("graded") is None:
            return data
        if data.get("variants"):
            raise ValueError("a graded task's variants come from its source: write no variants")
        source = GradedSource.model_validate(data["graded"])
        return {**data, "graded": source, "variants": graded_variants(source)}

    @model_validator(mode="after")
    def _unique_variants(self) -> "Task":
        ids = [v.id for v in self.variants]
        if len(ids) != len(set(ids)):
            raise ValueError("variant ids must be unique")
        return self

    def planned_variants(self, repeats: int, graded_items: int) -> list[Variant]:
        """What a run sends, one request each: a graded task's first `graded_items` items; otherwise `repeats`
        requests cycling through the variants (every variant at least once with all_variants)."""
        if self.graded is not None:
            return self.variants[:graded_items]
        count = max(repeats, len(self.variants)) if self.all_variants else repeats
        return [self.variants[i % len(self.variants)] for i in range(count)]

    def media_paths(self, variant: Variant) -> dict[str, Path]:
        """The variant's media files; a generated set's are made on first use (benchlib.config.graded)."""
        if self.graded is not None and (variant.image or variant.audio):
            render_media(self.graded)
        return {kind: resolve_data_path(getattr(variant, kind))
                for kind in ("image", "audio", "video") if getattr(variant, kind)}


def _load_file(path: Path) -> list[Task]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    except yaml.YAMLError as exc:
        raise TaskError(f"{path}: invalid YAML: {exc}") from None
    if not isinstance(raw, list):
        raise TaskError(f"{path}: expected a list of tasks")
    tasks = []
    for index, item in enumerate(raw):
        name = item.get("name", f"#{index}") if isinstance(item, dict) else f"#{index}"
        try:
            task = Task.model_validate(item)
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(p) for p in err["loc"])
            message = err["msg"].removeprefix("Value error, ")
            raise TaskError(f"{path}: task '{name}': {f'{key}: ' if key else ''}{message}") from None
        for variant in task.variants if task.graded is None else ():  # a generated set's media: made on first use
            for kind, media in task.media_paths(variant).items():
                if not media.is_file():
                    raise TaskError(f"{path}: task '{name}' variant '{variant.id}': {kind} file not found: {media}")
        tasks.append(task)
    return tasks


@lru_cache(maxsize=4)
def _load_dir(directory: str) -> dict[str, Task]:
    registry: dict[str, Task] = {}
    for path in sorted(Path(directory).glob("*.yaml")):
        for task in _load_file(path):
            if task.name in registry:
                raise TaskError(f"{path}: task '{task.name}' is defined twice")
            registry[task.name] = task
    return registry


def load_tasks(directory: Path | None = None) -> dict[str, Task]:
    """Every task by name, from all suite files."""
    return dict(_load_dir(str(directory or tasks_dir())))


def graded_set_names(directory: Path | None = None) -> set[str]:
    """The names of the graded sets (tasks with `graded:`)."""
    return {name for name, task in load_tasks(directory).items() if task.graded is not None}


def tasks_for(suite: str, names: list[str] | None = None, directory: Path | None = None) -> list[Task]:
    """The tasks of one suite, in file order, restricted to `names` when given (empty = all)."""
    wanted = set(names or [])
    return [t for t in load_tasks(directory).values() if t.suite == suite and (not wanted or t.name in wanted)]


def under_load_name(name: str, concurrency: int) -> str:
    return f"{name}{LOAD_MARK}{concurrency}"


def under_load(task: Task, concurrency: int) -> Task:
    """The graded task's second pass at `concurrency` in flight: the same items and checker, its own name."""
    return task.model_copy(update={"name": under_load_name(task.name, concurrency),
                                   "title": f"{task.title or task.name} — {concurrency} in flight"})


def load_pass(name: str) -> tuple[str, int]:
    """(the task, its concurrency) of a task name: ("arithmetic", 4) for "arithmetic@c4", (name, 1) otherwise."""
    base, mark, level = name.rpartition(LOAD_MARK)
    if mark and base and level.isdigit():
        return base, int(level)
    return name, 1
