"""Deployment frontier: regimes (the axes an operator decides on, each maximised or minimised) and the
non-dominated systems over them, with who dominates whom on which axes.

A system dominates another when it is at least as good on every axis and strictly better on one.
A missing value (NaN: modality not supported, not measured) counts as the worst possible value on that axis."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from benchlib.analysis import paired, speed_verdicts, stats
from benchlib.config import identity
from benchlib.config.tasks import load_pass
from benchlib.measure.telemetry.boundary import DIFFERENT as DIFFERENT_BOUNDARY
from benchlib.records.schema import flag, number

Direction = Literal["max", "min"]


@dataclass(frozen=True)
class Regime:
    """A named deployment regime: the axes an operator decides on, each maximised or minimised, the tasks
    whose answer quality matters to it and the floor a deployment must clear to be eligible at all."""

    key: str
    title: str
    axes: dict[str, Direction]
    description: str = ""
    paper_model: str = ""  # the model the paper (000 §7) puts on this regime's frontier
    requires: tuple[str, ...] = ()  # capabilities a system must have a value on to compete (e.g. audio input)
    quality_tasks: tuple[str, ...] = ()  # tasks whose accuracy is this regime's quality axis
    min_accuracy: float | None = None  # eligibility floor on that accuracy
    # the modalities whose graded sets judge a system that ran them, instead of quality_tasks (GRADED RULE,
    # quality_columns); () for none
    graded: tuple[str, ...] = ("text",)
    missing: str = "ineligible"  # a system without a value on an axis: "ineligible" (listed, with why) | "worst"

    @property
    def quality_axis(self) -> str:
        return f"accuracy_{self.key}" if self.quality_tasks else ""

    def all_axes(self) -> dict[str, Direction]:
        """The regime's axes plus its quality axis (accuracy over quality_tasks, higher is better)."""
        return {**self.axes, **({self.quality_axis: "max"} if self.quality_tasks else {})}

    def floors(self) -> dict[str, float]:
        return {self.quality_axis: self.min_accuracy} if self.quality_tasks and self.min_accuracy else {}


TEXT_TASKS = ("basic_qa", "reasoning", "coding", "multilingual", "summarization")
PAPER_TASKS = TEXT_TASKS + ("image_description", "color_identification", "transcription", "audio_qa",
                            "video_analysis")
MODALITIES = ("text", "vision", "audio", "video")  # a graded set's modality: its task's `requires`
QUALITY_FLOOR = 0.5  # a deployment that gets fewer than half of its regime's tasks right is not a candidate
GRADED = paired.GRADED  # accuracy basis of a graded set's items (benchlib.config.graded), first pass
UNDER_LOAD = paired.UNDER_LOAD  # the same items again at run.graded_concurrency: never a quality axis

# The paper's §7 regimes, on the columns of reference.paper_systems() / analysis.systems_from_summary().
REGIMES: dict[str, Regime] = {
    "workstation": Regime(
        "workstation", "General multimodal workstation",
        {"avg_decode_tps": "max", "modality_count": "max", "video_support": "max"},
        "Throughput, modality breadth, video support; answer quality over the paper's ten tasks; a multimodal "
        "workstation takes images (a text-only deployment is not eligible)", "Gemma 4 E2B",
        requires=("vision_decode_tps",), quality_tasks=PAPER_TASKS, min_accuracy=QUALITY_FLOOR, graded=MODALITIES),
    "edge": Regime(
        "edge", "Energy- and thermal-constrained edge inference",
        {"tps_per_w": "max", "peak_temp_c": "min", "context_window_k": "max"},
        "Tokens per watt, temperature, long context (noise is not measured); answer quality over the text tasks. "
        "Power readings differ in scope per platform (see POWER_SCOPE): tok/s per W compares what each platform's "
        "sensor covers, idle not subtracted; it ranks only deployments of one energy boundary (ENERGY BOUNDARY "
        "RULE): another boundary's is marked 'different energy boundary'", "Qwen3.5-4B", quality_tasks=TEXT_TASKS, min_accuracy=QUALITY_FLOOR),
    "audio": Regime(
        "audio", "Audio-centric concise pipeline",
        {"asr_decode_tps": "max", "short_qa_output_tokens": "min"},
        "ASR throughput and brevity measured as output tokens per short answer (the paper's 'shorter outputs'; "
        "it read them as the short-answer token *rate*, a speed: under that reading Phi-4 Multimodal alone is on "
        "the frontier, see the sensitivity lines)", "Phi-4 Multimodal",
        requires=("asr_decode_tps",),  # a deployment without audio input is no audio pipeline
        quality_tasks=("transcription", "audio_qa", "basic_qa"), min_accuracy=QUALITY_FLOOR,
        graded=("audio",)),  # the generated speech set: the text and vision sets say nothing about transcription
}


