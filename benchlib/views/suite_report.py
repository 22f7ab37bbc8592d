"""Tables and seaborn figures the suite notebooks show; logic stays here, notebooks only call it.

The modality evidence (images, clips, frames, tool calls beside the answers) is benchlib.views.evidence; the
telemetry plot is benchlib.views.timeline.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from benchlib.config.formatting import MISSING, fmt, interval, is_missing
from benchlib.records.rows import STATUS_OK
from benchlib.records.schema import flag
from benchlib.views.timeline import telemetry_figure

SUMMARY_COLUMNS = ["task", "modality", "n_ok", "n_failed", "n_unsupported", "n_truncated", "n_echo", "valid",
                   "decode_tps_mean", "decode_tps_mean_lo", "decode_tps_mean_hi", "ttft_s_p50", "ttfo_s_p50",
                   "e2e_s_p50", "itl_s_p50", "itl_s_p99", "tpot_s_mean", "prefill_tps_mean", "n_scored",
                   "accuracy", "accuracy_lo", "accuracy_hi", "energy_j", "avg_power_w", "tokens_per_joule", "tps_per_w",
                   "percentile_note", "note"]


def summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The per-task summary, trimmed to the columns a reader scans first."""
    columns = [c for c in SUMMARY_COLUMNS if c in summary.columns]
    return summary[columns].round(3)


def console_table(summary: pd.DataFrame) -> str:
    """Plain-text per-task table for the terminal: requests, decode tok/s mean±sd, TTFT p50, e2e p50, accuracy."""
    rows = []
    for _, row in summary.iterrows():
        tps = MISSING if is_missing(row.get("decode_tps_mean")) else \
            f"{fmt(row.get('decode_tps_mean'), '.1f')}±{fmt(row.get('decode_tps_sd'), '.1f')}"
        status = "" if flag(row.get("valid", True)) else " INVALID"
        if row.get("n_ok", 0) == 0 and row.get("n_unsupported", 0):
            status = " not supported"
        scored = row.get("n_scored")
        accuracy = interval(row.get("accuracy"), row.get("accuracy_lo"), row.get("accuracy_hi"), ".0%",
                            n=None if is_missing(scored) else int(scored))
        rows.append([row.get("suite", ""), row["task"], int(row.get("n_ok", 0) + row.get("n_failed", 0)), tps,
                     fmt(row.get("ttft_s_p50"), ".3f"), fmt(row.get("e2e_s_p50"), ".2f"), accuracy + status])
    frame = pd.DataFrame(rows, columns=["suite", "task", "requests", "decode tok/s", "TTFT p50 s", "e2e p50 s",
                                        "accuracy [95% CI] (n scored)"])
    if "model" in summary and summary["model"].nunique() > 1:  # several deployments (e.g. the ladder's rungs)
        frame.insert(0, "model", summary["model"].astype(str).to_numpy())
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
    ok = requests[(requests["status"] == STATUS_OK) & ~requests["is_warmup"].map(flag)]
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


def plot_telemetry(out_dir: Path) -> plt.Figure:
    """Every recorded series over time with the measurement windows shaded; saved as telemetry.png."""
    return telemetry_figure(out_dir, save=True)
