"""Predicted vs measured: what `frontier-bench plan` predicted (outputs/<host>/plan.json) beside what was measured,
and the seeds' check (benchlib.published.hardware.seed_checks) beside the paper's own figures.

Per host, the first plan (made before any run there: the published default efficiency) and the latest (calibrated
on the host's runs); each prediction of a deployment whose weights were measured on that host is a row. Every
prediction left the deployment's own runs out of its calibration (benchlib.analysis.plan, EFFICIENCY RULE), so a
run measured before the plan still checks it. Measured: the mean decode tok/s of the text suite's measured requests
of every run of those weights on the host (benchlib.analysis.plan.measured_points), with its 95 % bootstrap
interval."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from benchlib.analysis.plan import measured_points, relative_error
from benchlib.config.formatting import fmt, interval
from benchlib.paper.format import Table
from benchlib.paper.runs import Runs
from benchlib.paper.style import theme
from benchlib.published import hardware

TARGET = 0.15  # the plan's target: median absolute decode error on a host's measured deployments (issue 58)
COLUMNS = ["host", "plan", "basis", "deployment", "read_gb", "predicted", "predicted_lo", "predicted_hi",
           "measured", "measured_lo", "measured_hi", "n", "error", "within", "measured_by"]


def predicted_vs_measured(runs: Runs, ref: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (host, plan kept, measured deployment), then the seeds' check (module docstring)."""
    rows = []
    hosts = dict.fromkeys(str(p.get("host", {}).get("name", "")) for p in runs.plan_records)
    for host in hosts:
        records = [p for p in runs.plan_records if p.get("host", {}).get("name") == host]
        points = measured_points(runs.meta, runs.requests, host).set_index("weights_key")
        kept = [("first", records[0])] + ([("latest", records[-1])] if len(records) > 1 else [])
        for which, record in kept:
            for pred in record.get("predictions") or []:
                key = (pred.get("candidate") or {}).get("weights_key") or ""
                if key not in points.index:
                    continue
                got, decode, eff = points.loc[key], pred["decode_tps"], pred["decode_efficiency"]
                rows.append({"host": host, "plan": f"{which} ({record.get('id')})",
                             "basis": f"efficiency {_number(eff['value']):.2f}, n={eff['n']}: {eff['basis']}",
                             "deployment": pred["name"], "read_gb": (pred.get("candidate") or {}).get("read_gb"),
                             "predicted": _number(decode["value"]), "predicted_lo": _number(decode["low"]),
                             "predicted_hi": _number(decode["high"]), "measured": got["decode_tps"],
                             "measured_lo": got["decode_lo"], "measured_hi": got["decode_hi"], "n": int(got["n"]),
                             "measured_by": got["systems"]})
    if ref is not None and hardware.has_seed_check_sources(ref):
        for check in hardware.seed_checks(ref):
            p = check["prediction"]
            rows.append({"host": check["host"], "plan": "seeds' check", "basis": p.decode_efficiency.basis,
                         "deployment": p.name, "read_gb": p.candidate.read_gb, "predicted": p.decode_tps.value,
                         "predicted_lo": p.decode_tps.low, "predicted_hi": p.decode_tps.high,
                         "measured": check["measured_tps"], "measured_lo": math.nan, "measured_hi": math.nan,
                         "n": 0, "measured_by": "paper 000 §6 (average throughput)"})
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["error"] = [relative_error(p, m) for p, m in zip(out["predicted"], out["measured"])]
    out["within"] = (out["predicted_lo"] <= out["measured"]) & (out["measured"] <= out["predicted_hi"])
    return out


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else math.nan


def median_errors(frame: pd.DataFrame) -> pd.DataFrame:
    """Per host and plan: the median absolute decode error, n, and how many fell within their interval."""
    if frame.empty:
        return pd.DataFrame(columns=["host", "plan", "median_abs_error", "n", "within"])
    return (frame.assign(abs_error=frame["error"].abs())
            .groupby(["host", "plan"], sort=False)
            .agg(median_abs_error=("abs_error", "median"), n=("abs_error", "size"), within=("within", "sum"))
            .reset_index())


