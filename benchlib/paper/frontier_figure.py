"""The Pareto-frontier figure: one panel per regime's two main axes, the frontier's step line, starred
members, labels on their own points."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from benchlib.analysis import frontier
from benchlib.config.formatting import fmt
from benchlib.paper.format import Table
from benchlib.paper.labels import joined, place_labels, short
from benchlib.paper.runs import Runs
from benchlib.paper.settings import AXIS_FORMATS, AXIS_LABELS, NO_RUNS, THIS_RUN, Settings
from benchlib.paper.style import system_colors, theme, wrap
from benchlib.records.schema import number

PARETO_PANELS = [("workstation", "avg_decode_tps", "modality_count"), ("edge", "tps_per_w", "peak_temp_c"),
                 ("audio", "asr_decode_tps", "short_qa_output_tokens"), ("tradeoff", "avg_decode_tps", "tps_per_w")]


def fig_pareto(tables: Mapping[str, Table], runs: Runs, settings: Settings) -> plt.Figure:
    """One panel per regime preset (its first two axes; the frontier drawn over them, membership judged on all
    the regime's axes) plus the paper's headline trade-off, throughput vs tok/s/W."""
    theme()
    systems = tables["_systems"].data
    colors = system_colors(systems)
    regimes = settings.regime_objects()
    panels = [(k, x, y) for k, x, y in PARETO_PANELS if k in regimes or k == "tradeoff"]
    ncols = 2
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(15, 6.2 * nrows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_axis_off()
    for ax, (key, xcol, ycol) in zip(axes.flat, panels):
        if key == "tradeoff":
            axes_dirs = {"avg_decode_tps": "max", "tps_per_w": "max"}
            title, requires, floors = "Throughput vs energy efficiency (the paper's headline trade-off)", (), {}
        else:  # membership judged exactly as in the frontier table: every axis, quality floor, eligibility
            axes_dirs = regimes[key].all_axes()
            title, requires, floors = regimes[key].title, regimes[key].requires, regimes[key].floors()
        _pareto_panel(ax, systems, xcol, ycol, axes_dirs, title, colors, requires, floors)
    handles = [Line2D([], [], marker="*", ls="", ms=14, mfc="0.3", mec="black", label="on the regime's frontier"),
               Line2D([], [], marker="o", ls="", ms=8, mfc="white", mec="0.3",
                      label="dominated or not eligible (the note under each panel says by whom or why)"),
               Line2D([], [], marker="D", ls="", ms=8, mfc="0.3", mec="black", label="this run (diamond outline)"),
               Line2D([], [], color="0.2", ls="--", lw=1.2, label="Pareto front of the two plotted axes")]
    fig.legend(handles=handles, loc="lower center", ncol=4, frameon=False, fontsize=9, bbox_to_anchor=(0.5, 0.0))
    fig.suptitle("Deployment frontier: who stays non-dominated in each regime (000 §7)" +
                 ("" if not runs.empty else f" — this run: {NO_RUNS}"), fontsize=14)
    fig.tight_layout(rect=(0, 0.035, 1, 0.97))
    for ax, (key, xcol, ycol) in zip(axes.flat, panels):  # labels last: the layout is final now
        _pareto_labels(ax)
    return fig


def _panel_limits(values: pd.Series, direction: str, has_missing: bool) -> tuple[float, float, float | None,
                                                                               tuple[float, float] | None]:
    """(low, high, where n/a values go, the n/a band) for one axis: finite values with a margin, and when some
    value is missing a band beyond the worst end (low end for 'max' axes, high end for 'min')."""
    finite = values.dropna().astype(float)
    lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
    span = hi - lo or (abs(hi) * 0.5 or 1.0)
    low, high = lo - 0.3 * span, hi + 0.3 * span
    if not has_missing:
        return low, high, None, None
    band = 0.22 * span
    if direction == "max":
        band_range = (low - band, low)
        return low - band, high, low - band / 2, band_range
    band_range = (high, high + band)
    return low, high + band, high + band / 2, band_range


def _pareto_panel(ax: plt.Axes, systems: pd.DataFrame, xcol: str, ycol: str, axes_dirs: Mapping[str, str],
                  title: str, colors: Mapping[str, Any], requires: Sequence[str] = (),
                  floors: Mapping[str, float] | None = None) -> None:
    """Scatter of two regime axes. Systems lacking a value sit in a grey 'n/a' band at that axis' worst end
    (a missing value counts as worst, as in the frontier itself), so every system stays visible."""
    xdir, ydir = axes_dirs.get(xcol, "max"), axes_dirs.get(ycol, "max")
    marked = (frontier.pareto_frontier(systems, axes_dirs, requires=requires, floors=floors) if len(systems)
              else systems.assign(on_frontier=[], dominated_by=[], eligible=[]))
    x = pd.to_numeric(marked[xcol], errors="coerce")
    y = pd.to_numeric(marked[ycol], errors="coerce")
    x0, x1, x_na, x_band = _panel_limits(x, xdir, bool(x.isna().any()))
    y0, y1, y_na, y_band = _panel_limits(y, ydir, bool(y.isna().any()))
    px, py = x.fillna(x_na if x_na is not None else np.nan), y.fillna(y_na if y_na is not None else np.nan)
    _na_bands(ax, xcol, ycol, x_band, y_band)
    _scatter(ax, marked, px, py, colors)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_xlabel(f"{AXIS_LABELS.get(xcol, xcol)}  {'→ better' if xdir == 'max' else '← better'}")
    ax.set_ylabel(f"{AXIS_LABELS.get(ycol, ycol)}  ↑ better" + ("  (axis inverted)" if ydir == "min" else ""))
    ax.set_title(wrap(title, 70), fontsize=11)
    if ycol in ("modality_count",):
        ax.yaxis.get_major_locator().set_params(integer=True)
    if ydir == "min":
        ax.invert_yaxis()
    for band, get, put, limits in ((x_band, ax.get_xticks, ax.set_xticks, (x0, x1)),
                                   (y_band, ax.get_yticks, ax.set_yticks, (y0, y1))):
        if band:  # no numeric tick inside the n/a band: positions there are not values
            put([t for t in get() if not (band[0] - 1e-12 <= t <= band[1] + 1e-12) and limits[0] <= t <= limits[1]])
    if len(marked):  # 2-D Pareto front of the plotted axes (missing = worst), drawn once the limits are final
        eligible = marked["eligible"].astype(bool) if "eligible" in marked else pd.Series(True, index=marked.index)
        front = frontier.pareto_frontier(marked[eligible], {xcol: xdir, ycol: ydir}).reindex(marked.index)
        on = front["on_frontier"].fillna(False).astype(bool).to_numpy()
        if on.any():
            _draw_front(ax, px[on].astype(float).to_numpy(), py[on].astype(float).to_numpy(), xdir, ydir)
    _point_notes(ax, marked, px, py, colors, [a for a in axes_dirs if a not in (xcol, ycol)])


def _na_bands(ax: plt.Axes, xcol: str, ycol: str, x_band: tuple[float, float] | None,
              y_band: tuple[float, float] | None) -> None:
    """The grey 'n/a' band of each axis where some system lacks a value, named."""
    if x_band:
        ax.axvspan(*x_band, color="0.92", zorder=0, lw=0)
        ax.text(sum(x_band) / 2, 0.99, f"n/a:\nno {xcol.replace('_', ' ')}", transform=ax.get_xaxis_transform(),
                ha="center", va="top", fontsize=7, color="0.4", style="italic")
    if y_band:
        ax.axhspan(*y_band, color="0.92", zorder=0, lw=0)
        ax.text(0.99, sum(y_band) / 2, f"n/a: no {ycol.replace('_', ' ')}", transform=ax.get_yaxis_transform(),
                ha="right", va="center", fontsize=7, color="0.4", style="italic")


def _scatter(ax: plt.Axes, marked: pd.DataFrame, px: pd.Series, py: pd.Series, colors: Mapping[str, Any]) -> None:
    """Frontier members as filled stars, the others hollow (our runs as diamonds; ours on the frontier ringed)."""
    for row, xv, yv in zip(marked.itertuples(), px, py):
        ours = row.source == THIS_RUN
        ax.scatter(xv, yv, s=(320 if row.on_frontier else 90),
                   marker=("*" if row.on_frontier else ("D" if ours else "o")),
                   facecolor=(colors.get(row.system, "0.5") if row.on_frontier else "white"),
                   edgecolor=(colors.get(row.system, "0.5") if not row.on_frontier else "black"),
                   linewidth=(2.0 if not row.on_frontier else 0.8), zorder=4)
        if ours and row.on_frontier:
            ax.scatter(xv, yv, s=520, marker="D", facecolor="none", edgecolor=colors.get(row.system, "0.5"),
                       linewidth=1.5, zorder=3)


def _point_notes(ax: plt.Axes, marked: pd.DataFrame, px: pd.Series, py: pd.Series, colors: Mapping[str, Any],
                 extra: Sequence[str]) -> None:
    """Each point's short label, kept on the axes for _pareto_labels (placed once the layout is final), and what
    its label would say beyond its name (the other axes, why it is off the frontier) grouped below the panel."""
    texts, xs, ys, cols, notes = [], [], [], [], {}
    for row, xv, yv in zip(marked.itertuples(), px, py):
        # ours by their one name (model · server · settings · host), the seed's by model
        texts.append(f"{row.system} [this run]" if row.source == THIS_RUN else short(row.system))
        xs.append(float(xv))
        ys.append(float(yv))
        cols.append(colors.get(row.system, "0.2"))
        why = ", ".join(_extra_axis_text(a, getattr(row, a)) for a in extra)
        if not row.on_frontier and str(row.dominated_by).startswith("not eligible"):
            why += ("; " if why else "") + str(row.dominated_by)
        elif not row.on_frontier and row.dominated_by:
            doms = [d.split(" (better on")[0] for d in row.dominated_by.split("; ")]
            why += ("; " if why else "") + "dominated by " + ", ".join(short(d) for d in doms)
        elif row.on_frontier:
            why += ("; " if why else "") + "on the frontier"
        notes.setdefault(why, []).append(texts[-1])
    lines = [wrap(f"• {joined(names, 10_000).replace(chr(10), ', ')}: {why}", 118) for why, names in notes.items()]
    ax.text(0.0, -0.13, "\n".join(lines), transform=ax.transAxes, ha="left", va="top", fontsize=7, color="0.25")
    ax._paper_labels = (xs, ys, texts, cols)  # type: ignore[attr-defined]


def _draw_front(ax: plt.Axes, xs: np.ndarray, ys: np.ndarray, xdir: str, ydir: str) -> None:
    """The attainment boundary of the 2-D front: from the worst x edge along the best-y member, down the
    staircase, to the worst y edge (limits must be final)."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    ox = xs if xdir == "max" else -xs
    oy = ys if ydir == "max" else -ys
    order = np.argsort(ox)
    ox, oy = ox[order], oy[order]
    worst_x = min(x0, x1) if xdir == "max" else -max(x0, x1)
    worst_y = min(y0, y1) if ydir == "max" else -max(y0, y1)
    path = [(worst_x, oy[0]), (ox[0], oy[0])]
    for i in range(1, len(ox)):
        path += [(ox[i - 1], oy[i]), (ox[i], oy[i])]
    path.append((ox[-1], worst_y))
    px = np.array([p[0] for p in path]) * (1 if xdir == "max" else -1)
    py = np.array([p[1] for p in path]) * (1 if ydir == "max" else -1)
    ax.plot(px, py, color="0.2", ls="--", lw=1.2, zorder=2)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)


def _extra_axis_text(axis: str, value: Any) -> str:
    v = number(value)
    if math.isnan(v):
        return f"{axis.replace('_', ' ')} n/a"
    if axis == "context_window_k":
        return f"context {v:.0f}K"
    if axis == "video_support":
        return "video: yes" if v >= 1 else "video: no"
    if axis == "modality_count":
        return f"{v:.0f} modalities"
    return f"{axis.replace('_', ' ')} {fmt(v, AXIS_FORMATS.get(axis, '.3g'))}"


def _pareto_labels(ax: plt.Axes) -> None:
    xs, ys, texts, cols = getattr(ax, "_paper_labels", ([], [], [], []))
    if texts:
        place_labels(ax, xs, ys, texts, cols, fontsize=8)
