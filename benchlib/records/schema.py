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
import io
import json
import logging
import math
import re
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


def number(value: Any) -> float:
    """A float, NaN for anything missing or non-numeric (None, '', 'n/a', a bool is not a number here)."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def short_number(value: Any) -> str:
    """A value as text for a verdict line: three significant digits, "n/a" when NaN, other text as it is."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return str(value)
    return "n/a" if math.isnan(out) else f"{out:.3g}"


def finite(value: Any) -> float | None:
    """A finite float or None (for code that must not carry NaN or inf forward)."""
    out = number(value)
    return out if math.isfinite(out) else None


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


def complete_prefix(data: bytes) -> int:
    """Length of the longest prefix of a CSV file that ends on a whole record: a newline outside quotes
    (quotes and newlines are single bytes in UTF-8, so bytes can be scanned directly)."""
    quotes, end, last = 0, 0, 0
    for match in re.finditer(b"\n", data):
        quotes += data.count(b'"', last, match.start())
        last = match.start()
        if quotes % 2 == 0:
            end = match.end()
    return end


def read_csv(path: str | Path, kinds: Mapping[str, ColumnKind] | None = None, *, label: str = "",
             required: tuple[str, ...] = ()) -> pd.DataFrame:
    """Read a tidy CSV every column as text, then type the declared columns.

    A missing or empty file gives an empty frame with the declared columns. Rows the CSV parser cannot split
    into the header's columns (a torn line) are not dropped silently: they are counted and a warning names the
    file; so are rows whose `required` columns are empty, and a last row without its newline (cut by a crash
    or a full disk: only whole rows are ever read). The frame's attrs["dropped_rows"] holds the count.
    """
    path = Path(path)
    columns = list(kinds or {})
    if not path.is_file() or path.stat().st_size == 0:
        return coerce(pd.DataFrame(columns=columns), kinds or {})
    data = path.read_bytes()
    whole = complete_prefix(data)
    torn = 1 if data[whole:].strip() else 0  # a last row without its newline was cut: never read as whole
    text = data[:whole].decode("utf-8", errors="replace")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        return coerce(pd.DataFrame(columns=columns), kinds or {})
    rows, bad = [], torn
    try:
        for row in reader:
            if len(row) == len(header):
                rows.append(row)
            elif row:
                bad += 1
    except csv.Error:  # e.g. a quote left open by a torn last line
        bad += 1
    frame = pd.DataFrame(rows, columns=header, dtype=object)
    if required:
        keep = np.ones(len(frame), dtype=bool)
        for name in required:
            if name in frame:
                keep &= frame[name].fillna("").astype(str).str.len().to_numpy() > 0
        bad += int((~keep).sum())
        frame = frame[keep]
    if bad:
        log.warning("%s: %d row(s) could not be read (torn or malformed) and were left out", label or path, bad)
    frame = frame.replace({"": None}) if len(frame) else frame
    out = coerce(frame.reset_index(drop=True), kinds or {})
    for name in out.columns:  # undeclared columns: numbers when every cell is one, else text (as pandas would)
        if name not in (kinds or {}) and out[name].dtype == object:
            numbers = pd.to_numeric(out[name], errors="coerce")
            if numbers.notna().sum() == out[name].notna().sum():
                out[name] = numbers.astype(float)
    out.attrs["dropped_rows"] = bad
    return out
