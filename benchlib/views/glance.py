"""The forms the terminal's closing summary and the report's first screen share, so the two say the same thing in
the same words: each deployment's figures as one row (analysis.deployments.deployment_figures, written with their
intervals), and the verdict between deployments in one sentence (analysis.host's dominance, in its words), each
deployment named by its short label (config.identity)."""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from benchlib.analysis import decisions, host
from benchlib.config.formatting import MISSING, bracket, fmt, is_missing, point_difference

# what each of analysis.decisions' verdicts means, said wherever one is shown
VERDICT_MEANING = {decisions.SWAP: "all thresholds pass",
                   decisions.VERIFY: "none fails, some unmeasured or undecided",
                   decisions.WAIT: "a threshold fails"}
DECODE, TTFT, GRADED, FAILED, ENERGY = ("decode tok/s [95% CI]", "TTFT ms [95% CI]", "graded accuracy [95% CI]",
                                        "failed", "energy tok/J")


def _with_interval(value: float, low: float, high: float, spec: str) -> str:
    return MISSING if is_missing(value) else fmt(value, spec) + bracket(low, high, spec)


def figures_display(figures: pd.DataFrame, labels: Mapping[str, str]) -> pd.DataFrame:
    """deployment_figures' rows as a reader scans them: the label, decode rate and TTFT with their intervals, graded
    accuracy with its Wilson interval and n, failed of the requests sent, and tokens per joule where any deployment
    measured energy (the column left out where none did)."""
    shown = pd.DataFrame({
        "deployment": [labels.get(name, name) for name in figures["deployment"]],
        DECODE: [_with_interval(r.decode_tps, r.decode_tps_lo, r.decode_tps_hi, ".1f") for r in figures.itertuples()],
        TTFT: [_with_interval(r.ttft_ms, r.ttft_ms_lo, r.ttft_ms_hi, ".0f") for r in figures.itertuples()],
        GRADED: [f"{_with_interval(r.graded_accuracy, r.graded_lo, r.graded_hi, '.0%')} (n {r.graded_scored})"
                 if r.graded_scored else MISSING for r in figures.itertuples()],
        FAILED: [f"{r.failed} of {r.sent}" for r in figures.itertuples()]})
    if figures["tokens_per_joule"].notna().any():
        shown[ENERGY] = [fmt(v, ".3g") for v in figures["tokens_per_joule"]]
    return shown


def relabel(text: str, labels: Mapping[str, str]) -> str:
    """`text` with every full name in it replaced by its short label (longest first: no name is part of another's)."""
    for name in sorted(labels, key=len, reverse=True):
        text = text.replace(name, labels[name])
    return text


def answers(row: pd.Series, labels: Mapping[str, str]) -> str:
    """One pair's graded axis (analysis.host's row) in a clause, the better one first: 'smollm2-135m 55% vs
    gemma3-270m 0% on the same 29 items: +55 [+34, +72] pp, McNemar p = 3.1e-05'."""
    a, b, value_a, value_b = row["a"], row["b"], row["a_value"], row["b_value"]
    difference, low, high = row["difference"], row["difference_lo"], row["difference_hi"]
    if difference < 0:
        a, b, value_a, value_b, difference, low, high = b, a, value_b, value_a, -difference, -high, -low
    rule = relabel(str(row["rule"]), labels) if isinstance(row.get("rule"), str) and row["rule"] else ""
    return (f"{labels.get(a, a)} {fmt(value_a, '.0%')} vs {labels.get(b, b)} {fmt(value_b, '.0%')} on the same "
            f"{int(row['n'])} items: {point_difference(difference, low, high)}, McNemar p = "
            f"{fmt(row['p_value'], '.2g')}" + (f" ({rule})" if rule else ""))


def verdict_sentence(frame: pd.DataFrame, labels: Mapping[str, str]) -> str:
    """The verdict between our deployments in one sentence, from analysis.host's head-to-head frame: a pair's
    dominance in its words; for more, the ranking and the first place's dominance."""
    verdicts = host.dominance(frame) if len(frame) else []
    if not verdicts:
        return ""
    if len(verdicts) == 1:
        return f"On this host, {relabel(verdicts[0][2], labels)}."
    ranked = host.ranked(frame)
    leader = ranked[0][0]
    beaten = [b if a == leader else a for a, b, text in verdicts
              if leader in (a, b) and text.startswith(f"{leader} dominates")]
    return ("On this host, ranked by the axes where one is better than another: " + ", ".join(
        f"{i}. {labels.get(name, name)} ({wins})" for i, (name, wins) in enumerate(ranked, 1))
        + (f"; {labels.get(leader, leader)} dominates {', '.join(labels.get(n, n) for n in beaten)}" if beaten
           else "") + ".")
