"""The paper's bar and line figures: throughput and latency by task, energy efficiency, our runs against
the published numbers, and the load sweeps."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, MaxNLocator

from benchlib.config.formatting import fmt
from benchlib.measure.telemetry.boundary import NODE_INPUT
from benchlib.paper.format import Table
from benchlib.paper.runs import Runs, source_label
from benchlib.paper.settings import NO_RUNS, THIS_RUN
from benchlib.paper.style import empty_figure, no_runs_note, short_task_labels, system_colors, theme, wrap
from benchlib.paper.systems import task_catalog, task_label, task_order
from benchlib.records.rows import STATUS_OK
from benchlib.records.schema import flag


def _bar_frame(long: pd.DataFrame, metric: str, runs: Runs, request_col: str | None) -> pd.DataFrame:
    """Per task × system values for a bar chart: published single values, ours as request rows (for sd bars)."""
    rows = long[(long["metric"] == metric) & (long["status"] == "")].dropna(subset=["value"])
    frames = [rows[rows["source"] != THIS_RUN][["task_id", "task", "system", "source", "value"]]]
    if request_col and len(runs.requests):
        req = runs.requests
        ok = req[(req["status"] == STATUS_OK) & ~req["is_warmup"].astype(bool)].copy()
        ok["value"] = pd.to_numeric(ok[request_col], errors="coerce")
        ok = ok.dropna(subset=["value"])
        valid = rows[rows["source"] == THIS_RUN][["task_id", "system"]].drop_duplicates()
        ok = ok.merge(valid, left_on=["task", "system"], right_on=["task_id", "system"])
        ok["source"] = THIS_RUN
        ok["task"] = ok["task_id"].map(dict(zip(long["task_id"], long["task"])))
        frames.append(ok[["task_id", "task", "system", "source", "value"]])
    else:
        frames.append(rows[rows["source"] == THIS_RUN][["task_id", "task", "system", "source", "value"]])
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["task_id", "task", "system",
                                                                                     "source", "value"])


def _status_marks(long: pd.DataFrame, metric: str, catalog: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(task label, system) -> 'n/a' / 'not supported' / 'invalid' for the cells a bar chart leaves empty."""
    rows = long[(long["metric"] == metric) & (long["status"] != "")]
    marks = {}
    for row in rows.itertuples():
        mark = ("n/a" if row.status == "not applicable" else "not supported" if row.status == "not supported"
                else "invalid")
        marks[(task_label(row.task_id, catalog), row.system)] = mark
    return marks


def _hbar(ax: plt.Axes, data: pd.DataFrame, order: list[str], hue_order: list[str], colors: Mapping[str, Any],
          xlabel: str, title: str, marks: Mapping[tuple[str, str], str] | None = None, spec: str = ".1f",
          legend_below: bool = True) -> None:
    """Horizontal grouped bars (task × system): value at each bar end, status marks where a bar is missing,
    our runs hatched with sd whiskers, legend below the axes so it never covers a bar."""
    if data.empty:
        ax.set_axis_off()
        no_runs_note(ax, "no data", "center")
        return
    sns.barplot(data=data, y="task", x="value", hue="system", order=order, hue_order=hue_order,
                palette={s: colors.get(s, "0.5") for s in hue_order}, errorbar="sd", orient="h", ax=ax,
                err_kws={"linewidth": 1.2}, capsize=0.15, saturation=0.9, width=0.8)
    ours = set(data.loc[data["source"] == THIS_RUN, "system"])
    for container, system in zip(ax.containers, hue_order):
        if system in ours:
            for patch in container.patches if hasattr(container, "patches") else container:
                patch.set_hatch("///")
                patch.set_edgecolor("white")
    stats = data.groupby(["task", "system"])["value"].agg(["mean", "std"])
    top = float((stats["mean"] + stats["std"].fillna(0)).max())
    n = len(hue_order)
    for i, task in enumerate(order):
        for j, system in enumerate(hue_order):
            y = i - 0.4 + 0.8 * (j + 0.5) / n
            if (task, system) in stats.index:
                mean, sd = stats.loc[(task, system)]
                x = mean + (0 if math.isnan(sd) else sd)
                ax.text(x + top * 0.01, y, format(mean, spec), va="center", fontsize=7, color="0.25")
            elif marks and (task, system) in marks:
                ax.text(top * 0.01, y, marks[(task, system)], va="center", fontsize=7, color="0.45", style="italic")
    ax.set_xlim(0, top * 1.12)
    ax.set(xlabel=xlabel, ylabel="", title=title)
    handles, labels = ax.get_legend_handles_labels()
    labels = [f"{lab}  [this run]" if lab in ours else lab for lab in labels]
    if legend_below:
        ax.legend(handles, labels, title="bars = mean; hatched = this run, whiskers = ± sd over requests",
                  fontsize=8, title_fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08),
                  ncol=2 if n > 2 else n, frameon=False)
    else:
        ax.legend(handles, labels, fontsize=8, loc="lower right")


