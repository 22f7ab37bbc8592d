"""On this host: the user's own deployments against each other, before any comparison with published systems.

Per pair of deployments and per axis, who is better and what decides it:

    decode speed          the text suite's measured requests, prompt by prompt where both answered the same prompts
                          (analysis.speed_verdicts: the ratio of decode rates, the paired sign-flip test, tasks
                          weighted equally; the unpaired rule where they share none): faster / slower /
                          equivalent within ±m / mixed / undecided, in `better` (the faster one's name, or the
                          word), the ratio with its 95 % interval in ratio, ratio_lo, ratio_hi, the word naming the
                          faster one in `note` (SpeedVerdict.outcome), the evidence with each task's in `rule`
    time to first token   the same rule on TTFT (a shorter time is faster)
    answers (graded sets) THE paired verdict (paired.verdicts, basis GRADED): the accuracy difference on the items
                          both answered, Newcombe's interval and the exact McNemar test; where a compare plan
                          compared the pair, the verdict its sequential rule reached (paired.planned), in `rule`
    energy                tokens per joule where both were measured within one energy boundary (one window
                          each, no interval: a difference beyond ENERGY_MARGIN decides it, a smaller one nothing)

a_value, b_value (with a_lo … b_hi) on decode speed, time to first token and end-to-end latency: each deployment's
figure with its 95 % interval, for reading — analysis.deployments.speed_reading, the mean of its text-suite tasks'
means with the stratified t interval floored at 0, the one figure and interval the first screen and the thresholds
give it; the verdict is the paired one. m is the stricter of the two deployments' run.equivalence_margin. A
deployment dominates another when it is better on one axis and worse on none measured for both (a mixed axis is
worse for both). The seeds' smoke tasks and the end-to-end latency (which also counts each answer's length) are
compared beside the verdict, off the dominance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from benchlib.analysis import deployments, paired, speed_verdicts
from benchlib.config.latency_plan import EQUIVALENCE_MARGIN
from benchlib.records.schema import flag

NOT_MEASURED = "not measured"
UNDECIDED, EQUIVALENT, MIXED = speed_verdicts.UNDECIDED, speed_verdicts.EQUIVALENT, speed_verdicts.MIXED
ENERGY_MARGIN = 0.10  # tokens per joule: one window each, no interval; a smaller relative difference decides nothing
SPEED_SUITE = deployments.SPEED_SUITE


@dataclass(frozen=True)
class Axis:
    key: str
    words: str  # how a sentence names it
    unit: str
    direction: str  # "max" | "min"
    better: str  # the comparative a sentence uses ("faster")


AXES = (Axis("decode_tps", "decode speed", "tok/s", "max", "faster decode"),
        Axis("ttft_ms", "time to first token", "ms", "min", "shorter time to first token"),
        Axis("graded", "answers on the graded sets", "", "max", "better answers"),
        Axis("tokens_per_joule", "energy", "tokens/J", "max", "more tokens per joule"))
SMOKE_AXIS = Axis("smoke", "answers on the seeds' smoke tasks (beside the verdict)", "", "max", "")
E2E_AXIS = Axis("e2e_ms", "end-to-end latency (beside the verdict: it counts each answer's length)", "ms", "min",
                "shorter end-to-end latency")
BESIDE = (SMOKE_AXIS.key, E2E_AXIS.key)  # compared, kept off the dominance and the ranking
# axis -> the requests' column its speed verdict compares (a time in s: its ratio is the ratio in ms)
SPEED_COLUMNS = {"decode_tps": "decode_tps", "ttft_ms": "ttft_s", "e2e_ms": "e2e_s"}
COLUMNS = ["a", "b", "axis", "words", "unit", "a_value", "a_lo", "a_hi", "b_value", "b_lo", "b_hi", "difference",
           "difference_lo", "difference_hi", "better", "n", "p_value", "note", "rule", "ratio", "ratio_lo",
           "ratio_hi", "paired"]


def _measured(requests: pd.DataFrame) -> pd.DataFrame:
    rows = requests
    if "suite" in rows:
        rows = rows[rows["suite"] == SPEED_SUITE]
    if "status" in rows:
        rows = rows[rows["status"] == "ok"]
    if "is_warmup" in rows:
        rows = rows[~rows["is_warmup"].map(flag)]
    return rows


def head_to_head(requests: pd.DataFrame, energy: pd.DataFrame | None = None,
                 plans: pd.DataFrame | None = None, margins: dict[str, float] | None = None) -> pd.DataFrame:
    """Every pair of systems in `requests` (rows with a `system` column), one row per axis (COLUMNS), then the
    rows beside the verdict (the smoke tasks, end-to-end latency). `energy`: system, tokens_per_joule,
    energy_boundary (the systems frame), where measured; `plans`: the compare plans (paired.plan_pairs' frame),
    whose verdicts the graded axis takes; `margins`: each system's run.equivalence_margin (default
    EQUIVALENCE_MARGIN)."""
    systems = list(dict.fromkeys(requests["system"].astype(str))) if len(requests) else []
    speed = _measured(requests) if len(requests) else requests
    speed = speed.assign(system=speed["system"].astype(str)) if len(speed) else speed
    figures = {}
    for name in systems:
        mine = speed[speed["system"] == name] if len(speed) else speed
        figures[name] = {axis: deployments.speed_reading(mine, column, 1.0 if axis == "decode_tps" else 1000.0)
                         for axis, column in SPEED_COLUMNS.items()}
    table = paired.verdicts(paired.item_results(requests), plans) if len(requests) else pd.DataFrame()
    energy_of = {}
    if energy is not None and len(energy) and "tokens_per_joule" in energy:
        for row in energy.itertuples():
            value = pd.to_numeric(pd.Series([row.tokens_per_joule]), errors="coerce").iloc[0]
            energy_of[str(row.system)] = (float(value), str(getattr(row, "energy_boundary", "") or ""))
    rows = []
    for a, b in combinations(systems, 2):
        margin = min((margins or {}).get(a, EQUIVALENCE_MARGIN), (margins or {}).get(b, EQUIVALENCE_MARGIN))
        for axis in (*AXES[:2], E2E_AXIS):
            rows.append(_speed_row(speed, axis, a, b, figures[a][axis.key], figures[b][axis.key], margin))
        for axis, basis in ((AXES[2], paired.GRADED), (SMOKE_AXIS, paired.SMOKE)):
            rows.append(_paired_row(table, basis, axis, a, b))
        rows.append(_energy_row(a, b, energy_of.get(a), energy_of.get(b)))
    order = {axis.key: i for i, axis in enumerate((*AXES, SMOKE_AXIS, E2E_AXIS))}
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.sort_values("axis", key=lambda s: s.map(order), kind="stable").reset_index(drop=True) \
        if len(frame) else frame


def _speed_row(speed: pd.DataFrame, axis: Axis, a: str, b: str, va: tuple, vb: tuple, margin: float) -> dict:
    """One speed axis of a pair: each side's figure for reading (speed_reading), the speed verdict deciding (better =
    the faster one's name, or the word)."""
    row = _row(a, b, axis, a_value=va[0], a_lo=va[1], a_hi=va[2], b_value=vb[0], b_lo=vb[1], b_hi=vb[2])
    if any(math.isnan(v) for v in (va[0], vb[0])):
        return row
    verdict = speed_verdicts.compare(speed, a, b, SPEED_COLUMNS[axis.key], margin)
    better = {speed_verdicts.FASTER: a, speed_verdicts.SLOWER: b}.get(verdict.word, verdict.word)
    row.update(better=better if verdict.n else NOT_MEASURED, n=verdict.n, p_value=verdict.p_value,
               ratio=verdict.ratio, ratio_lo=verdict.ratio_lo, ratio_hi=verdict.ratio_hi, paired=verdict.paired,
               rule=verdict.evidence(per_task=True), note=verdict.outcome())
    return row


