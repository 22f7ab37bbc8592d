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
URL), the same rows every summary uses; a deployment is its identity (config.identity.Deployment: model · server
· settings · host, from the suite's manifest; the folders' names where it has none), so two studies pair what they
measured of one deployment, and `--same A_NAME=B_NAME` pairs one deployment measured under two names.

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
from typing import Any, Mapping

import numpy as np
import pandas as pd

from benchlib.analysis import paired, speed_verdicts, stats
from benchlib.config import metrics
from benchlib.config.identity import Deployment, short_labels
from benchlib.config.latency_plan import EQUIVALENCE_MARGIN
from benchlib.records import plausible, store
from benchlib.records.rows import STATUS_FAILED, STATUS_OK, read_requests
from benchlib.records.run_folder import RunFolder, suite_folders
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
    return measured(read_sent(root))


def measured(rows: pd.DataFrame) -> pd.DataFrame:
    """The requests that succeeded: what each metric is computed from."""
    return rows[rows["status"] == STATUS_OK]


def read_sent(root: str) -> pd.DataFrame:
    """Every request sent under a results root (warm-ups left out; failed ones kept, to be counted), with host,
    deployment and suite."""
    path = store.materialize(root) if store.is_url(root) else Path(root)
    if not path.is_dir():
        raise CompareError(f"{root}: no such results folder")
    frames = []
    for suite_dir in suite_folders(path)[0]:
        csv = RunFolder(suite_dir).requests_path
        if not csv.exists():
            continue
        rows = _measured(csv)
        if len(rows):
            host, folder = suite_dir.parent.parent.name, suite_dir.parent.name
            name = Deployment.from_recorded(RunFolder(suite_dir).params, host, folder).name
            frames.append(rows.assign(host=host, deployment=name, folder=f"{host}/{folder}", suite=suite_dir.name))
    if not frames:
        raise CompareError(f"{root}: no requests.csv under <host>/<model>/<suite>/")
    return pd.concat(frames, ignore_index=True)


def _measured(csv: Path) -> pd.DataFrame:
    """The rows of one requests.csv but its warm-ups; CompareError for a file that is none, or a value no request
    that succeeded can have."""
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
    rows = rows[~warmup]
    plausible.check_rows(measured(rows), str(csv), CompareError)
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
    found = {"change": (verdict.ratio - 1) * 100, "change_lo": (verdict.ratio_lo - 1) * 100,
             "change_hi": (verdict.ratio_hi - 1) * 100, "verdict": word, "paired": verdict.paired,
             "evidence": verdict.evidence(per_task=True), "bad": verdict.word == speed_verdicts.SLOWER}
    if verdict.paired and "request_key" in a and "request_key" in b:
        # a paired change is measured on the prompts both sent: the values beside it are those prompts' means, so
        # the two cannot point different ways because one side also sent prompts the other did not
        va, vb = (rows.assign(value=pd.to_numeric(rows[column], errors="coerce")).dropna(subset=["value"])
                  .drop_duplicates("request_key", keep="last").set_index("request_key")["value"] for rows in (a, b))
        shared = va.index.intersection(vb.index)
        if len(shared):
            found.update(a=float(va[shared].mean()), b=float(vb[shared].mean()), n_a=len(shared), n_b=len(shared))
    return found


