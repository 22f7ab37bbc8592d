"""The report's first section: the user's own deployments against each other on this host (analysis.host), with
the table, the one figure and the quality plan each deployment's graded items followed (planned and used n, and
why it stopped; suites.quality_looks)."""

from __future__ import annotations

import math
from typing import Mapping

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import MaxNLocator, PercentFormatter

from benchlib.analysis import host, paired, sequential, stats
from benchlib.analysis.failures import GRADED_FAILED, graded_outcome
from benchlib.config.formatting import fmt, point_difference
from benchlib.config.tasks import graded_set_names
from benchlib.paper.format import Table
from benchlib.paper.runs import Runs
from benchlib.paper.settings import THIS_RUN
from benchlib.paper.style import empty_figure, theme, wrap
from benchlib.records.schema import flag

TITLE_WIDTH = 20  # characters on a line of a panel's title in the On this host figure
PLAN_COLUMNS = ["system", "plan", "planned_n", "used_n", "sent", "answered", "scored", "looks", "reason", "baseline",
                "alpha_at_stop", "detail"]


def _value(row: pd.Series, side: str) -> str:
    if row["axis"] in ("graded", "smoke"):
        return fmt(row[f"{side}_value"], ".0%")
    spec = ".1f" if row["axis"] != "tokens_per_joule" else ".3g"
    return host.interval_text(row[f"{side}_value"], row[f"{side}_lo"], row[f"{side}_hi"], spec)


def _decides(row: pd.Series) -> str:
    if row["axis"] in ("graded", "smoke"):
        if not row["n"]:
            return str(row["note"])
        return (f"difference {point_difference(row['difference'], row['difference_lo'], row['difference_hi'])} on "
                f"{int(row['n'])} items, McNemar p = "
                f"{fmt(row['p_value'], '.2g')} ({row['note']})" + (f"; {row['rule']}" if row.get("rule") else ""))
    if row["axis"] == "tokens_per_joule":
        return str(row["note"])
    return str(row["rule"]) if row["better"] != host.NOT_MEASURED else "no measured request"


def host_table(runs: Runs, systems: pd.DataFrame) -> Table | None:
    """Every pair of our deployments, axis by axis (analysis.host.head_to_head); None with fewer than two."""
    if runs.empty or runs.requests.empty:
        return None
    requests = runs.requests
    ours = systems[systems["source"] == THIS_RUN] if len(systems) and "source" in systems else systems
    if "excluded" in ours:  # nothing is ranked on answers it did not get (analysis.failures.not_ranked)
        ours = ours[~ours["excluded"].map(lambda v: isinstance(v, str) and v.startswith(GRADED_FAILED))]
        requests = requests[requests["system"].isin(ours["system"])]
    margins = dict(zip(runs.meta["system"], pd.to_numeric(runs.meta["equivalence_margin"], errors="coerce"))) \
        if "equivalence_margin" in runs.meta else {}
    frame = host.head_to_head(requests, ours, runs.compare_plans, {k: v for k, v in margins.items() if v == v})
    if frame.empty:
        return None
    display = pd.DataFrame({
        "A": frame["a"], "B": frame["b"], "axis": frame["words"] + [f" ({u})" if u else "" for u in frame["unit"]],
        "A [95% CI]": [_value(r, "a") for _, r in frame.iterrows()],
        "B [95% CI]": [_value(r, "b") for _, r in frame.iterrows()],
        "better": frame["better"], "what decides": [_decides(r) for _, r in frame.iterrows()]})
    return Table("on_this_host", "On this host: our deployments against each other", frame, display,
                 "Decode speed, time to first token and (beside the verdict) end-to-end latency from the text suite's "
                 "measured requests: each deployment's mean of its tasks' means with its 95 % t interval — the "
                 "figure the deployments table and the thresholds give it — for reading; the "
                 "verdict compares them prompt by prompt (the ratio on the prompts both answered, paired sign-flip "
                 "test, tasks weighted equally; analysis/speed_verdicts.py): faster / slower when the ratio's 95 % "
                 "interval excludes 1, equivalent within ±m when its 90 % interval lies inside the margin (two "
                 "one-sided tests; run.equivalence_margin), mixed when tasks are decided in opposite directions, "
                 "else undecided with the prompts a decision would take; answers on the graded sets as the paired "
                 "verdict on the items both answered (Newcombe interval, exact McNemar test; where a compare plan "
                 "compared the pair, the verdict its group-sequential rule reached, the interval and p beside it) — "
                 "the verdict the terminal and the frontier give; energy as tokens per joule where both were measured "
                 "within one boundary. The seeds' smoke tasks are compared beside the verdict, never pooled into it.")


