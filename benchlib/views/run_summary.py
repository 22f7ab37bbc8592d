"""What the terminal shows when `frontier-bench run`, `study` or `ladder` ends — one screen, read at a glance — and
the embedded models' GGUF files for the own-server walk (`frontier-bench models`).

    CLOSING SUMMARY  at most ~30 lines, none over WIDTH characters: where the per-task table went (a file), one
                     row per deployment (decode rate and TTFT with their 95 % intervals, graded accuracy with its
                     Wilson interval, failed requests of those sent, energy where measured), the verdict between
                     them in one line (analysis.host: who dominates whom, in its words) with the paired answers
                     under it, each deployment's thresholds with every verdict word explained where it is shown,
                     and where the report is.

Deployments are named by their short labels (config.identity): the study's plan printed each full name once,
and the per-task file keys the labels back to them. The figures are the analysis layer's; this module lays them
out and names no verdict of its own (paired_lines: the paired verdicts in full, as the analysis writes them)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from benchlib.analysis import decisions, host, paired
from benchlib.analysis.deployments import decision_inputs, deployment_figures
from benchlib.config.formatting import bracket, fit, fmt, is_missing
from benchlib.config.graded_run import reduced_note
from benchlib.config.identity import Deployment, key_lines, short_labels
from benchlib.config.params import ParamsError, ThresholdParams, load_params
from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure.servers.llama_cpp import EmbeddedServerError, model_path_of
from benchlib.records.run_folder import RunFolder
from benchlib.records.schema import flag
from benchlib.suites import quality_looks
from benchlib.suites.notebooks import shown_path
from benchlib.views import glance
from benchlib.views.suite_report import console_table, invalid_note

MAX_PAIRS = 3  # pairs of deployments given a verdict line each; the report's "On this host" table has them all
MAX_INVALID = 3  # INVALID tasks said on the screen, each with why; the per-task file has them all
TASK_TABLE = "summary.txt"  # the per-task table, written beside the study's record (or the deployment's folders)


def deployment_name_of(suite_dir: Path) -> str:
    """The deployment's full name (model · server · settings · host), from the suite's manifest; the folders' names
    where it has none."""
    params = RunFolder(suite_dir).params
    return Deployment.from_recorded(params, suite_dir.parent.parent.name, suite_dir.parent.name).name


def read_summaries(suite_dirs: Sequence[Path]) -> pd.DataFrame:
    """The suites' summary.csv files, each row's `model` its deployment's full name."""
    frames = []
    for suite_dir in suite_dirs:
        folder = RunFolder(suite_dir)
        if folder.has_summary():
            frames.append(folder.summary().assign(suite=suite_dir.name,
                                                                  model=deployment_name_of(suite_dir)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def read_all_requests(suite_dirs: Sequence[Path]) -> pd.DataFrame:
    """Every suite's requests.csv, each row's `system` its deployment's full name."""
    frames = [RunFolder(d).requests().assign(system=deployment_name_of(d))
              for d in suite_dirs if RunFolder(d).has_requests()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# ---- the deployments' table and the verdict -------------------------------------------------------------------
def table_lines(figures: pd.DataFrame, labels: Mapping[str, str]) -> list[str]:
    """The deployments' table (views.glance), columns aligned."""
    frame = glance.figures_display(figures, labels)
    widths = {c: max(len(c), *(len(v) for v in frame[c])) for c in frame}
    return ["  ".join(c.ljust(widths[c]) for c in frame).rstrip()] + \
        ["  ".join(str(v).ljust(widths[c]) for c, v in zip(frame, values)).rstrip() for values in frame.to_numpy()]


SPEED_AXES = ("decode_tps", "ttft_ms")  # analysis.host's speed axes, each said under a pair's verdict
PER_TASK = "; per task"  # where a speed verdict's evidence turns to each task (speed_verdicts' evidence, per_task)


def speed_lines(frame: pd.DataFrame, a: str, b: str, labels: Mapping[str, str]) -> list[str]:
    """A pair's speed verdicts (analysis.host, the words and evidence the report's "On this host" gives): one
    'decode speed: smollm2-135m faster — decode rate 2.00× [1.80×–2.20×] the other's on the same 10 prompts (…)'
    each, the evidence task by task left to the report (PER_TASK)."""
    rows = frame[(frame["a"] == a) & (frame["b"] == b) & frame["axis"].isin(SPEED_AXES)
                 & (frame["better"] != host.NOT_MEASURED)]
    return [f"  {r.words}: {glance.relabel(str(r.note), labels)} — "
            f"{glance.relabel(str(r.rule).split(PER_TASK)[0], labels)}" for r in rows.itertuples()]


def verdict_lines(requests: pd.DataFrame, plans: pd.DataFrame, labels: Mapping[str, str],
                  margins: Mapping[str, float] | None = None) -> list[str]:
    """The verdict between the deployments (analysis.host, in its words) in one line — each pair's for up to
    MAX_PAIRS pairs — each with its speed verdicts and the paired answers on the graded sets under it. `margins`:
    each deployment's run.equivalence_margin where its params set one."""
    if len(labels) < 2 or requests.empty:
        return []
    frame = host.head_to_head(requests[requests["system"].isin(list(labels))], None, plans, margins=margins)
    if frame.empty:
        return []
    verdicts = host.dominance(frame)
    lines = fit(f"verdict: {glance.verdict_sentence(frame, labels)}") if len(verdicts) > 1 else []
    for a, b, text in verdicts[:MAX_PAIRS]:
        lines += fit(f"{'verdict' if len(verdicts) == 1 else '  pair'}: {glance.relabel(text, labels)}")
        lines += [row for line in speed_lines(frame, a, b, labels) for row in fit(line, "      ")]
        graded = frame[(frame["a"] == a) & (frame["b"] == b) & (frame["axis"] == "graded")]
        if len(graded) and graded["n"].iloc[0]:
            lines += fit(f"  answers, item by item: {glance.answers(graded.iloc[0], labels)}", "      ")
    if len(verdicts) > MAX_PAIRS:
        lines.append(f"  {len(verdicts) - MAX_PAIRS} more pairs: the report's \"On this host\" table")
    return lines


# ---- the thresholds -------------------------------------------------------------------------------------------
CRITERION_WORDS = {"tok/s": "decode", "entities": "entity recall"}  # decisions' labels as a sentence says them
VERDICT_KEY = " · ".join(f"{word}: {meaning}" for word, meaning in glance.VERDICT_MEANING.items())
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


def threshold_lines(summary: pd.DataFrame, requests: pd.DataFrame, figures: pd.DataFrame,
                    own: Mapping[str, Mapping[str, Any]], labels: Mapping[str, str]) -> list[str]:
    """Each deployment whose params set thresholds: its verdict (analysis.decisions, judged against each value's
    95 % interval) and every threshold with the value and its interval; the verdict words explained above them."""
    by_name = figures.set_index("deployment")
    lines = []
    for name, label in labels.items():
        limits = own.get(name)
        if not limits or not len(summary):
            continue
        mine = summary[summary["model"] == name]
        sent = requests[requests["system"] == name].assign(model=name) if len(requests) else None
        candidate = decision_inputs(mine.drop(columns=[c for c in ("host",) if c in mine]),
                                    requests=sent.drop(columns=[c for c in ("host",) if c in sent]) if sent is not None
                                    else None)
        if candidate.empty:
            continue
        used = ThresholdParams(**limits)
        verdict = decisions.decide(candidate, used).iloc[0]["verdict"]
        judged = decisions.evaluate_thresholds(candidate, used)
        bounds = {column: (by_name.at[name, f"{column}_lo"], by_name.at[name, f"{column}_hi"])
                  for column in ("decode_tps", "ttft_ms")}
        lines += fit(f"  {label}: {verdict} — " + " · ".join(_criterion(r, bounds) for r in judged.to_dict("records")))
    if lines:
        lines = ["thresholds, from each deployment's params:", *fit(f"  ({VERDICT_KEY})")] + lines
    return lines


def own_thresholds(suite_dirs: Sequence[Path]) -> dict[str, dict[str, Any]]:
    """Full name → the thresholds its params set (those not set left out); deployments that set none are absent."""
    out: dict[str, dict[str, Any]] = {}
    for folder in suite_dirs:
        limits = RunFolder(folder).params.get("thresholds") or {}
        limits = {k: v for k, v in limits.items() if v not in (None, False)}
        if limits:
            out.setdefault(deployment_name_of(folder), limits)
    return out


def margins(suite_dirs: Sequence[Path]) -> dict[str, float]:
    """Full name → the run.equivalence_margin its params set (those that set none are absent: the default holds)."""
    out: dict[str, float] = {}
    for folder in suite_dirs:
        margin = (RunFolder(folder).params.get("run") or {}).get("equivalence_margin")
        if isinstance(margin, (int, float)):
            out.setdefault(deployment_name_of(folder), float(margin))
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
    notes = [f"{labels[name]} on {note.removeprefix('reduced: ')} ({setting_of(note)})"
             for name, note in (graded_notes or {}).items() if note and name in labels]
    write_task_table(summary, labels, table_file, ["graded sets, part of their pools:", *notes] if notes else [])
    figures = deployment_figures(summary, requests)
    lines = ["", *fit(f"per task: {shown(str(table_file))} ({summary['task'].nunique()} tasks, failures and notes)"),
             ""]
    lines += table_lines(figures, labels)
    texts = set((graded_notes or {}).get(name, "") for name in labels) - {""}
    if len(texts) == 1 and len(notes) == len(labels) > 1:
        note = texts.pop()
        lines += fit(f"graded accuracy on {note.removeprefix('reduced: ')}, the same for each ({setting_of(note)}): "
                     "a demo's verdict, not a model's score")
    else:
        lines += [line for note in notes for line in fit("graded accuracy of " + note)]
    invalid = summary[~summary["valid"].map(flag)] if "valid" in summary else summary.iloc[0:0]
    for _, row in invalid.head(MAX_INVALID).iterrows():  # each with why (analysis.task_stats' note), its deployment
        lines += fit(invalid_note(row) + (f" ({labels[row['model']]})" if len(labels) > 1 else ""))  # where several
    if len(invalid) > MAX_INVALID:
        lines.append(f"  {len(invalid) - MAX_INVALID} more INVALID tasks: the per-task file")
    plans = quality_looks.compare_plans(suite_dirs, deployment_name_of)
    lines += verdict_lines(requests, plans, labels, margins(suite_dirs))
    lines += threshold_lines(summary, requests, figures, own_thresholds(suite_dirs), labels)
    return lines


def setting_of(note: str) -> str:
    """The setting that sized a reduced graded run: a sequential plan's size comes from run.quality."""
    return "run.quality" if note.startswith("sized") else "run.graded_items"


def graded_notes(suite_dirs: Sequence[Path]) -> dict[str, str]:
    """Full name → 'reduced: 33 of 964 items' for each quality run that planned fewer than the pools
    (config.graded_run.reduced_note)."""
    notes = {}
    for suite_dir in suite_dirs:
        note = reduced_note(RunFolder(suite_dir).manifest.get("graded"))
        if note:
            notes[deployment_name_of(suite_dir)] = note
    return notes


def reduced_lines(suite_dirs: Sequence[Path]) -> list[str]:
    """'<deployment>: reduced: 33 of 964 items (run.graded_items)' for each quality run that planned fewer than the
    pools (a sequential quality plan's: 'sized by its compare plan …')."""
    return [f"  {name}: {note} ({setting_of(note)})" for name, note in graded_notes(suite_dirs).items()]


def paired_lines(suite_dirs: Sequence[Path]) -> list[str]:
    """The paired verdicts (benchlib.analysis.paired.verdicts, ONE BASIS) in full: per pair of deployments, the verdict
    on the graded sets (a compare plan's where one compared the pair), then the seeds' smoke tasks beside it."""
    requests = read_all_requests(suite_dirs)
    items = paired.item_results(requests) if len(requests) else pd.DataFrame()
    table = paired.verdicts(items, quality_looks.compare_plans(suite_dirs, deployment_name_of)) if len(items) \
        else pd.DataFrame(columns=["basis"])
    lines = []
    for basis, heading in ((paired.GRADED, "the verdict, on the graded sets"),
                           (paired.SMOKE, "beside it, the seeds' smoke tasks (not part of the verdict)")):
        rows = table[table["basis"] == basis].drop(columns="basis").to_dict("records")
        if rows:
            lines += [f"{heading}:"] + ["  " + paired.Paired(**row).line() for row in rows]
    return lines


def print_summary(suite_dirs: Sequence[Path], table_file: Path) -> bool:
    """Print the closing summary (the per-task table written to `table_file`); returns whether any request
    succeeded."""
    lines = closing_lines(suite_dirs, table_file, shown_path, graded_notes(suite_dirs))
    if not lines:
        return False
    print("\n".join(lines))
    summary = read_summaries(suite_dirs)
    return bool(summary.get("n_ok", pd.Series(dtype=float)).fillna(0).sum() > 0)


def embedded_models() -> list[tuple[str, str, str]]:
    """(model name, GGUF path, params file) of each embedded llama.cpp deployment in params/, one per file."""
    found: dict[str, tuple[str, str, str]] = {}
    for path in sorted((PROJECT_ROOT / "params").glob("embedded*.yaml"), key=lambda p: (len(p.name), p.name)):
        try:
            params = load_params(path)
        except ParamsError:
            continue
        settings = params.server.embedded
        if params.server.kind != "embedded" or settings.engine == "whisper" or params.server.weights == "random":
            continue
        try:
            gguf = model_path_of(settings)
        except EmbeddedServerError:
            continue
        found.setdefault(gguf, (params.server.model, gguf, shown_path(str(path))))
    return list(found.values())