# Every axis at once: the paper's 'split frontier' (no single winner).
PAPER_REGIMES = tuple(REGIMES)  # the paper's §7 three; ALL_AXES spans these


ALL_AXES: dict[str, Direction] = {axis: d for regime in REGIMES.values() for axis, d in regime.axes.items()}
# Every axis at once: the paper's 'split frontier' (no single winner), where a missing value is the worst one
# (a deployment without audio is simply worst at audio); the quality floor still applies.
ALL_REGIME = Regime("all", "Every axis at once (the paper's split frontier)", dict(ALL_AXES),
                    "All regime axes together: no single winner expected", "", quality_tasks=PAPER_TASKS,
                    min_accuracy=QUALITY_FLOOR, missing="worst", graded=MODALITIES)
# Beyond the paper: what the load and context sweeps measured (benchlib.sweeps.frontier_figures). Published
# systems have no such figures, so the regime requires them: it ranks our own runs.
REGIMES["serving"] = Regime(
    "serving", "Multi-user serving on one box",
    {"serving_tps": "max", "max_concurrency_ok": "max", "max_context_ok_k": "max"},
    "Goodput: output tok/s of the requests that met the run's SLOs at the rate sweep's best level (where no rate "
    "sweep ran: aggregate tok/s at the best concurrency level; systems' serving_basis says which), the most "
    "concurrent streams and the longest prompt that ran without a failure (measured by the load notebook); "
    "answer quality over the text tasks", "",
    requires=("max_concurrency_ok",), quality_tasks=TEXT_TASKS, min_accuracy=QUALITY_FLOOR)


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


def _unpaired_undecided(systems: pd.DataFrame, axes: Mapping[str, Direction]) -> dict[str, np.ndarray]:
    """axis -> boolean matrix [i, j]: the 95 % interval of the difference between systems i and j on that axis
    includes 0 — the UNPAIRED RULE for an axis with `<axis>_lo` / `<axis>_hi` columns: the two intervals combined
    as independent (MOVER, Newcombe's method 10 for two proportions, from their own bounds). Systems without an
    interval are never undecided by it."""
    out = {}
    for axis in axes:
        lo, hi = f"{axis}_lo", f"{axis}_hi"
        if lo not in systems or hi not in systems:
            continue
        value = pd.to_numeric(systems[axis], errors="coerce").to_numpy(dtype=float)
        low = pd.to_numeric(systems[lo], errors="coerce").to_numpy(dtype=float)
        high = pd.to_numeric(systems[hi], errors="coerce").to_numpy(dtype=float)
        known = ~np.isnan(low) & ~np.isnan(high) & ~np.isnan(value)
        down, up = value - low, high - value  # each side's reach below and above its value
        difference = value[:, None] - value[None, :]
        below = difference - np.sqrt(down[:, None] ** 2 + up[None, :] ** 2)
        above = difference + np.sqrt(up[:, None] ** 2 + down[None, :] ** 2)
        out[axis] = known[:, None] & known[None, :] & (below <= 0) & (above >= 0)
    return out


def _paired_winners(systems: pd.DataFrame, axes: Mapping[str, Direction]) -> dict[str, np.ndarray]:
    """axis -> paired.winner_matrix over the systems' per-item results on it (an `<axis>_items` column, as
    quality_columns writes): +1 / −1 where one system beats the other on the same items, 0 undecided, NaN where
    either has no per-item results there; a pair a compare plan compared (paired.PLAN_COLUMN) gets its verdict."""
    names = systems["system"].astype(str).tolist() if "system" in systems else []
    plans = paired.system_plans(systems)
    return {axis: paired.winner_matrix(systems[f"{axis}_items"].tolist(), names, plans) for axis in axes
            if f"{axis}_items" in systems}


