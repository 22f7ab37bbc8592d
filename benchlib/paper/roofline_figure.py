"""The roofline figure: decode tok/s against memory bandwidth with each model's bytes-per-token ceiling,
and the share of the ceiling each system reaches."""

from __future__ import annotations

import math
from typing import Any, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.transforms import Bbox

from benchlib.config.formatting import is_missing
from benchlib.paper.format import Table
from benchlib.paper.labels import measuring_renderer, overlap, place_labels, point_label, short_model
from benchlib.paper.runs import Runs, source_label
from benchlib.paper.settings import NO_RUNS, THIS_RUN
from benchlib.paper.style import no_runs_note, theme, wrap

MARKERS = {"000": "o", "002": "s", "004": "^", THIS_RUN: "D"}  # per source: the seed's prefix, or this run
SOURCE_NOTES = {"000": ": paper 000, average throughput (§6)",
                "002": ": Ollama on 3 machines, quantization not stated (no ceiling)",
                "004": ": E4B quantizations on DGX Spark"}
LADDER_COLOR = sns.color_palette("dark", 8)[3]


def fig_roofline(tables: Mapping[str, Table], runs: Runs) -> plt.Figure:
    """Left: decode tok/s against memory bandwidth (log-log); one ceiling line per GB read per token, each point
    coloured like its own ceiling; a run of unknown bandwidth is a horizontal line at its measured rate.
    Right: measured ÷ ceiling where the ceiling is known."""
    theme()
    points = tables["roofline"].data.copy()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(17, 8.2), gridspec_kw={"width_ratios": [1.8, 1]})
    bw = pd.to_numeric(points["memory_bandwidth_gbs"], errors="coerce")
    tps = pd.to_numeric(points["decode_tps"], errors="coerce")
    limits = _limits(bw, tps)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*limits[:2])
    ax.set_ylim(*limits[2:])
    # A quantization ladder's rungs are one connected column of points in one colour (their law: the ladder figure)
    rung = points["ladder"].eq(True) if "ladder" in points else pd.Series(False, index=points.index)
    key_color, line_handles, line_tags = _ceiling_lines(ax, points[~rung], limits)
    labels, unknown_bw, ladder_pts = _points(ax, points, bw, tps, rung, key_color)
    notes, unknown_handles = _unknown_bandwidth(ax, unknown_bw)
    ladder_handles = _ladder_line(ax, ladder_pts)
    ax.set_xlabel("memory bandwidth (GB/s, log scale)")
    ax.set_ylabel("decode throughput (tok/s, log scale)")
    ax.set_title("Bandwidth roofline: ceiling = bandwidth ÷ GB read per token"
                 + (f"  (this run: {NO_RUNS})" if runs.empty else ""), fontsize=12)
    ax.legend(handles=_source_handles(points) + ladder_handles + unknown_handles + line_handles,
              loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=2, fontsize=8, frameon=False,
              title="E2B / E4B = Gemma 4 E2B / E4B", title_fontsize=8)
    _efficiency_panel(bx, points, key_color)
    fig.tight_layout()
    _label_ceilings(ax, line_tags, *limits)
    place_labels(ax, *labels, fontsize=7.5, obstacles=notes)
    return fig


def _limits(bw: pd.Series, tps: pd.Series) -> tuple[float, float, float, float]:
    """(xmin, xmax, ymin, ymax) of the log-log panel: the known points with a margin, room for labels right of
    the fastest."""
    known_bw, finite_tps = bw.dropna(), tps.dropna()
    xmin = float(known_bw.min()) / 1.8 if len(known_bw) else 50.0
    xmax = float(known_bw.max()) * 3.5 if len(known_bw) else 2000.0
    ymin = float(finite_tps.min()) / 2.2 if len(finite_tps) else 5.0
    ymax = max(float(finite_tps.max()) * 3.5 if len(finite_tps) else 300.0, 100.0)
    return xmin, xmax, ymin, ymax


