"""The paper's verdict tables: deployment frontiers per regime (who dominates whom on which axes, with the
frontier text) and the decision framework's threshold verdicts."""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

import numpy as np
import pandas as pd

from benchlib.analysis import decisions, deployments, frontier
from benchlib.config import metrics
from benchlib.config.formatting import bracket, fmt, short_number
from benchlib.config.identity import Deployment
from benchlib.config.params import ThresholdParams
from benchlib.paper.format import Table
from benchlib.paper.runs import Runs, seed_rows, source_label
from benchlib.paper.settings import AXIS_FORMATS, THIS_RUN, THRESHOLD_PRESETS
from benchlib.published import reference
from benchlib.records.schema import number


def _axis_text(axis: str, direction: str, value: Any, row: Any = None) -> str:
    """'axis ↑ value' with the 95 % interval where the system has one and, for accuracy, whether it was
    measured by our checkers or reported by the seed (a pass/fail summary)."""
    arrow = "↑" if direction == "max" else "↓"
    spec = metrics.metric(axis).fmt
    text = f"{axis} {arrow} {fmt(number(value), spec, 'n/a')}"
    if row is not None:
        text += bracket(number(row.get(f"{axis}_lo")), number(row.get(f"{axis}_hi")), spec)
        basis = row.get(f"{axis}_basis")
        if isinstance(basis, str) and basis:
            text += f" ({basis})"
    return text


FRONTIER_COLUMNS = ["regime_key", "regime", "axes_spec", "system", "source", "on_frontier", "eligible", "axes",
                    "dominated_by", "paper_frontier_model", "matches_paper", "paper_agrees_if", "paper_reason"]


def frontier_tables(systems: pd.DataFrame, regimes: Mapping[str, frontier.Regime],
                    ref: pd.DataFrame) -> tuple[Table, Table]:
    """(frontier, dominance): per regime × system the axis values, membership and dominators (with the axes
    they are better on); and every dominated/dominator pair."""
    printed = seed_rows(ref, "000")
    printed = printed[printed["metric"] == "frontier_model"] if len(printed) else printed
    rows, pairs = [], []
    axis_columns = list(dict.fromkeys(a for r in regimes.values() for a in r.all_axes()))
    for key, regime in regimes.items():
        if systems.empty:
            continue
        regime_rows, regime_pairs = _regime_frontier(key, regime, systems, printed, axis_columns)
        rows += regime_rows
        pairs += regime_pairs
    data = pd.DataFrame(rows, columns=FRONTIER_COLUMNS + axis_columns)
    frontier_table = Table("frontier", "Deployment frontier per regime preset (000 §7), our runs as extra systems",
                           data, _frontier_display(data),
                           caption="A system is on a regime's frontier when no other eligible system is at least as "
                                   "good on every axis and strictly better on one; an axis decides only where its "
                                   "test does: our deployments' speed prompt by prompt (faster / slower / "
                                   "equivalent / mixed / undecided; a mixed axis lets neither dominate), answers "
                                   "item by item, other axes with intervals by the interval of their difference. "
                                   "A system without a value on an axis, without a required capability or "
                                   "below the regime's accuracy floor is listed as not eligible, with the reason. "
                                   "Accuracy is 'measured' (our checkers, Wilson interval) or 'reported' (the "
                                   "seed's pass/fail summary). 'Every axis at once' reproduces the paper's split "
                                   "frontier (no global winner; there a missing value counts as worst).")
    dominance = pd.DataFrame(pairs, columns=["regime_key", "regime", "dominated", "dominated_by", "better_on",
                                             "undecided_on"])
    return frontier_table, Table("frontier_dominance", "Who dominates whom, on which axes", dominance,
                                 dominance.drop(columns=["regime_key"]),
                                 caption="Every dominated/dominator pair per regime with the axes the dominator is "
                                         "strictly better on and those neither is better on, with why (equal, "
                                         "equivalent, undecided).")