def _speed_words(systems: pd.DataFrame, axes: Mapping[str, Direction]) -> dict[str, dict[tuple[int, int], Any]]:
    """axis -> {(i, j): SpeedVerdict of system i against j} over the prompts both measured (an `<axis>_prompts`
    column, as speed_columns writes; speed_verdicts' PAIRED RULE), for every pair sharing 2 prompts or more."""
    out: dict[str, dict[tuple[int, int], Any]] = {}
    for axis in axes:
        column = f"{axis}_prompts"
        if column not in systems:
            continue
        maps, found = systems[column].tolist(), {}
        for i in range(len(maps)):
            for j in range(i + 1, len(maps)):
                if not isinstance(maps[i], dict) or not isinstance(maps[j], dict):
                    continue
                shared = [k for k in maps[i] if k in maps[j]]
                if len(shared) < 2:
                    continue
                ratios = np.log([maps[i][k] / maps[j][k] for k in shared])
                verdict = speed_verdicts.paired([k[0] for k in shared], ratios, PROMPT_AXES[axis], str(i), str(j))
                found[(i, j)], found[(j, i)] = verdict, verdict.turned()
        out[axis] = found
    return out


def dominance_pairs(systems: pd.DataFrame, axes: Mapping[str, Direction], id_col: str = "system") -> pd.DataFrame:
    """Every (dominated, dominator) pair, with the axes the dominator is strictly better on and those neither is
    (undecided_on, each with why).

    The words are speed_verdicts': where two systems measured the same prompts (`<axis>_prompts`), the paired
    speed verdict decides the axis ("faster"/"slower"; "axis (equivalent within ±10 %)", "axis (undecided on N
    prompts)"; "mixed" — faster on some tasks, slower on others — lets neither dominate across it); where both
    answered the same items of a quality axis (`<axis>_items`), the paired verdict (benchlib.analysis.paired): one
    is better only when the interval of the item-by-item difference excludes 0 ("axis (undecided, paired on the
    same items)"); otherwise, on an axis with intervals, the UNPAIRED RULE (`_unpaired_undecided`: "axis
    (undecided, unpaired: the difference's 95 % interval includes 0)"); an axis without intervals, by its values."""
    matrix = _oriented(systems, axes)
    names = list(axes)
    unpaired = _unpaired_undecided(systems, axes)
    winners = _paired_winners(systems, axes)
    speeds = _speed_words(systems, axes)
    ids = systems[id_col].astype(str).tolist()
    rows = []
    for i in range(len(ids)):
        for j in range(len(ids)):
            if i == j:
                continue
            a, b = matrix[j].copy(), matrix[i].copy()  # does j dominate i?
            why: dict[str, str] = {}
            by_items = [n for n, won in winners.items() if not np.isnan(won[j, i])]
            for n in by_items:  # the paired verdict, not the two pooled values, orders them
                a[names.index(n)] = b[names.index(n)] + winners[n][j, i]
                why[n] = "undecided, paired on the same items"
            by_prompts = {n: found[(j, i)] for n, found in speeds.items() if (j, i) in found and n not in by_items}
            for n, verdict in by_prompts.items():
                # faster +1, slower −1; mixed: j is slower somewhere, so it cannot be at least as good
                step = {speed_verdicts.FASTER: 1, speed_verdicts.SLOWER: -1, speed_verdicts.MIXED: -1}
                a[names.index(n)] = b[names.index(n)] + step.get(verdict.word, 0)
                why[n] = (f"equivalent within ±{verdict.margin:.0%}, paired on {verdict.n} prompts"
                          if verdict.word == speed_verdicts.EQUIVALENT else
                          f"undecided, paired on {verdict.n} prompts")
            for n in names:
                if n in unpaired and n not in why and unpaired[n][i, j] and a[names.index(n)] != b[names.index(n)]:
                    a[names.index(n)] = b[names.index(n)]
                    why[n] = "undecided, unpaired: the difference's 95 % interval includes 0"
            if np.all(a >= b) and np.any(a > b):
                rows.append({"dominated": ids[i], "dominated_by": ids[j],
                             "better_on": [n for n, x, y in zip(names, a, b) if x > y],
                             "undecided_on": [f"{n} ({why.get(n, 'equal')})" for n, x, y in zip(names, a, b)
                                              if x == y]})
    return pd.DataFrame(rows, columns=DOMINANCE_COLUMNS)


