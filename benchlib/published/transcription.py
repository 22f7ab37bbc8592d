"""How a transcribed reference cell is checked against the seed's own printed table, cell by cell.

Every reference row (paper/reference/*.csv) names the cell it was read from:
    seed_table   a table id from paper/reference/seed_tables.csv, or "text" for a number in running text
    seed_row     the row's label as printed (for "text": a verbatim phrase around the number, unique in the seed)
    seed_col     the column's label as printed (empty for "text")
seed_tables.csv says where each table is and how its cells are separated:
    pipe    markdown tables (| a | b |): header and cells read from the seed itself
    space   cells separated by whitespace (000's tables, 002's ratio tables): `columns` and `rows` give the labels
    none    cells printed with nothing between them (002's and 004's web tables): `columns` and `rows` likewise
A table starts at the first header line after its `anchor` (a line, unique in the seed, or empty; for pipe tables
the `nth` table from it) and ends at the next blank line. For pipe tables the cell is the column's cell of the
row. For space/none tables a row's cells are not delimited, so the row's whole line must be spelled out, in column order, by its label and its cells:
in a space table each transcribed cell is its texts (a number never continued by a digit or a point) with at most
some words around them but no other number, and every other column at least one word; a none table has no
boundaries at all, so every one of its cells must be transcribed and the line is their exact concatenation. A value
moved to another column, row or number no longer spells the line.

The value itself must then be the number printed in the cell (the first number; both ends for a range), and a coded
cell (a text cell given a number: "Supported" → video_support 1) must carry the code CODES gives its text.
PRINTED_DERIVATIONS recomputes the seeds' own totals, averages and ratios from their cells.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from benchlib.config.paths import REFERENCE_DIR
from benchlib.published import reference

SPEC_FILE = "seed_tables.csv"
SEPARATORS = ("pipe", "space", "none")
TEXT = "text"
RANGE = re.compile(r"^[~≈<>]?\s*(\d+(?:\.\d+)?)\s*-\s*(\d+(?:\.\d+)?)")
NUMBER = re.compile(r"(\d+(?:\.\d+)?)")
# Metrics whose cells are text even when they start with a digit.
TEXT_METRICS = ("server_version",)
# Coded cells: (metric, text as printed) → the number the reference gives it (README "Coded values").
CODES = {
    ("accuracy", "All reported correct"): 1,
    ("accuracy", "All reasoning chains reported correct; Gemma and Qwen truncated"): 1,
    ("accuracy", "Both supported models reported correct"): 1,
    ("truncated", "Gemma and Qwen truncated"): 1,
    ("video_support", "Supported"): 1,
    ("video_support", "Not supported"): 0,
    ("video_support", "Not supported in this deployment"): 0,
    ("vision_works", "YES"): 1, ("vision_works", "WORKING"): 1, ("vision_works", "Works"): 1,
    ("vision_works", "5/5"): 1, ("vision_works", "5/5 colors"): 1, ("vision_works", "5/5 colors, accurate layout"): 1,
    ("vision_works", "NO"): 0, ("vision_works", "NOT SUPPORTED"): 0,
    ("tools_passed", "Tools FAIL"): 0,
}


@dataclass
class Table:
    """One printed table of a seed: its column labels and its rows (label → line, or label → cells for pipe)."""

    id: str
    source: str
    sep: str
    columns: list[str]
    label_columns: int
    lines: dict[str, str] = field(default_factory=dict)
    cells: dict[str, list[str]] = field(default_factory=dict)


def load_specs(directory: Path | None = None) -> pd.DataFrame:
    """seed_tables.csv: table, source, section, anchor, nth, sep, label_columns, columns, rows."""
    spec = pd.read_csv(Path(directory or REFERENCE_DIR) / SPEC_FILE, dtype=str, keep_default_na=False)
    bad = spec[~spec["sep"].isin(SEPARATORS)]
    if len(bad):
        raise ValueError(f"{SPEC_FILE}: sep must be one of {', '.join(SEPARATORS)} (table {bad['table'].iloc[0]})")
    if spec["table"].duplicated().any():
        raise ValueError(f"{SPEC_FILE}: table ids repeat: {sorted(spec.loc[spec['table'].duplicated(), 'table'])}")
    return spec


def _split(label: str) -> list[str]:
    return [part.strip() for part in label.split(" | ")] if label else []


def _pipe_cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _normal(line: str) -> str:
    return " ".join(line.split())


def _joined(parts: list[str], sep: str) -> str:
    return ("" if sep == "none" else " ").join(parts)


def read_table(spec: pd.Series, text: str) -> Table:
    """The table `spec` describes, read from the seed text (raises ValueError when it is not where it says)."""
    lines = text.splitlines()
    start = 0
    if spec["anchor"]:
        hits = [i for i, line in enumerate(lines) if line.strip() == spec["anchor"]]
        if len(hits) != 1:
            raise ValueError(f"table {spec['table']}: anchor {spec['anchor']!r} occurs {len(hits)} times in "
                             f"{spec['source']}")
        start = hits[0]
    sep, columns = spec["sep"], _split(spec["columns"])
    label_columns = int(spec["label_columns"] or 1)
    if sep == "pipe":
        starts = [i for i in range(start, len(lines))
                  if lines[i].lstrip().startswith("|") and not (i and lines[i - 1].lstrip().startswith("|"))]
        nth = int(spec.get("nth") or 1)
        if len(starts) < nth:
            raise ValueError(f"table {spec['table']}: no pipe table number {nth} after its anchor")
        header = starts[nth - 1]
        table = Table(spec["table"], spec["source"], sep, _pipe_cells(lines[header]), label_columns)
        for line in lines[header + 2:]:
            if not line.lstrip().startswith("|"):
                break
            cells = _pipe_cells(line)
            table.cells.setdefault(" ".join(cells[:label_columns]), cells)
        return table
    wanted = _joined(columns, sep) if sep == "none" else _normal(_joined(columns, sep))
    header = next((i for i in range(start, len(lines))
                   if (lines[i].strip() if sep == "none" else _normal(lines[i])) == wanted), None)
    if header is None:
        raise ValueError(f"table {spec['table']}: header {wanted!r} not found in {spec['source']}")
    block = []
    for line in lines[header + 1:]:
        if not line.strip():
            break
        block.append(line.strip() if sep == "none" else _normal(line))
    table = Table(spec["table"], spec["source"], sep, columns, label_columns)
    for label in _split(spec["rows"]):
        prefix = label if sep == "none" else label + " "
        line = next((candidate for candidate in block if candidate.startswith(prefix)), None)
        if line is None:
            raise ValueError(f"table {spec['table']}: no row labelled {label!r}")
        table.lines[label] = line
    return table


def read_tables(specs: pd.DataFrame, texts: dict[str, str]) -> dict[str, Table]:
    """Every table of the spec whose seed text is given, by table id."""
    return {row["table"]: read_table(row, texts[row["source"]]) for _, row in specs.iterrows()
            if row["source"] in texts}


def literal(text: str) -> str:
    """A regex for `text` that a digit (or a point and a digit) may not continue on either side of a number."""
    pattern = re.escape(text)
    if re.match(r"[\d.]", text):
        pattern = r"(?<!\d)(?<!\d\.)" + pattern
    if re.search(r"[\d.]$", text) and re.search(r"\d", text):
        pattern += r"(?!\d|\.\d)"
    return pattern


def _in_cell(cell: str, texts: list[str]) -> bool:
    return re.search(".*?".join(literal(t) for t in texts), cell) is not None


def _cell_texts(rows: pd.DataFrame) -> list[str]:
    """The distinct transcribed texts of one cell, in the order printed, dropping any inside another."""
    texts = list(dict.fromkeys(rows["value_text"]))
    return [t for t in texts if not any(t != other and t in other for other in texts)]


# Around its transcribed texts a whitespace-separated cell may hold words, but never a number: a referenced cell
# cannot swallow its neighbour's figure.
_WORDS_BEFORE = r"(?:[^\d\s]\S*\s+)*?[^\d\s.]*"
_WORDS_AFTER = r"[^\d\s]*(?:\s+[^\d\s]\S*)*?"


def _spelled(table: Table, label: str, by_column: dict[int, list[str]]) -> str | None:
    """None when the row's printed line is spelled by its label and cells in column order, else the reason."""
    line = table.lines[label]
    parts = []
    for index in range(table.label_columns, len(table.columns)):
        texts = by_column.get(index)
        if not texts:
            if table.sep == "none":
                return f"column {table.columns[index]!r} is not transcribed: a line printed without separators " \
                       f"is checked only whole"
            parts.append(r"\S.*?")
            continue
        ordered = sorted(texts, key=lambda t: line.find(t))
        if table.sep == "none":
            parts.append(".*?".join(re.escape(t) for t in ordered))
        else:
            parts.append(_WORDS_BEFORE + ".*?".join(literal(t) for t in ordered) + _WORDS_AFTER)
    gap = r"\s+" if table.sep == "space" else ""
    pattern = "^" + re.escape(label) + gap + gap.join(parts) + "$"
    if re.match(pattern, line) is None:
        cells = [(table.columns[i], t) for i, t in sorted(by_column.items())]
        return f"the printed line {line!r} is not spelled by {cells}"
    return None