def predicted_table(runs: Runs, ref: pd.DataFrame) -> Table | None:
    frame = predicted_vs_measured(runs, ref)
    if frame.empty:
        return None
    summary = median_errors(frame)
    display = pd.DataFrame({
        "host": frame["host"], "plan": frame["plan"], "deployment": frame["deployment"],
        "GB read/token": [fmt(v, ".3g") for v in frame["read_gb"]],
        "predicted decode tok/s": [interval(v, lo, hi, ".3g") for v, lo, hi in
                                   zip(frame["predicted"], frame["predicted_lo"], frame["predicted_hi"])],
        "measured tok/s [95% CI]": [interval(v, lo, hi, ".3g", n or None) for v, lo, hi, n in
                                    zip(frame["measured"], frame["measured_lo"], frame["measured_hi"], frame["n"])],
        "error": [fmt(v, "+.0%") for v in frame["error"]],
        "within interval": frame["within"].map({True: "yes", False: "no"}),
        "efficiency": frame["basis"]})
    caption = ("Decode tok/s predicted by `frontier-bench plan` (bandwidth ÷ GB read per token × the efficiency; "
               "each deployment's own runs left out of its calibration) beside what the text suite measured on "
               "the same weights; the seeds' rows predict 000's deployments from published sizes and bandwidth "
               "beside the paper's average throughput. Median |error|: " + "; ".join(
                   f"{r.host} {r.plan}: {r.median_abs_error:.0%} over {r.n} ({int(r.within)} within their interval)"
                   for r in summary.itertuples()) + f" (target ≤ {TARGET:.0%}).")
    return Table("predicted_vs_measured", "Predicted before measuring vs measured: decode tok/s", frame, display,
                 caption=caption)


def _label(name: str) -> str:
    """'gemma3-270m-q2_k' -> 'gemma3 q2_k': the model family and the quantization, enough beside its neighbours."""
    parts = str(name).split("-")
    return f"{parts[0]} {parts[-1]}" if len(parts) >= 3 else str(name)


def fig_predicted(tables: dict) -> plt.Figure | None:
    if "predicted_vs_measured" not in tables:
        return None
    theme()
    frame = tables["predicted_vs_measured"].data
    fig, ax = plt.subplots(figsize=(8.5, 7))
    styles = {"first": ("o", "white", "first plan (published default efficiency)"),
              "latest": ("o", "tab:blue", "latest plan (this host's efficiency)"),
              "seeds'": ("s", "tab:orange", "seeds' check (published sizes and bandwidth)")}
    for prefix, (marker, face, label) in styles.items():
        mine = frame[frame["plan"].str.startswith(prefix)]
        if mine.empty:
            continue
        yerr = np.vstack([mine["predicted"] - mine["predicted_lo"], mine["predicted_hi"] - mine["predicted"]])
        xerr = np.vstack([mine["measured"] - mine["measured_lo"], mine["measured_hi"] - mine["measured"]])
        ax.errorbar(mine["measured"], mine["predicted"], yerr=np.nan_to_num(yerr), xerr=np.nan_to_num(xerr),
                    fmt=marker, mfc=face, mec="black", ecolor="grey", capsize=3, ms=8, label=label, zorder=3)
        if prefix == "first":  # the same deployments as the latest plan's, higher up: their labels would crowd
            continue
        for i, row in enumerate(mine.itertuples()):
            ax.annotate(_label(row.deployment), (row.measured, row.predicted), textcoords="offset points",
                        xytext=(6, 8 if i % 2 else -12), fontsize=7)
    values = pd.concat([frame["measured"], frame["predicted"], frame["predicted_hi"]]).astype(float)
    values = values[values > 0]
    grid = np.geomspace(values.min() / 1.3, values.max() * 1.3, 20)
    ax.plot(grid, grid, color="black", lw=1, label="predicted = measured")
    ax.fill_between(grid, grid * (1 - TARGET), grid * (1 + TARGET), color="green", alpha=0.12,
                    label=f"within ±{TARGET:.0%}")
    ax.set(xscale="log", yscale="log", xlabel="measured decode tok/s (log)", ylabel="predicted decode tok/s (log)",
           title="Predicted before measuring vs measured")
    ax.legend(fontsize=8, loc="upper left", frameon=False)
    fig.tight_layout()
    return fig
