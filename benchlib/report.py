"""Tables and seaborn figures the suite notebooks show; logic stays here, notebooks only call it."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg") if matplotlib.get_backend().lower() == "agg" else None
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from benchlib.records import STATUS_OK  # noqa: E402

SUMMARY_COLUMNS = ["task", "modality", "n_ok", "n_failed", "n_unsupported", "n_truncated", "valid",
                   "decode_tps_mean", "decode_tps_sd", "ttft_s_p50", "e2e_s_p50", "prefill_tps_mean", "accuracy",
                   "energy_j", "avg_power_w", "tokens_per_joule", "tps_per_w", "note"]


def summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The per-task summary, trimmed to the columns a reader scans first."""
    columns = [c for c in SUMMARY_COLUMNS if c in summary.columns]
    return summary[columns].round(3)


def console_table(summary: pd.DataFrame) -> str:
    """Plain-text per-task table for the terminal: requests, decode tok/s mean±sd, TTFT p50, e2e p50, accuracy."""
    rows = []
    for _, row in summary.iterrows():
        def num(key: str, fmt: str) -> str:
            value = row.get(key)
            return format(value, fmt) if pd.notna(value) else "–"

        tps = f"{num('decode_tps_mean', '.1f')}±{num('decode_tps_sd', '.1f')}" if pd.notna(
            row.get("decode_tps_mean")) else "–"
        status = "" if row.get("valid", True) in (True, "True") else " INVALID"
        if row.get("n_ok", 0) == 0 and row.get("n_unsupported", 0):
            status = " not supported"
        rows.append([row.get("suite", ""), row["task"], int(row.get("n_ok", 0) + row.get("n_failed", 0)), tps,
                     num("ttft_s_p50", ".3f"), num("e2e_s_p50", ".2f"),
                     num("accuracy", ".0%") + status])
    frame = pd.DataFrame(rows, columns=["suite", "task", "requests", "decode tok/s", "TTFT p50 s", "e2e p50 s",
                                        "accuracy"])
    return frame.to_string(index=False)


def failures(requests: pd.DataFrame) -> pd.DataFrame:
    """Failed, unsupported or flagged requests with their reason."""
    if requests.empty:
        return requests
    flag_columns = [c for c in ("truncated", "cache_suspect", "prefill_outlier", "cold", "rate_mismatch", "looping")
                    if c in requests.columns]
    flagged = (requests["status"] != STATUS_OK) | requests[flag_columns].fillna(False).astype(bool).any(axis=1)
    columns = ["task", "variant", "repeat", "is_warmup", "status", "error_kind", "error_message", "finish_reason",
               *flag_columns, "decode_ratio", "flags"]
    return requests.loc[flagged, [c for c in columns if c in requests.columns]]


def plot_suite(requests: pd.DataFrame, out_dir: Path | None = None, title: str = "") -> plt.Figure | None:
    """Decode tok/s and TTFT per task (measured requests only), one panel each."""
    ok = requests[(requests["status"] == STATUS_OK) & ~requests["is_warmup"]]
    if ok.empty:
        return None
    sns.set_theme(style="whitegrid", context="notebook")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    sns.barplot(data=ok, x="task", y="decode_tps", errorbar="sd", ax=axes[0], color="#4C72B0")
    axes[0].set(title="Decode speed (mean ± sd)", xlabel="", ylabel="tokens / s")
    sns.boxplot(data=ok.assign(ttft_ms=ok["ttft_s"] * 1000), x="task", y="ttft_ms", ax=axes[1], color="#DD8452")
    axes[1].set(title="Time to first token", xlabel="", ylabel="TTFT (ms)")
    for ax in axes:
        ax.tick_params(axis="x", rotation=20)
    fig.suptitle(title or f"{ok['model'].iloc[0]} on {ok['host'].iloc[0]}", fontweight="bold")
    fig.tight_layout()
    if out_dir is not None:
        fig.savefig(Path(out_dir) / "speed.png", dpi=120)
    return fig


def plot_telemetry(out_dir: Path) -> plt.Figure | None:
    """Power (or CPU) and memory over time, with task windows shaded."""
    series_path, windows_path = Path(out_dir) / "telemetry.csv", Path(out_dir) / "windows.csv"
    if not series_path.is_file():
        return None
    series = pd.read_csv(series_path)
    if series.empty or "t_ns" not in series:
        return None
    t0 = series["t_ns"].min()
    series["t_s"] = (series["t_ns"] - t0) / 1e9
    power_col = next((c for c in ("power_w", "cpu_percent") if c in series and series[c].notna().any()), None)
    mem_col = next((c for c in ("mem_used_bytes", "server_rss_bytes") if c in series and series[c].notna().any()),
                   None)
    panels = [c for c in (power_col, mem_col) if c]
    if not panels:
        return None
    sns.set_theme(style="whitegrid", context="notebook")
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 2.8 * len(panels)), sharex=True, squeeze=False)
    labels = {"power_w": "GPU power (W)", "cpu_percent": "host CPU (%)", "mem_used_bytes": "GPU memory (GB)",
              "server_rss_bytes": "server RSS (GB)"}
    windows = pd.read_csv(windows_path) if windows_path.is_file() else pd.DataFrame()
    palette = sns.color_palette("pastel", max(len(windows), 1))
    for ax, column in zip(axes[:, 0], panels):
        values = series[column] / (1e9 if column.endswith("bytes") else 1)
        data = series.assign(value=values)
        hue = "gpu" if "gpu" in data and data["gpu"].nunique() > 1 else None
        sns.lineplot(data=data, x="t_s", y="value", hue=hue, ax=ax, linewidth=1)
        ax.set(ylabel=labels.get(column, column), xlabel="time since start (s)")
        for i, (_, window) in enumerate(windows.iterrows()):
            start, end = (window["t_start_ns"] - t0) / 1e9, (window["t_end_ns"] - t0) / 1e9
            ax.axvspan(start, end, color=palette[i % len(palette)], alpha=0.35, lw=0)
            if ax is axes[0, 0]:
                ax.text((start + end) / 2, ax.get_ylim()[1], str(window["window"]), ha="center", va="bottom",
                        fontsize=8, rotation=30)
    fig.suptitle("Telemetry with measurement windows shaded", fontweight="bold", y=1.02)
    fig.tight_layout()
    fig.savefig(Path(out_dir) / "telemetry.png", dpi=120, bbox_inches="tight")
    return fig
