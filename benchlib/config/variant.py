"""The settings label: the params a study changes, written as a deployment's `server.variant` so that they name its
output folder, as a grid point's settings do (benchlib.suites.study).

    SETTINGS RULE  a deployment a study changes (its overrides, over the params file) is labelled by every
                   result-shaping setting (BenchParams.shaping_params) whose value differs from the file's, in the
                   params' own order: `key=value`, joined by ","; the key is the shortest dotted tail that names one
                   setting only (`graded_items`, but `run.max_tokens` beside `sweep.max_tokens`), a list's items are
                   joined by "+", and a value that is long or holds other characters is written as a short hash of
                   it. A label longer than LABEL_MAX keeps its first settings and counts and hashes the rest.

So the same settings give the same label (and folder, and run id: the run resumes), other settings another, and a
plain run of the file (nothing changed, no label) keeps the file's own folder: the default study's quick settings,
a fuller study of the same models, a ladder rung and `make run PARAMS=…` each get their own folder or share one
exactly when what they measure is the same.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

LABEL_MAX = 64  # characters of the settings label before its tail is hashed
VALUE_MAX = 24  # characters of one value before it is hashed
SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.-]+$")  # fits server.variant's pattern without the separators , = +
UNLABELLED = {("server", "variant")}  # the label itself


def leaves(data: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Nested dicts as {key path: value}; lists, scalars, empty dicts and a mapping whose keys are no setting names
    (run.graded_items' `'*': 1`, which no label may spell) are leaves."""
    if isinstance(data, dict) and data and all(SAFE_VALUE.match(str(key)) for key in data):
        out: dict[tuple[str, ...], Any] = {}
        for key, value in data.items():
            out.update(leaves(value, (*prefix, str(key))))
        return out
    return {prefix: data}


def changed_settings(base: dict[str, Any], params: dict[str, Any]) -> dict[tuple[str, ...], Any]:
    """Every leaf of `params` (shaping_params of the deployment) whose value differs from `base`'s (the params file's
    shaping_params, or its raw sections where the file alone does not validate), in `params`' order."""
    before = leaves(base)
    return {path: value for path, value in leaves(params).items()
            if path not in UNLABELLED and (path not in before or before[path] != value)}


def _short(path: tuple[str, ...], every: list[tuple[str, ...]]) -> str:
    """The shortest tail of `path` that is the tail of no other path in `every`."""
    for size in range(1, len(path) + 1):
        tail = path[-size:]
        if not any(other != path and other[-size:] == tail for other in every):
            return ".".join(tail)
    return ".".join(path)


def _digest(value: Any, size: int = 6) -> str:
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:size]


def _value(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        text = json.dumps(value)  # true, false, null: as YAML writes them
    elif isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        text = str(int(value))  # 6.0 as the file writes it, 6
    elif isinstance(value, (int, float, str)):
        text = str(value)
    elif isinstance(value, list) and all(isinstance(v, (int, float, str)) and not isinstance(v, bool)
                                         for v in value) and value:
        items = [str(v) for v in value]
        text = "+".join(items) if all(SAFE_VALUE.match(i) for i in items) else ""
    else:
        text = ""
    return text if text and len(text) <= VALUE_MAX and SAFE_VALUE.match(text.replace("+", "")) else _digest(value)


def settings_label(changed: dict[tuple[str, ...], Any], every: list[tuple[str, ...]] | None = None) -> str:
    """The SETTINGS RULE's label of `changed` ('' when nothing changed); `every` is every setting's key path (for
    the short keys), by default the changed ones'."""
    paths = list(every if every is not None else changed)
    parts = [f"{_short(path, paths)}={_value(value)}" for path, value in changed.items()]
    label = ",".join(parts)
    if len(label) <= LABEL_MAX:
        return label
    kept: list[str] = []
    for part in parts:
        if len(",".join([*kept, part])) > LABEL_MAX - 16:
            break
        kept.append(part)
    rest = {".".join(path): value for path, value in list(changed.items())[len(kept):]}
    return ",".join([*kept, f"{len(rest)}more.{_digest(rest, 8)}"])
