"""What the terminal shows when `frontier-bench run`, `study` or `ladder` ends: one screen, read at a glance.

    CLOSING SUMMARY  at most ~30 lines, none over WIDTH characters: where the per-task table went (a file), one
                     row per deployment (decode rate and TTFT with their 95 % intervals, graded accuracy with its
                     Wilson interval, failed requests of those sent, energy where measured), the verdict between
                     them in one line (analysis.host: who dominates whom, in its words) with the paired answers
                     under it, each deployment's thresholds with every verdict word explained where it is shown,
                     and where the report is.

Deployments are named by their short labels (config.identity): the study's plan printed each full name once,
and the per-task file keys the labels back to them. The figures are the analysis layer's; this module lays them
out and names no verdict of its own."""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from benchlib.analysis import decisions, host, paired, stats
from benchlib.analysis.deployments import decision_inputs
from benchlib.config import metrics
from benchlib.config.formatting import MISSING, bracket, fmt, is_missing
from benchlib.config.identity import key_lines, short_labels
from benchlib.config.params import ThresholdParams
from benchlib.records.rows import read_requests
from benchlib.records.schema import flag, read_csv
from benchlib.suites import quality_looks
from benchlib.suites.study import recorded_deployment_name
from benchlib.views.suite_report import console_table

WIDTH = 120  # no line longer: a terminal of the usual width shows each on one row
MAX_PAIRS = 3  # pairs of deployments given a verdict line each; the report's "On this host" table has them all
TASK_TABLE = "summary.txt"  # the per-task table, written beside the study's record (or the deployment's folders)


