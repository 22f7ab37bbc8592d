"""What the load notebook shows: throughput/latency and prompt-length figures, level tables and the
client-health table.

Imports: benchlib.load.levels, .health."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from benchlib.load.health import HEALTH_COLUMNS
from benchlib.load.levels import flag_column, numeric_column


def plot_concurrency(levels: pd.DataFrame, out_dir: Path | None = None, title: str = "") -> Any:
    """Throughput vs latency per level (the knee marked), and TTFT / e2e percentiles vs concurrency."""
    data = levels[numeric_column(levels, "n_ok").fillna(0) > 0].sort_values("concurrency")
    if data.empty:
        return None
    sns.set_theme(style="whitegrid", context="notebook")
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.6))
    ax = axes[0]
    sns.lineplot(data=data, x="e2e_s_p50", y="throughput_tps", marker="o", ax=ax, color="#4C72B0", sort=False)
    for _, row in data.iterrows():
        label = f"{int(row['concurrency'])}" + (" (knee)" if flag_column(pd.Series([row.get("knee")])).iloc[0] else "") \
            + (" (client-bound)" if flag_column(pd.Series([row.get("client_bound")])).iloc[0] else "")
        ax.annotate(label, (row["e2e_s_p50"], row["throughput_tps"]), textcoords="offset points", xytext=(6, 6),
                    fontsize=9)
    knee = data[flag_column(data["knee"])] if "knee" in data else data.iloc[0:0]
    if len(knee):
        ax.scatter(knee["e2e_s_p50"], knee["throughput_tps"], s=180, facecolors="none", edgecolors="#C44E52",
                   linewidths=2, zorder=5, label="saturation knee")
        ax.legend(loc="best")
    ax.set(title="Throughput vs latency (labels: requests in flight)", xlabel="e2e latency p50 (s)",
           ylabel="aggregate output (tokens / s)")
    ax.set_ylim(bottom=0, top=float(data["throughput_tps"].max()) * 1.15)
    ax.set_xlim(left=0, right=float(data["e2e_s_p50"].max()) * 1.15)
    long = data.melt(id_vars="concurrency", value_vars=["ttft_s_p50", "ttft_s_p99", "e2e_s_p50"],
                     var_name="metric", value_name="seconds")
    long["metric"] = long["metric"].map({"ttft_s_p50": "TTFT p50", "ttft_s_p99": "TTFT p99", "e2e_s_p50": "e2e p50"})
    sns.lineplot(data=long, x="concurrency", y="seconds", hue="metric", marker="o", ax=axes[1])
    axes[1].set_xscale("log", base=2)
    axes[1].set_xticks(list(data["concurrency"]))
    axes[1].set_xticklabels([str(int(c)) for c in data["concurrency"]])
    axes[1].set(title="Latency vs concurrency", xlabel="requests in flight", ylabel="seconds")
    axes[1].set_ylim(bottom=0)
    fig.suptitle(title or "Concurrency sweep", fontweight="bold")
    fig.tight_layout()
    if out_dir is not None:
        fig.savefig(Path(out_dir) / "load_concurrency.png", dpi=120)
    return fig


def plot_context(levels: pd.DataFrame, out_dir: Path | None = None, title: str = "") -> Any:
    """TTFT and prefill tok/s vs prompt length (server-counted tokens where reported, else the target)."""
    data = levels[numeric_column(levels, "n_ok").fillna(0) > 0].copy()
    if data.empty:
        return None
    data["tokens"] = numeric_column(data, "prompt_tokens").fillna(numeric_column(data, "target_tokens"))
    data["ttft_ms"] = numeric_column(data, "ttft_s_p50") * 1000
    sns.set_theme(style="whitegrid", context="notebook")
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.4))
    sns.lineplot(data=data, x="tokens", y="ttft_ms", marker="o", ax=axes[0], color="#DD8452")
    axes[0].set(title="Time to first token vs prompt length", xlabel="prompt tokens (server-counted)",
                ylabel="TTFT p50 (ms)")
    sns.lineplot(data=data, x="tokens", y="prefill_tps", marker="o", ax=axes[1], color="#55A868")
    axes[1].set(title="Prefill speed vs prompt length", xlabel="prompt tokens (server-counted)",
                ylabel="prompt tokens / TTFT (tokens / s)")
    for ax in axes:
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
    fig.suptitle(title or "Context sweep", fontweight="bold")
    fig.tight_layout()
    if out_dir is not None:
        fig.savefig(Path(out_dir) / "load_context.png", dpi=120)
    return fig


def health_table(concurrency: pd.DataFrame, context: pd.DataFrame) -> pd.DataFrame:
    """Client self-check of every level, both sweeps."""
    parts = []
    if len(concurrency):
        parts.append(concurrency.assign(sweep="concurrency", level=concurrency["concurrency"].astype(int)))
    if len(context):
        parts.append(context.assign(sweep="context", level=context["target_tokens"].astype(int)))
    if not parts:
        return pd.DataFrame(columns=["sweep", "level"] + HEALTH_COLUMNS)
    frame = pd.concat(parts, ignore_index=True)
    return frame[["sweep", "level"] + [c for c in HEALTH_COLUMNS if c in frame]].round(3)


def fmt(value: Any, spec: str = ".0f") -> str:
    return format(value, spec) if isinstance(value, (int, float)) and not math.isnan(value) else "–"


def concurrency_table(levels: pd.DataFrame) -> pd.DataFrame:
    """The per-level columns a reader scans first."""
    columns = ["concurrency", "n_requests", "n_ok", "n_failed", "throughput_tps", "decode_tps_p50", "ttft_s_p50",
               "ttft_s_p99", "e2e_s_p50", "e2e_s_p99", "throughput_gain", "latency_growth", "knee", "saturated",
               "client_bound"]
    return levels[[c for c in columns if c in levels]].round(3)


def context_table(levels: pd.DataFrame) -> pd.DataFrame:
    """Target vs server-counted prompt length, TTFT and prefill speed per length."""
    columns = ["target_tokens", "prompt_tokens", "token_error", "exact", "method", "n_ok", "n_failed", "ttft_s_p50",
               "prefill_tps", "server_prefill_tps", "client_bound", "note"]
    return levels[[c for c in columns if c in levels]].round(3)