def _ceiling_lines(ax: plt.Axes, points: pd.DataFrame, limits: tuple[float, float, float, float]
                   ) -> tuple[dict[float, Any], list[Line2D], list[tuple[float, str, Any]]]:
    """One ceiling line per distinct GB/token in its own colour (points take their ceiling's colour):
    (colour per GB/token, legend handles, (GB/token, tag, colour) for the tags drawn after layout)."""
    xmin, xmax, ymin, ymax = limits
    ceilings = points.dropna(subset=["bytes_per_token_gb"]).copy()
    ceilings["key"] = ceilings["bytes_per_token_gb"].round(3)
    keys = sorted(ceilings["key"].unique())
    line_palette = sns.color_palette("tab10", max(len(keys), 1))
    key_color = {k: line_palette[i % len(line_palette)] for i, k in enumerate(keys)}
    grid = np.geomspace(xmin, xmax, 60)
    line_handles, line_tags = [], []
    for key in keys:
        group = ceilings[ceilings["key"] == key]
        names = ", ".join(dict.fromkeys(
            short_model(m) + ("" if str(q).split(" ")[0].lower() in str(m).lower() else f" {str(q).split(' ')[0]}")
            + (" (this run)" if s == THIS_RUN else "")
            for m, q, s in zip(group["model"], group["quantization"], group["source"])))
        ours = (group["source"] == THIS_RUN).all()
        if xmax / key < ymin or xmin / key > ymax:
            names += " — off the plotted range"
        (line,) = ax.plot(grid, grid / key, color=key_color[key], lw=1.3, ls=(":" if ours else "-"), alpha=0.8,
                          zorder=1, label=f"ceiling at {key:.3g} GB/token: {names}")
        line_handles.append(line)
        line_tags.append((key, f"{key:.3g} GB/tok", key_color[key]))
    return key_color, line_handles, line_tags


def _points(ax: plt.Axes, points: pd.DataFrame, bw: pd.Series, tps: pd.Series, rung: pd.Series,
            key_color: Mapping[float, Any]) -> tuple[tuple[list, list, list, list], list, list]:
    """Every point of known bandwidth drawn: ((xs, ys, texts, colours) of their labels, the runs of unknown
    bandwidth as (row, tok/s, colour), the ladder's rungs as (GB/s, tok/s))."""
    other = {"002": sns.color_palette("dark", 8)[5]}
    xs, ys, texts, cols = [], [], [], []
    unknown_bw, ladder_pts = [], []
    for row, x, y, is_rung in zip(points.itertuples(), bw, tps, rung):
        if is_missing(y):
            continue
        if is_rung and not is_missing(x):
            ladder_pts.append((x, y))
            ax.scatter(x, y, s=60, marker="D", color=LADDER_COLOR, edgecolor="black", linewidth=0.6, zorder=4)
            xs.append(x)
            ys.append(y)
            texts.append(f"{row.quantization} ({row.bytes_per_token_gb:.3g} GB/tok)")
            cols.append(LADDER_COLOR)
            continue
        prefix = row.source[:3] if row.source != THIS_RUN else THIS_RUN
        key = round(float(row.bytes_per_token_gb), 3) if not is_missing(row.bytes_per_token_gb) else None
        color = key_color.get(key, other.get(prefix, "0.35"))
        if is_missing(x):
            unknown_bw.append((row, y, color))
            continue
        ax.scatter(x, y, s=(90 if prefix == THIS_RUN else 70), marker=MARKERS.get(prefix, "o"), color=color,
                   edgecolor="black", linewidth=0.7, zorder=4)
        xs.append(x)
        ys.append(y)
        texts.append(point_label(row))
        cols.append(color)
    return (xs, ys, texts, cols), unknown_bw, ladder_pts


def _unknown_bandwidth(ax: plt.Axes, unknown_bw: list[tuple[Any, float, Any]]) -> tuple[list[Any], list[Line2D]]:
    """A run of unknown bandwidth is never a guessed point: its measured rate as a line across all bandwidths,
    with a note (an obstacle for the labels) and a legend entry naming the lower bound its bytes give."""
    notes, handles = [], []
    for row, y, color in unknown_bw:
        ax.axhline(y, color=color, ls="--", lw=1.5, zorder=2)
        notes.append(ax.text(0.995, y / 1.04, f"this run: {y:.1f} tok/s\nbandwidth unknown",
                             transform=ax.get_yaxis_transform(), ha="right", va="top", fontsize=8, color=color,
                             bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.9},
                             zorder=6))
        floor = "" if is_missing(row.implied_bandwidth_gbs) else \
            (f";\n  × {row.bytes_per_token_gb:.3g} GB/token = {row.implied_bandwidth_gbs:.1f} GB/s of weight reads "
             "(a lower bound on its bandwidth)")
        handles.append(Line2D([], [], color=color, ls="--", lw=1.5, label=(
            f"{point_label(row)}: measured {y:.1f} tok/s, bandwidth unknown\n  (host.memory_bandwidth_gbs not set: "
            f"drawn as a line, not a point){floor}")))
    return notes, handles