def manifest(suite_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((suite_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def deployment_name(suite_dir: Path) -> str:
    """The deployment's full name (model · server · settings · host), from the suite's manifest; the folders' names
    where it has none."""
    params = manifest(suite_dir).get("params") or {}
    return recorded_deployment_name(params, suite_dir.parent.parent.name, suite_dir.parent.name)


def read_summaries(suite_dirs: Sequence[Path]) -> pd.DataFrame:
    """The suites' summary.csv files, each row's `model` its deployment's full name."""
    frames = []
    for suite_dir in suite_dirs:
        path = suite_dir / "summary.csv"
        if path.is_file():
            frames.append(read_csv(path, label=str(path)).assign(suite=suite_dir.name,
                                                                  model=deployment_name(suite_dir)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def read_all_requests(suite_dirs: Sequence[Path]) -> pd.DataFrame:
    """Every suite's requests.csv, each row's `system` its deployment's full name."""
    frames = [read_requests(d / "requests.csv").assign(system=deployment_name(d))
              for d in suite_dirs if (d / "requests.csv").is_file()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def fit(line: str, indent: str = "    ") -> list[str]:
    """A line as rows of at most WIDTH characters, the continuation rows indented."""
    if len(line) <= WIDTH:
        return [line]
    return textwrap.wrap(line, WIDTH, subsequent_indent=indent, break_on_hyphens=False)


def relabel(text: str, labels: Mapping[str, str]) -> str:
    """`text` with every full name in it replaced by its short label (longest first: no name is part of another's)."""
    for name in sorted(labels, key=len, reverse=True):
        text = text.replace(name, labels[name])
    return text


# ---- the deployments' table -------------------------------------------------------------------------------
@dataclass
class Row:
    """One deployment as the closing table shows it."""

    label: str
    decode: tuple[float, float, float] = (math.nan, math.nan, math.nan)  # mean tok/s, 95 % interval
    ttft_ms: tuple[float, float, float] = (math.nan, math.nan, math.nan)
    graded: tuple[int, int] = (0, 0)  # passed, scored
    sent: int = 0
    failed: int = 0
    tokens_per_joule: float = math.nan
    extra: dict[str, str] = field(default_factory=dict)


def _speed(requests: pd.DataFrame, column: str, scale: float) -> tuple[float, float, float]:
    """Mean of the text suite's measured requests with its 95 % bootstrap interval: the figures analysis.host reads
    beside each verdict (a_value, a_lo, a_hi)."""
    rows = requests
    for name, keep in (("suite", host.SPEED_SUITE), ("status", "ok")):
        rows = rows[rows[name] == keep] if name in rows else rows
    if "is_warmup" in rows:
        rows = rows[~rows["is_warmup"].map(flag)]
    values = (pd.to_numeric(rows[column], errors="coerce") * scale).dropna().to_numpy(dtype=float) \
        if column in rows else []
    if not len(values):
        return math.nan, math.nan, math.nan
    low, high = stats.bootstrap_interval(values)
    return float(values.mean()), low, high


def deployment_rows(summary: pd.DataFrame, requests: pd.DataFrame, labels: Mapping[str, str]) -> list[Row]:
    """One Row per deployment (summary's `model`, requests' `system`: full names) in `labels`' order."""
    rows = []
    for name, label in labels.items():
        mine = summary[summary["model"] == name] if len(summary) else summary
        sent = requests[requests["system"] == name] if len(requests) else requests
        measured = sent[~sent["is_warmup"].map(flag)] if "is_warmup" in sent else sent
        checkers = mine["checker"] if "checker" in mine else pd.Series("", index=mine.index)
        graded = mine[[paired.basis_of(str(t), c) == paired.GRADED for t, c in zip(mine["task"], checkers)]] \
            if len(mine) else mine
        count = (lambda frame, column: int(pd.to_numeric(frame.get(column, pd.Series(dtype=float)),
                                                         errors="coerce").fillna(0).sum()))
        energy = pd.to_numeric(mine.get("energy_j", pd.Series(dtype=float)), errors="coerce")
        tokens = pd.to_numeric(mine.get("completion_tokens_sum", pd.Series(dtype=float)), errors="coerce")
        both = energy.notna() & tokens.notna() & (energy > 0)
        rows.append(Row(label=label, decode=_speed(measured, "decode_tps", 1.0),
                        ttft_ms=_speed(measured, "ttft_s", 1000.0),
                        graded=(count(graded, "n_passed"), count(graded, "n_scored")),
                        sent=len(measured), failed=int((measured["status"] != "ok").sum()) if "status" in measured
                        else 0,
                        tokens_per_joule=metrics.tokens_per_joule(tokens[both].sum(), energy[both].sum())
                        if both.any() else math.nan))
    return rows


def _with_interval(figures: tuple[float, float, float], spec: str) -> str:
    value, low, high = figures
    return MISSING if is_missing(value) else fmt(value, spec) + bracket(low, high, spec)


def _graded(passed: int, scored: int) -> str:
    if not scored:
        return MISSING
    low, high = stats.wilson_interval(passed, scored)
    return f"{passed / scored:.0%} [{low:.0%}–{high:.0%}] (n {scored})"


def table_lines(rows: Sequence[Row]) -> list[str]:
    """The deployments' table, columns aligned; energy only where some deployment measured it."""
    columns = {"deployment": [r.label for r in rows],
               "decode tok/s [95% CI]": [_with_interval(r.decode, ".1f") for r in rows],
               "TTFT ms [95% CI]": [_with_interval(r.ttft_ms, ".0f") for r in rows],
               "graded accuracy [95% CI]": [_graded(*r.graded) for r in rows],
               "failed": [f"{r.failed} of {r.sent}" for r in rows]}
    if any(not is_missing(r.tokens_per_joule) for r in rows):
        columns["energy tok/J"] = [fmt(r.tokens_per_joule, ".3g") for r in rows]
    frame = pd.DataFrame(columns)
    widths = {c: max(len(c), *(len(v) for v in frame[c])) for c in frame}
    line = "  ".join
    return [line(c.ljust(widths[c]) for c in frame).rstrip()] + \
        [line(str(v).ljust(widths[c]) for c, v in zip(frame, values)).rstrip() for values in frame.to_numpy()]


def _points(share: float) -> str:
    """A difference of two shares in percentage points, signed ('+58', '-3', '0')."""
    text = fmt(share * 100, "+.0f") if not is_missing(share) else MISSING
    return "0" if text in ("+0", "-0") else text


# ---- the verdict ----------------------------------------------------------------------------------------------
def verdict_lines(requests: pd.DataFrame, plans: pd.DataFrame, labels: Mapping[str, str]) -> list[str]:
    """The verdict between the deployments (analysis.host: each pair's dominance over speed, TTFT and the graded
    answers, in its words) in one line per pair (at most MAX_PAIRS), each with the paired answers under it."""
    if len(labels) < 2 or requests.empty:
        return []
    frame = host.head_to_head(requests[requests["system"].isin(list(labels))], None, plans)
    if frame.empty:
        return []
    lines = []
    verdicts = host.dominance(frame)
    if len(verdicts) > 1:
        lines += fit("ranking (axes where one is better than another): " + ", ".join(
            f"{i}. {labels.get(name, name)} ({wins})" for i, (name, wins) in enumerate(host.ranked(frame), 1)))
    for a, b, text in verdicts[:MAX_PAIRS]:
        lines += fit(f"verdict: {relabel(text, labels)}")
        graded = frame[(frame["a"] == a) & (frame["b"] == b) & (frame["axis"] == "graded")]
        if len(graded) and graded["n"].iloc[0]:
            r = graded.iloc[0]
            if r["difference"] < 0:  # the better one first, its difference positive
                a, b = b, a
                r = r.rename({"a_value": "b_value", "b_value": "a_value"})
                r["difference"], r["difference_lo"], r["difference_hi"] = \
                    -r["difference"], -r["difference_hi"], -r["difference_lo"]
            lines += fit(f"  answers, item by item: {labels[a]} {fmt(r['a_value'], '.0%')} vs {labels[b]} "
                         f"{fmt(r['b_value'], '.0%')} on the same {int(r['n'])} items: "
                         f"{_points(r['difference'])} [{_points(r['difference_lo'])}, {_points(r['difference_hi'])}] pp"
                         f", McNemar p = {fmt(r['p_value'], '.2g')}"
                         + (f" ({relabel(str(r['rule']), labels)})" if isinstance(r["rule"], str) and r["rule"]
                            else ""))
    if len(verdicts) > MAX_PAIRS:
        lines.append(f"  {len(verdicts) - MAX_PAIRS} more pairs: the report's \"On this host\" table")
    return lines


# ---- the thresholds -------------------------------------------------------------------------------------------
CRITERION_WORDS = {"tok/s": "decode", "entities": "entity recall"}  # decisions' labels as a sentence says them
VERDICT_KEY = (f"{decisions.SWAP}: all pass, {decisions.VERIFY}: none fails but some unmeasured or undecided, "
               f"{decisions.WAIT}: one fails")
SPECS = {"tok/s": ".1f", "ms": ".0f", "GB": ".1f"}  # a threshold's value written as the table writes it


def _criterion(row: Mapping[str, Any], bounds: Mapping[str, tuple[float, float]]) -> str:
    """'TTFT 501 [350–652] vs ≤500 ms FAIL': the value with its 95 % interval (the analysis's where it gives one,
    else the table's), the threshold with its unit, and the analysis's word."""
    words = CRITERION_WORDS.get(row["criterion"], row["criterion"])
    value = row["value"]
    if row["status"] == decisions.NO_DATA:
        return f"{words} {row['threshold']} not measured"
    if isinstance(value, bool):
        return f"{words} {'works' if value else 'does not work'} {row['status']}"
    low, high = row.get("low"), row.get("high")
    if is_missing(low) or is_missing(high):
        low, high = bounds.get(row["column"], (math.nan, math.nan))
    unit = str(row["threshold"]).lstrip("≥≤0123456789.").strip()
    spec = SPECS.get(unit, ".3g")
    return f"{words} {fmt(float(value), spec)}{bracket(low, high, spec)} vs {row['threshold']} {row['status']}"


def threshold_lines(summary: pd.DataFrame, rows: Sequence[Row], own: Mapping[str, Mapping[str, Any]],
                    labels: Mapping[str, str]) -> list[str]:
    """Each deployment whose params set thresholds: its verdict (analysis.decisions) and every threshold with the
    value's interval; the verdict words explained on the line above them."""
    by_label = {r.label: r for r in rows}
    lines = []
    for name, label in labels.items():
        limits = own.get(name)
        if not limits or not len(summary):
            continue
        mine = summary[summary["model"] == name]
        candidate = decision_inputs(mine.drop(columns=[c for c in ("host",) if c in mine]))
        if candidate.empty:
            continue
        used = ThresholdParams(**limits)
        verdict = decisions.decide(candidate, used).iloc[0]["verdict"]
        judged = decisions.evaluate_thresholds(candidate, used)
        row = by_label[label]
        bounds = {"decode_tps": row.decode[1:], "ttft_ms": row.ttft_ms[1:]}
        lines += fit(f"  {label}: {verdict} — " + " · ".join(_criterion(r, bounds) for r in judged.to_dict("records")))
    if lines:
        lines = fit(f"thresholds of each one's params ({VERDICT_KEY}):") + lines
    return lines


def own_thresholds(suite_dirs: Sequence[Path]) -> dict[str, dict[str, Any]]:
    """Full name → the thresholds its params set (those not set left out); deployments that set none are absent."""
    out: dict[str, dict[str, Any]] = {}
    for folder in suite_dirs:
        limits = (manifest(folder).get("params") or {}).get("thresholds") or {}
        limits = {k: v for k, v in limits.items() if v not in (None, False)}
        if limits:
            out.setdefault(deployment_name(folder), limits)
    return out


# ---- the whole summary ----------------------------------------------------------------------------------------
def write_task_table(summary: pd.DataFrame, labels: Mapping[str, str], path: Path, notes: Sequence[str] = ()) -> None:
    """The per-task table (suite_report.console_table) with each deployment by its label, its key and `notes`
    under it, as a file the closing summary points to."""
    shown = summary.assign(model=summary["model"].map(lambda n: labels.get(n, n)))
    text = "\n".join(["Per task, each deployment by its label:", *("  " + k for k in key_lines(dict(labels))), "",
                      console_table(shown), *([""] + list(notes) if notes else [])])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip() + "\n", encoding="utf-8")


def closing_lines(suite_dirs: Sequence[Path], table_file: Path, shown: Callable[[str], str] = str,
                  graded_notes: Mapping[str, str] | None = None) -> list[str]:
    """The closing summary of the suites' deployments (CLOSING SUMMARY) — [] when no suite wrote a summary — and
    the per-task table written to `table_file`. `shown`: how a path is printed; `graded_notes`: full name → why its
    graded accuracy rests on part of the pools ('reduced demo: 29 of 964 items')."""
    summary = read_summaries(suite_dirs)
    if summary.empty:
        return []
    requests = read_all_requests(suite_dirs)
    labels = short_labels(list(dict.fromkeys(summary["model"])))
    notes = [f"{labels[name]}: {note} (run.graded_items)" for name, note in (graded_notes or {}).items()
             if note and name in labels]
    write_task_table(summary, labels, table_file, ["graded sets, part of their pools:", *notes] if notes else [])
    rows = deployment_rows(summary, requests, labels)
    lines = ["", *fit(f"per task: {shown(str(table_file))} ({summary['task'].nunique()} tasks, failures and notes)"),
             ""]
    lines += table_lines(rows)
    texts = set((graded_notes or {}).get(name, "") for name in labels) - {""}
    if len(texts) == 1 and len(notes) == len(labels) > 1:
        lines += fit(f"graded accuracy: {texts.pop()} each (run.graded_items): a demo's verdict, not a model's score")
    else:
        lines += [line for note in notes for line in fit("graded accuracy of " + note)]
    invalid = summary[~summary["valid"].map(flag)] if "valid" in summary else summary.iloc[0:0]
    if len(invalid):  # their rows in the file say why (analysis.summary's note)
        lines += fit("INVALID (too many failed requests; the per-task file says why): " + "; ".join(
            f"{labels[name]}: {', '.join(group['task'].astype(str))}" for name, group in invalid.groupby("model", sort=False)))
    plans = quality_looks.compare_plans(suite_dirs, deployment_name)
    lines += verdict_lines(requests, plans, labels)
    lines += threshold_lines(summary, rows, own_thresholds(suite_dirs), labels)
    return lines