@dataclass(frozen=True)
class Panel:
    """One panel of a task-by-system bar figure: its bars (_bar_frame), axis label and title, how a bar's value is
    written, and the marks for the cells it leaves empty."""

    data: pd.DataFrame
    xlabel: str
    title: str
    spec: str = ".1f"
    marks: Mapping[tuple[str, str], str] | None = None
    ticks: bool = False  # thousands separators and at most four ticks (milliseconds)
    empty: str = "no data"


def _task_bars(panels: list[Panel], runs: Runs, systems: pd.DataFrame, ratios: list[float]) -> plt.Figure:
    """Panels of bars by task on one task axis, one legend for all of them and a key under it: tasks by their short
    names, our deployments by their short labels (long names squeezed the panels into slivers and legends over
    each other)."""
    catalog = task_catalog()
    labels = runs.labels
    tasks = task_order([t for panel in panels for t in panel.data["task_id"]], catalog)
    names, task_key = short_task_labels([task_label(t, catalog) for t in tasks])
    order = [names[task_label(t, catalog)] for t in tasks]
    frames = [panel.data.assign(task=[names[task_label(t, catalog)] for t in panel.data["task_id"]],
                                system=[labels.get(s, s) for s in panel.data["system"]]) for panel in panels]
    drawn = {s for frame in frames for s in frame["system"]}
    hue = [s for s in dict.fromkeys(labels.get(s, s) for s in systems["system"]) if s in drawn]
    hue += [s for s in dict.fromkeys(s for frame in frames for s in frame["system"]) if s not in hue]
    colors = {labels.get(name, name): color for name, color in system_colors(systems).items()}
    key = [f"{label} = {name}" for name, label in labels.items() if label != name and label in drawn] + task_key
    rows = 2 + (len(hue) + 2) // 3  # the legend's title and rows, three entries a row
    below = 0.8 + 0.2 * rows + 0.15 * len(key)  # inches under the panels: x labels, legend, key
    height = max(3.5, 0.16 * len(order) * max(len(hue), 1) + 1.0)
    total = height + below
    fig, axes = plt.subplots(1, len(panels), figsize=(13, total), sharey=True, squeeze=False,
                             gridspec_kw={"width_ratios": ratios})
    ours = set(labels.values())
    for ax, panel, frame in zip(axes[0], panels, frames):
        if frame.empty:
            ax.set_axis_off()
            ax.set_title(panel.title)
            no_runs_note(ax, panel.empty, "center")
            continue
        marks = {(names.get(task, task), labels.get(system, system)): mark
                 for (task, system), mark in (panel.marks or {}).items()}
        _hbar(ax, frame, order, hue, colors, panel.xlabel, panel.title, marks, spec=panel.spec, legend_below=False)
        if panel.ticks:
            ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    handles, legend = next(((h, lab) for ax in axes[0] for h, lab in [ax.get_legend_handles_labels()] if h),
                           ([], []))
    # placed by hand: a layout engine would not leave the legend and the key their room under the x labels
    fig.subplots_adjust(left=1.45 / 13, right=0.98, top=1 - 0.5 / total, bottom=below / total, wspace=0.08)
    legend_top = (below - 0.85) / total
    fig.legend(handles, [f"{name}  [this run]" if name in ours else name for name in legend],
               title="bars = mean; hatched = this run, whiskers = ± sd over requests", loc="upper center",
               bbox_to_anchor=(0.5, legend_top), ncol=min(3, max(len(legend), 1)), fontsize=8, title_fontsize=8,
               frameon=False)
    if key:  # what each short name stands for, under the legend
        fig.text(0.5, legend_top - 0.2 * rows / total, "\n".join(key), ha="center", va="top", fontsize=7.5,
                 color="0.3")
    return fig