def quality_plan_table(runs: Runs) -> Table | None:
    """Per deployment that answered graded items: the plan it followed, planned and used n, the looks and why it
    stopped (a deployment without quality_plan.csv followed the fixed plan: every planned item, one look)."""
    looks = runs.quality_plans if runs.quality_plans is not None else pd.DataFrame()
    outcome = graded_outcome(runs.requests, graded_set_names()).set_index(["host", "model"])

    def counts(host_name: str, model: str) -> dict[str, int]:
        """What a reader is told of the graded requests: sent, answered, scored (analysis.failures)."""
        if (host_name, model) not in outcome.index:
            return {"sent": 0, "answered": 0, "scored": 0}
        row = outcome.loc[(host_name, model)]
        return {"sent": int(row["graded_sent"]), "answered": int(row["graded_answered"]),
                "scored": int(row["graded_scored"])}

    rows = []
    for (host_name, model), group in (looks.groupby(["host", "model"], sort=False) if len(looks) else []):
        last = group.iloc[-1]
        detail = (f"{int(last['a_only'])} vs {int(last['b_only'])} discordant, p = {fmt(last['p_value'], '.2g')}"
                  if last["plan"] == "compare" else
                  f"{int(last['passed'])} of {int(last['n'])} passed, ± {fmt(last['half_width'], '.1%')}")
        rows.append({**counts(host_name, model), "system": runs.name(host_name, model), "plan": last["plan"],
                     "planned_n": int(last["planned_n"]),
                     "used_n": int(last["n"]), "looks": len(group),
                     "reason": last["reason"] if isinstance(last["reason"], str) and last["reason"] else "not stopped",
                     "baseline": last["baseline"] if isinstance(last.get("baseline"), str) else "",
                     "alpha_at_stop": last.get("nominal_alpha"), "detail": detail})
    planned = {r["system"] for r in rows}
    requests = runs.requests
    checkers = requests["checker"] if "checker" in requests else pd.Series("", index=requests.index)
    first = requests[[paired.basis_of(str(t), c) == paired.GRADED for t, c in zip(requests["task"], checkers)]] \
        if len(requests) and "task" in requests else requests
    if len(first):
        first = first[~first["is_warmup"].map(flag)] if "is_warmup" in first else first
        items = paired.item_results(first)
        for (host_name, model), group in first.groupby(["host", "model"], sort=False):
            name = runs.name(host_name, model)
            if name in planned:
                continue
            mine = items[items["system"] == name]
            sent = counts(host_name, model)
            rows.append({**sent, "system": name, "plan": "fixed", "planned_n": max(len(group), sent["sent"]),
                         "used_n": len(mine), "looks": 1,
                         "reason": sequential.FIXED, "baseline": "", "alpha_at_stop": float("nan"),
                         "detail": f"{int(mine['passed'].sum())} of {len(mine)} passed"})
    if not rows:
        return None
    frame = pd.DataFrame(rows, columns=PLAN_COLUMNS)
    display = frame.assign(alpha_at_stop=[fmt(a, ".2g") for a in frame["alpha_at_stop"]]).rename(columns={
        "planned_n": "planned items", "used_n": "used items", "alpha_at_stop": "level at the last look"})
    return Table("quality_plan", "Graded items: planned, used, and why the deployment stopped", frame, display,
                 "A sized quality plan (params run.quality) sends the graded sets look by look: 'precision reached' "
                 "when the Wilson 95 % interval is narrow enough, 'decided' when the group-sequential paired test "
                 "against the baseline rejects at the level its alpha-spending allows at that look (O'Brien-Fleming "
                 "type), 'pool exhausted' when no item was left, 'budget' when its time ran out; 'fixed size': the "
                 "fixed plan, every planned item (run.graded_items of each set, capped by its pool).")


def latency_plan_table(runs: Runs) -> Table | None:
    """Per deployment and task sized by a latency plan (params run.latency, plan precision): the percentile with its
    95 % interval at the last look, the requests used and why it stopped; None where no run sized one."""
    looks = runs.latency_plans if runs.latency_plans is not None else pd.DataFrame()
    if not len(looks):
        return None
    last = looks.groupby(["host", "model", "task"], sort=False).tail(1)
    counts = looks.groupby(["host", "model", "task"], sort=False).size()
    frame = pd.DataFrame({
        "system": [runs.name(h, m) for h, m in zip(last["host"], last["model"])], "task": last["task"],
        "metric": last["metric"] + " " + last["percentile"],
        "estimate": last["estimate"], "low": last["low"], "high": last["high"],
        "relative_half_width": last["relative_half_width"], "target": last["target"], "used_n": last["n"],
        "max_requests": last["max_requests"], "looks": counts.to_numpy(),
        "reason": [r if isinstance(r, str) and r else "not stopped" for r in last["reason"]]})
    display = pd.DataFrame({
        "deployment": frame["system"], "task": frame["task"], "percentile": frame["metric"],
        "value [95% CI]": [host.interval_text(v, lo, hi, ".4g") for v, lo, hi in
                           zip(frame["estimate"], frame["low"], frame["high"])],
        "± (target)": [f"{fmt(w, '.1%')} ({fmt(t, '.0%')})" for w, t in zip(frame["relative_half_width"],
                                                                          frame["target"])],
        "requests (cap)": [f"{int(n)} ({int(c)})" for n, c in zip(frame["used_n"], frame["max_requests"])],
        "looks": frame["looks"], "why it stopped": frame["reason"]})
    return Table("latency_plan", "Latency sized to a precision: requests used and why each task stopped", frame,
                 display, "A latency plan (params run.latency, plan precision) sends a task's requests look by look "
                 "until its percentile's distribution-free 95 % interval (order statistics) is within ±the target of "
                 "the estimate — 'precision reached' — or its request cap ('request cap') or time budget ('budget') "
                 "ends it; it stops on the interval's width, never on the value (analysis/latency_precision.py).")