def check_cells(ref: pd.DataFrame, tables: dict[str, Table], texts: dict[str, str]) -> list[str]:
    """One line per transcribed row that its seed does not print where the row says (empty when all agree)."""
    problems = []
    for (source, table_id, label), group in ref.groupby(["source", "seed_table", "seed_row"], sort=False):
        where = f"{source} · {table_id} · {label!r}"
        if table_id == TEXT:
            count = texts[source].count(label)
            if count != 1:
                problems.append(f"{where}: the phrase occurs {count} times in the seed (must be once)")
            missing = [t for t in group["value_text"] if not _in_cell(label, [t])]
            problems += [f"{where}: {t!r} is not in the phrase" for t in missing]
            continue
        table = tables.get(table_id)
        if table is None or table.source != source:
            problems.append(f"{where}: no such table of {source} in {SPEC_FILE}")
            continue
        by_column: dict[int, list[str]] = {}
        for column, cell_rows in group.groupby("seed_col", sort=False):
            if column not in table.columns:
                problems.append(f"{where}: no column {column!r} (columns: {' | '.join(table.columns)})")
                continue
            by_column[table.columns.index(column)] = _cell_texts(cell_rows)
        if table.sep == "pipe":
            cells = table.cells.get(label)
            if cells is None:
                problems.append(f"{where}: no such row")
                continue
            for index, cell_texts in by_column.items():
                if index >= len(cells) or not _in_cell(cells[index], cell_texts):
                    problems.append(f"{where} · {table.columns[index]!r}: the cell does not print "
                                    f"{' … '.join(cell_texts)!r}")
        elif label not in table.lines:
            problems.append(f"{where}: no such row")
        elif by_column and (reason := _spelled(table, label, by_column)):
            problems.append(f"{where}: {reason}")
    return problems