def fig_throughput(tables: Mapping[str, Table], runs: Runs) -> plt.Figure:
    theme()
    long, systems = tables["_task_metrics"].data, tables["_systems"].data
    data = _bar_frame(long, "decode_tps", runs, "decode_tps")
    return _task_bars([Panel(data, "decode throughput (tokens / s), higher is better",
                             "Generation throughput by task and system (000 §4, §9 video; our runs hatched)"
                             + (f"\nthis run: {NO_RUNS}" if runs.empty else ""),
                             marks=_status_marks(long, "decode_tps", task_catalog()))], runs, systems, [1])


def fig_latency(tables: Mapping[str, Table], runs: Runs) -> plt.Figure:
    """End-to-end latency per task (published and ours) beside our time to first token, on one task axis."""
    theme()
    long, systems = tables["_task_metrics"].data, tables["_systems"].data
    e2e = _bar_frame(long, "e2e_latency", runs, "e2e_s")
    ttft = _bar_frame(long[long["source"] == THIS_RUN], "ttft", runs, "ttft_s")
    notes = sorted({str(n) for n in runs.meta.get("client_error", pd.Series(dtype=object)) if str(n or "")
                    and str(n) != "nan"})
    # the client's own error bar (measure/selfcheck/calibration) under the TTFT axis, as each run's manifest recorded it
    return _task_bars([Panel(e2e, "end-to-end latency (s), lower is better",
                             "End-to-end latency by task (000 §5; our runs hatched)"
                             + (f"\nthis run: {NO_RUNS}" if runs.empty else ""), ".2f",
                             _status_marks(long, "e2e_latency", task_catalog())),
                       Panel(ttft.assign(value=ttft["value"] * 1000),
                             "\n".join(["TTFT (ms), lower is better", *notes]),
                             "Time to first token (this run only; the paper reports none)", ".0f", ticks=True,
                             empty=f"this run: {NO_RUNS}" if runs.empty else "no TTFT measured")],
                      runs, systems, [1.4, 1])


NO_BOUNDARY = "no energy measured"


