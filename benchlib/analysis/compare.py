"""Two studies compared: per deployment, suite and metric, the change from study A to study B with its 95 %
interval and whether it is beyond the noise; a regression beyond a chosen threshold is what
`frontier-bench compare A B --fail-on METRIC=PCT` exits non-zero for, so a lab can run it in CI.

    CHANGE RULE  timing metrics (decode tok/s, TTFT, e2e): the relative change of the mean, B ÷ A − 1, with a
                 95 % bootstrap percentile interval (each study's measured requests resampled on their own,
                 2,000 resamples, fixed seed, so a rerun prints the same bounds); accuracy: the difference of
                 shares B − A with Newcombe's hybrid score interval (from the two Wilson intervals).
    NOISE RULE   a change is beyond the noise when its interval excludes 0; otherwise it reads "within noise".
    REGRESSION   a change beyond the noise in the metric's bad direction (the metric registry's direction) by
                 more than the threshold (percent for timing metrics, percentage points for accuracy).

Measured requests are the non-warm-up ok rows of each suite's requests.csv under the root (a folder or a store
URL), the same rows every summary uses; a deployment is the model folder (model[+variant]) on its host.

A root that cannot be compared is one line naming the file and what is wrong, never a traceback or a wrong
table: a requests.csv that is not a regular file (a FIFO, a device), whose header lacks request_key and status,
or a measured value no request can have (benchlib.records.plausible, the one rule every reader of rows holds
them to: not finite, below 0, or above 10^6 tok/s decoding one stream or 10^6 s for a request).
"""

from __future__ import annotations

import csv as csvlib
import html
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from benchlib.analysis import stats
from benchlib.config import metrics
from benchlib.records import plausible, store
from benchlib.records.rows import STATUS_OK, read_requests
from benchlib.records.schema import flag, optional_flag

# metric -> (requests.csv column, kind): "mean" metrics compare means; "share" compares passed ÷ scored.
COMPARED = {"decode_tps": ("decode_tps", "mean"), "ttft_s": ("ttft_s", "mean"), "e2e_s": ("e2e_s", "mean"),
            "accuracy": ("passed", "share")}
REQUIRED = ("request_key", "status")
HEADER_BYTES = 1 << 16  # requests.csv's header is ~1.5 kB; a first line longer than this is no header of it
KEYS = ["host", "deployment", "suite"]
COLUMNS = KEYS + ["metric", "n_a", "n_b", "a", "b", "change", "change_lo", "change_hi", "unit", "verdict",
                  "regression"]


class CompareError(ValueError):
    """A root cannot be compared (one line)."""


def read_root(root: str) -> pd.DataFrame:
    """Every measured request under a results root (folder or store URL), with host, deployment and suite."""
    path = store.materialize(root) if store.is_url(root) else Path(root)
    if not path.is_dir():
        raise CompareError(f"{root}: no such results folder")
    frames = []
    for csv in sorted(path.glob("*/*/*/requests.csv")):
        suite_dir = csv.parent
        if ".archived-" in suite_dir.name:
            continue
        rows = _measured(csv)
        if len(rows):
            frames.append(rows.assign(host=suite_dir.parent.parent.name, deployment=suite_dir.parent.name,
                                      suite=suite_dir.name))
    if not frames:
        raise CompareError(f"{root}: no requests.csv under <host>/<model>/<suite>/")
    return pd.concat(frames, ignore_index=True)


