"""What every telemetry module shares: window kinds, the sensor-status record, NaN tests."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

# level: one load-sweep level (inside its task); steady: a level's steady-state part (analysis/load_levels)
WindowKind = Literal["idle", "loaded", "task", "level", "steady"]


KINDS: tuple[str, ...] = ("idle", "loaded", "task", "level", "steady")


NAN = float("nan")


def sensor_status(available: bool, reason: str = "", source: str = "") -> dict[str, Any]:
    return {"available": bool(available), "reason": reason, "source": source}


def is_number(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def read_sysfs(path: Path) -> str:
    """A sysfs/procfs attribute's text, stripped; "" when it cannot be read (absent, permission, device gone)."""
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"window kind must be one of {', '.join(KINDS)} (got {kind!r})")