def _regime_frontier(key: str, regime: frontier.Regime, systems: pd.DataFrame, printed: pd.DataFrame,
                     axis_columns: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One regime's rows of the frontier table (one per system, beside the paper's pick) and its dominance pairs."""
    axes = regime.all_axes()
    marked = frontier.pareto_frontier(systems, axes, requires=regime.requires, floors=regime.floors(),
                                      missing=regime.missing)
    dom = frontier.dominance_pairs(systems[marked["eligible"]], axes)
    paper_model = regime.paper_model
    paper_row = printed[printed["task"] == regime.title] if len(printed) else printed
    agree_if = _paper_agrees_if(systems[systems["source"] != THIS_RUN], regime) if paper_model else ""
    rows = []
    for row in marked.to_dict("records"):
        entry = {"regime_key": key, "regime": regime.title,
                 "axes_spec": ", ".join(f"{a} {'↑' if d == 'max' else '↓'}" for a, d in axes.items()),
                 "axes": ", ".join(_axis_text(a, d, row[a], row) for a, d in axes.items()),
                 "system": row["system"], "source": row["source"], "on_frontier": bool(row["on_frontier"]),
                 "dominated_by": row["dominated_by"],
                 "paper_frontier_model": paper_model, "paper_agrees_if": agree_if,
                 "paper_reason": (str(paper_row["note"].iloc[0]) if len(paper_row) else "")}
        entry.update({a: row.get(a, math.nan) if a in axes else math.nan for a in axis_columns})
        entry["eligible"] = bool(row["eligible"])
        if row["source"] != THIS_RUN and paper_model:
            entry["matches_paper"] = bool(row["on_frontier"]) == (row["model"] == paper_model)
        else:
            entry["matches_paper"] = None
        rows.append(entry)
    pairs = [{"regime_key": key, "regime": regime.title, "dominated": p.dominated, "dominated_by": p.dominated_by,
              "better_on": ", ".join(p.better_on), "undecided_on": ", ".join(p.undecided_on)} for p in dom.itertuples()]
    return rows, pairs


def _frontier_display(data: pd.DataFrame) -> pd.DataFrame:
    """The frontier table as the reader scans it: membership in words, the paper's verdict beside ours."""
    return pd.DataFrame({
        "regime": data["regime"], "system": data["system"], "source": data["source"].map(source_label),
        "axes (↑ higher / ↓ lower is better)": data["axes"],
        "on frontier": [("**yes**" if v else "no") if e else "not eligible"
                        for v, e in zip(data["on_frontier"], data["eligible"])],
        "dominated by (better on)": data["dominated_by"].replace("", "—"),
        "paper (§7)": [("agrees" if m else "DIFFERS" + (f" (agrees if {a})" if a else "")) if m is not None
                       else ("extra system" if s == THIS_RUN else "")
                       for m, s, a in zip(data["matches_paper"], data["source"], data["paper_agrees_if"])],
    })


def sensitivity_table(systems: pd.DataFrame, regimes: Mapping[str, frontier.Regime], ref: pd.DataFrame,
                      runs: Runs) -> Table:
    """Per regime, every single change of its axes (frontier.sensitivity) and whether it changes the verdict;
    a regime judging tok/s per W notes each platform's power-reading scope on its base row (column note)."""
    frames = []
    for key, regime in regimes.items():
        if systems.empty or any(a not in systems for a in regime.all_axes()):
            continue
        frames.append(frontier.sensitivity(systems, regime))
    data = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=frontier.SENSITIVITY_COLUMNS)
    scope = power_scope(ref, runs)
    # a regime that judges tok/s per W carries the power-reading scope on its own row ("as defined")
    power_keys = {k for k, r in regimes.items() if "tps_per_w" in r.all_axes()}
    data["note"] = ["power scope: " + "; ".join(scope) + "." if kind == "base" and key in power_keys and scope
                    else "" for key, kind in zip(data["regime_key"], data["kind"])]
    display = pd.DataFrame({
        "regime": data["regime_key"], "change": data["change"], "frontier": data["frontier"],
        "verdict": [("as defined" if k == "base" else ("**flips**" if f else "same"))
                    for k, f in zip(data["kind"], data["flips"])],
        "joined / left": [", ".join(filter(None, [f"+ {j}" if j else "", f"− {x}" if x else ""]))
                          for j, x in zip(data["joined"], data["left"])]})
    caption = ("Each regime's verdict under every single change of its axes: one axis dropped, one added (the "
               "other regimes' axes, latencies, both readings of brevity) or one measured otherwise. 'flips' = a "
               "different frontier. Edge power readings differ in scope: " + "; ".join(scope) + ".")
    return Table("frontier_sensitivity", "Which single axis change flips each regime's verdict", data, display,
                 caption=caption)