def _measured(csv: Path) -> pd.DataFrame:
    """The measured rows of one requests.csv; CompareError for a file that is none, or a value no request has."""
    try:
        mode = os.stat(csv).st_mode
        if not stat.S_ISREG(mode):  # a FIFO would block the read, /dev/zero never end it
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) \
                else "a folder" if stat.S_ISDIR(mode) else "not a regular file"
            raise CompareError(f"{csv}: {kind}, not a requests.csv")
        with open(csv, "rb") as handle:
            first = handle.readline(HEADER_BYTES)
    except OSError as exc:
        raise CompareError(f"{csv}: cannot be read ({exc.strerror or exc})") from None
    header = next(csvlib.reader([first.decode("utf-8", "replace")]), [])
    missing = [name for name in REQUIRED if name not in header]
    if first and missing:
        raise CompareError(f"{csv}: its header has no {' or '.join(missing)}, so it is no requests.csv "
                           f"(it starts {first[:60].decode('utf-8', 'replace')!r})")
    rows = read_requests(csv)
    warmup = rows["is_warmup"].map(flag) if "is_warmup" in rows else False
    rows = rows[(rows["status"] == STATUS_OK) & ~warmup]
    plausible.check_rows(rows, str(csv), CompareError)
    return rows


def _mean_change(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """B ÷ A − 1 of the means with a bootstrap interval over independent resamples of each side."""
    if len(a) < stats.MIN_BOOTSTRAP_N or len(b) < stats.MIN_BOOTSTRAP_N or a.mean() == 0:
        return (b.mean() / a.mean() - 1 if len(a) and len(b) and a.mean() else math.nan), math.nan, math.nan
    rng = np.random.default_rng(stats.SEED)
    ratios = (rng.choice(b, (stats.RESAMPLES, len(b))).mean(axis=1)
              / rng.choice(a, (stats.RESAMPLES, len(a))).mean(axis=1)) - 1
    ratios = ratios[np.isfinite(ratios)]
    if not len(ratios):
        return float(b.mean() / a.mean() - 1), math.nan, math.nan
    alpha = (1 - stats.CONFIDENCE) / 2
    return float(b.mean() / a.mean() - 1), float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1 - alpha))


def _share_change(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """B − A of two shares with Newcombe's hybrid score interval."""
    if not len(a) or not len(b):
        return math.nan, math.nan, math.nan
    pa, pb = a.mean(), b.mean()
    la, ua = stats.wilson_interval(int(a.sum()), len(a))
    lb, ub = stats.wilson_interval(int(b.sum()), len(b))
    return (float(pb - pa), float(pb - pa - math.hypot(pb - lb, ua - pa)),
            float(pb - pa + math.hypot(ub - pb, pa - la)))


def _values(rows: pd.DataFrame, column: str, kind: str) -> np.ndarray:
    if column not in rows:
        return np.array([])
    if kind == "share":
        scored = rows[column].map(optional_flag).dropna()
        return scored.astype(float).to_numpy()
    return pd.to_numeric(rows[column], errors="coerce").dropna().to_numpy(dtype=float)


@dataclass
class Threshold:
    metric: str
    limit: float  # percent (timing) or percentage points (accuracy)


def parse_threshold(text: str) -> Threshold:
    """'decode_tps=5' → regress when decode tok/s drops more than 5 % beyond the noise."""
    name, _, value = text.partition("=")
    if name not in COMPARED:
        raise CompareError(f"--fail-on {text!r}: metric must be one of {', '.join(COMPARED)}")
    try:
        limit = float(value.rstrip("%")) if value else 0.0
    except ValueError:
        raise CompareError(f"--fail-on {text!r}: the threshold must be a number (percent)") from None
    if not math.isfinite(limit) or limit < 0:
        raise CompareError(f"--fail-on {text!r}: the threshold must be a percentage ≥ 0")
    return Threshold(name, limit)


def compare(a: pd.DataFrame, b: pd.DataFrame, thresholds: list[Threshold] | None = None) -> pd.DataFrame:
    """One row per deployment × suite × metric found in either study (COLUMNS)."""
    limits = {t.metric: t.limit for t in thresholds or []}
    keys = sorted(set(map(tuple, a[KEYS].drop_duplicates().to_numpy())) |
                  set(map(tuple, b[KEYS].drop_duplicates().to_numpy())))
    out = []
    for key in keys:
        mine_a = a[(a[KEYS] == pd.Series(key, index=KEYS)).all(axis=1)]
        mine_b = b[(b[KEYS] == pd.Series(key, index=KEYS)).all(axis=1)]
        for metric, (column, kind) in COMPARED.items():
            va, vb = _values(mine_a, column, kind), _values(mine_b, column, kind)
            if not len(va) and not len(vb):
                continue
            change, lo, hi = (_share_change if kind == "share" else _mean_change)(va, vb)
            unit = "pp" if kind == "share" else "%"
            scale = 100.0
            row = dict(zip(KEYS, key), metric=metric, n_a=len(va), n_b=len(vb),
                       a=float(va.mean()) if len(va) else math.nan, b=float(vb.mean()) if len(vb) else math.nan,
                       change=change * scale, change_lo=lo * scale, change_hi=hi * scale, unit=unit)
            row["verdict"], row["regression"] = _verdict(row, metric, limits.get(metric))
            out.append(row)
    return pd.DataFrame(out, columns=COLUMNS)


def _verdict(row: dict, metric: str, limit: float | None) -> tuple[str, bool]:
    if not row["n_a"] or not row["n_b"]:
        return ("only in B" if not row["n_a"] else "only in A"), False
    lo, hi = row["change_lo"], row["change_hi"]
    if math.isnan(lo) or math.isnan(hi):
        return f"too few requests for an interval (n {row['n_a']}, {row['n_b']})", False
    if lo <= 0 <= hi:
        return "within noise", False
    better = metrics.direction(metric) == "max"
    improved = (lo > 0) == better
    word = "better" if improved else "worse"
    regression = not improved and limit is not None and min(abs(lo), abs(hi)) > limit
    return (f"{word} beyond noise" + (f" (regression: more than {limit:g} {row['unit']})" if regression else "")), \
        regression


def _cell(value: float, unit: str = "") -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:+.1f}{unit}" \
        if unit else f"{value:.4g}"