def fig_on_this_host(tables: Mapping[str, Table], runs: Runs) -> plt.Figure | None:
    """One panel per measured axis: each deployment's value with its 95 % interval (graded answers: the accuracy
    with its Wilson interval over the items both answered)."""
    table = tables.get("on_this_host")
    if table is None or table.data.empty:
        return None
    theme()
    frame = table.data
    points = []
    for row in frame.itertuples():
        if row.axis in host.BESIDE or row.better == host.NOT_MEASURED:
            continue
        label = host.AXES_BY_KEY[row.axis].words + (f" ({row.unit})" if row.unit else "")
        for side, name in (("a", row.a), ("b", row.b)):
            # speed and TTFT: analysis.deployments.speed_reading, as the deployments table under the figure
            value, low, high = (getattr(row, f"{side}_value"), getattr(row, f"{side}_lo"), getattr(row, f"{side}_hi"))
            if row.axis == "graded":
                value, (low, high) = value, _wilson_of(value, row.n)
            points.append({"axis": label, "system": name, "value": value, "low": low, "high": high})
    data = pd.DataFrame(points).drop_duplicates(["axis", "system"])
    if data.empty:
        return empty_figure("On this host", "no axis measured for two deployments")
    labels = runs.labels  # the short labels the first screen's table keys to the full names
    data["system"] = [labels.get(name, name) for name in data["system"]]
    order = list(dict.fromkeys(data["system"]))
    colors = dict(zip(order, sns.color_palette("dark", len(order))))
    panels = data["axis"].nunique()
    # one row of panels, as wide as the report's column and short: the figure sits on the first screen
    grid = sns.FacetGrid(data, col="axis", sharex=False, sharey=True, col_wrap=None,
                         height=max(1.5, 0.42 * len(order) + 1.0), aspect=max(1.3, 4.2 / panels))
    grid.map_dataframe(_draw, order=order, colors=colors)
    # each panel's title on at most two short lines, the panels set apart: on one line, neighbouring titles as
    # long as "time to first token (ms)" and "answers on the graded sets" run into each other at the page's width
    for ax, title in zip(grid.axes.flat, grid.col_names):
        ax.set_title(wrap(title, TITLE_WIDTH), fontsize=10)
    grid.set_axis_labels("", "")
    figure = grid.figure
    # the suptitle just above the panels' titles, however many lines they took (the saved figure is cropped to fit)
    top = max(ax.title.get_window_extent(figure.canvas.get_renderer()).y1 for ax in grid.axes.flat)
    figure.suptitle("On this host: our deployments, 95 % intervals", y=top / figure.bbox.height + 0.03,
                    va="bottom", fontsize=11)
    return figure


def _wilson_of(share: float, n: float) -> tuple[float, float]:
    if not n or math.isnan(share):
        return math.nan, math.nan
    low, high = stats.wilson_interval(int(round(share * n)), int(n))
    return low, high


def _draw(data: pd.DataFrame, order: list[str], colors: Mapping[str, object], **_: object) -> None:
    """One panel: each deployment's value and 95 % interval, on a row of its own (the same row in every panel)."""
    ax = plt.gca()
    for row in data.itertuples():
        has = not (math.isnan(row.low) or math.isnan(row.high))
        ax.errorbar(row.value, order.index(row.system),
                    xerr=[[row.value - row.low], [row.high - row.value]] if has else None, fmt="o",
                    color=colors[row.system], capsize=4)
    ax.set_yticks(range(len(order)), [wrap(name, 22) for name in order])
    ax.set_ylim(-0.6, len(order) - 0.4)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))  # a few ticks: the panels are narrow
    if len(data) and str(data["axis"].iloc[0]).startswith("answers"):
        ax.xaxis.set_major_formatter(PercentFormatter(1.0))