def energy_groups(systems: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The systems split by energy boundary (telemetry/boundary), those without one last: one group per axis, so
    joules of two boundaries never share one. Systems whose node was read from its BMC appear once more, in a group
    of their own at the whole node, with the node's tokens per joule (tok/s per W is not computed there)."""
    bounds = systems.get("energy_boundary", pd.Series("", index=systems.index)).map(
        lambda b: b if isinstance(b, str) and b else NO_BOUNDARY)
    order = sorted(set(bounds) - {NO_BOUNDARY}) + ([NO_BOUNDARY] if (bounds == NO_BOUNDARY).any() else [])
    groups = [(name, systems[bounds == name]) for name in order]
    node = pd.to_numeric(systems.get("node_tokens_per_joule", pd.Series(math.nan, index=systems.index)),
                         errors="coerce")
    if node.notna().any():
        at_node = systems[node.notna()].assign(tokens_per_joule=node[node.notna()], tps_per_w=math.nan,
                                               energy_note="no energy: tok/s per W is not computed at the node")
        groups.insert(len(order) - (NO_BOUNDARY in order), (NODE_INPUT, at_node))
    return groups


def fig_energy(tables: Mapping[str, Table], runs: Runs) -> plt.Figure:
    """tok/s per W and tokens per joule, one row of panels per energy boundary: bars of different boundaries never
    share an axis (each row has its own scale and names its boundary)."""
    theme()
    systems = tables["_systems"].data
    if systems.empty:
        return empty_figure("Energy efficiency", f"no systems: paper_000 not loaded and {NO_RUNS}")
    colors = system_colors(systems)
    groups = energy_groups(systems)
    heights = [max(len(g), 1) + 1.2 for _, g in groups]
    fig, grid = plt.subplots(len(groups), 2, figsize=(14, max(3.8, 0.75 * len(systems) + 1.6 * len(groups) + 1)),
                             squeeze=False, gridspec_kw={"height_ratios": heights})
    for (boundary, group), axes in zip(groups, grid):
        scope = NO_BOUNDARY if boundary == NO_BOUNDARY else f"energy boundary: {boundary} (idle not subtracted)"
        for ax, column, label, title in (
                (axes[0], "tps_per_w", "tokens/s per watt (higher is better)",
                 "tok/s per W — published (000 §6) and ours"),
                (axes[1], "tokens_per_joule", "tokens per joule (higher is better)",
                 "tokens per joule — measured by us only")):
            data = group[["system", "source", column, "energy_note"]].copy()
            data["value"] = pd.to_numeric(data[column], errors="coerce")
            data["label"] = [f"{s}\n[{source_label(src)}]" for s, src in zip(data["system"], data["source"])]
            plotted = data.fillna({"value": 0.0})
            sns.barplot(data=plotted, y="label", x="value", hue="system", palette=colors, legend=False, ax=ax,
                        orient="h", saturation=0.9)
            top = float(data["value"].max()) if data["value"].notna().any() else 1.0
            for i, row in enumerate(data.itertuples()):
                if math.isnan(row.value) and column == "tokens_per_joule" and row.source != THIS_RUN:
                    ax.text(top * 0.02, i, "not published: the paper prints tok/s/W only", va="center", fontsize=7.5,
                            color="0.3", style="italic")
                elif math.isnan(row.value):
                    reason = str(row.energy_note).removeprefix("no energy: ")
                    ax.text(top * 0.02, i, wrap(f"no energy data — {reason}", 70), va="center", fontsize=7.5,
                            color="0.3", style="italic")
                else:
                    ax.text(row.value + top * 0.01, i, f"{row.value:.2f}", va="center", fontsize=9)
            ax.set(xlabel=label, ylabel="", title=f"{title}\n{scope}", xlim=(0, top * 1.25))
        axes[1].set_yticklabels([])
    note = ("Left: the paper's tok/s/W (average throughput ÷ average inference power, 000 §6) beside ours (decode "
            "tok/s ÷ window power). Right: tokens ÷ window energy, which only our runs measure. One row per energy "
            "boundary: figures of different boundaries are never on one axis.")
    fig.text(0.01, 0.005, note, fontsize=8, color="0.35")
    if runs.empty:
        no_runs_note(grid[0][0], loc="lower right")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def fig_runs_vs_published(tables: Mapping[str, Table], runs: Runs) -> plt.Figure:
    """Headline numbers per system, published (000) beside this run: average decode tok/s, average end-to-end
    latency, accuracy over scored tasks."""
    theme()
    systems = tables["_systems"].data.copy()
    if systems.empty:
        return empty_figure("Our runs beside the published ones", f"no systems: paper_000 not loaded and {NO_RUNS}")
    long = tables["_task_metrics"].data
    acc = long[(long["metric"] == "accuracy") & (long["status"] == "")].dropna(subset=["value"])
    measured = acc[acc["source"] == THIS_RUN]
    systems["accuracy"] = systems["system"].map(measured.groupby("system")["value"].mean())
    reported = acc[acc["source"] != THIS_RUN].groupby("system")["value"]
    reported_text = {name: f"reported correct on {int((v == 1).sum())}/{len(v)} tasks (pass/fail, not a rate)"
                     for name, v in reported}
    systems["label"] = [f"{s}\n[{source_label(src)}]" for s, src in zip(systems["system"], systems["source"])]
    systems["kind"] = ["this run" if s == THIS_RUN else "published (seed 000)" for s in systems["source"]]
    palette = {"published (seed 000)": sns.color_palette("deep")[0], "this run": sns.color_palette("dark")[3]}
    fig, axes = plt.subplots(1, 3, figsize=(16, max(3.6, 0.8 * len(systems) + 1.8)), sharey=True)
    for ax, column, label, spec in ((axes[0], "avg_decode_tps", "average decode tok/s (higher is better)", ".1f"),
                                    (axes[1], "avg_e2e_s", "average end-to-end latency, s (lower is better)", ".2f"),
                                    (axes[2], "accuracy", "measured accuracy: passed ÷ scored (our runs)", ".0%")):
        data = systems.assign(value=pd.to_numeric(systems[column], errors="coerce").fillna(0.0))
        sns.barplot(data=data, y="label", x="value", hue="kind", palette=palette, dodge=False, ax=ax, orient="h",
                    legend=(ax is axes[0]))
        top = float(data["value"].max()) or 1.0
        for i, raw in enumerate(pd.to_numeric(systems[column], errors="coerce")):
            text = fmt(raw, spec, "n/a")
            if column == "accuracy" and systems["source"].iloc[i] != THIS_RUN:
                text = reported_text.get(systems["system"].iloc[i], "n/a")  # published: never drawn as a rate
            ax.text((raw if not math.isnan(raw) else 0) + top * 0.01, i, text, va="center", fontsize=9)
        ax.set(xlabel=label, ylabel="", xlim=(0, (1.18 if column == "accuracy" else top * 1.22)))
    handles, labels = axes[0].get_legend_handles_labels()
    axes[0].get_legend().remove()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.93), ncol=2, fontsize=9, frameon=False)
    axes[2].xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0%}"))
    fig.suptitle("Our runs beside the published ones (source: seed 000 vs this run)"
                 + (f" — this run: {NO_RUNS}, published numbers only" if runs.empty else ""), fontsize=13)
    fig.text(0.01, 0.005, "Published accuracy is the paper's pass/fail summary ('reported correct'), written as text "
             "and never drawn on the measured-accuracy axis; ours is the checker's passed ÷ scored. Different "
             "hardware per system: read across rows with care.",
             fontsize=8, color="0.35")
    fig.tight_layout(rect=(0, 0.04, 1, 0.9))
    return fig


