"""Tables and seaborn figures the suite notebooks show; logic stays here, notebooks only call it.

The modality evidence (images, clips, frames, tool calls beside the answers) is benchlib.views.evidence; the
telemetry plot is benchlib.views.timeline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from benchlib.analysis import paired
from benchlib.config.formatting import MISSING, fmt, interval, is_missing, point_difference
from benchlib.config.tasks import under_load_name
from benchlib.measure.selfcheck.calibration import error_note
from benchlib.records.rows import STATUS_OK
from benchlib.records.run_folder import RunFolder
from benchlib.records.schema import flag
from benchlib.views.timeline import telemetry_figure

SUMMARY_COLUMNS = ["task", "modality", "n_ok", "n_failed", "n_unsupported", "n_truncated", "n_echo", "valid",
                   "decode_tps_mean", "decode_tps_mean_lo", "decode_tps_mean_hi", "ttft_s_mean", "ttft_s_p50",
                   "ttft_s_p50_lo", "ttft_s_p50_hi", "ttfo_s_p50", "e2e_s_p50", "e2e_s_p50_lo", "e2e_s_p50_hi",
                   "itl_s_p50", "itl_s_p50_lo", "itl_s_p50_hi", "itl_s_p99", "itl_s_p99_lo", "itl_s_p99_hi",
                   "tpot_s_mean", "prefill_tps_mean", "n_scored",
                   "accuracy", "accuracy_lo", "accuracy_hi", "energy_j", "avg_power_w", "tokens_per_joule", "tps_per_w",
                   "percentile_note", "note"]


def summary_table(summary: pd.DataFrame, out_dir: Path | None = None) -> Any:
    """The per-task summary, trimmed to the columns a reader scans first; given the run folder whose manifest holds
    the client's calibration (measure/selfcheck/calibration), a table captioned with the client's error on its TTFT/ITL."""
    columns = [c for c in SUMMARY_COLUMNS if c in summary.columns]
    table = summary[columns].round(3)
    note = client_error(out_dir)
    return table.style.format(precision=3, na_rep="").set_caption(f"TTFT and ITL: {note}") if note else table


def client_error(out_dir: Path | None) -> str:
    """'client error ±x ms TTFT, ±y ms ITL (p99, calibrated on this host)' from the run folder's manifest; "" when
    it holds none."""
    if out_dir is None:
        return ""
    return error_note(RunFolder(out_dir).manifest.get("client_calibration"))


def invalid_note(row: Any) -> str:
    """'INVALID text · basic_qa: error rate 33% above 20%': why a task's row is not valid (analysis.task_stats' note)."""
    note = "" if is_missing(row.get("note")) else str(row.get("note") or "")
    return f"INVALID {row.get('suite', '')} · {row['task']}: {note or 'see summary.csv'}"


def console_table(summary: pd.DataFrame) -> str:
    """Plain-text per-task table for the terminal: requests sent and failed, decode tok/s mean±sd, TTFT mean and p50,
    e2e p50 (each percentile with its 95 % interval; '–' where n is too small to bound it: percentile_note),
    accuracy; each INVALID row's reason below the table."""
    rows, notes = [], []
    for _, row in summary.iterrows():
        tps = MISSING if is_missing(row.get("decode_tps_mean")) else \
            f"{fmt(row.get('decode_tps_mean'), '.1f')}±{fmt(row.get('decode_tps_sd'), '.1f')}"
        status = "" if flag(row.get("valid", True)) else " INVALID"
        if status:
            notes.append(invalid_note(row))
        if row.get("n_ok", 0) == 0 and row.get("n_unsupported", 0):
            status = " not supported"
        scored = row.get("n_scored")
        accuracy = interval(row.get("accuracy"), row.get("accuracy_lo"), row.get("accuracy_hi"), ".0%",
                            n=None if is_missing(scored) else int(scored))
        rows.append([row.get("suite", ""), row["task"], int(row.get("n_ok", 0) + row.get("n_failed", 0)),
                     int(row.get("n_failed", 0) or 0), tps,
                     interval(row.get("ttft_s_mean"), row.get("ttft_s_mean_lo"), row.get("ttft_s_mean_hi"), ".3f"),
                     interval(row.get("ttft_s_p50"), row.get("ttft_s_p50_lo"), row.get("ttft_s_p50_hi"), ".3f"),
                     interval(row.get("e2e_s_p50"), row.get("e2e_s_p50_lo"), row.get("e2e_s_p50_hi"), ".2f"),
                     accuracy + status])
    frame = pd.DataFrame(rows, columns=["suite", "task", "sent", "failed", "decode tok/s", "TTFT mean s [95% CI]",
                                        "TTFT p50 s [95% CI]", "e2e p50 s [95% CI]", "accuracy [95% CI] (n scored)"])
    if "model" in summary and summary["model"].nunique() > 1:  # several deployments (e.g. the ladder's rungs)
        frame.insert(0, "model", summary["model"].astype(str).to_numpy())
    return "\n".join([frame.to_string(index=False), *notes])