DOMINANCE_COLUMNS = ["dominated", "dominated_by", "better_on", "undecided_on"]
# frontier axes judged prompt by prompt where two of our deployments measured the same prompts: axis -> the
# requests' column (speed_columns)
PROMPT_AXES = {"avg_decode_tps": "decode_tps", "avg_e2e_s": "e2e_s"}


def speed_columns(systems: pd.DataFrame, requests: pd.DataFrame | None,
                  exclude_suites: Sequence[str] = ("quality",)) -> pd.DataFrame:
    """Add `<axis>_prompts` for each PROMPT_AXES axis: each system's {(task, variant, repeat): value} over the
    measured requests its figure averages (ok, not warm-up, the quality suite and graded passes under load left
    out), keyed like systems_from_summary's rows (config.identity.keys); None for a system without any."""
    out = systems.copy()
    if requests is None or not len(requests) or not {"model", "host", "task"} <= set(requests.columns):
        return out
    rows = requests
    if "suite" in rows:
        rows = rows[~rows["suite"].isin(exclude_suites)]
    if "status" in rows:
        rows = rows[rows["status"] == "ok"]
    if "is_warmup" in rows:
        rows = rows[~rows["is_warmup"].map(flag)]
    rows = rows[[load_pass(str(t))[1] == 1 for t in rows["task"]]] if len(rows) else rows
    rows = rows.assign(system=identity.keys(rows))
    for axis, column in PROMPT_AXES.items():
        maps = []
        for name in out["system"].astype(str):
            values = speed_verdicts.prompt_values(rows, name, column)
            maps.append({(t, v, r): x for t, v, r, x in values[[*speed_verdicts.KEY, "value"]].itertuples(
                index=False)} or None)
        out[f"{axis}_prompts"] = maps
    return out


ENERGY_AXES = ("tps_per_w", "tokens_per_joule")


def node_flips(systems: pd.DataFrame) -> list[str]:
    """Where the boundary changes a verdict: pairs of systems measured at one chip boundary whose order on tokens per
    joule there is the reverse of their order at the whole node (node_tokens_per_joule, from each node's BMC), in
    words. A GPU-only joule flatters a small model on a big host: the host's own draw is what the node adds."""
    need = {"system", "tokens_per_joule", "node_tokens_per_joule", "energy_boundary"}
    if not need <= set(systems.columns):
        return []
    rows = [(str(r.system), number(r.tokens_per_joule), number(r.node_tokens_per_joule), str(r.energy_boundary))
            for r in systems.itertuples()]
    rows = [r for r in rows if not np.isnan(r[1]) and not np.isnan(r[2]) and r[3]]
    out = []
    for i, (a, chip_a, node_a, where) in enumerate(rows):
        for b, chip_b, node_b, theirs in rows[i + 1:]:
            if where == theirs and (chip_a - chip_b) * (node_a - node_b) < 0:
                win, lose = ((a, chip_a, node_a), (b, chip_b, node_b)) if chip_a > chip_b else \
                    ((b, chip_b, node_b), (a, chip_a, node_a))
                out.append(f"{win[0]} beats {lose[0]} on tokens per joule at the {where} ({win[1]:.3g} vs "
                           f"{lose[1]:.3g}) but not at the whole node ({win[2]:.3g} vs {lose[2]:.3g})")
    return out


def _energy_axes(axes: Mapping[str, Direction]) -> list[str]:
    return [a for a in axes if a in ENERGY_AXES]


def _boundary_of(systems: pd.DataFrame, index: Any) -> str:
    value = systems.at[index, "energy_boundary"] if "energy_boundary" in systems else ""
    return value if isinstance(value, str) else ""


def _has_energy(systems: pd.DataFrame, index: Any, axes: Mapping[str, Direction]) -> bool:
    return any(a in systems and not np.isnan(number(systems.at[index, a])) for a in _energy_axes(axes))


