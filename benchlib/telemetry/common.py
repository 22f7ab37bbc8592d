"""What every telemetry module shares: window kinds, the sensor-status record, NaN tests.

Imports: nothing from benchlib."""

from __future__ import annotations

import math
from typing import Any, Literal

WindowKind = Literal["idle", "loaded", "task", "level"]  # level: one load-sweep level (inside its task)


KINDS: tuple[str, ...] = ("idle", "loaded", "task", "level")


NAN = float("nan")


def sensor_status(available: bool, reason: str = "", source: str = "") -> dict[str, Any]:
    return {"available": bool(available), "reason": reason, "source": source}


def is_number(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"window kind must be one of {', '.join(KINDS)} (got {kind!r})")