def power_scope(ref: pd.DataFrame, runs: Runs) -> list[str]:
    """What each platform's power figure covers, from the seed's own cells (000 §3) and our windows' sources:
    '<host>: <avg power as printed>, envelope <TDP as printed>, idle <idle as printed> (not subtracted)'."""
    lines = []
    platform = seed_rows(ref, "000")
    platform = platform[platform["section"].str.startswith("§3")] if len(platform) else platform
    for host, group in platform.groupby("host", sort=False) if len(platform) else []:
        def text(metric: str) -> str:
            cells = group[group["metric"] == metric]
            return str(cells["value_text"].iloc[0]) if len(cells) else "not printed"
        lines.append(f"{host}: {text('avg_power')} (envelope {text('tdp')}; idle {text('idle_power')}, "
                     "not subtracted)")
    if not runs.empty and len(runs.windows) and "power_source" in runs.windows:
        for host, group in runs.windows.groupby("host", sort=False):
            sources = sorted({str(v) for v in group["power_source"].dropna() if str(v)})
            lines.append(f"{host} (this run): {', '.join(sources) if sources else 'no power sensor'}")
    return lines


def _paper_agrees_if(published: pd.DataFrame, regime: frontier.Regime) -> str:
    """'' when the regime as defined gives the paper's pick on the published systems, else the first single axis
    change (frontier.sensitivity) under which it does ('no single change' when none does)."""
    if published.empty or any(a not in published for a in regime.all_axes()):
        return ""
    changes = frontier.sensitivity(published, regime)
    picks = [[Deployment.model_of(m) for m in str(f).split("; ")] for f in changes["frontier"]]
    if picks[0] == [regime.paper_model]:
        return ""
    order = {"swap": 0, "drop": 1, "add": 2}  # another measure of an axis first: the reading, not the question
    found = sorted((order.get(k, 3), i) for i, (k, p) in enumerate(zip(changes["kind"], picks))
                   if p == [regime.paper_model])
    return str(changes["change"].iloc[found[0][1]]) if found else "no single change"


def frontier_systems_table(systems: pd.DataFrame) -> Table:
    columns = ["system", "source", "avg_decode_tps", "modality_count", "video_support", "tps_per_w", "peak_temp_c",
               "context_window_k", "asr_decode_tps", "short_qa_decode_tps", "avg_power_w", "avg_e2e_s",
               "peak_throughput_tps", "max_concurrency_ok", "max_context_ok_k", "knee_concurrency", "goodput_tps",
               "max_slo_rate_rps", "serving_tps", "serving_basis"]
    data = systems.reindex(columns=columns)
    display = data.copy()
    display["source"] = display["source"].map(source_label)
    display["serving_basis"] = [v if isinstance(v, str) else "" for v in data["serving_basis"]]
    for column in columns[2:-1]:
        display[column] = [fmt(number(v), AXIS_FORMATS.get(column, ".3g"), "n/a") for v in data[column]]
    return Table("frontier_systems", "Frontier inputs per system", data, display,
                 caption="The axis values the regimes judge (n/a = not supported or not measured: worst on that axis).")