def energy_boundary(systems: pd.DataFrame, axes: Mapping[str, Direction]) -> str:
    """The one energy boundary an energy axis (tok/s per W, tokens per joule) is compared within — the one most
    systems with a value on it share (ties: alphabetical) — or "" when no axis is about energy or no system states
    a boundary. ENERGY BOUNDARY RULE: joules of different boundaries (GPU board, CPU package, …;
    measure/telemetry/boundary) are not ranked against each other; a system measured over another boundary is
    not eligible on such an axis, marked DIFFERENT_BOUNDARY."""
    if not _energy_axes(axes) or "energy_boundary" not in systems:
        return ""
    counts: dict[str, int] = {}
    for index in systems.index:
        theirs = _boundary_of(systems, index)
        if theirs and _has_energy(systems, index, axes):
            counts[theirs] = counts.get(theirs, 0) + 1
    return min(counts, key=lambda b: (-counts[b], b)) if counts else ""


def eligibility(systems: pd.DataFrame, axes: Mapping[str, Direction], requires: Sequence[str] = (),
                floors: Mapping[str, float] | None = None, missing: str = "ineligible") -> pd.Series:
    """'' for a system that may compete, else why not: its own `excluded` reason (random weights), a required
    capability or an axis without a value ("no tps_per_w"), or a floor it misses ("accuracy_workstation 0% <
    50%"). A system without a value is not eligible — never silently the worst."""
    reasons = []
    compared = energy_boundary(systems, axes)
    for index in systems.index:
        excluded = str(systems.at[index, "excluded"]) if "excluded" in systems else ""
        if excluded and excluded != "nan":
            reasons.append(excluded)
            continue
        theirs = _boundary_of(systems, index)
        if compared and theirs != compared and _has_energy(systems, index, axes):
            reasons.append(f"{DIFFERENT_BOUNDARY} ({theirs or 'not stated'}; {', '.join(_energy_axes(axes))} "
                           f"compared within {compared})")
            continue
        needed = [*requires, *axes] if missing == "ineligible" else list(requires)
        absent = [a for a in dict.fromkeys(needed) if a not in systems or np.isnan(number(systems.at[index, a]))]
        why = [f"no {', '.join(absent)}"] if absent else []
        for axis, floor in (floors or {}).items():
            value = number(systems.at[index, axis]) if axis in systems else np.nan
            if not np.isnan(value) and value < floor:
                why.append(f"{axis} {value:.0%} < floor {floor:.0%}")
        reasons.append("; ".join(why))
    return pd.Series(reasons, index=systems.index, dtype=object)


def pareto_frontier(systems: pd.DataFrame, axes: Mapping[str, Direction], id_col: str = "system",
                    requires: Sequence[str] = (), floors: Mapping[str, float] | None = None,
                    missing: str = "ineligible") -> pd.DataFrame:
    """Copy of `systems` with on_frontier (bool), eligible (bool) and dominated_by ('X (better on a, b); Y
    (...)', '' if none, 'not eligible: <why>' for a system that does not compete).

    Systems lacking a value on a `requires` axis or on any axis, or below a floor, do not compete: they
    neither join nor dominate. missing="worst" instead ranks a missing axis value as the worst possible (the
    paper's every-axis reading, where a deployment without audio is simply worst at audio)."""
    unknown = [a for a in axes if a not in systems]
    if unknown:
        raise KeyError(f"axes {unknown} are not columns (have: {', '.join(map(str, systems.columns))})")
    why = eligibility(systems, axes, requires, floors, missing)
    eligible = why == ""
    pairs = (dominance_pairs(systems[eligible], axes, id_col) if eligible.any()
             else pd.DataFrame(columns=DOMINANCE_COLUMNS))
    out = systems.copy()
    ids = out[id_col].astype(str)
    out["eligible"] = eligible
    out["on_frontier"] = eligible & ~ids.isin(set(pairs["dominated"]))
    beaten_by: dict[Any, list[str]] = {}  # one pass over the pairs, not a filtered frame per system
    for p in pairs.itertuples():
        beaten_by.setdefault(p.dominated, []).append(f"{p.dominated_by} (better on {', '.join(p.better_on)})")
    out["dominated_by"] = ["; ".join(beaten_by.get(name, ())) if ok else f"not eligible: {reason}"
                           for name, ok, reason in zip(ids, eligible, why)]
    return out




