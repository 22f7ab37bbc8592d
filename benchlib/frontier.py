"""Deployment frontier: regimes (the axes an operator decides on, each maximised or minimised) and the
non-dominated systems over them, with who dominates whom on which axes.

A system dominates another when it is at least as good on every axis and strictly better on one.
A missing value (NaN: modality not supported, not measured) counts as the worst possible value on that axis.

Imports: nothing from benchlib (analysis layer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from benchlib.schema import short_number

Direction = Literal["max", "min"]


@dataclass(frozen=True)
class Regime:
    """A named deployment regime: the axes an operator decides on, each maximised or minimised."""

    key: str
    title: str
    axes: dict[str, Direction]
    description: str = ""
    paper_model: str = ""  # the model the paper (000 §7) puts on this regime's frontier
    requires: tuple[str, ...] = ()  # axes a system must have a value on to compete (a capability it needs)


# The paper's §7 regimes, on the columns of reference.paper_systems() / analysis.systems_from_summary().
REGIMES: dict[str, Regime] = {
    "workstation": Regime(
        "workstation", "General multimodal workstation",
        {"avg_decode_tps": "max", "modality_count": "max", "video_support": "max"},
        "Throughput, modality breadth, video support", "Gemma 4 E2B"),
    "edge": Regime(
        "edge", "Energy- and thermal-constrained edge inference",
        {"tps_per_w": "max", "peak_temp_c": "min", "context_window_k": "max"},
        "Tokens per watt, temperature, long context (noise is not measured)", "Qwen3.5-4B"),
    "audio": Regime(
        "audio", "Audio-centric concise pipeline",
        {"asr_decode_tps": "max", "short_qa_decode_tps": "max"},
        "ASR throughput, short-answer token rate (token rates, as the paper reads it; adding ASR latency "
        "asr_e2e_s ↓ also puts Gemma 4 E2B on this frontier: 0.44 s vs 6.13 s)", "Phi-4 Multimodal",
        requires=("asr_decode_tps",)),  # a deployment without audio input is no audio pipeline
}


# Every axis at once: the paper's 'split frontier' (no single winner).
PAPER_REGIMES = tuple(REGIMES)  # the paper's §7 three; ALL_AXES spans these


ALL_AXES: dict[str, Direction] = {axis: d for regime in REGIMES.values() for axis, d in regime.axes.items()}
# Beyond the paper: what the load and context sweeps measured (benchlib.sweeps.frontier_figures). Published
# systems have no such figures, so the regime requires them: it ranks our own runs.
REGIMES["serving"] = Regime(
    "serving", "Multi-user serving on one box",
    {"peak_throughput_tps": "max", "max_concurrency_ok": "max", "max_context_ok_k": "max"},
    "Aggregate tok/s at the best concurrency level, the most concurrent streams and the longest prompt that ran "
    "without a failure (measured by the load notebook)", "", requires=("max_concurrency_ok",))


def _oriented(systems: pd.DataFrame, axes: Mapping[str, Direction]) -> np.ndarray:
    """Matrix where larger is better on every axis; NaN becomes -inf (worst)."""
    columns = []
    for axis, direction in axes.items():
        if direction not in ("max", "min"):
            raise ValueError(f"axis '{axis}': direction must be 'max' or 'min', not {direction!r}")
        if axis not in systems:
            raise KeyError(f"axis '{axis}' is not a column (have: {', '.join(map(str, systems.columns))})")
        values = pd.to_numeric(systems[axis], errors="coerce").to_numpy(dtype=float)
        values = values if direction == "max" else -values
        columns.append(np.where(np.isnan(values), -np.inf, values))
    return np.column_stack(columns) if columns else np.empty((len(systems), 0))


def dominance_pairs(systems: pd.DataFrame, axes: Mapping[str, Direction], id_col: str = "system") -> pd.DataFrame:
    """Every (dominated, dominator) pair, with the axes the dominator is strictly better on and tied on."""
    matrix = _oriented(systems, axes)
    names = list(axes)
    ids = systems[id_col].astype(str).tolist()
    rows = []
    for i in range(len(ids)):
        for j in range(len(ids)):
            if i == j:
                continue
            a, b = matrix[j], matrix[i]  # does j dominate i?
            if np.all(a >= b) and np.any(a > b):
                rows.append({"dominated": ids[i], "dominated_by": ids[j],
                             "better_on": [n for n, x, y in zip(names, a, b) if x > y],
                             "tied_on": [n for n, x, y in zip(names, a, b) if x == y]})
    return pd.DataFrame(rows, columns=["dominated", "dominated_by", "better_on", "tied_on"])


def pareto_frontier(systems: pd.DataFrame, axes: Mapping[str, Direction], id_col: str = "system",
                    requires: Sequence[str] = ()) -> pd.DataFrame:
    """Copy of `systems` with on_frontier (bool) and dominated_by ('X (better on a, b); Y (...)', '' if none).

    Systems without a value on a `requires` axis do not compete (they neither join nor dominate); their
    dominated_by says 'not eligible: no <axis>'."""
    missing = {axis: systems[axis].isna() if axis in systems else pd.Series(True, index=systems.index)
               for axis in requires}
    eligible = ~pd.concat(missing.values(), axis=1).any(axis=1) if missing else pd.Series(True, index=systems.index)
    pairs = (dominance_pairs(systems[eligible], axes, id_col) if eligible.any()
             else pd.DataFrame(columns=["dominated", "dominated_by", "better_on", "tied_on"]))
    out = systems.copy()
    ids = out[id_col].astype(str)
    out["on_frontier"] = eligible & ~ids.isin(set(pairs["dominated"]))
    out["dominated_by"] = [
        "; ".join(f"{p.dominated_by} (better on {', '.join(p.better_on)})"
                  for p in pairs[pairs["dominated"] == name].itertuples())
        if ok else "not eligible: no " + ", ".join(a for a, m in missing.items() if m.loc[index])
        for index, name, ok in zip(out.index, ids, eligible)
    ]
    return out


def regime_frontiers(systems: pd.DataFrame, regimes: Mapping[str, Regime] | None = None,
                     id_col: str = "system") -> pd.DataFrame:
    """Long table: one row per regime × system, with the axis values, frontier membership and dominators."""
    rows = []
    for regime in (regimes or {key: REGIMES[key] for key in PAPER_REGIMES}).values():
        marked = pareto_frontier(systems, regime.axes, id_col, regime.requires)
        for _, row in marked.iterrows():
            rows.append({
                "regime": regime.title,
                "system": row[id_col],
                "axes": ", ".join(f"{axis} {'↑' if d == 'max' else '↓'} {short_number(row[axis])}"
                                  for axis, d in regime.axes.items()),
                "on_frontier": bool(row["on_frontier"]),
                "dominated_by": row["dominated_by"],
            })
    return pd.DataFrame(rows, columns=["regime", "system", "axes", "on_frontier", "dominated_by"])


def frontier_members(systems: pd.DataFrame, axes: Mapping[str, Direction], id_col: str = "system") -> list[str]:
    """The non-dominated systems, in input order."""
    marked = pareto_frontier(systems, axes, id_col)
    return marked.loc[marked["on_frontier"], id_col].astype(str).tolist()