def _ladder_line(ax: plt.Axes, ladder_pts: list[tuple[float, float]]) -> list[Line2D]:
    """The ladder's rungs joined in order of speed, and its legend entry (none without a ladder)."""
    if not ladder_pts:
        return []
    lx, ly = zip(*sorted(ladder_pts, key=lambda p: p[1]))
    ax.plot(lx, ly, color=LADDER_COLOR, lw=1.2, zorder=3)
    return [Line2D([], [], color=LADDER_COLOR, marker="D", mec="black", lw=1.2, label=(
        f"this host's quantization ladder ({len(ladder_pts)} rungs) at its measured read bandwidth; "
        "no ceiling lines drawn: see the ladder figure"))]


def _source_handles(points: pd.DataFrame) -> list[Line2D]:
    """One legend marker per source of the points, in order of appearance."""
    return [Line2D([], [], marker=MARKERS.get(s[:3] if s != THIS_RUN else THIS_RUN, "o"), ls="", color="0.6",
                   mec="black", ms=8,
                   label=(source_label(s) if s != THIS_RUN else THIS_RUN) + SOURCE_NOTES.get(s[:3], ""))
            for s in dict.fromkeys(points["source"])]


def _label_ceilings(ax: plt.Axes, labels: list[tuple[float, str, Any]], xmin: float, xmax: float, ymin: float,
                    ymax: float) -> None:
    """A short tag on each ceiling line near where it leaves the plot, rotated along the line (after layout)."""
    renderer = measuring_renderer(ax)
    used: list[Bbox] = []
    for key, text, color in labels:
        x_end = min(xmax, ymax * key) / 1.15
        if x_end / 2 < xmin:
            continue
        p0, p1 = ax.transData.transform([(x_end / 2, x_end / 2 / key), (x_end, x_end / key)])
        angle = math.degrees(math.atan2(p1[1] - p0[1], p1[0] - p0[0]))
        for shrink in (1.0, 0.75, 0.55, 0.4):
            x = x_end * shrink
            handle = ax.text(x, x / key * 1.05, text, rotation=angle, rotation_mode="anchor", ha="right",
                             va="bottom", fontsize=8, color=color, zorder=3,
                             bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7})
            box = handle.get_window_extent(renderer)
            if not any(overlap(box, b) for b in used) and x / key > ymin and x > xmin:
                used.append(box)
                break
            handle.remove()


def _efficiency_panel(ax: plt.Axes, points: pd.DataFrame, key_color: Mapping[float, Any]) -> None:
    known = points.dropna(subset=["efficiency"]).copy()
    unknown = points[points["efficiency"].isna()]
    if known.empty:
        ax.set_axis_off()
        no_runs_note(ax, "no run with a known ceiling", "center")
    else:
        known["label"] = [point_label(r) for r in known.itertuples()]
        known = known.sort_values("efficiency", ascending=False)
        colors = {lab: key_color.get(round(float(b), 3), "0.5") for lab, b in zip(known["label"],
                                                                                 known["bytes_per_token_gb"])}
        sns.barplot(data=known, y="label", x="efficiency", hue="label", palette=colors, legend=False, ax=ax,
                    orient="h")
        for i, value in enumerate(known["efficiency"]):
            ax.text(value + 0.01, i, f"{value:.0%}", va="center", fontsize=9)
        ax.set_xlim(0, max(1.08, float(known["efficiency"].max()) + 0.15))
        ax.axvline(1.0, color="0.3", ls="--", lw=1)
        ax.tick_params(axis="y", labelsize=8.5)
        ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0%}"))
        ax.set(xlabel="measured ÷ bandwidth ceiling (dashed line = ceiling)", ylabel="",
               title="Share of the bandwidth ceiling reached")
    if len(unknown):
        reasons: dict[str, list[str]] = {}
        for row in unknown.itertuples():
            why = ("bandwidth unknown" if is_missing(row.memory_bandwidth_gbs) else
                   "quantization not stated" if is_missing(row.bytes_per_param) else "inputs missing")
            reasons.setdefault(why, []).append(point_label(row))
        text = "No ceiling, not in this panel:\n" + "\n".join(
            f"• {why}: " + wrap(", ".join(names), 62).replace("\n", "\n   ") for why, names in reasons.items())
        ax.text(0.0, -0.16, text, transform=ax.transAxes, fontsize=7.5, ha="left", va="top", color="0.3")