QUALITY_LONG_COLUMNS = ["system", "task", "passed", "scored", "basis", "note", "modality"]


def _of(rows: pd.DataFrame, modalities: tuple[str, ...]) -> pd.Series:
    """Rows whose task is of one of `modalities` (a row without a modality is a text task's)."""
    if "modality" not in rows:
        return pd.Series("text" in modalities, index=rows.index)
    return rows["modality"].astype(object).where(rows["modality"].notna() & (rows["modality"] != ""), "text") \
        .isin(modalities)


def quality_columns(systems: pd.DataFrame, accuracy: pd.DataFrame,
                    regimes: Mapping[str, Regime] | None = None, items: pd.DataFrame | None = None) -> pd.DataFrame:
    """Add each regime's quality axis to `systems`: accuracy_<regime> = passed ÷ scored pooled over the
    regime's quality tasks, with _lo/_hi (Wilson 95 %, measured rows only), _basis ("measured" by our
    checkers, GRADED, or "reported": the paper's pass/fail summary coded 1/0, one per task) and _tasks (how many of
    the tasks the figure covers). `accuracy` is long: system, task, passed, scored, basis, note, modality (the
    task's input modality; missing: text).

        GRADED RULE: in a regime with `graded` modalities, a system with scored graded-set items (basis GRADED) of
        those modalities is judged on those sets — every such graded set it ran, pooled: the text sets for edge and
        serving, the generated speech set for audio, every modality's for the workstation and the split frontier —
        instead of the regime's quality tasks: the seeds' tasks
        stay the paper's tasks (its tables compare on them), the graded sets are the quality axis wherever they
        were run, and _basis says which one a system's figure is. A set's pass under load (UNDER_LOAD) never
        counts.

    With per-item results (`items`: paired.item_results' long frame), _items holds each system's
    {(task, item): passed} over the same tasks (None without any), which dominance_pairs compares pairwise."""
    out = systems.copy()
    for regime in (regimes or {**REGIMES, "all": ALL_REGIME}).values():
        axis = regime.quality_axis
        if not axis:
            continue
        values, lows, highs, bases, counts, outcome_maps = [], [], [], [], [], []
        for name in out["system"].astype(str):
            mine = accuracy[accuracy["system"] == name] if len(accuracy) else accuracy
            mine = mine[pd.to_numeric(mine["scored"], errors="coerce") > 0] if len(mine) else mine
            graded = mine[(mine["basis"] == GRADED) & _of(mine, regime.graded)] if len(mine) else mine
            rows = graded if len(graded) else (mine[mine["task"].isin(regime.quality_tasks)] if len(mine) else mine)
            tasks = tuple(rows["task"].astype(str)) if len(graded) else regime.quality_tasks
            outcome_maps.append(paired.outcomes(items, name, tasks) or None
                                if items is not None and len(items) else None)
            if not len(rows):
                values.append(np.nan), lows.append(np.nan), highs.append(np.nan), bases.append(""), counts.append(0)
                continue
            passed = float(pd.to_numeric(rows["passed"], errors="coerce").sum())
            scored = float(pd.to_numeric(rows["scored"], errors="coerce").sum())
            basis = "+".join(sorted(set(rows["basis"])))
            low, high = stats.wilson_interval(int(round(passed)), int(round(scored))) \
                if basis in ("measured", GRADED) else (np.nan, np.nan)
            values.append(passed / scored), lows.append(low), highs.append(high), bases.append(basis)
            counts.append(int(rows["task"].nunique()))
        out[axis], out[f"{axis}_lo"], out[f"{axis}_hi"] = values, lows, highs
        out[f"{axis}_basis"], out[f"{axis}_tasks"] = bases, counts
        if items is not None and len(items):
            out[f"{axis}_items"] = outcome_maps
    return out


# ---- sensitivity: which single change of a regime's axes changes its verdict -------------------------------------

# Axes a reader might add to a regime (beyond every regime's own): latencies and both readings of brevity.
SENSITIVITY_AXES: dict[str, Direction] = {**ALL_AXES, "asr_e2e_s": "min", "avg_e2e_s": "min",
                                          "short_qa_output_tokens": "min", "short_qa_decode_tps": "max"}
