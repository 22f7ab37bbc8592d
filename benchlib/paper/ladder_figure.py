"""The ladder figure: the bandwidth law on our quantization ladder beside 004's published ladder.

Left: decode tok/s against GB read per token (log-log), each rung with its 95 % interval and its type as label;
per ladder the fitted law (effective bandwidth ÷ GB/token, dashed) and the bandwidth ceiling (solid). Right: accuracy
against file size for the rungs where accuracy is that precision's own, with Wilson intervals."""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from benchlib.config.formatting import is_missing
from benchlib.paper.format import Table
from benchlib.paper.style import no_runs_note, theme


def fig_ladder(tables: Mapping[str, Table]) -> plt.Figure | None:
    if "ladder" not in tables:
        return None
    theme()
    points, laws = tables["ladder"].data, tables["ladder_law"].data
    published = tables["roofline"].data
    published = published[published["source"].astype(str).str.startswith("004")]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(15, 6.6), gridspec_kw={"width_ratios": [1.6, 1]})
    palette = sns.color_palette("colorblind", 6)
    groups = [(f"{host} (ours)", mine["read_per_token_gb"], mine["decode_tps"], mine["decode_tps_lo"],
               mine["decode_tps_hi"], mine["qtype"], mine["read_gbs"].iloc[0], "measured read")
              for host, mine in points.groupby("host", sort=False)]
    if len(published):
        groups.append((f"{published['host'].iloc[0]} (004, published)", published["bytes_per_token_gb"],
                       published["decode_tps"], None, None, published["quantization"].str.split(" ").str[0],
                       float(published["memory_bandwidth_gbs"].iloc[0]), "vendor"))
    all_x = pd.concat([g[1] for g in groups]).astype(float)
    grid = np.geomspace(float(all_x.min()) / 1.6, float(all_x.max()) * 1.6, 50)
    for i, (name, gb, tps, lo, hi, labels, ceiling_bw, bw_kind) in enumerate(groups):
        color = palette[i % len(palette)]
        gb, tps = gb.astype(float).to_numpy(), tps.astype(float).to_numpy()
        if lo is not None:
            err = np.vstack([tps - lo.astype(float).to_numpy(), hi.astype(float).to_numpy() - tps])
            ax.errorbar(gb, tps, yerr=np.nan_to_num(err), fmt="o", color=color, ecolor=color, capsize=3, ms=7,
                        mec="black", zorder=4, label=f"{name}: decode tok/s, 95 % CI")
        else:
            ax.scatter(gb, tps, marker="s", s=60, color=color, edgecolor="black", zorder=4,
                       label=f"{name}: decode tok/s")
        law = laws.iloc[i] if i < len(laws) else None
        if law is not None and not is_missing(law["beff_gbs"]):
            ax.plot(grid, law["beff_gbs"] / grid, ls="--", color=color, lw=1.3,
                    label=f"{name}: the law (slope −1) at {law['beff_gbs']:.1f} GB/s effective; "
                          f"free fit slope {law['slope']:.2f}")
        if not is_missing(ceiling_bw):
            ax.plot(grid, ceiling_bw / grid, ls="-", color=color, lw=1, alpha=0.6,
                    label=f"{name}: ceiling at {ceiling_bw:.0f} GB/s ({bw_kind})")
        order = np.argsort(gb)
        names = [str(v) for v in labels]
        stacked = {True: 0, False: 0}  # labels of a tight cluster step further out, one line each
        for rank, j in enumerate(order):  # neighbours alternate: above-right and below-left, each with a leader
            above = rank % 2 == 0
            close = rank > 1 and gb[order[rank - 2]] * 1.15 > gb[j]
            stacked[above] = stacked[above] + 1 if close else 0
            step = 16 * stacked[above]
            ax.annotate(names[j], (gb[j], tps[j]), textcoords="offset points",
                        xytext=(6, 14 + step) if above else (-6, -18 - step),
                        ha="left" if above else "right", fontsize=8, color=color,
                        arrowprops={"arrowstyle": "-", "color": color, "lw": 0.6})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [t for t in (0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50) if grid[0] <= t <= grid[-1]]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlabel("GB read per generated token (log scale)")
    ax.set_ylabel("decode throughput (tok/s, log scale)")
    ax.set_title("The bandwidth law: tok/s = bandwidth ÷ GB read per token", fontsize=12)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1, fontsize=8, frameon=False)
    _accuracy_panel(bx, points)
    fig.tight_layout()
    return fig


def _accuracy_panel(ax: plt.Axes, points: pd.DataFrame) -> None:
    own = points[(points["derived_from"] == "") & points["accuracy"].notna()]
    if own.empty:
        ax.set_axis_off()
        no_runs_note(ax, "no rung with scored requests", "center")
        return
    for (host, mine), color in zip(own.groupby("host", sort=False), sns.color_palette("colorblind", 6)):
        size = mine["size_bytes"].astype(float) / 1e6
        acc = mine["accuracy"].astype(float)
        err = np.vstack([acc - mine["accuracy_lo"].astype(float), mine["accuracy_hi"].astype(float) - acc])
        ax.errorbar(size, acc, yerr=err, fmt="o-", color=color, capsize=3, mec="black", label=f"{host} (ours)")
        for x, y, q, n in zip(size, acc, mine["qtype"], mine["n_scored"]):
            ax.annotate(f"{q} (n={n})", (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8, color=color)
    ax.set_ylim(-0.02, 1.02)
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0%}"))
    ax.set(xlabel="model file (MB)", ylabel="accuracy (scored requests, Wilson 95 % CI)",
           title="What quantizing costs: accuracy against size\n(rungs at or below the source precision)")
    ax.legend(fontsize=8, frameon=False)
