"""The bandwidth law on one host's quantization ladder: decode tok/s against GB read per token.

The law (seeds 002, 004): decode tok/s = effective bandwidth ÷ bytes read per token. Across a ladder of one model
(the same computation at different weight sizes) it predicts a slope of −1 on log-log axes. We fit
log(tok/s) = a + b·log(GB/token) by least squares (scipy's linregress) and report:
- b with its 95 % interval: −1 is the law; a shallower slope means part of the time does not scale with the bytes
  read (compute, dequantization, sampling, the HTTP stream);
- the effective bandwidth, B_eff = geometric mean over rungs of tok/s × GB/token (the fit with b fixed at −1), with
  a 95 % bootstrap interval over rungs; beside it the host's measured read bandwidth (benchlib.measure.capacity.bandwidth) and the
  share of it decode reaches.

Bytes per token come from each rung's GGUF tensor table (benchlib.analysis.weights), not a nominal bits-per-weight. Decode
rates are our per-request client-side rates of the text suite (warm-ups excluded), mean with a bootstrap interval;
accuracy pools every scored request of the rung (Wilson interval), and is not reported for rungs derived from a
less precise source (their accuracy is the source's)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from benchlib.analysis.stats import CONFIDENCE, bootstrap_interval, wilson_interval
from benchlib.analysis.task_stats import measured
from benchlib.config.paths import outputs_root
from benchlib.records.rows import STATUS_OK
from benchlib.records.schema import optional_flag

LADDER_COLUMNS = ["host", "model", "qtype", "derived_from", "file_type", "size_bytes", "bits_per_weight",
                  "read_per_token_gb", "embedding_type", "tensor_types", "read_gbs", "copy_gbs", "bandwidth_method"]
SPEED_SUITE = "text"


def read_ladders(root: str | Path | None = None) -> pd.DataFrame:
    """One row per rung of every outputs/<host>/ladder.json under root; empty (with the columns) when none."""
    rows: list[dict[str, Any]] = []
    for path in sorted(Path(root or outputs_root()).glob("*/ladder.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        bandwidth = record.get("bandwidth") or {}
        for rung in record.get("rungs") or []:
            weights = rung.get("weights") or {}
            n_params = weights.get("n_params") or 0
            rows.append({
                "host": record.get("host", path.parent.name), "model": rung.get("model", ""),
                "qtype": rung.get("qtype", ""), "derived_from": rung.get("derived_from", ""),
                "file_type": weights.get("file_type", ""), "size_bytes": weights.get("size_bytes", math.nan),
                "bits_per_weight": 8.0 * weights.get("tensor_bytes", 0) / n_params if n_params else math.nan,
                "read_per_token_gb": weights.get("read_per_token_bytes", math.nan) / 1e9,
                "embedding_type": weights.get("embedding_type", ""),
                "tensor_types": ", ".join(f"{k}×{v}" for k, v in (weights.get("tensor_types") or {}).items()),
                "read_gbs": bandwidth.get("read_gbs", math.nan), "copy_gbs": bandwidth.get("copy_gbs", math.nan),
                "bandwidth_method": bandwidth.get("method", "")})
    return pd.DataFrame(rows, columns=LADDER_COLUMNS)


def ladder_points(ladders: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """Each rung with its measured decode rate (mean, 95 % interval, n), accuracy (Wilson) where meaningful, and
    its share of the host's read-bandwidth ceiling."""
    ok = measured(requests)
    ok = ok[ok["status"] == STATUS_OK] if len(ok) else ok
    rows = []
    for rung in ladders.to_dict("records"):
        mine = ok[(ok["host"] == rung["host"]) & (ok["model"] == rung["model"])] if len(ok) else ok
        speed = pd.to_numeric(mine[mine["suite"] == SPEED_SUITE]["decode_tps"], errors="coerce").dropna() \
            if len(mine) else pd.Series(dtype=float)
        lo, hi = bootstrap_interval(speed)
        verdicts = mine["passed"].map(optional_flag) if len(mine) else pd.Series(dtype=object)
        passed = verdicts[verdicts.notna()].astype(bool)  # unscored rows (NA) are not counted
        n_scored = int(len(passed))
        meaningful = not rung["derived_from"] and n_scored > 0
        acc = float(passed.mean()) if meaningful else math.nan
        acc_lo, acc_hi = wilson_interval(int(passed.sum()), n_scored) if meaningful else (math.nan, math.nan)
        tps = float(speed.mean()) if len(speed) else math.nan
        ceiling = rung["read_gbs"] / rung["read_per_token_gb"] if rung["read_per_token_gb"] else math.nan
        rows.append({**rung, "decode_tps": tps, "decode_tps_lo": lo, "decode_tps_hi": hi, "n_decode": len(speed),
                     "accuracy": acc, "accuracy_lo": acc_lo, "accuracy_hi": acc_hi,
                     "n_scored": n_scored if meaningful else 0,
                     "implied_gbs": tps * rung["read_per_token_gb"], "ceiling_tps": ceiling,
                     "share_of_ceiling": tps / ceiling if ceiling else math.nan})
    out = pd.DataFrame(rows)
    return out.sort_values(["host", "read_per_token_gb"], ignore_index=True) if len(out) else out


def fit_law(points: pd.DataFrame) -> dict[str, Any]:
    """Fit the law on one host's rungs (see the module docstring). NaN figures below 3 measured rungs."""
    good = points.dropna(subset=["decode_tps", "read_per_token_gb"])
    good = good[(good["decode_tps"] > 0) & (good["read_per_token_gb"] > 0)]
    out: dict[str, Any] = {"n_rungs": int(len(good)), "slope": math.nan, "slope_lo": math.nan, "slope_hi": math.nan,
                           "r2": math.nan, "beff_gbs": math.nan, "beff_lo": math.nan, "beff_hi": math.nan,
                           "read_gbs": float(points["read_gbs"].iloc[0]) if len(points) else math.nan,
                           "copy_gbs": float(points["copy_gbs"].iloc[0]) if len(points) else math.nan}
    if len(good) < 3:
        return out
    x, y = np.log(good["read_per_token_gb"].to_numpy()), np.log(good["decode_tps"].to_numpy())
    fit = scipy_stats.linregress(x, y)
    t = float(scipy_stats.t.ppf(0.5 + CONFIDENCE / 2, len(good) - 2))
    implied = np.log(good["implied_gbs"].to_numpy())
    lo, hi = bootstrap_interval(implied)
    out.update({"slope": float(fit.slope), "slope_lo": float(fit.slope - t * fit.stderr),
                "slope_hi": float(fit.slope + t * fit.stderr), "r2": float(fit.rvalue ** 2),
                "beff_gbs": float(np.exp(implied.mean())), "beff_lo": float(np.exp(lo)), "beff_hi": float(np.exp(hi))})
    out["share_of_read_bandwidth"] = out["beff_gbs"] / out["read_gbs"] if out["read_gbs"] else math.nan
    return out


def published_law(runs004: pd.DataFrame) -> dict[str, Any]:
    """The same fit on a published ladder (004's E4B quantizations on one GB10): columns decode_tps and
    bytes_per_token_gb (nominal: the blog's parameters × bytes per parameter), memory_bandwidth_gbs."""
    frame = runs004.rename(columns={"bytes_per_token_gb": "read_per_token_gb"}).copy()
    frame["implied_gbs"] = frame["decode_tps"] * frame["read_per_token_gb"]
    frame["read_gbs"] = frame.get("memory_bandwidth_gbs", math.nan)
    frame["copy_gbs"] = math.nan
    return fit_law(frame)