# Other measures of the same quality: axis -> (its alternative, direction, what the alternative is).
ALTERNATIVE_MEASURES: dict[str, tuple[str, Direction, str]] = {
    "short_qa_output_tokens": ("short_qa_decode_tps", "max", "brevity as the short-answer token rate (the paper's "
                                                              "reading) instead of tokens per answer"),
    "short_qa_decode_tps": ("short_qa_output_tokens", "min", "brevity as tokens per answer instead of the "
                                                             "short-answer token rate"),
}
SENSITIVITY_COLUMNS = ["regime_key", "change", "kind", "axes", "frontier", "flips", "joined", "left"]


def regime_members(systems: pd.DataFrame, regime: Regime, axes: Mapping[str, Direction],
                   id_col: str = "system") -> list[str]:
    """The regime's frontier over `axes` (its eligibility rules; the quality floor while its axis is kept)."""
    floors = {a: f for a, f in regime.floors().items() if a in axes}
    marked = pareto_frontier(systems, axes, id_col, regime.requires, floors, regime.missing)
    return marked.loc[marked["on_frontier"], id_col].astype(str).tolist()


def sensitivity(systems: pd.DataFrame, regime: Regime, id_col: str = "system",
                extra_axes: Mapping[str, Direction] | None = None) -> pd.DataFrame:
    """Every single change of the regime's axes — drop one, add one of `extra_axes` (default SENSITIVITY_AXES,
    those with a value somewhere), or swap one for its ALTERNATIVE_MEASURES — with the frontier it gives and
    whether that differs from the regime's own (flips; joined / left name who). The first row is the regime."""
    axes = regime.all_axes()
    base = regime_members(systems, regime, axes, id_col)
    changes: list[tuple[str, str, dict[str, Direction]]] = [("as defined", "base", dict(axes))]
    if len(axes) > 1:
        changes += [(f"drop {a}", "drop", {k: d for k, d in axes.items() if k != a}) for a in axes]
    for axis, direction in (extra_axes or SENSITIVITY_AXES).items():
        if axis in axes or axis not in systems or pd.to_numeric(systems[axis], errors="coerce").isna().all():
            continue
        if any(ALTERNATIVE_MEASURES.get(a, ("",))[0] == axis for a in axes):
            continue  # the other measure of an axis already judged: that is a swap, below
        changes.append((f"add {axis} {'↑' if direction == 'max' else '↓'}", "add", {**axes, axis: direction}))
    for axis in axes:
        if axis in ALTERNATIVE_MEASURES and ALTERNATIVE_MEASURES[axis][0] in systems:
            other, direction, what = ALTERNATIVE_MEASURES[axis]
            swapped = {(other if k == axis else k): (direction if k == axis else d) for k, d in axes.items()}
            changes.append((what, "swap", swapped))
    rows = []
    for label, kind, changed in changes:
        members = base if kind == "base" else regime_members(systems, regime, changed, id_col)
        rows.append({"regime_key": regime.key, "change": label, "kind": kind,
                     "axes": ", ".join(f"{a} {'↑' if d == 'max' else '↓'}" for a, d in changed.items()),
                     "frontier": "; ".join(members) or "(none)", "flips": set(members) != set(base),
                     "joined": "; ".join(m for m in members if m not in base),
                     "left": "; ".join(m for m in base if m not in members)})
    return pd.DataFrame(rows, columns=SENSITIVITY_COLUMNS)


def sensitivity_lines(table: pd.DataFrame, name=lambda s: s) -> list[str]:
    """Plain lines for the changes that flip the verdict ('robust' when none does)."""
    flips = table[table["flips"].astype(bool)]
    if not len(flips):
        return ["robust: no single axis dropped, added or measured otherwise changes this frontier"]
    out = []
    for row in flips.itertuples():
        moved = ", ".join(filter(None, [f"+ {', '.join(map(name, row.joined.split('; ')))}" if row.joined else "",
                                        f"− {', '.join(map(name, row.left.split('; ')))}" if row.left else ""]))
        out.append(f"flips if {row.change}: {moved}")
    return out
