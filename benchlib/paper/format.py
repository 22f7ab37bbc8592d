"""How a table is drawn: the Table object (a frame plus title, caption and notes), cell formatting and
Markdown rendering."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from benchlib.records.schema import number


@dataclass
class Table:
    """A paper table: `data` is written as CSV (numbers stay numbers), `display` as Markdown."""

    name: str
    title: str
    data: pd.DataFrame
    display: pd.DataFrame | None = None
    caption: str = ""

    def markdown(self) -> str:
        return markdown_table(self.display if self.display is not None else self.data)


def fmt(value: Any, spec: str = ".4g", missing: str = "–") -> str:
    """A number formatted with spec ('.1f', '.0%', ...); NaN/None -> missing; text stays."""
    if value is None:
        return missing
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, float, np.integer, np.floating)):
        if isinstance(value, float) and math.isnan(value):
            return missing
        return format(value, spec)
    text = str(value)
    return text if text and text != "nan" else missing


def markdown_table(frame: pd.DataFrame) -> str:
    """GitHub Markdown table (no tabulate dependency); NaN -> '–', pipes escaped."""
    if frame is None or frame.empty:
        return "_(no rows)_"
    columns = [str(c) for c in frame.columns]

    def cell(value: Any) -> str:
        text = fmt(value)
        return text.replace("|", "\\|").replace("\n", "<br>")

    numeric = [pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
               and frame[c].notna().any() for c in frame.columns]
    lines = ["| " + " | ".join(c.replace("|", "\\|") for c in columns) + " |",
             "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)


def smart(value: Any) -> str:
    """A readable number: whole numbers without decimals, 3 significant digits otherwise (never e-notation)."""
    v = number(value)
    if math.isnan(v):
        return "–"
    if v.is_integer():
        return f"{v:.0f}"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.3g}"


def isnan(value: Any) -> bool:
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return False
