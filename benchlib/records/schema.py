"""Typed CSV columns: one reader for every tidy file, and the two coercions every analysis needs.

A file's columns are declared once (requests.csv by `records.RequestRecord`, telemetry windows by
`telemetry.files.WINDOW_TYPES`, sweep levels by `load.levels`); `read_csv` gives them back typed, so booleans
are booleans and numbers are numbers wherever a frame is used, and nobody re-parses "True"/"true"/"1".

Column kinds: "str", "int" (nullable Int64, parsed exactly: nanosecond stamps stay exact), "float" (also
optional counts such as prompt_tokens, so arithmetic on them gives NaN, not pandas.NA), "bool" (False when empty), "optional_bool" (pandas'
nullable boolean: empty stays <NA>, e.g. `passed` on an unscored row) and "json" (lists/dicts stored as JSON).

Old files keep loading: booleans written as Python's True/False or as true/false/1/0 all read back; a column
a file lacks is added empty; a column the schema does not know is kept as read.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import math
import sys
import types
import typing
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

log = logging.getLogger("benchlib")

ColumnKind = typing.Literal["str", "int", "float", "bool", "optional_bool", "json"]
TRUE_TEXT = frozenset({"true", "1", "1.0", "yes"})
FALSE_TEXT = frozenset({"false", "0", "0.0", "no", ""})
# The csv module refuses a field over 131,072 characters by default; an answer, an itl_s list or a prompt may be
# longer and must read back whole. The limit is the process's: every reader of these files shares it.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
NEWLINE = b"\n"
MAX_RESYNCS = 32  # each unclosed quote costs a scan to the end of the file; more than this is not a results file


def number(value: Any) -> float:
    """A float, NaN for anything missing or non-numeric (None, '', 'n/a', a bool is not a number here)."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def finite(value: Any) -> float | None:
    """A finite float or None (for code that must not carry NaN or inf forward)."""
    out = number(value)
    return out if math.isfinite(out) else None


def numeric_column(frame: pd.DataFrame, column: str) -> pd.Series:
    """The one coercion rule for a column read as numbers: floats, NaN where the column is missing or a value
    does not parse (a caller that needs another fill says so with .fillna)."""
    if column not in frame:
        return pd.Series(np.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[column], errors="coerce").astype(float)


def integer(value: Any) -> Any:
    """An int (exact for big counters such as nanosecond stamps: never through a float), or pandas.NA."""
    if isinstance(value, (bool, np.bool_)) or value is None or value is pd.NA:
        return pd.NA
    if isinstance(value, (int, np.integer)):
        return int(value)
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        as_float = number(text)
        return int(as_float) if math.isfinite(as_float) and as_float.is_integer() else pd.NA


def flag(value: Any) -> bool:
    """A boolean cell: True for True/true/1/1.0/yes, False for anything else (including missing)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if value is None or value is pd.NA:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    return str(value).strip().lower() in TRUE_TEXT


def optional_flag(value: Any) -> Any:
    """True / False, or pandas.NA when the cell is missing or not a boolean literal (e.g. an unscored row)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return pd.NA
    text = str(value).strip().lower()
    if text in TRUE_TEXT:
        return True
    if text in FALSE_TEXT and text:
        return False
    return pd.NA


