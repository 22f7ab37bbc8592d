"""The one telemetry plot: a suite's sampled series over time with its measurement windows shaded, and —
when a request is given — that request's span shaded strongly with a zoom column beside it.

Suite notebooks call it without a request (report.plot_telemetry); the explorer calls it with the selected
request. Series are drawn only where the run recorded them (GPU power, host CPU, server RSS, GPU memory,
GPU temperature); a run without telemetry gets a one-line figure saying so.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from benchlib.measure.telemetry import TELEMETRY_CSV, WINDOWS_CSV, read_telemetry, read_windows
from benchlib.records import run_folder
from benchlib.records.schema import number

SERIES = [("power_w", "GPU power (W)", 1.0), ("cpu_percent", "host CPU (%)", 1.0),
          ("server_rss_bytes", "server RSS (GB)", 1e-9), ("mem_used_bytes", "GPU memory (GB)", 1e-9),
          ("temp_c", "GPU temperature (°C)", 1.0)]
FIGURE_NAME = "telemetry.png"


def suite_windows(path: str | Path) -> pd.DataFrame:
    """The run folder's measurement windows (windows.csv, else the sampler's telemetry_windows.csv)."""
    folder = Path(path)
    for name in (run_folder.WINDOWS_CSV, WINDOWS_CSV):
        frame = read_windows(folder / name)
        if len(frame):
            return frame.dropna(subset=["t_start_ns", "t_end_ns"])
    return read_windows(folder / run_folder.WINDOWS_CSV)


def request_span(row: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """(start_ns, end_ns) on the telemetry clock (perf_counter_ns), None when no request went out."""
    if not row:
        return None
    start, e2e = number(row.get("start_ns")), number(row.get("e2e_s"))
    if math.isnan(start) or start <= 0:
        return None
    return int(start), int(start + (0 if math.isnan(e2e) else e2e) * 1e9)


def _empty(text: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(11, 1.6))
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, style="italic", color="0.35")
    return fig


def telemetry_figure(path: str | Path, row: Mapping[str, Any] | None = None, zoom_margin_s: float = 3.0,
                     save: bool = False) -> plt.Figure:
    """Telemetry of one run folder (one panel per recorded series), windows shaded and named; with `row`,
    that request's span (start_ns … start_ns + e2e_s) shaded strongly, its first token dashed, and a zoom
    column. save=True writes telemetry.png into the folder."""
    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.9)
    telemetry = read_telemetry(Path(path) / TELEMETRY_CSV)
    series = [(c, label, scale) for c, label, scale in SERIES
              if c in telemetry and pd.to_numeric(telemetry[c], errors="coerce").notna().any()]
    span = request_span(row)
    if telemetry.empty or not series:
        reason = "no telemetry.csv in this run folder" if telemetry.empty else "telemetry has no usable series"
        suffix = "" if row is None or span else "; no request was sent, so there is no span to show"
        return _empty(f"Telemetry: {reason}{suffix}")
    t_ns = pd.to_numeric(telemetry["t_ns"], errors="coerce")
    t0 = int(t_ns.min())
    telemetry = telemetry.assign(t_s=(t_ns - t0) / 1e9)
    windows = suite_windows(path)
    columns = 2 if span else 1
    fig, axes = plt.subplots(len(series), columns, figsize=(13 if span else 12, 2.3 * len(series) + 0.8),
                             squeeze=False, gridspec_kw={"width_ratios": [2.2, 1][:columns]}, sharex="col")
    color = sns.color_palette("dark")[3]
    for r, (column, label, scale) in enumerate(series):
        data = telemetry.assign(value=pd.to_numeric(telemetry[column], errors="coerce") * scale)
        data = data.dropna(subset=["value"])
        hue = "gpu" if "gpu" in data and data["gpu"].nunique() > 1 else None
        for c, ax in enumerate(axes[r]):
            sns.lineplot(data=data, x="t_s", y="value", hue=hue, ax=ax, linewidth=1.0,
                         **({} if hue else {"color": "0.25"}))
            ax.set(ylabel=label if c == 0 else "", xlabel="")
            if c == 0:
                for i, (_, win) in enumerate(windows.iterrows()):
                    a, b = (float(win["t_start_ns"]) - t0) / 1e9, (float(win["t_end_ns"]) - t0) / 1e9
                    ax.axvspan(a, b, color=("0.86" if i % 2 else "0.93"), zorder=0, lw=0)
                    if r == 0:
                        ax.text((a + b) / 2, 1.01, str(win["window"]), transform=ax.get_xaxis_transform(),
                                ha="center", va="bottom", fontsize=7, color="0.4", rotation=25)
            if span:
                a, b = (span[0] - t0) / 1e9, (span[1] - t0) / 1e9
                ax.axvspan(a, max(b, a + 0.02), color=color, alpha=0.3, lw=0, zorder=1)
                ttft = number(row.get("ttft_s"))
                if not math.isnan(ttft):
                    ax.axvline(a + ttft, color=color, lw=1, ls="--")
                if c == 1:
                    ax.set_xlim(a - zoom_margin_s, b + zoom_margin_s)
    axes[-1, 0].set_xlabel("seconds since the suite's telemetry started")
    if span:
        axes[-1, 1].set_xlabel("zoom on this request (±%g s)" % zoom_margin_s)
        title = (f"Telemetry with this request shaded ({row.get('task')} · {row.get('label', row.get('variant'))}); "
                 "dashed = first token; grey = measurement windows")
    elif row is not None:
        title = "Telemetry — no request was sent for this row, so there is no span to show"
    else:
        title = "Telemetry with the measurement windows shaded (idle, loaded, one per task)"
    fig.suptitle(title, fontsize=11, fontweight="bold")
    fig.tight_layout()
    if save:
        fig.savefig(Path(path) / FIGURE_NAME, dpi=120, bbox_inches="tight")
    return fig
