"""Tasks are data: testdata/tasks/<suite>.yaml lists tasks with prompt variants, expected answers and a checker name.

A suite is the notebook that runs it (text, quality, vision, audio, video). `requires` names the input
modality a deployment must accept; a deployment lacking it gets 'unsupported' rows, not a crash.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from benchlib.config.paths import resolve_data_path, tasks_dir

Suite = Literal["text", "quality", "vision", "audio", "video"]


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
    variants: list[Variant] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_variants(self) -> "Task":
        ids = [v.id for v in self.variants]
        if len(ids) != len(set(ids)):
            raise ValueError("variant ids must be unique")
        return self

    def media_paths(self, variant: Variant) -> dict[str, Path]:
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
            raise TaskError(f"{path}: task '{name}': {key}: {err['msg']}") from None
        for variant in task.variants:
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


def tasks_for(suite: str, names: list[str] | None = None, directory: Path | None = None) -> list[Task]:
    """The tasks of one suite, in file order, restricted to `names` when given (empty = all)."""
    wanted = set(names or [])
    return [t for t in load_tasks(directory).values() if t.suite == suite and (not wanted or t.name in wanted)]