def _paired_row(table: pd.DataFrame, basis: str, axis: Axis, a: str, b: str) -> dict:
    """The paired verdict of a and b on one basis, oriented a against b."""
    row = _row(a, b, axis, note="no items both answered", n=0)
    hit = table[(table["basis"] == basis) & (((table["a"] == a) & (table["b"] == b))
                                             | ((table["a"] == b) & (table["b"] == a)))] if len(table) else table
    if not len(hit):
        return row
    result = paired.Paired(**hit.iloc[0].drop("basis").to_dict())
    turned = result.a != a  # pairwise lists them in its own order
    sign = -1 if turned else 1
    difference, low, high = sign * result.difference, *sorted((sign * result.difference_lo,
                                                               sign * result.difference_hi))
    row.update(a_value=result.accuracy_b if turned else result.accuracy_a,
               b_value=result.accuracy_a if turned else result.accuracy_b,
               difference=difference, difference_lo=low, difference_hi=high,
               better={1: a, -1: b, 0: UNDECIDED}[sign * result.winner], n=result.n, p_value=result.p_value,
               rule=result.rule,
               note=f"{result.a_only if not turned else result.b_only} vs "
                    f"{result.b_only if not turned else result.a_only} items only one got right")
    return row


def _row(a: str, b: str, axis: Axis, **values: object) -> dict:
    row = {c: math.nan for c in COLUMNS}
    row.update(a=a, b=b, axis=axis.key, words=axis.words, unit=axis.unit, better=NOT_MEASURED, note="", rule="")
    row.update(values)
    return row


