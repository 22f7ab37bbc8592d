"""How a table is drawn: the Table object (a frame plus title, caption and notes) and its Markdown rendering;
its cells are written by benchlib.config.formatting."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from benchlib.config.formatting import fmt


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