LOAD_METRIC_NAMES = {"throughput_tps": "aggregate, all streams", "decode_tps_mean": "per stream (mean)",
                     "ttft_s_p50": "TTFT p50", "e2e_s_p50": "end-to-end p50", "prefill_tps": "prefill rate",
                     "tokens_per_joule": "tokens per joule (level window)", "goodput_tps": "goodput (met the SLOs)"}


LOAD_PANELS = [("concurrency", ("concurrency",), ("throughput_tps", "decode_tps_mean"), "output tok/s"),
               ("concurrency", ("concurrency",), ("ttft_s_p50", "e2e_s_p50"), "p50 latency (s)"),
               ("context", ("prompt_tokens", "target_tokens"), ("ttft_s_p50",), "p50 TTFT (s)"),
               ("context", ("prompt_tokens", "target_tokens"), ("prefill_tps",), "prefill tok/s"),
               ("concurrency", ("concurrency",), ("tokens_per_joule",), "tokens per joule"),
               ("rate", ("rate_rps",), ("throughput_tps", "goodput_tps"), "output tok/s in the steady state")]


def fig_load(runs: Runs) -> plt.Figure | None:
    """Load sweeps when the load suite wrote them: throughput and latency per concurrency level (knee marked),
    TTFT and prefill rate per prompt length, output tok/s and goodput per offered rate."""
    if not runs.load:
        return None
    theme()
    fig, axes = plt.subplots(3, 2, figsize=(14, 12.5), squeeze=False)
    for ax, (kind, xs, ys, ylabel) in zip(axes.flat, LOAD_PANELS):
        frame = runs.load.get(kind)
        xcol = next((c for c in xs if frame is not None and c in frame and frame[c].notna().any()), None)
        present = [c for c in ys if frame is not None and c in frame and frame[c].notna().any()]
        if frame is None or xcol is None or not present:
            ax.set_axis_off()
            reason = ""
            if frame is not None and "energy_reason" in frame and ys == ("tokens_per_joule",):
                reason = next((str(r) for r in frame["energy_reason"] if isinstance(r, str) and r), "")
            no_runs_note(ax, f"no {kind} sweep yet" if frame is None else
                         wrap(f"sweep_{kind}.csv: no {ylabel}" + (f" — {reason}" if reason else ""), 60), "center")
            continue
        data = frame
        long = data.melt(id_vars=["system", xcol] + (["knee"] if "knee" in data else []), value_vars=present,
                         var_name="metric", value_name="value").dropna(subset=["value"])
        long["metric"] = long["metric"].map(lambda m: LOAD_METRIC_NAMES.get(m, m))
        # colour tells the metrics apart (aggregate vs per stream, throughput vs goodput), line style the systems
        sns.lineplot(data=long, x=xcol, y="value", hue="metric", style="system", markers=True, ax=ax)
        if "knee" in long:
            knees = long[long["knee"].map(flag)]
            ax.scatter(knees[xcol], knees["value"], s=160, facecolor="none", edgecolor="black", zorder=5,
                       label="knee")
        if kind == "concurrency":
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_ylim(bottom=0)  # rates, latencies and tokens per joule: every panel's axis starts at zero
        ax.set(xlabel=xcol.replace("_", " "), ylabel=ylabel, title=f"Load sweep: {ylabel} vs {xcol.replace('_', ' ')}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
