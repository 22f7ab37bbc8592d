"""How a number is written for a person: a format spec or three significant figures, a unit after it, an
interval after a value, and one mark for a missing value. The paper's tables and figures, the verdict lines of
the frontier and the decisions, and the console table of a run all write their numbers through these. And how a
line is fitted to the terminal (WIDTH: `fit` wraps it under its head, `gist` shortens a message at a word)."""

from __future__ import annotations

import math
import textwrap
from typing import Any

import numpy as np
import pandas as pd

MISSING = "–"  # a value that was not measured, not printed or not applicable: never "nan", never "None"
READABLE = "readable"  # the spec that writes a number as `readable` does, for a table whose columns mix scales
NO_BOUNDS = f" [{MISSING}]"  # after a figure that should carry an interval and has none (too few values)
WIDTH = 120  # no terminal line longer: a terminal of the usual width shows each on one row


def fit(line: str, indent: str = "    ") -> list[str]:
    """A line as rows of at most WIDTH characters, the continuation rows indented."""
    if len(line) <= WIDTH:
        return [line]
    return textwrap.wrap(line, WIDTH, subsequent_indent=indent, break_on_hyphens=False)


def gist(message: str, limit: int = 60) -> str:
    """A message short enough for a line about something else: whole where it fits; else its last clause (messages
    here say what happened, then ': ' and why), where that fits; else its words up to `limit`, then '…' — never a
    word cut in two."""
    message = " ".join(message.split())
    if len(message) <= limit:
        return message
    last = message.rsplit(": ", 1)[-1]
    if len(last) <= limit:
        return last
    return textwrap.shorten(message, limit, placeholder=" …")


def is_missing(value: Any) -> bool:
    """None, pandas' NA or a NaN of any float type; text and other objects are values."""
    if value is None or value is pd.NA:
        return True
    if isinstance(value, (float, np.floating)):
        return math.isnan(value)
    return False


def fmt(value: Any, spec: str = ".4g", missing: str = MISSING) -> str:
    """A number written with spec ('.1f', '.0%', ..., READABLE); a missing value (or the text "nan") -> missing; a bool
    -> yes/no; other text as it is."""
    if is_missing(value):
        return missing
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return readable(value, missing) if spec == READABLE else format(value, spec)
    text = str(value)
    return text if text and text != "nan" else missing


def readable(value: Any, missing: str = MISSING) -> str:
    """A number as a person reads it in a table: whole numbers without decimals, no decimals from 100 up, one
    from 10 up, three significant digits below (never e-notation); not a number -> missing."""
    if isinstance(value, (bool, np.bool_)) or is_missing(value):
        return missing
    try:
        v = float(value)
    except (TypeError, ValueError):
        return missing
    if math.isnan(v):
        return missing
    if v.is_integer():
        return f"{v:.0f}"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.3g}"


def short_number(value: Any) -> str:
    """A value in a verdict line: three significant digits, "n/a" when NaN, other text as it is."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return str(value)
    return "n/a" if math.isnan(out) else f"{out:.3g}"


def bracket(low: Any, high: Any, spec: str) -> str:
    """' [low–high]' of an interval, '' when either end is missing; ', ' between the ends when the low one is
    negative ('-2.46–-0.42' would read as a range of a negative)."""
    if is_missing(low) or is_missing(high):
        return ""
    dash = ", " if low < 0 else "–"
    return f" [{fmt(low, spec)}{dash}{fmt(high, spec)}]"


def interval(value: Any, low: Any, high: Any, spec: str, n: int | None = None, missing: str = MISSING,
             unbounded: str = "") -> str:
    """'value [low–high] (n=…)': a value with its interval where it has one and the count it rests on;
    `unbounded` (NO_BOUNDS: ' [–]') after a value whose interval is missing."""
    if is_missing(value):
        return missing
    ends = bracket(low, high, spec) or unbounded
    return fmt(value, spec) + ends + (f" (n={n})" if n is not None else "")


def bounded_column(frame: pd.DataFrame, column: str, spec: str = READABLE) -> list[str]:
    """A column whose interval lies in `<column>_lo` and `<column>_hi` (a percentile with its order-statistic
    bounds), each cell 'value [low–high]', 'value [–]' where it has none (too few values, or a file written before
    the bounds were), '–' where the value is missing."""
    def numbers(name: str) -> pd.Series:
        return pd.to_numeric(frame[name], errors="coerce") if name in frame else pd.Series(math.nan, index=frame.index)
    return [interval(value, low, high, spec, unbounded=NO_BOUNDS)
            for value, low, high in zip(numbers(column), numbers(f"{column}_lo"), numbers(f"{column}_hi"))]


def points(share: Any) -> str:
    """A difference of two shares in percentage points, signed ('+58', '-3', '0'); missing -> MISSING."""
    text = fmt(float(share) * 100, "+.0f") if not is_missing(share) else MISSING
    return "0" if text in ("+0", "-0") else text


def point_difference(difference: Any, low: Any, high: Any) -> str:
    """A difference of two accuracies with its 95 % interval, in percentage points: '+59 [+37, +74] pp' (the ends
    always apart by a comma: a signed range); '+59 pp' without an interval, MISSING without a value. Every place that
    prints an accuracy difference writes it so — a share's '%' would read as a relative change."""
    if is_missing(difference):
        return MISSING
    ends = "" if is_missing(low) or is_missing(high) else f" [{points(low)}, {points(high)}]"
    return f"{points(difference)}{ends} pp"


def quantity(value: Any, spec: str, unit: str, missing: str = MISSING) -> str:
    """'16 GB': a number with its unit after a space; missing -> missing, without the unit."""
    return missing if is_missing(value) else f"{fmt(value, spec)} {unit}"
