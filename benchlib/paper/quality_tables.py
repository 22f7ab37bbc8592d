"""The paper's graded-set tables: each of our deployments' accuracy per graded set with its n and interval (and under
load, where a run sent the sets again with several requests in flight), and the paired verdicts between deployments
that answered the same items — the comparison the frontier's quality axis rests on (analysis.frontier GRADED RULE).

Only our runs appear: the seeds report no graded sets."""

from __future__ import annotations

import pandas as pd

from benchlib.analysis import frontier, paired
from benchlib.config.formatting import fmt, interval, point_difference
from benchlib.config.tasks import load_pass
from benchlib.paper.format import Table
from benchlib.paper.runs import Runs
from benchlib.scoring.graded import GRADED_CHECKERS

GRADED_COLUMNS = ["deployment", "set", "in_flight", "n", "passed", "accuracy", "accuracy_lo", "accuracy_hi",
                  "joules_per_correct", "tokens_per_joule", "reduced"]
PAIRED_COLUMNS = ["set", "a", "b", "n", "a_only", "b_only", "accuracy_a", "accuracy_b", "difference", "difference_lo",
                  "difference_hi", "p_value", "verdict", "rule"]


def _graded_rows(runs: Runs) -> pd.DataFrame:
    summary = runs.summary
    if summary.empty or "checker" not in summary:
        return summary.iloc[0:0]
    return summary[summary["checker"].isin(GRADED_CHECKERS) & (pd.to_numeric(summary["n_scored"], errors="coerce") > 0)]


def graded_table(runs: Runs) -> Table | None:
    """Per deployment and graded set: n, accuracy with its Wilson 95 % interval, energy per correct answer; a set's
    pass under load on its own row (in flight > 1). None when no run graded anything."""
    rows = _graded_rows(runs)
    if rows.empty:
        return None
    data = []
    for row in rows.to_dict("records"):
        name, level = load_pass(str(row["task"]))
        data.append({"deployment": runs.name(row["host"], row["model"]), "set": name,
                     "in_flight": _in_flight(runs.requests, row, level), "reduced": _reduced(runs.meta, row),
                     "n": int(row["n_scored"]), "passed": int(row["n_passed"]), "accuracy": row["accuracy"],
                     "accuracy_lo": row["accuracy_lo"], "accuracy_hi": row["accuracy_hi"],
                     "joules_per_correct": row.get("joules_per_correct"),
                     "tokens_per_joule": row.get("tokens_per_joule")})
    frame = pd.DataFrame(data, columns=GRADED_COLUMNS).sort_values(["deployment", "in_flight"], kind="stable")
    display = pd.DataFrame({
        "deployment": frame["deployment"], "set": frame["set"], "in flight": frame["in_flight"],
        "accuracy [95% CI] (n)": [interval(r.accuracy, r.accuracy_lo, r.accuracy_hi, ".0%", n=r.n)
                                  for r in frame.itertuples()],
        "run size": frame["reduced"].replace("", "full pools"),
        "J per correct": [fmt(v, ".1f") for v in frame["joules_per_correct"]],
        "tok/J": [fmt(v, ".2f") for v in frame["tokens_per_joule"]]})
    return Table("graded_sets", "Accuracy on the graded sets, per deployment", frame.reset_index(drop=True),
                 display.reset_index(drop=True),
                 "Items drawn from reasoning-gym's generators and HumanEval (testdata/tasks/quality_graded.yaml), and "
                 "generated pictures and speech with known content (vision_graded.yaml, audio_graded.yaml), the "
                 "same items for every deployment; scored by each set's own scorer, HumanEval's code run against its "
                 "tests in a sandbox, a picture's answer and a clip's transcript exactly. Wilson 95 % intervals; n = items scored. 'in flight': requests sent at once "
                 "(run.graded_in_flight; a set's row named '<set>@c<n>' is its second pass under load, "
                 "run.graded_concurrency). 'run size': 'reduced: N of M items' where the run sent fewer than "
                 "the pools (the embedded CPU demo), else every item. Energy per correct answer over the "
                 f"set's task window (its boundary in the energy tables). These sets are the frontier's quality axis "
                 f"('{frontier.GRADED}') for the deployments that ran them.")


