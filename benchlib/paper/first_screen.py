"""What the report's first screen shows after the verdict sentence and the "On this host" figure: one row per
deployment of ours with its figures and intervals and its thresholds' verdict (the terminal's table, views.glance),
and the regimes in one compact table — who is on each frontier, where ours stand and why, in a few words — in
place of a paragraph per regime telling a deployment it is not eligible."""

from __future__ import annotations

import re
from typing import Mapping

import pandas as pd

from benchlib.analysis import frontier
from benchlib.analysis.deployments import deployment_figures
from benchlib.config.identity import key_lines
from benchlib.paper.format import Table
from benchlib.paper.runs import Runs, source_label
from benchlib.paper.settings import THIS_RUN
from benchlib.paper.summary import in_words
from benchlib.views import glance

THRESHOLDS = "thresholds"
VERDICT_KEY = "; ".join(f"{word}: {meaning}" for word, meaning in glance.VERDICT_MEANING.items())


def deployments_table(runs: Runs, judged: Table | None) -> Table | None:
    """One row per deployment of ours (analysis.deployments.deployment_figures, written as views.glance writes
    them for the terminal), named by its short label, with its thresholds' verdict from the decisions table
    (`judged`); None without runs."""
    if runs.empty or runs.summary.empty:
        return None
    figures = deployment_figures(runs.summary.assign(model=runs.summary["system"]), runs.requests)
    figures = figures[figures["deployment"].isin(set(runs.systems))].reset_index(drop=True)
    labels = runs.labels
    verdicts = judged.data[judged.data["source"] == THIS_RUN].set_index("candidate") if judged is not None \
        and len(judged.data) else pd.DataFrame(columns=["verdict", "thresholds_used"])
    figures[THRESHOLDS] = [verdicts["verdict"].get(name, "") for name in figures["deployment"]]
    figures["thresholds_used"] = [verdicts["thresholds_used"].get(name, "") for name in figures["deployment"]]
    figures.insert(1, "label", [labels.get(name, name) for name in figures["deployment"]])
    display = glance.figures_display(figures, labels)
    display[THRESHOLDS] = [f"{verdict} ({'its params' if str(used).startswith('this run') else used})" if verdict
                           else "–" for verdict, used in zip(figures[THRESHOLDS], figures["thresholds_used"])]
    key = "; ".join(line.replace("  = ", " = ").strip() for line in key_lines(labels))
    return Table("deployments", "Our deployments", figures, display,
                 f"{key}.<br>Decode and TTFT: the mean of the text suite's task means with its t interval (the one "
                 f"the thresholds are judged on); graded accuracy: Wilson interval; failed: of the requests sent. "
                 f"Thresholds: {VERDICT_KEY} (each one with its value: the swap decisions table).")


FLOOR = re.compile(r"(\S+) < floor (\S+)")


def _parts(reason: str) -> list[str]:
    """A frontier row's reason ('not eligible: no tps_per_w, peak_temp_c; accuracy_edge 0% < floor 50%') as its
    clauses in words ('no tokens/s per watt or peak temperature measured', 'accuracy 0%, below the 50% floor')."""
    return [in_words(FLOOR.sub(r"\1, below the \2 floor", part.strip()))
            for part in str(reason).removeprefix("not eligible: ").split(";") if part.strip()]


def _ours(rows: pd.DataFrame, labels: Mapping[str, str]) -> str:
    """Where our deployments stand in one regime, in a few words: on the frontier, dominated by whom, or not
    eligible and why (the clauses all share said once)."""
    if rows.empty:
        return "no deployment of ours"
    out = []
    eligible = rows[rows["eligible"].astype(bool)]
    on = [labels.get(s, s) for s in eligible.loc[eligible["on_frontier"].astype(bool), "system"]]
    if on:
        out.append(f"{', '.join(on)}: on the frontier")
    for row in eligible[~eligible["on_frontier"].astype(bool)].itertuples():
        first = str(row.dominated_by).split(" (")[0]
        out.append(f"{labels.get(row.system, row.system)}: dominated by {glance.relabel(first, labels)}")
    left = rows[~rows["eligible"].astype(bool)]
    if len(left):
        clauses = {row.system: _parts(row.dominated_by) for row in left.itertuples()}
        shared = [c for c in next(iter(clauses.values())) if all(c in mine for mine in clauses.values())]
        who = "both" if len(clauses) == 2 else "all" if len(clauses) > 2 else labels.get(left["system"].iloc[0])
        text = f"not eligible ({who}): {'; '.join(shared)}" if shared else "not eligible"
        extra = [f"{labels.get(s, s)} also {'; '.join(c for c in mine if c not in shared)}"
                 for s, mine in clauses.items() if any(c not in shared for c in mine)]
        if not shared and len(clauses) == 1:
            text = f"{who} not eligible: {'; '.join(next(iter(clauses.values())))}"
            extra = []
        out.append("; ".join([text, *extra]))
    return " · ".join(out)


def regimes_table(front: Table, regimes: Mapping[str, frontier.Regime], labels: Mapping[str, str]) -> Table | None:
    """Per regime: what it judges, who is on its frontier (published systems and ours), and where ours stand."""
    data = front.data
    if data.empty:
        return None
    rows = []
    for key, group in data.groupby("regime_key", sort=False):
        regime = regimes.get(key)
        members = group[group["on_frontier"].astype(bool)]
        named = [f"{labels.get(r.system, r.system)} [{source_label(r.source)}]" for r in members.itertuples()]
        rows.append({"regime_key": key, "regime": regime.title if regime else key,
                     "judged on": in_words(", ".join(regime.all_axes())) if regime else "",
                     "on its frontier": "; ".join(named) if named else "none: no system is eligible",
                     "ours": _ours(group[group["source"] == THIS_RUN], labels)})
    frame = pd.DataFrame(rows)
    display = frame.drop(columns="regime_key").assign(
        regime=[f"**{r}**<br><small>{j}</small>" for r, j in zip(frame["regime"], frame["judged on"])]
    ).drop(columns="judged on")
    return Table("regimes", "The regimes: who is on each frontier, and where ours stand", frame, display,
                 "Each regime judges every system on its axes (000 §7's presets); a system missing an axis, or below "
                 "the regime's accuracy floor, is not eligible. The frontier table and the sections below give "
                 "each axis with its interval, who dominates whom and what single change would flip it.")
