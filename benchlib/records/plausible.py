"""ONE PLAUSIBILITY RULE for request rows however they arrive — measured by our client, imported from another tool
(`import-results`), or read back by `compare` and `export`: a value no request can have stops the reader with one
line naming the file, the column, the value and the request, and nothing is written from it.

    durations   ttft_s, ttfo_s, e2e_s, tpot_s and every inter-token gap of itl_s: finite, >= 0 and at most
                MAX_SECONDS (10^6 s: run.deadline_s ends a request within a day). A gap may be as low as
                -GAP_SLACK_S: our client stamps each read with the kernel's receive time converted to the monotonic
                clock by an offset read afresh each time (benchlib.measure.http.wire), so two reads microseconds apart
                may swap by the conversion's error; a gap below that is no stamping error
    rates       decode_tps, prefill_tps: finite, >= 0 and at most MAX_RATE (10^6 tok/s decoding one stream)
    start       started_at_unix: finite, >= 0 (0: not known, as in a vLLM import) and at most MAX_STAMP_S
                (10^10 s, the year 2286: a wall-clock instant, or a tool's own monotonic clock in seconds)

An empty cell (a failed request's TTFT, a count the server did not give) is no value and passes. The readers of
other tools' files hold their stamps to MAX_STAMP_S before they convert them (a start of 1e308 s would overflow
the nanosecond stamp), so the same bound governs a row before and after it is written.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

MAX_SECONDS = 1e6
MAX_RATE = 1e6
MAX_STAMP_S = 1e10
GAP_SLACK_S = 1e-3  # far above the kernel stamps' conversion error (microseconds), far below any real gap
# column -> (the least and the most a request can have, what the column is)
LIMITS = {"ttft_s": (0.0, MAX_SECONDS, "duration"), "ttfo_s": (0.0, MAX_SECONDS, "duration"),
          "e2e_s": (0.0, MAX_SECONDS, "duration"), "tpot_s": (0.0, MAX_SECONDS, "duration"),
          "itl_s": (-GAP_SLACK_S, MAX_SECONDS, "gap"), "decode_tps": (0.0, MAX_RATE, "rate"),
          "prefill_tps": (0.0, MAX_RATE, "rate"), "started_at_unix": (0.0, MAX_STAMP_S, "start time")}


class Implausible(ValueError):
    """A row holds a value no request can have (one line)."""


def within(value: float, high: float, low: float = 0.0) -> bool:
    """The rule for one number: finite, at least `low` and at most `high` (NaN and the infinities fail it)."""
    return math.isfinite(value) and low <= value <= high


def _bounds(low: float, high: float) -> str:
    return f">= 0 and at most {high:g}" if low == 0 else f"at least {low:g} and at most {high:g}"


def check_value(column: str, value: float, where: str, error: type[Exception] = Implausible) -> None:
    """The rule for one figure of a column (a tool's own mean TTFT, a summary's p50): `error` naming `where`."""
    low, high, what = LIMITS[column]
    if not within(value, high, low):
        raise error(f"{where}: {column} {value:g} is no request's: a measured {what} is finite, {_bounds(low, high)}")


def _gaps(cells: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Every gap of an itl_s column (lists, as read_requests decodes them) with the row label each came from; an
    entry that is no number is NaN (it fails the rule)."""
    lists = [cell if isinstance(cell, list) else [] for cell in cells]
    counts = np.fromiter((len(cell) for cell in lists), dtype=np.int64, count=len(lists))
    values = np.fromiter((v if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan
                          for v in itertools.chain.from_iterable(lists)), dtype=float, count=int(counts.sum()))
    return values, np.repeat(cells.index.to_numpy(), counts)


def check_rows(rows: pd.DataFrame, label: str, error: type[Exception] = Implausible) -> None:
    """Raise `error` (one line naming `label`, the column, the value and the request) at the first value of the
    rows that breaks the rule (module docstring)."""
    for column, (low, high, what) in LIMITS.items():
        if column not in rows or not len(rows):
            continue
        if column == "itl_s":
            values, at = _gaps(rows[column])
            present = np.ones(len(values), dtype=bool)
        else:
            cells = rows[column]
            values = pd.to_numeric(cells, errors="coerce").to_numpy(dtype=float)  # text becomes NaN: it fails
            at = rows.index.to_numpy()
            present = (cells.notna() & (cells.astype(str) != "")).to_numpy()
        with np.errstate(invalid="ignore"):
            bad = present & ~((values >= low) & (values <= high))  # NaN and the infinities fail it
        if bad.any():
            first = int(np.argmax(bad))
            shown = f"{values[first]:g}" if not math.isnan(values[first]) else \
                repr(rows.at[at[first], column] if column != "itl_s" else "a gap that is no number")
            key = rows.at[at[first], "request_key"] if "request_key" in rows else at[first]
            raise error(f"{label}: {column} {shown} (request {key}) is no request's: a measured {what} is finite, "
                        f"{_bounds(low, high)}")