def _energy_row(a: str, b: str, ea: tuple | None, eb: tuple | None) -> dict:
    axis = AXES[3]
    va, vb = (ea or (math.nan, ""))[0], (eb or (math.nan, ""))[0]
    row = _row(a, b, axis, a_value=va, b_value=vb, note="no energy reading on this host")
    if math.isnan(va) or math.isnan(vb):
        return row
    if ea[1] != eb[1]:
        row["note"] = f"different energy boundaries ({ea[1] or 'not stated'} vs {eb[1] or 'not stated'})"
        return row
    close = abs(va - vb) <= ENERGY_MARGIN * max(va, vb)
    row.update(better=UNDECIDED if close else (a if va > vb else b),
               note=f"one window each, no interval: beyond {ENERGY_MARGIN:.0%} apart decides, within it nothing")
    return row


def dominance(frame: pd.DataFrame) -> list[tuple[str, str, str]]:
    """Per pair: (a, b, what it comes to) — 'A dominates B (…)' or 'neither dominates: A …; B …' — over the verdict
    axes (the smoke tasks and end-to-end latency stay out); the axes neither is better on are named with their word
    (equivalent, undecided, mixed: a mixed axis is worse for both, so neither dominates across it)."""
    out = []
    for (a, b), rows in frame.groupby(["a", "b"], sort=False):
        rows = rows[~rows["axis"].isin(BESIDE)]
        better = {name: [AXES_BY_KEY[r.axis].better for r in rows.itertuples() if r.better == name] for name in (a, b)}
        words = {word: [AXES_BY_KEY[r.axis].words for r in rows.itertuples() if r.better == word]
                 for word in (EQUIVALENT, UNDECIDED, MIXED)}
        rest = "; ".join(f"{word} on {', '.join(axes)}" for word, axes in words.items() if axes)
        tail = f"; {rest}" if rest else ""
        if words[MIXED]:
            sides = "; ".join(f"{n} has {', '.join(better[n])}" for n in (a, b) if better[n])
            out.append((a, b, f"neither dominates: {sides + '; ' if sides else ''}{rest}"))
        elif better[a] and not better[b]:
            out.append((a, b, f"{a} dominates {b} ({', '.join(better[a])}{tail})"))
        elif better[b] and not better[a]:
            out.append((a, b, f"{b} dominates {a} ({', '.join(better[b])}{tail})"))
        elif better[a]:
            out.append((a, b, f"neither dominates: {a} has {', '.join(better[a])}; {b} has {', '.join(better[b])}"))
        else:
            out.append((a, b, f"neither dominates: no axis tells {a} and {b} apart{tail}"))
    return out


AXES_BY_KEY = {axis.key: axis for axis in (*AXES, SMOKE_AXIS, E2E_AXIS)}


def ranked(frame: pd.DataFrame) -> list[tuple[str, int]]:
    """(system, axes it is better on against the others), most first: the verdict axes only, the smoke tasks and
    end-to-end latency out (equal counts keep the order the systems came in)."""
    names = list(dict.fromkeys([*frame["a"], *frame["b"]])) if len(frame) else []
    rows = frame[~frame["axis"].isin(BESIDE)] if len(frame) else frame
    wins = {n: int((rows["better"] == n).sum()) for n in names}
    return sorted(wins.items(), key=lambda item: -item[1])


def interval_text(value: float, low: float, high: float, spec: str) -> str:
    """'45.2 [43.1–47.0]', or the value alone without an interval, '–' without a value."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    spread = "" if any(isinstance(v, float) and np.isnan(v) for v in (low, high)) else \
        f" [{format(low, spec)}–{format(high, spec)}]"
    return f"{format(value, spec)}{spread}"
