"""The figures that go with the seeds' own tables: 002's bandwidth law fitted per model, and power & thermal (the
published idle, inference and peak power against each platform's envelope, beside our runs' telemetry time
series with their task windows)."""

from __future__ import annotations

import math
from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from benchlib.paper.format import Table
from benchlib.paper.labels import place_labels
from benchlib.paper.runs import Runs, first_telemetry
from benchlib.paper.settings import THIS_RUN
from benchlib.paper.style import no_runs_note, theme, wrap


def fig_bandwidth_law(tables: Mapping[str, Table]) -> plt.Figure | None:
    """002's points per model on linear axes, the fitted k·GB/s line of each model, the outlier ringed."""
    if "bandwidth_law" not in tables:
        return None
    theme()
    law = tables["bandwidth_law"].data
    fig, ax = plt.subplots(figsize=(9, 6))
    colors = dict(zip(law["model"].unique(), sns.color_palette("deep", law["model"].nunique())))
    grid = np.linspace(0, float(law["memory_bandwidth_gbs"].max()) * 1.15, 20)
    xs, ys, texts, cols = [], [], [], []
    for model, group in law.groupby("model", sort=False):
        k = float(group["k_tps_per_gbs"].iloc[0])
        ax.plot(grid, k * grid, color=colors[model], lw=1.2, ls="--",
                label=f"{model}: tok/s = {k:.3f} × GB/s (1/k = {1 / k:.1f} GB/token; log-log slope "
                      f"{group['loglog_slope'].iloc[0]:.2f}, {group['loglog_slope_without_outlier'].iloc[0]:.2f} "
                      "without the outlier)")
        ax.scatter(group["memory_bandwidth_gbs"], group["decode_tps"], s=70, color=colors[model], edgecolor="black",
                   zorder=4)
        out = group[group["outlier"]]
        ax.scatter(out["memory_bandwidth_gbs"], out["decode_tps"], s=260, facecolor="none", edgecolor="crimson",
                   lw=1.5, zorder=3)
        for row in group.itertuples():
            xs.append(row.memory_bandwidth_gbs)
            ys.append(row.decode_tps)
            texts.append(f"{row.host} ({row.ratio:.3f} tok/s per GB/s)" + (" outlier" if row.outlier else ""))
            cols.append(colors[model])
    ax.set(xlim=(0, grid[-1]), ylim=(0, float(law["decode_tps"].max()) * 1.25),
           xlabel="memory bandwidth (GB/s)", ylabel="decode throughput (tok/s)",
           title="002's bandwidth law: decode tok/s against memory bandwidth (Ollama, 3 machines)")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    fig.tight_layout()
    place_labels(ax, xs, ys, texts, cols, fontsize=8)
    return fig


def fig_power_thermal(tables: Mapping[str, Table], runs: Runs) -> plt.Figure:
    """Left: each published platform's idle, average and peak inference power against its envelope (the seed's
    cells; idle not subtracted anywhere). Right: our first run's telemetry over time — power where a sensor
    reads it, else CPU utilisation — with its idle, loaded and task windows shaded."""
    theme()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(16, 6), gridspec_kw={"width_ratios": [1, 1.4]})
    systems = tables["_systems"].data
    platform = tables["platform"].data.set_index("host") if len(tables["platform"].data) else pd.DataFrame()
    rows = []
    for row in systems[systems["source"] != THIS_RUN].itertuples():
        host = row.host
        idle = platform["idle_power_w"].get(host, math.nan) if len(platform) else math.nan
        tdp = platform["tdp_w"].get(host, math.nan) if len(platform) else math.nan
        for kind, value in (("idle", idle), ("average inference", row.avg_power_w), ("peak in run", row.peak_power_w),
                            ("envelope (TDP)", tdp)):
            rows.append({"system": f"{row.model}\n{host}", "kind": kind, "W": value})
    data = pd.DataFrame(rows).dropna(subset=["W"]) if rows else pd.DataFrame(columns=["system", "kind", "W"])
    if len(data):
        sns.barplot(data=data, x="system", y="W", hue="kind", ax=ax, palette="muted")
        for bar in ax.patches:
            if bar.get_height() > 0:
                ax.annotate(f"{bar.get_height():.0f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7)
        ax.set(ylabel="power (W)", xlabel="", title="Published power (000 §3, §6): n = 1 run each, no interval")
        ax.set_ylim(0, None)
        ax.legend(fontsize=8, frameon=False)
        ax.text(0, -0.2, wrap("Scopes differ: RTX 3090 = GPU board draw, GB10 = the GPU reading of a ~140 W SoC "
                              "system; idle is not subtracted in the paper's tok/s per W.", 95),
                transform=ax.transAxes, fontsize=8, va="top", color="0.3")
    else:
        ax.set_axis_off()
        no_runs_note(ax, "no published power figures loaded", "center")
    _telemetry_panel(bx, runs)
    fig.tight_layout()
    return fig


def _telemetry_panel(ax: plt.Axes, runs: Runs) -> None:
    telemetry, windows, label = first_telemetry(runs)
    if telemetry is None:
        ax.set_axis_off()
        no_runs_note(ax, "this run: no telemetry recorded yet (make run)", "center")
        return
    t0 = float(telemetry["t_ns"].min())
    t = (telemetry["t_ns"] - t0) / 1e9
    power = pd.to_numeric(telemetry.get("power_w", pd.Series(dtype=float)), errors="coerce")
    if power.notna().any():
        series, ylabel = power, "GPU power (W, NVML)"
    else:
        series, ylabel = pd.to_numeric(telemetry.get("cpu_percent", pd.Series(dtype=float)), errors="coerce"), \
            "CPU utilisation (%): no power sensor on this host"
    ax.plot(t, series, color="0.2", lw=1)
    temp = pd.to_numeric(telemetry.get("temp_c", pd.Series(dtype=float)), errors="coerce")
    if temp.notna().any():
        tx = ax.twinx()
        tx.plot(t, temp, color="crimson", lw=1, alpha=0.7)
        tx.set_ylabel("GPU temperature (°C)", color="crimson")
    shades = {"idle": "0.85", "loaded": "#cfe2f3", "task": "#fce5cd"}
    for row in windows.itertuples():
        start, end = (row.t_start_ns - t0) / 1e9, (row.t_end_ns - t0) / 1e9
        ax.axvspan(start, end, color=shades.get(row.kind, "#eeeeee"), alpha=0.6, lw=0, zorder=0)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c, alpha=0.6) for c in shades.values()]
    ax.legend(handles, [f"{k} window" for k in shades], fontsize=8, loc="upper right", frameon=False)
    ax.set(xlabel="time since the run started (s)", ylabel=ylabel, title=wrap(f"Our telemetry: {label}", 70))
    ax.set_ylim(0, None)