def frontier_text(table: Table, sensitivity: Table | None = None) -> str:
    """Plain-text frontier summary: per regime the axes, members, the paper's pick, which single axis change
    flips the verdict (from the sensitivity table) and the dominated systems."""
    data = table.data
    if data.empty:
        return "deployment frontier: no systems (no reference data and no runs)"
    lines = ["DEPLOYMENT FRONTIER (000 §7 regimes; our runs as extra systems)", ""]
    for key, group in data.groupby("regime_key", sort=False):
        regime = group["regime"].iloc[0]
        lines.append(f"[{key}] {regime}")
        lines.append(f"  axes:      {group['axes_spec'].iloc[0]}")
        members = group.loc[group["on_frontier"], "system"].tolist()
        lines.append(f"  frontier:  {'; '.join(members) if members else '(none)'}")
        paper_model = group["paper_frontier_model"].iloc[0]
        if paper_model:
            published = group[group["source"] != THIS_RUN]
            agrees = bool(published["matches_paper"].all()) if len(published) else False
            why = "" if agrees else str(group["paper_agrees_if"].iloc[0] or "")
            lines.append(f"  paper:     {paper_model} — {'reproduced' if agrees else 'NOT reproduced'}"
                         + (f" (reproduced if {why})" if why else ""))
        if sensitivity is not None and len(sensitivity.data):
            changes = sensitivity.data[sensitivity.data["regime_key"] == key]
            for line in frontier.sensitivity_lines(changes, Deployment.model_of) if len(changes) else []:
                lines.append(f"  {line}")
            lines += [f"  {note}" for note in changes.get("note", pd.Series(dtype=str)) if note]
        for row in group.itertuples():
            excluded = str(row.dominated_by).startswith("not eligible")
            tag = "FRONTIER " if row.on_frontier else ("NOT ELIGIBLE" if excluded else "dominated")
            src = source_label(row.source)
            detail = f" ({row.dominated_by})" if excluded else (f" by {row.dominated_by}" if row.dominated_by else "")
            lines.append(f"    {tag} {row.system} [{src}]: {row.axes}{detail}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _criteria_text(long: pd.DataFrame) -> str:
    """'decode tok/s 38.9 [31.2–46.0] (n 10) vs ≥40: undecided at this n; TTFT 266 vs ≤500 ms: PASS' — each
    threshold with the measured value and, where it has one, the interval it is judged against."""
    return "; ".join(f"{r['criterion']} "
                     f"{decisions.shown_value(r) if r['column'] in INTERVAL_CRITERIA else short_number(r['value'])} "
                     f"vs {r['threshold']}: {r['status']}" for _, r in long.iterrows())


INTERVAL_CRITERIA = ("decode_tps", "ttft_ms")  # the criteria our runs measure with an interval


def decisions_table(ref: pd.DataFrame, runs: Runs, thresholds: str = "heros_swap") -> Table:
    """The her-os decision tables re-judged under a threshold preset, and each of our runs judged under the
    `thresholds:` of its own params file (when it sets any; else the preset), with PASS/FAIL per threshold."""
    preset = THRESHOLD_PRESETS[thresholds]
    frames = []
    if len(seed_rows(ref, "001")):
        cands = reference.heros_decision_candidates(ref)
        cands["source"] = seed_rows(ref, "001")["source"].iloc[0]
        frames.append(cands)
    if not runs.empty and len(runs.summary):
        ours = deployments.decision_inputs(runs.summary, requests=runs.requests)
        ours["source"], ours["reported_decision"], ours["section"] = THIS_RUN, "", ""
        frames.append(ours)
    columns = ["candidate", "source", "section", "decode_tps", "ttft_ms", "model_memory_gb", "tools_passed",
               "entity_recall", "vision_works", "verdict", "decision", "reported_decision", "thresholds_used",
               "criteria"]
    if not frames:
        return Table("decisions", "Swap decisions", pd.DataFrame(columns=columns))
    cands = pd.concat(frames, ignore_index=True)
    own = {row.system: json.loads(row.thresholds or "{}") for row in runs.meta.itertuples()} \
        if not runs.empty and "thresholds" in runs.meta else {}
    judged = []
    for index, cand in cands.iterrows():
        limits = own.get(cand["candidate"]) if cand["source"] == THIS_RUN else None
        used = ThresholdParams(**limits) if limits else preset
        one = cands.loc[[index]]
        decided = decisions.decide(one, used).iloc[0]
        judged.append({"verdict": decided["verdict"], "decision": decided["decision"],
                       "thresholds_used": "this run's params: " + ", ".join(f"{k}={v}" for k, v in limits.items())
                       if limits else thresholds,
                       "criteria": _criteria_text(decisions.evaluate_thresholds(one, used))})
    data = pd.concat([cands.reset_index(drop=True), pd.DataFrame(judged)], axis=1).reindex(columns=columns)
    display = data.copy()
    display["source"] = display["source"].map(source_label)
    for column, spec in (("decode_tps", ".1f"), ("ttft_ms", ".0f"), ("model_memory_gb", ".1f"),
                         ("tools_passed", ".3g"), ("entity_recall", ".2f")):
        display[column] = [fmt(number(v), spec) for v in data[column]]
    display["vision_works"] = [fmt(v) if isinstance(v, (bool, np.bool_)) else "–" for v in data["vision_works"]]
    limits = ", ".join(f"{k}={v}" for k, v in preset.model_dump().items() if v not in (None, False))
    return Table("decisions", f"Swap decisions under the her-os thresholds ({thresholds}: {limits})", data, display,
                 caption="001's decision tables re-judged by decisions.decide (SWAP = all pass, VERIFY = none fails but "
                         "data missing or undecided at this n, WAIT = a threshold fails); our decode rate and TTFT "
                         "judged against their 95 % interval (PASS only when the whole interval meets the limit, FAIL "
                         "when none of it does); each of our runs under the thresholds of its own "
                         "params file when it sets any (thresholds_used says which), with every threshold's PASS/"
                         "FAIL and measured value in criteria. Our memory is the peak telemetry memory (an upper "
                         "bound).")