def json_value(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        return value
    if isinstance(value, str) and value:
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return []
    return []


def kind_of(annotation: Any) -> ColumnKind:
    """Column kind of a dataclass field annotation (str, int | None, list[float], ...)."""
    args = set(typing.get_args(annotation)) if isinstance(annotation, (types.UnionType,)) or \
        typing.get_origin(annotation) is typing.Union else {annotation}
    optional = type(None) in args
    args.discard(type(None))
    base = next(iter(args)) if len(args) == 1 else str
    origin = typing.get_origin(base) or base
    if origin in (list, dict):
        return "json"
    if base is bool:
        return "optional_bool" if optional else "bool"
    if base is int:
        return "float" if optional else "int"  # an optional count reads as float with NaN, pandas' missing value
    if base is float:
        return "float"
    return "str"


def dataclass_kinds(cls: type) -> dict[str, ColumnKind]:
    """Column kinds from a dataclass's field annotations, in field order."""
    hints = typing.get_type_hints(cls)
    return {f.name: kind_of(hints[f.name]) for f in dataclasses.fields(cls)}


def coerce(frame: pd.DataFrame, kinds: Mapping[str, ColumnKind]) -> pd.DataFrame:
    """Give each declared column its kind (adding missing ones empty); undeclared columns are left as they are."""
    out = frame.copy()
    for name, kind in kinds.items():
        column = out[name] if name in out else pd.Series([None] * len(out), index=out.index, dtype=object)
        if kind == "str":
            out[name] = column.map(lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
        elif kind == "float":
            out[name] = pd.to_numeric(column.map(number), errors="coerce").astype(float)
        elif kind == "int":
            out[name] = pd.array([integer(v) for v in column], dtype="Int64")
        elif kind == "bool":
            out[name] = column.map(flag).astype(bool)
        elif kind == "optional_bool":
            out[name] = pd.array([optional_flag(v) for v in column], dtype="boolean")
        elif kind == "json":
            out[name] = column.map(json_value)
        else:  # pragma: no cover — a typo in a schema
            raise ValueError(f"unknown column kind {kind!r} for {name}")
    return out


def _record_end(data: bytes, pos: int) -> tuple[int | None, int]:
    """(offset just past the first newline outside quotes from pos, newlines up to it); (None, newlines seen) when
    the data ends first. Quotes and newlines are single bytes in UTF-8, so bytes can be scanned directly."""
    quotes, last, count = 0, pos, 0
    newline = data.find(NEWLINE, pos)
    while newline != -1:
        quotes += data.count(b'"', last, newline)
        last, count = newline, count + 1
        if quotes % 2 == 0:
            return newline + 1, count
        newline = data.find(NEWLINE, newline + 1)
    return None, count


def _cells(text: str) -> list[str] | str:
    """One record's cells, or why the parser refused it."""
    try:
        return next(csv.reader([text]), [])
    except csv.Error as exc:
        return str(exc).splitlines()[0][:80]


@dataclasses.dataclass
class Scan:
    """A CSV file's bytes split into records: the header, the rows with the line each starts on, one entry per
    record left out (its line and why), and the end of the last whole record (what a torn tail is cut back to)."""

    header: list[str]
    rows: list[tuple[int, list[str]]]
    problems: list[str]
    whole: int


def scan_csv(data: bytes) -> Scan:
    """Split a CSV file into records, each parsed on its own: a record the parser refuses, or with another number
    of cells than the header, costs that record and never the ones after it. An unbalanced quote would glue a
    row to every row after it: where a whole record with the header's cells starts on the next line, the bad row
    costs its own line only. A tail that never closes its quotes or lacks its newline is torn (cut by a crash, a
    kill or a full disk): never read as a row."""
    header: list[str] | None = None
    rows: list[tuple[int, list[str]]] = []
    problems: list[str] = []
    pos, line, whole, resyncs = 0, 1, 0, 0

    def record(start: int) -> tuple[int | None, int, list[str] | str | None]:
        end, count = _record_end(data, start)
        return end, count, None if end is None else _cells(data[start:end].decode("utf-8", errors="replace"))

    def fits(cells: list[str] | str | None) -> bool:
        return header is not None and isinstance(cells, list) and len(cells) == len(header)

    while pos < len(data):
        end, count, cells = record(pos)
        first_newline = data.find(NEWLINE, pos)
        if header is not None and (end is None or count > 1) and not fits(cells) and first_newline != -1 \
                and resyncs < MAX_RESYNCS and fits(record(first_newline + 1)[2]):
            problems.append(f"line {line} (an unclosed quote)")
            pos, line, whole, resyncs = first_newline + 1, line + 1, first_newline + 1, resyncs + 1
            continue
        if end is None:
            if data[pos:].strip():
                problems.append(f"line {line} (cut: the row does not end)")
            break
        if header is None:
            header = cells if isinstance(cells, list) and cells else None
            if header is None:
                break
        elif isinstance(cells, str):
            problems.append(f"line {line} ({cells})")
        elif fits(cells):
            rows.append((line, cells))
        elif cells:  # an empty line is no row
            problems.append(f"line {line} ({len(cells)} cells, the header has {len(header)})")
        pos, line, whole = end, line + count, end
    return Scan(header or [], rows, problems, whole)


def complete_prefix(data: bytes) -> int:
    """Length of the longest prefix of a CSV file that ends on a whole record (scan_csv)."""
    return scan_csv(data).whole


def _shown(problems: list[str], most: int = 5) -> str:
    return ", ".join(problems[:most]) + (f" and {len(problems) - most} more" if len(problems) > most else "")


def read_csv(path: str | Path, kinds: Mapping[str, ColumnKind] | None = None, *, label: str = "",
             required: tuple[str, ...] = ()) -> pd.DataFrame:
    """Read a tidy CSV every column as text, then type the declared columns.

    A missing or empty file gives an empty frame with the declared columns. Rows that cannot be read whole are
    not dropped silently: a record the parser refuses or that does not split into the header's columns, a row
    whose `required` columns are empty and a torn last row (cut by a crash or a full disk) are each counted, and
    a warning names the file and each one's line. One bad row costs that row, never the rows after it
    (scan_csv), and a field of any length reads back whole. The frame's attrs["dropped_rows"] holds the count.
    """
    path = Path(path)
    columns = list(kinds or {})
    if not path.is_file() or path.stat().st_size == 0:
        return coerce(pd.DataFrame(columns=columns), kinds or {})
    scan = scan_csv(path.read_bytes())
    if not scan.header:
        return coerce(pd.DataFrame(columns=columns), kinds or {})
    header, problems = scan.header, list(scan.problems)
    lines = [line for line, _ in scan.rows]
    rows = [cells for _, cells in scan.rows]
    frame = pd.DataFrame(rows, columns=header, dtype=object)
    if required:
        keep = np.ones(len(frame), dtype=bool)
        for name in required:
            if name in frame:
                empty = frame[name].fillna("").astype(str).str.len().to_numpy() == 0
                problems += [f"line {lines[i]} (no {name})" for i in np.flatnonzero(keep & empty)]
                keep &= ~empty
        frame = frame[keep]
    bad = len(problems)
    if bad:
        log.warning("%s: %d row(s) could not be read (torn or malformed) and were left out: %s", label or path, bad,
                    _shown(problems))
    frame = frame.replace({"": None}) if len(frame) else frame
    out = coerce(frame.reset_index(drop=True), kinds or {})
    for name in out.columns:  # undeclared columns: numbers when every cell is one, else text (as pandas would)
        if name not in (kinds or {}) and out[name].dtype == object:
            numbers = pd.to_numeric(out[name], errors="coerce")
            if numbers.notna().sum() == out[name].notna().sum():
                out[name] = numbers.astype(float)
    out.attrs["dropped_rows"] = bad
    return out