def _in_flight(requests: pd.DataFrame, row: dict, level: int) -> int:
    """The requests in flight a set's rows record (their concurrency); the pass's level where rows lack it."""
    if requests.empty or "concurrency" not in requests:
        return level
    mine = requests[(requests["host"] == row["host"]) & (requests["model"] == row["model"])
                    & (requests["task"] == row["task"])]
    values = pd.to_numeric(mine["concurrency"], errors="coerce").dropna()
    return int(values.max()) if len(values) else level


def _reduced(meta: pd.DataFrame, row: dict) -> str:
    """'reduced: N of M items' (or what sized them: paper.runs.reduced_note) for a deployment whose run planned
    fewer graded items than the pools."""
    if meta.empty or "graded_reduced" not in meta:
        return ""
    mine = meta[(meta["host"] == row["host"]) & (meta["model"] == row["model"])]["graded_reduced"]
    return next((str(v) for v in mine if isinstance(v, str) and v), "")


def paired_table(runs: Runs) -> Table | None:
    """Every pair of our deployments on the graded items both answered, per set and over all sets pooled (the
    frontier's comparison), then each deployment against itself under load. None without two comparable passes."""
    graded = _graded_rows(runs)
    if graded.empty or runs.requests.empty:
        return None
    items = paired.item_results(runs.requests)
    sets = sorted({str(t) for t in graded["task"] if load_pass(str(t))[1] == 1})
    rows = []
    for name in sets:
        rows += [{"set": name, **row} for row in paired.pairwise(items, tasks=[name]).to_dict("records")]
    # THE verdict (ONE BASIS): every set's items pooled; a pair a compare plan compared gets the plan's verdict
    verdicts = paired.verdicts(items, runs.compare_plans)
    rows += [{"set": paired.ALL_SETS, **row} for row in
             verdicts[verdicts["basis"] == paired.GRADED].drop(columns="basis").to_dict("records")]
    for row in paired.under_load(items).to_dict("records"):
        rows.append({**row, "set": row["task"], "a": f"{row['system']} ({row['a']})",
                     "b": f"{row['system']} ({row['b']})"})
    if not rows:
        return None
    frame = pd.DataFrame(rows).reindex(columns=PAIRED_COLUMNS)
    display = pd.DataFrame({
        "set": frame["set"], "A": frame["a"], "B": frame["b"], "items": frame["n"],
        "only A / only B right": [f"{int(a)} / {int(b)}" for a, b in zip(frame["a_only"], frame["b_only"])],
        "accuracy A vs B": [f"{fmt(a, '.0%')} vs {fmt(b, '.0%')}" for a, b in zip(frame["accuracy_a"],
                                                                                 frame["accuracy_b"])],
        "A − B [95% CI]": [point_difference(d, lo, hi) for d, lo, hi in
                           zip(frame["difference"], frame["difference_lo"], frame["difference_hi"])],
        "McNemar p": [fmt(p, ".3g") for p in frame["p_value"]],
        "verdict": [f"{v} ({r})" if isinstance(r, str) and r else v for v, r in zip(frame["verdict"], frame["rule"])]})
    return Table("graded_paired", "Paired verdicts on the same graded items", frame, display,
                 "A against B over the items both answered: the accuracy difference with Newcombe's paired 95 % "
                 "interval and the exact McNemar test on the items only one got right; 'A beats B' only when the "
                 "interval excludes 0 and p < 0.05, else undecided (analysis/paired.py). 'all sets' pools every set's "
                 "items — the comparison the frontier's quality axis uses; where a compare plan compared the pair, "
                 "its group-sequential verdict, at its alpha (a fixed-sample test after looks is an uncorrected "
                 "peek: the per-set rows and p beside it inform, they do not decide). Rows '(c1)' against '(c<n>)' "
                 "compare a deployment with itself under load.")