def to_markdown(table: pd.DataFrame, a: str, b: str) -> str:
    lines = [f"# {a} → {b}", "",
             "Change of each metric from A to B with its 95 % interval; *beyond noise* when the interval excludes 0 "
             "(benchlib/analysis/compare.py states the rules).", "",
             "| host | deployment | suite | metric | n A | n B | A | B | change [95 % CI] | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        change = f"{_cell(r.change, r.unit)} [{_cell(r.change_lo, r.unit)}, {_cell(r.change_hi, r.unit)}]"
        lines.append(f"| {r.host} | {r.deployment} | {r.suite} | {metrics.label(r.metric, with_unit=False)} | {r.n_a} | {r.n_b} | "
                     f"{_cell(r.a)} | {_cell(r.b)} | {change} | {'**' + r.verdict + '**' if r.regression else r.verdict} |")
    return "\n".join(lines) + "\n"


def to_html(table: pd.DataFrame, a: str, b: str) -> str:
    """A self-contained page (no script, no network): the same table, regressions in bold red."""
    rows = []
    for r in table.itertuples():
        style = ' style="color:#b00;font-weight:bold"' if r.regression else ""
        cells = [r.host, r.deployment, r.suite, metrics.label(r.metric, with_unit=False), r.n_a, r.n_b, _cell(r.a), _cell(r.b),
                 f"{_cell(r.change, r.unit)} [{_cell(r.change_lo, r.unit)}, {_cell(r.change_hi, r.unit)}]",
                 r.verdict]
        rows.append(f"<tr{style}>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("host", "deployment", "suite", "metric", "n A", "n B", "A", "B",
                                             "change [95 % CI]", "verdict"))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(a)} → {html.escape(b)}</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}</style></head><body>"
            f"<h1>{html.escape(a)} → {html.escape(b)}</h1><div style='overflow-x:auto'><table><tr>{head}</tr>"
            + "".join(rows) + "</table></div></body></html>\n")