def _share_change(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """B − A of two accuracies (CHANGE RULE): on the items both answered when there are any (paired), else the
    two shares as independent samples."""
    items_a, items_b = (paired.outcomes(paired.item_results(rows.assign(system=name)), name)
                        for rows, name in ((a, "A"), (b, "B")))
    both = paired.compare(items_b, items_a, "B", "A") if items_a and items_b else None
    shown: dict = {}
    if both is not None and both.n:
        low, high, change = both.difference_lo, both.difference_hi, both.difference
        evidence = both.line()
        decided = both.winner != 0
        is_paired = True
        # the items both answered: their accuracies beside the change measured on them
        shown = {"a": both.accuracy_b, "b": both.accuracy_a, "n_a": both.n, "n_b": both.n}
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
    if is_paired and not decided and (low > 0 or high < 0):  # paired.py's rule asks both: say which one held back
        word += f" (the interval excludes 0, McNemar's exact p = {both.p_value:.2g} does not reject)"
    return {"change": change * 100, "change_lo": low * 100, "change_hi": high * 100, "verdict": word,
            "paired": is_paired, "evidence": evidence, "bad": word == WORSE, **shown}


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


# ---- pairing two names for one deployment, counting what was sent ----------------------------------------------
def _resolve(rows: pd.DataFrame, name: str, side: str, flag_text: str) -> tuple[str, str]:
    """The one (host, deployment) of `rows` that `name` names: its full name, its short label among that side's
    deployments (as the terminal after a run prints it), its model folder, or host/folder."""
    folders = rows["folder"] if "folder" in rows else rows["host"] + "/" + rows["deployment"]
    found = sorted(set(zip(rows["host"], rows["deployment"], folders)))
    labels = short_labels([d for _, d, _ in found])
    hits = [(h, d) for h, d, f in found if name in (d, labels.get(d), f, f.split("/", 1)[-1])]
    if len(hits) != 1:
        known = ", ".join(f"{f} ({d})" for _, d, f in found)
        raise CompareError(f"--same {flag_text}: {'no' if not hits else 'more than one'} deployment of {side} is "
                           f"named {name!r} (its deployments: {known})")
    return hits[0]


def parse_same(texts: list[str] | None, a: pd.DataFrame, b: pd.DataFrame) -> dict[tuple[str, str], tuple[str, str]]:
    """'A_NAME=B_NAME' (a full name, a model folder or host/folder) → {B's (host, deployment): A's}: the same
    model measured under two names (behind a user's server and in the default study) compared as one deployment."""
    mapping: dict[tuple[str, str], tuple[str, str]] = {}
    for text in texts or []:
        left, sep, right = text.partition("=")
        if not sep or not left or not right:
            raise CompareError(f"--same {text}: write A_NAME=B_NAME (a deployment's model folder, or host/folder)")
        mine, theirs = _resolve(b, right, "B", text), _resolve(a, left, "A", text)
        named = set(zip(b["host"], b["deployment"]))
        if theirs in named and theirs != mine:  # renaming would pool two of B's deployments into one
            raise CompareError(f"--same {text}: B has a deployment named {theirs[1]!r} already, so its rows and "
                               f"{mine[1]!r}'s would be pooled; give A and B as two results folders")
        mapping[mine] = theirs
    return mapping


def same(b: pd.DataFrame, mapping: Mapping[tuple[str, str], tuple[str, str]]) -> pd.DataFrame:
    """B's rows with each mapped deployment named as A names it, and `b_name` (the name B gave it)."""
    keys = list(zip(b["host"], b["deployment"]))
    named = [mapping.get(k, k) for k in keys]
    return b.assign(host=[n[0] for n in named], deployment=[n[1] for n in named],
                    b_name=[k[1] if k in mapping else "" for k in keys])


def sent_and_failed(rows: pd.DataFrame) -> pd.DataFrame:
    """Per host, deployment and suite: requests sent and failed (warm-ups left out)."""
    if rows.empty:
        return pd.DataFrame(columns=[*KEYS, "sent", "failed"])
    return rows.assign(failed=rows["status"] == STATUS_FAILED).groupby(KEYS, as_index=False).agg(
        sent=("status", "size"), failed=("failed", "sum"))


def with_requests(table: pd.DataFrame, a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """The change table with each side's requests sent and failed (sent_a, failed_a, sent_b, failed_b) and the
    name B gave a deployment --same paired (b_name)."""
    out = table
    for rows, side in ((a, "a"), (b, "b")):
        counts = sent_and_failed(rows).rename(columns={"sent": f"sent_{side}", "failed": f"failed_{side}"})
        out = out.merge(counts, on=KEYS, how="left")
    names = b[b["b_name"] != ""].drop_duplicates(KEYS)[[*KEYS, "b_name"]] if "b_name" in b else \
        pd.DataFrame(columns=[*KEYS, "b_name"])
    out = out.merge(names, on=KEYS, how="left")
    for column in ("sent_a", "failed_a", "sent_b", "failed_b"):
        out[column] = out[column].fillna(0).astype(int)
    out["b_name"] = out["b_name"].fillna("")
    return out


# ---- the change table as a person reads it -------------------------------------------------------------------
GOOD, BAD = ("better", "faster"), ("worse", "slower")  # the verdicts' first words, by which way they go
SHOWN = {"decode_tps": ("tok/s", 1.0, ".1f"), "ttft_s": ("ms", 1000.0, ".0f"), "e2e_s": ("s", 1.0, ".2f"),
         "accuracy": ("%", 100.0, ".1f")}  # a metric's values as the table writes them: unit, scale, format


def tone(verdict: str) -> str:
    """'better' or 'worse' where the analysis's verdict says a change goes one way (its first word: better or faster,
    worse or slower), else ''."""
    first = str(verdict).split(" ")[0]
    return "better" if first in GOOD else "worse" if first in BAD else ""


def matched(table: pd.DataFrame) -> pd.Series:
    """Rows both studies measured (the others are 'only in A' / 'only in B')."""
    return (table["n_a"] > 0) & (table["n_b"] > 0)


def _value(metric: str, value: float, n: int) -> str:
    unit, scale, spec = SHOWN[metric]
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{format(value * scale, spec)} {unit} (n {n})"


def change_text(r: Any) -> str:
    """'-5.2 % [-9.1, -1.0]': a row's change with its 95 % interval and unit."""
    def signed(x: float) -> str:
        return "–" if x is None or math.isnan(x) else f"{x:+.1f}"
    unit = "pp" if r.unit == "pp" else "%"
    return f"{signed(r.change)} {unit} [{signed(r.change_lo)}, {signed(r.change_hi)}]"


def change_line(r: Any) -> str:
    """One row in a line: 'h/m · text · decode rate: 9.0 tok/s (n 10) → 6.1 tok/s (n 10), -32.2 % [-40.1, -25.0]
    — worse beyond noise'."""
    return (f"{_deployment(r)} · {r.suite} · {metrics.metric(r.metric).label}: {_value(r.metric, r.a, r.n_a)} → "
            f"{_value(r.metric, r.b, r.n_b)}, {change_text(r)} — {r.verdict}")


def _deployment(r: Any) -> str:
    return r.deployment + (f" (B: {r.b_name})" if getattr(r, "b_name", "") else "")


def _requests(sent: int, failed: int) -> str:
    return f"{sent} sent, {failed} failed"


def _how(row: Any) -> str:
    """'paired' or 'unpaired' where the table says how a change was measured, '' where it does not."""
    if not getattr(row, "evidence", ""):
        return ""
    return "paired" if getattr(row, "paired", False) else "unpaired"


def headline(table: pd.DataFrame) -> str:
    """The comparison in one line: how many changes go which way, on how many deployments, and what was left out."""
    both, only = table[matched(table)], table[~matched(table)]
    tones = both["verdict"].map(tone) if len(both) else pd.Series(dtype=str)
    deployments = both[["host", "deployment"]].drop_duplicates()
    regressions = int(both["regression"].sum()) if len(both) else 0
    parts = [f"{int((tones == 'better').sum())} better", f"{int((tones == 'worse').sum())} worse",
             f"{int((tones == '').sum())} with no clear change"]
    left = only[["host", "deployment"]].drop_duplicates()
    return (f"B against A: {len(both)} metrics on {len(deployments)} deployment(s) measured in both — "
            + ", ".join(parts) + (f"; {regressions} regression(s) beyond a --fail-on threshold" if regressions else "")
            + (f"; {len(only)} rows of {len(left)} deployment(s) in one study only, listed after the table"
               if len(only) else "")
            + ("; where one deployment has a name in each, --same A_NAME=B_NAME pairs them" if only["verdict"].nunique()
               == 2 else "") + ".")


COLUMNS_SHOWN = ("deployment", "suite", "metric", "A", "B", "change B vs A [95 % CI]", "verdict",
                 "requests A", "requests B")


def _cells(r: Any) -> list[str]:
    return [_deployment(r), r.suite, metrics.metric(r.metric).label, _value(r.metric, r.a, r.n_a),
            _value(r.metric, r.b, r.n_b), change_text(r), r.verdict + (f" ({_how(r)})" if _how(r) else ""),
            _requests(r.sent_a, r.failed_a), _requests(r.sent_b, r.failed_b)]


def _only(table: pd.DataFrame) -> list[tuple[str, str]]:
    """('only in A', 'deployment (suites); …') per side, for the rows one study alone has."""
    out = []
    for word in ("only in A", "only in B"):
        rows = table[table["verdict"] == word]
        if len(rows):
            found = rows.groupby("deployment", sort=False)["suite"].agg(lambda s: ", ".join(dict.fromkeys(s)))
            out.append((word, f"{len(rows)} rows: " + "; ".join(f"{d} ({suites})" for d, suites in found.items())))
    return out


RULES = ("Each metric of each deployment measured in both studies: A's and B's value with its unit and n, the change "
         "from A to B with its 95 % interval (in % for timing metrics, in percentage points for accuracy) and the "
         "analysis's word for it; requests counts every request sent, failed ones too (warm-ups left out). "
         "benchlib/analysis/compare.py states the rules.")


def to_markdown(table: pd.DataFrame, a: str, b: str) -> str:
    both = table[matched(table)]
    lines = [f"# {a} → {b}", "", f"**{headline(table)}**", "", RULES, "",
             "| " + " | ".join(COLUMNS_SHOWN) + " |", "|" + "---|" * len(COLUMNS_SHOWN)]
    for r in both.itertuples():
        cells = _cells(r)
        cells[6] = f"**{cells[6]}**" if r.regression else cells[6]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    only = _only(table)
    if only:
        lines += ["", "## In one study only (not compared)", ""] + [f"- {word}: {text}" for word, text in only]
    return "\n".join(lines) + "\n"


STYLE = ("body{font-family:sans-serif;margin:2em;color:#1d1d1f}table{border-collapse:collapse;font-size:.9rem}"
         "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f4f4f6}"
         ".better{background:#e6f4ea;color:#0d652d}.worse{background:#fce8e6;color:#a50e0e}"
         ".regression{font-weight:bold}.headline{font-size:1.1rem;font-weight:600}")


def to_html(table: pd.DataFrame, a: str, b: str) -> str:
    """A self-contained page (no script, no network): the one-line headline, the matched rows with each change's
    cell coloured by the way its verdict goes (green better, red worse, said in the verdict's words too; a
    regression bold), then the rows one study alone has, collapsed."""
    def row_html(r: Any) -> str:
        way = tone(r.verdict)
        classes = " ".join(filter(None, [way, "regression" if r.regression else ""]))
        marked = f' class="{classes}"' if classes else ""  # the change and its verdict carry the colour
        return "<tr>" + "".join(f"<td{marked if i in (5, 6) else ''}>{html.escape(str(c))}</td>"
                                for i, c in enumerate(_cells(r))) + "</tr>"
    head = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in COLUMNS_SHOWN) + "</tr>"
    both, only = table[matched(table)], table[~matched(table)]
    body = [f"<h1>{html.escape(a)} → {html.escape(b)}</h1>", f"<p class='headline'>{html.escape(headline(table))}</p>",
            f"<p>{html.escape(RULES)} <span class='better'>better</span> / <span class='worse'>worse</span>: the "
            "way the verdict goes.</p>",
            f"<div style='overflow-x:auto'><table>{head}{''.join(row_html(r) for r in both.itertuples())}</table></div>"]
    if len(only):
        listed = "".join(f"<li>{html.escape(word)}: {html.escape(text)}</li>" for word, text in _only(table))
        body.append(f"<details><summary>{len(only)} rows in one study only (not compared)</summary><ul>{listed}</ul>"
                    "</details>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(a)} → {html.escape(b)}</title>"
            f"<style>{STYLE}</style></head><body>" + "".join(body) + "</body></html>\n")