def check_values(ref: pd.DataFrame) -> list[str]:
    """One line per row whose number is not the one its printed text carries (or whose code is not CODES's)."""
    problems = []
    for row in ref.itertuples():
        where = f"{row.source} · {row.section} · {row.model or row.host} · {row.metric} · {row.value_text!r}"
        text = row.value_text.replace(",", "")
        has_value = not (math.isnan(row.value) and math.isnan(row.value_low))
        code = CODES.get((row.metric, row.value_text))
        if row.unit == "flag" or code is not None:
            if code is None or row.value != code:
                problems.append(f"{where}: coded {row.value} but CODES gives {code}")
            continue
        if not has_value:
            if row.metric not in TEXT_METRICS and re.match(r"^[~≈]?\d", text):
                problems.append(f"{where}: prints a number but has no value")
            continue
        match = RANGE.match(text)
        if match and math.isnan(row.value):
            if (row.value_low, row.value_high) != (float(match.group(1)), float(match.group(2))):
                problems.append(f"{where}: range {row.value_low}–{row.value_high} is not the printed one")
        elif not (number := NUMBER.search(text)) or row.value != float(number.group(1)):
            problems.append(f"{where}: value {row.value} is not the printed number")
    return problems


def seed_texts(sources) -> dict[str, str]:
    """The seed texts (bold removed) of the given sources; raises FileNotFoundError naming the missing ones."""
    texts = {source: reference.seed_text(source) for source in sources}
    missing = sorted(source for source, text in texts.items() if text is None)
    if missing:
        raise FileNotFoundError(f"seed documents {', '.join(missing)} not found in {reference.SEEDS_DIR} "
                                f"(clone the project beside shared/, which holds seeds/)")
    return texts


def check(ref: pd.DataFrame | None = None, specs: pd.DataFrame | None = None) -> list[str]:
    """Every reference row checked against its seed: cell placement, printed number, code."""
    ref = reference.load_reference() if ref is None else ref
    specs = load_specs() if specs is None else specs
    texts = seed_texts(ref["source"].unique())
    tables = read_tables(specs[specs["source"].isin(texts)], texts)
    return check_cells(ref, tables, texts) + check_values(ref)
