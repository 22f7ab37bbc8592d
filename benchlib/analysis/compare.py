"""Two studies compared: per deployment, suite and metric, the change from study A to study B with its 95 %
interval and the word it earns; a regression beyond a chosen threshold is what
`frontier-bench compare A B --fail-on METRIC=PCT` exits non-zero for, so a lab can run it in CI.

    CHANGE RULE  timing metrics (decode tok/s, TTFT, e2e): B against A in analysis.speed_verdicts' words — paired
                 request by request where both studies measured the same requests (the request key: a rerun of the
                 same params), the ratio B ÷ A − 1 with the paired sign-flip interval, tasks weighted equally;
                 otherwise unpaired (Welch on log values, by task), and it says so. "faster" / "slower" (the
                 interval excludes 0), "equivalent within ±m" (two one-sided tests, m = EQUIVALENCE_MARGIN),
                 "mixed: …" (tasks decided each way), "undecided (…)" with the requests a decision would take.
                 Accuracy: B − A on the items both answered, paired (Newcombe's interval for paired shares, exact
                 McNemar test: analysis.paired), else the unpaired difference (Newcombe's hybrid score interval
                 from the two Wilson intervals): "better" / "worse" / "undecided".
    REGRESSION   "slower" or "worse" (the metric registry's direction says which way is bad) by more than the
                 threshold at the interval's nearer end (percent for timing metrics, percentage points for
                 accuracy).

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

from benchlib.analysis import paired, speed_verdicts, stats
from benchlib.config import metrics
from benchlib.config.latency_plan import EQUIVALENCE_MARGIN
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
                  "regression", "paired", "evidence"]
BETTER, WORSE = "better", "worse"  # accuracy's words (speed: speed_verdicts.FASTER, SLOWER)


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


def _speed_change(a: pd.DataFrame, b: pd.DataFrame, column: str, margin: float) -> dict:
    """B against A on a timing column (CHANGE RULE): change in % with its interval, the word and its evidence."""
    def prompts(rows: pd.DataFrame, name: str) -> pd.DataFrame:
        key = rows["request_key"].astype(str) if "request_key" in rows else pd.Series("", index=rows.index)
        task = rows["task"].astype(str) if "task" in rows else pd.Series("all", index=rows.index)
        return pd.DataFrame({"system": name, "task": task, "variant": key, "repeat": "", column: rows[column]})
    verdict = speed_verdicts.compare(pd.concat([prompts(a, "A"), prompts(b, "B")], ignore_index=True), "B", "A",
                                     column, margin)
    word = verdict.relative()
    return {"change": (verdict.ratio - 1) * 100, "change_lo": (verdict.ratio_lo - 1) * 100,
            "change_hi": (verdict.ratio_hi - 1) * 100, "verdict": word, "paired": verdict.paired,
            "evidence": verdict.evidence(per_task=True), "bad": verdict.word == speed_verdicts.SLOWER}


def _share_change(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """B − A of two accuracies (CHANGE RULE): on the items both answered when there are any (paired), else the
    two shares as independent samples."""
    items_a, items_b = (paired.outcomes(paired.item_results(rows.assign(system=name)), name)
                        for rows, name in ((a, "A"), (b, "B")))
    both = paired.compare(items_b, items_a, "B", "A") if items_a and items_b else None
    if both is not None and both.n:
        low, high, change = both.difference_lo, both.difference_hi, both.difference
        evidence = both.line()
        decided = both.winner != 0
        is_paired = True
    else:
        va, vb = _values(a, "passed", "share"), _values(b, "passed", "share")
        if not len(va) or not len(vb):
            return {"change": math.nan, "change_lo": math.nan, "change_hi": math.nan, "verdict": "",
                    "paired": False, "evidence": "", "bad": False}
        pa, pb = va.mean(), vb.mean()
        la, ua = stats.wilson_interval(int(va.sum()), len(va))
        lb, ub = stats.wilson_interval(int(vb.sum()), len(vb))
        change = pb - pa
        low, high = change - math.hypot(pb - lb, ua - pa), change + math.hypot(ub - pb, pa - la)
        evidence, decided, is_paired = "unpaired: no item both answered (Newcombe's hybrid score interval)", \
            low > 0 or high < 0, False
    word = (BETTER if change > 0 else WORSE) if decided else "undecided"
    return {"change": change * 100, "change_lo": low * 100, "change_hi": high * 100, "verdict": word,
            "paired": is_paired, "evidence": evidence, "bad": word == WORSE}


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


def compare(a: pd.DataFrame, b: pd.DataFrame, thresholds: list[Threshold] | None = None,
            margin: float = EQUIVALENCE_MARGIN) -> pd.DataFrame:
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
            row = dict(zip(KEYS, key), metric=metric, n_a=len(va), n_b=len(vb),
                       a=float(va.mean()) if len(va) else math.nan, b=float(vb.mean()) if len(vb) else math.nan,
                       unit="pp" if kind == "share" else "%", regression=False, paired=False, evidence="",
                       change=math.nan, change_lo=math.nan, change_hi=math.nan)
            if not len(va) or not len(vb):
                row["verdict"] = "only in B" if not len(va) else "only in A"
                out.append(row)
                continue
            found = _share_change(mine_a, mine_b) if kind == "share" else \
                _speed_change(mine_a, mine_b, column, margin)
            bad = found.pop("bad")
            row.update(found)
            limit = limits.get(metric)
            nearer = min(abs(row["change_lo"]), abs(row["change_hi"]))
            row["regression"] = bool(bad and limit is not None and nearer > limit)
            if row["regression"]:
                row["verdict"] += f" (regression: more than {limit:g} {row['unit']})"
            out.append(row)
    return pd.DataFrame(out, columns=COLUMNS)


def _cell(value: float, unit: str = "") -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:+.1f}{unit}" \
        if unit else f"{value:.4g}"


def to_markdown(table: pd.DataFrame, a: str, b: str) -> str:
    lines = [f"# {a} → {b}", "",
             "Change of each metric from A to B with its 95 % interval and its word: faster / slower (better / worse) "
             "when the interval excludes 0, equivalent within the margin when two one-sided tests show it, mixed "
             "when tasks go opposite ways, else undecided; paired request by request where both studies measured "
             "the same requests (benchlib/analysis/compare.py states the rules).", "",
             "| host | deployment | suite | metric | n A | n B | A | B | change [95 % CI] | verdict | compared |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        change = f"{_cell(r.change, r.unit)} [{_cell(r.change_lo, r.unit)}, {_cell(r.change_hi, r.unit)}]"
        lines.append(f"| {r.host} | {r.deployment} | {r.suite} | {metrics.label(r.metric, with_unit=False)} | {r.n_a} | {r.n_b} | "
                     f"{_cell(r.a)} | {_cell(r.b)} | {change} | "
                     f"{'**' + r.verdict + '**' if r.regression else r.verdict} | {_how(r)} |")
    return "\n".join(lines) + "\n"


def _how(row: object) -> str:
    """'paired' (request by request, or item by item) or 'unpaired', '' for a metric only one study has."""
    if not getattr(row, "evidence", ""):
        return ""
    return "paired" if getattr(row, "paired", False) else "unpaired"


def to_html(table: pd.DataFrame, a: str, b: str) -> str:
    """A self-contained page (no script, no network): the same table, regressions in bold red."""
    rows = []
    for r in table.itertuples():
        style = ' style="color:#b00;font-weight:bold"' if r.regression else ""
        cells = [r.host, r.deployment, r.suite, metrics.label(r.metric, with_unit=False), r.n_a, r.n_b, _cell(r.a), _cell(r.b),
                 f"{_cell(r.change, r.unit)} [{_cell(r.change_lo, r.unit)}, {_cell(r.change_hi, r.unit)}]",
                 r.verdict, _how(r)]
        rows.append(f"<tr{style}>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("host", "deployment", "suite", "metric", "n A", "n B", "A", "B",
                                             "change [95 % CI]", "verdict", "compared"))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(a)} → {html.escape(b)}</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}</style></head><body>"
            f"<h1>{html.escape(a)} → {html.escape(b)}</h1><div style='overflow-x:auto'><table><tr>{head}</tr>"
            + "".join(rows) + "</table></div></body></html>\n")
