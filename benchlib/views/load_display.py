"""What the load notebook shows: throughput/latency, prompt-length and rate-sweep figures, level tables and
the client-health table."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from benchlib.analysis.load_levels import CONCURRENCY_COLUMNS, CONTEXT_COLUMNS, flag_column
from benchlib.analysis.serving import RATE_COLUMNS, max_slo_rate
from benchlib.config.formatting import bounded_column, is_missing, quantity
from benchlib.measure.selfcheck.client_health import HEALTH_COLUMNS
from benchlib.records.schema import numeric_column


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


def health_table(concurrency: pd.DataFrame, context: pd.DataFrame, rate: pd.DataFrame | None = None) -> pd.DataFrame:
    """Client self-check of every level of every sweep (the rate sweep's with its schedule lag)."""
    parts = []
    if len(concurrency):
        parts.append(concurrency.assign(sweep="concurrency", level=concurrency["concurrency"].astype(int).astype(str)))
    if len(context):
        parts.append(context.assign(sweep="context", level=context["target_tokens"].astype(int).astype(str)))
    if rate is not None and len(rate):
        parts.append(rate.assign(sweep="rate", level=rate["level"].astype(str)))
    if not parts:
        return pd.DataFrame(columns=["sweep", "level"] + HEALTH_COLUMNS)
    frame = pd.concat(parts, ignore_index=True)
    lag = [c for c in ("schedule_lag_p50_ms", "schedule_lag_p99_ms", "schedule_lag_max_ms") if c in frame]
    return frame[["sweep", "level"] + [c for c in HEALTH_COLUMNS if c in frame] + lag].round(3)


# the sweeps' columns whose interval lies in <column>_lo / _hi (their percentiles): shown 'value [lo–hi]'
BOUNDED = frozenset(c for columns in (CONCURRENCY_COLUMNS, CONTEXT_COLUMNS, RATE_COLUMNS) for c in columns
                    if f"{c}_lo" in columns)


def level_table(levels: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The levels' `columns` (those present) rounded to 3 decimals, each percentile with its interval (BOUNDED)."""
    table = levels[[c for c in columns if c in levels]].round(3)
    for column in table.columns:
        if column in BOUNDED:
            table[column] = bounded_column(levels, column)
    return table


def concurrency_table(levels: pd.DataFrame) -> pd.DataFrame:
    """The per-level columns a reader scans first."""
    columns = ["concurrency", "n_requests", "n_ok", "n_failed", "throughput_tps", "decode_tps_p50", "ttft_s_p50",
               "ttft_s_p99", "e2e_s_p50", "e2e_s_p99", "throughput_gain", "latency_growth", "knee", "saturated",
               "client_bound"]
    return level_table(levels, columns)


def context_table(levels: pd.DataFrame) -> pd.DataFrame:
    """Target vs server-counted prompt length, TTFT and prefill speed per length."""
    columns = ["target_tokens", "prompt_tokens", "token_error", "exact", "method", "n_ok", "n_failed", "ttft_s_p50",
               "prefill_tps", "server_prefill_tps", "client_bound", "note"]
    return level_table(levels, columns)


# ---- rate sweep ---------------------------------------------------------------------------------------------
RATE_TABLE_COLUMNS = ["level", "mode", "offered_rps", "n_requests", "n_window", "window_s", "sent_rps", "achieved_rps",
                      "throughput_tps", "ttft_s_p50", "ttft_s_p99", "tpot_s_p50", "itl_s_p99", "e2e_s_p50",
                      "slo_met_share", "goodput_rps", "meets_slo", "schedule_lag_p99_ms", "schedule_lag_max_ms",
                      "prompt_tokens_mean", "prompt_exact_share", "cached_tokens_mean", "tokens_per_joule",
                      "client_bound", "resumed"]


def rate_table(levels: pd.DataFrame) -> pd.DataFrame:
    """The rate sweep's levels: offered vs achieved, latency, goodput, scheduling accuracy."""
    return level_table(levels, RATE_TABLE_COLUMNS)


def slo_line(levels: pd.DataFrame) -> str:
    """One line naming the highest rate that meets the SLOs (or that none does) and the best goodput."""
    if levels is None or levels.empty:
        return "rate sweep: not run (sweep.rate.enabled is false, or no level finished)"
    rate, level = max_slo_rate(levels)
    slos = str(levels["slos"].iloc[0]) if "slos" in levels else ""
    best = numeric_column(levels, "goodput_rps")
    good = f"; best goodput {quantity(best.max(), '.2f', 'req/s')}" if best.notna().any() else ""
    if is_missing(rate):
        return f"no level met the SLOs ({slos}){good}"
    return f"highest rate meeting the SLOs ({slos}): {quantity(rate, '.2f', 'req/s')} (level {level}){good}"


CLOSED_LOOP = ("synchronous", "throughput")


def rate_series(ax: Any, data: pd.DataFrame, column: str, color: str, label: str, scale: float = 1.0,
                style: str = "-") -> None:
    """One figure of the rate sweep against rate: open-loop levels joined by a line, the closed-loop levels
    (synchronous, throughput) as hollow squares beside it (they have no offered rate, only an achieved one)."""
    values = numeric_column(data, column) * scale
    closed = data["mode"].isin(CLOSED_LOOP) if "mode" in data else pd.Series(False, index=data.index)
    open_ = data[~closed & values.notna()]
    if len(open_):
        sns.lineplot(x=open_["rate_rps"], y=values[open_.index], ax=ax, color=color, marker="o", linestyle=style,
                     label=label, sort=True)
    shut = data[closed & values.notna()]
    if len(shut):
        ax.scatter(shut["rate_rps"], values[shut.index], marker="s", s=60, facecolors="none", edgecolors=color,
                   linewidths=1.5, label=None if len(open_) else label, zorder=4)


def plot_rate(levels: pd.DataFrame, out_dir: Path | None = None, title: str = "") -> Any:
    """Offered rate against achieved rate and goodput, output throughput, latency percentiles and tokens per
    joule; open-loop levels as lines, closed-loop ones (sync, throughput) as hollow squares; the highest
    SLO-meeting rate dashed, SLO limits dotted on the latency panel."""
    data = levels[numeric_column(levels, "n_ok").fillna(0) > 0].copy()
    data = data[numeric_column(data, "rate_rps").notna()].sort_values("rate_rps")
    if data.empty:
        return None
    sns.set_theme(style="whitegrid", context="notebook")
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    best, _ = max_slo_rate(data)
    top = float(max(numeric_column(data, "rate_rps").max(), numeric_column(data, "achieved_rps").max())) * 1.15
    ax = axes[0, 0]
    ax.plot([0, top], [0, top], color="#999999", linestyle=":", linewidth=1, label="achieved = offered")
    rate_series(ax, data, "achieved_rps", "#4C72B0", "achieved (completed)")
    rate_series(ax, data, "goodput_rps", "#55A868", "goodput (met the SLOs)", style="--")
    for _, row in data.iterrows():
        ax.annotate(str(row["level"]), (row["rate_rps"], row["achieved_rps"]), textcoords="offset points",
                    xytext=(6, 4), fontsize=8)
    ax.set(title="Offered vs achieved request rate", xlabel="offered rate (req/s; □ closed loop: achieved)",
           ylabel="requests / s", xlim=(0, top), ylim=(0, top))
    ax = axes[0, 1]
    rate_series(ax, data, "throughput_tps", "#4C72B0", "output throughput")
    rate_series(ax, data, "goodput_tps", "#55A868", "goodput", style="--")
    ax.set(title="Output tokens / s in the steady-state window", xlabel="offered rate (req/s)",
           ylabel="tokens / s", xlim=(0, top), ylim=(0, None))
    ax.legend(loc="lower right", fontsize=8)
    plot_rate_latency(axes[1, 0], data, top)
    energy = plot_rate_energy(axes[1, 1], data, top)
    if best == best:
        for ax in list(axes.flat)[:3] + ([axes[1, 1]] if energy else []):
            ax.axvline(best, color="#C44E52", linestyle="--", linewidth=1,
                       label=f"highest rate meeting the SLOs: {best:.2f} req/s" if ax is axes[0, 0] else None)
    axes[0, 0].legend(loc="upper left", fontsize=8)
    n = ", ".join(f"{r['level']} n={int(r['n_window'])}" for _, r in data.iterrows())
    fig.suptitle((title or "Rate sweep") + f"\nrequests in each level's steady-state window: {n}",
                 fontweight="bold", fontsize=11)
    fig.tight_layout()
    if out_dir is not None:
        fig.savefig(Path(out_dir) / "load_rate.png", dpi=120)
    return fig


LATENCY_SERIES = {"ttft_s": ("TTFT", "#DD8452", "ttft_ms"), "tpot_s": ("TPOT", "#4C72B0", "tpot_ms"),
                  "itl_s": ("ITL", "#8172B3", "itl_ms")}


def plot_rate_latency(ax: Any, data: pd.DataFrame, top: float) -> None:
    """TTFT, TPOT and ITL p50 (solid) and p99 (dashed; from 100 samples) against rate, SLOs dotted."""
    slo_limits = slo_limits_of(data)
    for metric, (name, color, slo) in LATENCY_SERIES.items():
        for q, style in (("p50", "-"), ("p99", "--")):
            if numeric_column(data, f"{metric}_{q}").notna().any():
                rate_series(ax, data, f"{metric}_{q}", color, f"{name} {q}", scale=1000, style=style)
        if slo in slo_limits:
            ax.axhline(slo_limits[slo], color=color, linestyle=":", linewidth=1.2)
            ax.annotate(f"{name} SLO {slo_limits[slo]:g} ms", (top, slo_limits[slo]), xytext=(-4, 3),
                        textcoords="offset points", fontsize=8, color=color, ha="right")
    ax.set_yscale("log")
    ax.set(title="Latency percentiles (dotted: SLOs)", xlabel="offered rate (req/s)", ylabel="ms (log scale)",
           xlim=(0, top))
    ax.legend(loc="upper left", fontsize=8, ncol=2)


def slo_limits_of(data: pd.DataFrame) -> dict[str, float]:
    """The SLO limits (ms) written in the levels' `slos` text."""
    text = str(data["slos"].iloc[0]) if "slos" in data and len(data) else ""
    found = re.findall(r"(ttft|tpot|itl|e2e) ≤ ([0-9.]+) ms", text)
    return {f"{name}_ms": float(value) for name, value in found}


def plot_rate_energy(ax: Any, data: pd.DataFrame, top: float) -> bool:
    """Tokens per joule against offered rate, or why there is none; True when drawn."""
    if numeric_column(data, "tokens_per_joule").notna().any():
        rate_series(ax, data, "tokens_per_joule", "#937860", "tokens per joule")
        ax.set(title="Energy efficiency per level", xlabel="offered rate (req/s)", ylabel="tokens / joule",
               xlim=(0, top), ylim=(0, None))
        return True
    reason = str(data["energy_reason"].dropna().iloc[0]) if "energy_reason" in data and \
        data["energy_reason"].notna().any() else "not measured"
    ax.text(0.5, 0.5, "tokens per joule: no energy reading\n" + "\n".join(textwrap.wrap(reason, 50)),
            ha="center", va="center", transform=ax.transAxes, fontsize=9, color="#555555")
    ax.set(title="Energy efficiency per level", xticks=[], yticks=[])
    return False


# ---- workloads (multi-turn, shared prefix, trace replay) -----------------------------------------------------
WORKLOAD_TABLE_COLUMNS = ["workload", "level", "n_requests", "n_ok", "n_failed", "span_s", "throughput_tps",
                          "ttft_s_p50", "ttft_s_p99", "itl_s_p50", "e2e_s_p50", "goodput_rps", "cache_hit_share",
                          "server_cache_hit_share", "trace_reuse_share", "ttft_first_s_p50", "ttft_later_s_p50",
                          "send_late_p99_ms", "tokens_per_joule", "client_bound", "resumed"]


def workloads_table(levels: pd.DataFrame) -> pd.DataFrame | str:
    """One row per workload that ran (benchlib.suites.load.workloads); a line saying none did otherwise."""
    if levels is None or levels.empty:
        return "workloads: none run (sweep.workloads: multiturn, shared_prefix and trace are off unless enabled)"
    return levels[[c for c in WORKLOAD_TABLE_COLUMNS if c in levels]].round(3)


def turns_line(turns: pd.DataFrame) -> str:
    """The multi-turn workload's first turn against the later ones, in one line ('' when it did not run)."""
    if turns is None or turns.empty or "later" not in set(turns["turn"].astype(str)):
        return ""
    rows = turns.set_index(turns["turn"].astype(str))
    first, later = rows.loc["1"], rows.loc["later"]

    def median(row: Any) -> str:
        interval = "" if is_missing(row["ttft_s_low"]) else \
            f" [{row['ttft_s_low'] * 1e3:.1f}, {row['ttft_s_high'] * 1e3:.1f}]"
        return f"{quantity(row['ttft_s_median'] * 1e3, '.1f', 'ms')}{interval} (n={int(row['n'])})"
    share = "" if is_missing(later["cached_share"]) else f"; later turns' cached share {later['cached_share']:.0%}"
    return f"TTFT median, turn 1: {median(first)}; later turns: {median(later)}{share}"
