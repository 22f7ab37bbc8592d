"""The her-os threshold decision framework (seed 001): criteria (decode tok/s, TTFT, model memory, tools,
entities, vision, ...) with limits, PASS/FAIL per criterion with the measured value, and the verdicts
SWAP / WAIT / VERIFY the field report prints.

THRESHOLD RULE: a candidate that carries a criterion's 95 % interval (`<column>_lo`, `<column>_hi`: our runs'
decode rate and TTFT, deployments.decision_inputs) is judged against the interval, not the bare value: PASS when
the whole interval meets the limit, FAIL when none of it does, UNDECIDED ("undecided at this n") when the limit
lies inside it — or when the value has no interval (too few requests). A published candidate (no interval
columns) is judged on its printed value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

import numpy as np
import pandas as pd

from benchlib.config.params import ThresholdParams

# 001 §10/§12 swap framework: tok/s ≥40, model VRAM ≤25 GB, TTFT ≤200 ms, tools ≥6/8, vision working.
HEROS_SWAP_THRESHOLDS = ThresholdParams(min_decode_tps=40, max_ttft_ms=200, max_model_memory_gb=25,
                                        min_tools_passed=6, vision_required=True)


# 001 §6 Phase 1 plan criteria: tok/s >25, TTFT <500 ms, VRAM <20 GB, tools ≥50% of 8, entities ≥5/7, vision.
# (Kannada ≥4/6 has no ThresholdParams field.) Printed as strict inequalities; applied inclusively here.
HEROS_PHASE1_THRESHOLDS = ThresholdParams(min_decode_tps=25, max_ttft_ms=500, max_model_memory_gb=20,
                                          min_tools_passed=4, min_entity_recall=5 / 7, vision_required=True)


@dataclass(frozen=True)
class Criterion:
    field: str  # ThresholdParams field
    column: str  # candidate column
    label: str
    kind: Literal["min", "max", "required"]
    unit: str = ""


CRITERIA: tuple[Criterion, ...] = (
    Criterion("min_decode_tps", "decode_tps", "tok/s", "min", "tok/s"),
    Criterion("max_model_memory_gb", "model_memory_gb", "memory", "max", "GB"),
    Criterion("max_ttft_ms", "ttft_ms", "TTFT", "max", "ms"),
    Criterion("min_tools_passed", "tools_passed", "tools", "min", "/8"),
    Criterion("min_entity_recall", "entity_recall", "entities", "min", ""),
    Criterion("vision_required", "vision_works", "vision", "required", ""),
)
PASS, FAIL, NO_DATA, UNDECIDED = "PASS", "FAIL", "NO DATA", "undecided at this n"
SWAP, VERIFY, WAIT = "SWAP", "VERIFY", "WAIT"


def _thresholds(thresholds: ThresholdParams | Mapping[str, Any]) -> ThresholdParams:
    return thresholds if isinstance(thresholds, ThresholdParams) else ThresholdParams(**dict(thresholds))


def _status(criterion: Criterion, limit: Any, value: Any, bounds: tuple[Any, Any] | None = None) -> str:
    """PASS / FAIL / NO DATA, and UNDECIDED where `bounds` (the value's 95 % interval, THRESHOLD RULE) straddle
    the limit or are missing."""
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return NO_DATA
    if criterion.kind == "required":
        return PASS if bool(value) else FAIL
    tol = 1e-9 * max(1.0, abs(float(limit)))  # float noise (0.1+0.2+0.3)/3 s must not fail "≤200 ms"

    def meets(x: Any) -> bool:
        return float(x) >= float(limit) - tol if criterion.kind == "min" else float(x) <= float(limit) + tol

    if bounds is None:
        return PASS if meets(value) else FAIL
    if any(b is None or (isinstance(b, float) and np.isnan(b)) for b in bounds):
        return UNDECIDED
    verdicts = {meets(b) for b in bounds}
    return UNDECIDED if len(verdicts) > 1 else (PASS if verdicts == {True} else FAIL)


def evaluate_thresholds(candidates: pd.DataFrame, thresholds: ThresholdParams | Mapping[str, Any],
                        id_col: str = "candidate") -> pd.DataFrame:
    """Long table: candidate × set criterion -> value, threshold, status (PASS / FAIL / NO DATA).

    min_* thresholds pass when value >= limit, max_* when value <= limit — for a candidate with the criterion's
    interval columns, the whole interval (THRESHOLD RULE; the value then reads 'v [lo–hi]' in `shown`);
    vision_required needs a true vision_works. Unset thresholds (None / False) are not evaluated.
    """
    limits = _thresholds(thresholds)
    rows = []
    for _, cand in candidates.iterrows():
        for criterion in CRITERIA:
            limit = getattr(limits, criterion.field)
            if limit is None or limit is False:
                continue
            raw = cand.get(criterion.column, np.nan)
            low, high = f"{criterion.column}_lo", f"{criterion.column}_hi"
            bounds = (cand.get(low), cand.get(high)) if low in cand.index and high in cand.index else None
            rows.append({
                id_col: cand[id_col],
                "criterion": criterion.label,
                "column": criterion.column,
                "value": raw,
                "threshold": ("works" if criterion.kind == "required" else
                              f"{'≥' if criterion.kind == 'min' else '≤'}{limit:g}{_unit(criterion.unit)}"),
                "status": _status(criterion, limit, raw, bounds),
                "low": bounds[0] if bounds else np.nan, "high": bounds[1] if bounds else np.nan,
                "n": cand.get(f"{criterion.column}_n", np.nan),
            })
    return pd.DataFrame(rows, columns=[id_col, "criterion", "column", "value", "threshold", "status", "low", "high",
                                       "n"])


def _unit(unit: str) -> str:
    return unit if unit.startswith("/") or not unit else " " + unit


def _describe_fail(row: pd.Series) -> str:
    value = row["value"]
    if isinstance(value, (bool, np.bool_)):
        shown = "no"
    else:
        shown = shown_value(row)
    return f"{row['criterion']} ({shown} vs {row['threshold']})"


def shown_value(row: pd.Series) -> str:
    """'38.9' or, with its interval, '38.9 [31.2–46.0] (n 10)'."""
    text = f"{float(row['value']):.3g}"
    low, high = row.get("low"), row.get("high")
    if low is not None and high is not None and not (np.isnan(float(low)) or np.isnan(float(high))):
        text += f" [{float(low):.3g}–{float(high):.3g}]"
    n = row.get("n")
    if n is not None and not np.isnan(float(n)):
        text += f" (n {int(n)})"
    return text


def decide(candidates: pd.DataFrame, thresholds: ThresholdParams | Mapping[str, Any] = HEROS_SWAP_THRESHOLDS,
           id_col: str = "candidate") -> pd.DataFrame:
    """One row per candidate: status per criterion, verdict and a decision line.

    verdict SWAP = every set threshold passes; VERIFY = none fails but some have no data or are undecided at
    this n (the report's 'SWAP candidate — needs verification'); WAIT = at least one fails.
    """
    long = evaluate_thresholds(candidates, thresholds, id_col)
    rows = []
    for name in candidates[id_col]:
        mine = long[long[id_col] == name]
        fails = mine[mine["status"] == FAIL]
        missing = mine[mine["status"] == NO_DATA]
        open_ = mine[mine["status"] == UNDECIDED]
        if len(fails):
            verdict, line = WAIT, "WAIT: fails " + ", ".join(_describe_fail(r) for _, r in fails.iterrows())
        elif len(missing) or len(open_):
            verdict = VERIFY
            line = "SWAP candidate, needs verification: " + "; ".join(filter(None, [
                "no data for " + ", ".join(missing["criterion"]) if len(missing) else "",
                f"{UNDECIDED} for " + ", ".join(_describe_fail(r) for _, r in open_.iterrows()) if len(open_) else ""]))
        else:
            verdict, line = SWAP, f"SWAP candidate: all {len(mine)} thresholds pass"
        row = {id_col: name}
        row.update({f"status_{r['column']}": r["status"] for _, r in mine.iterrows()})
        row.update(verdict=verdict, decision=line)
        rows.append(row)
    return pd.DataFrame(rows)