LOAD_ACCURACY_COLUMNS = ["set", "in flight", "items", "accuracy at 1", "accuracy under load",
                         "difference [95% CI]", "McNemar p", "verdict", "J per correct at 1", "J per correct under load",
                         "tok/J at 1", "tok/J under load"]


def accuracy_under_load(requests: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Each graded set sent one at a time and again under load (run.graded_concurrency): both accuracies on the same
    items, the paired difference with its interval and exact McNemar p (analysis.paired.under_load), and, where the
    task windows measured energy, joules per correct answer and tokens per joule of each pass."""
    table = paired.under_load(paired.item_results(requests))
    by_task = summary.set_index("task") if len(summary) and "task" in summary else pd.DataFrame()

    def figure(task: str, column: str, spec: str) -> str:
        value = by_task[column].get(task) if column in by_task else None
        return fmt(value, spec)

    rows = []
    for row in table.to_dict("records"):
        loaded = under_load_name(row["task"], row["concurrency"])
        rows.append([row["task"], row["concurrency"], row["n"], fmt(row["accuracy_a"], ".0%"),
                     fmt(row["accuracy_b"], ".0%"),
                     point_difference(row["difference"], row["difference_lo"], row["difference_hi"]),
                     fmt(row["p_value"], ".3g"), row["verdict"],
                     figure(row["task"], "joules_per_correct", ".1f"), figure(loaded, "joules_per_correct", ".1f"),
                     figure(row["task"], "tokens_per_joule", ".2f"), figure(loaded, "tokens_per_joule", ".2f")])
    return pd.DataFrame(rows, columns=LOAD_ACCURACY_COLUMNS)


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
    # A transcription endpoint streams no tokens: its panels are the real-time factor and the time to the answer.
    tokens = pd.to_numeric(ok["decode_tps"], errors="coerce").notna().any()
    speed, speed_title, speed_unit = ("decode_tps", "Decode speed (mean ± sd)", "tokens / s") if tokens or \
        "rtf" not in ok else ("rtf", "Real-time factor (mean ± sd)", "wall s ÷ audio s")
    sns.barplot(data=ok, x="task", y=speed, errorbar="sd", ax=axes[0], color="#4C72B0")
    axes[0].set(title=speed_title, xlabel="", ylabel=speed_unit)
    first = pd.to_numeric(ok["ttft_s"], errors="coerce").notna().any()
    latency, latency_title = ("ttft_s", "Time to first token") if first else ("e2e_s", "Time to the whole answer")
    sns.boxplot(data=ok.assign(ms=pd.to_numeric(ok[latency], errors="coerce") * 1000), x="task", y="ms", ax=axes[1],
                color="#DD8452")
    note = client_error(out_dir) if first else ""
    axes[1].set(title=latency_title + (f"\n{note}" if note else ""), xlabel="",
                ylabel=f"{'TTFT' if first else 'e2e'} (ms)")
    for ax in axes:
        ax.tick_params(axis="x", rotation=20)
    fig.suptitle(title or f"{ok['model'].iloc[0]} on {ok['host'].iloc[0]}", fontweight="bold")
    fig.tight_layout()
    if out_dir is not None:
        fig.savefig(Path(out_dir) / "speed.png", dpi=120)
    return fig


TRANSCRIPTION_SHOWN = {"task": "task", "variant": "clip", "status": "status", "audio_s": "audio s", "e2e_s": "e2e s",
                      "rtf": "real-time factor", "wer": "WER", "words": "words", "transcript": "transcript"}


def transcription(out_dir: Path) -> Any:
    """transcription.csv (benchlib.analysis.transcription): each clip's WER, e2e and real-time factor, then per task
    a row '(all clips)' with the corpus WER, the mean e2e and real-time factor; a line where no such task ran."""
    path = Path(out_dir) / "transcription.csv"
    if not path.is_file():
        return "no transcription.csv: no transcribing task ran in this suite"
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    corpus = frame["scope"] == "corpus"
    frame.loc[corpus, "variant"] = "(all clips)"
    for column, total in (("wer", "corpus_wer"), ("e2e_s", "e2e_mean_s"), ("rtf", "rtf_mean")):
        frame.loc[corpus, column] = frame.loc[corpus, total]
    counts = frame.loc[corpus, ["clips_ok", "clips"]].values
    frame.loc[corpus, "status"] = [f"{int(ok)}/{int(n)} ok" for ok, n in counts]
    return frame[list(TRANSCRIPTION_SHOWN)].rename(columns=TRANSCRIPTION_SHOWN).fillna("")


def plot_telemetry(out_dir: Path) -> plt.Figure:
    """Every recorded series over time with the measurement windows shaded; saved as telemetry.png."""
    return telemetry_figure(out_dir, save=True)
