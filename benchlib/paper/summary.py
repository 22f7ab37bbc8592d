"""The report's opening, written from the data: which deployment to use for what, and how sure.

First "On this host": the user's own deployments against each other (analysis.host) — who dominates whom on
speed, time to first token, the paired verdict on the graded sets and energy where measured, each with the
interval that decides it, the smoke tasks beside, and how many graded items each used and why it stopped — in at
most MAX_HOST_LINES lines. Then the comparison with the published systems:
Per regime: who is on the frontier and on which axes (values with their intervals), which of our deployments wins
it among ours — or that none is eligible and why —, the quality between ours as a paired verdict where both
answered the same items (benchlib.analysis.paired), the single axis change that would flip the verdict
(frontier.sensitivity) and who was not eligible, in one line each. Per deployment of ours: its thresholds PASS/FAIL
(analysis.decisions) and where it sits under its bandwidth ceiling. Every sentence names the tables and figures it
rests on: Markdown links into report.md (anchor), file paths on the terminal. Built from the assembled tables; the
catalog registers it (catalog.SUMMARY) and assembly writes it first in report.md, as summary.md and summary.txt."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pandas as pd

from benchlib.analysis import frontier, host, paired
from benchlib.analysis.failures import GRADED_FAILED
from benchlib.analysis.roofline import above_ceiling
from benchlib.config import metrics
from benchlib.config.formatting import fmt, is_missing, point_difference
from benchlib.paper.format import Table
from benchlib.paper.runs import source_label
from benchlib.paper.settings import THIS_RUN
from benchlib.views import glance

MAX_FLIPS = 3  # single changes named per regime; the sensitivity table lists them all
MAX_HOST_LINES = 10  # "On this host" answers the user's question in at most this many lines


def anchor(kind: str, name: str) -> str:
    """The id report.md and report.html give a table or figure ('table-frontier', 'figure-roofline')."""
    return f"{kind}-{name}"


def file_of(kind: str, name: str, image_ext: str = "png") -> str:
    return f"tables/{name}.md" if kind == "table" else f"figures/{name}.{image_ext}"


@dataclass(frozen=True)
class Sentence:
    """One statement and what it rests on: ("table", name) / ("figure", name) pairs."""

    text: str  # Markdown (bold names); the terminal drops the asterisks
    rests_on: tuple[tuple[str, str], ...]


@dataclass
class Block:
    heading: str
    sentences: list[Sentence] = field(default_factory=list)


@dataclass
class Summary:
    title: str
    blocks: list[Block]
    labels: Mapping[tuple[str, str], str]  # (kind, name) -> what a link says ("frontier table"): those built
    verdict: str = ""  # the verdict in one sentence: what the report and the summary say first

    def links(self, sentence: Sentence) -> list[tuple[str, str]]:
        """What a sentence rests on among the tables and figures built (an absent figure is not linked)."""
        return [ref for ref in sentence.rests_on if ref in self.labels]

    def markdown(self, report: str = "") -> str:
        """The summary as Markdown; `report` is the page the anchors live in ('' inside report.md itself,
        'report.md' for the stand-alone summary.md)."""
        lines = [f"## {self.title}", ""] + ([f"**{self.verdict}**", ""] if self.verdict and report else [])
        for block in self.blocks:
            lines += [f"### {block.heading}", ""]
            for sentence in block.sentences:
                links = ", ".join(f"[{self.labels[ref]}]({report}#{anchor(*ref)})" for ref in self.links(sentence))
                lines.append(f"- {sentence.text}" + (f" ({links})" if links else ""))
            lines.append("")
        return "\n".join(lines).rstrip() + "\n"

    def text(self, image_ext: str = "png") -> str:
        """The summary for the terminal: the same sentences, each with the files it rests on."""
        lines = [self.title.upper(), ""] + ([self.verdict, ""] if self.verdict else [])
        for block in self.blocks:
            lines.append(block.heading)
            for sentence in block.sentences:
                files = ", ".join(file_of(*ref, image_ext=image_ext) for ref in self.links(sentence))
                lines.append(f"  • {sentence.text.replace('**', '')}" + (f"  → {files}" if files else ""))
            lines.append("")
        return "\n".join(lines).rstrip() + "\n"


FRONTIER = (("table", "frontier"), ("figure", "pareto_frontier"))
DOMINANCE = (("table", "frontier_dominance"),)
SENSITIVITY = (("table", "frontier_sensitivity"),)
DECISIONS = (("table", "decisions"),)
ROOFLINE = (("table", "roofline"), ("figure", "roofline"))
RUNS = (("table", "runs"),)


def verdict_summary(tables: Mapping[str, Table], regimes: Mapping[str, frontier.Regime],
                    labels: Mapping[tuple[str, str], str]) -> Summary:
    """The summary of an assembly's tables (`regimes`: the settings' regime objects; `labels`: what a link to
    each table and figure says)."""
    data = tables["frontier"].data
    systems = tables["_systems"].data if "_systems" in tables else pd.DataFrame()
    ours = list(dict.fromkeys(data.loc[data["source"] == THIS_RUN, "system"])) if len(data) else []
    failed = systems[(systems["source"] == THIS_RUN) & systems["excluded"].map(
        lambda v: isinstance(v, str) and v.startswith(GRADED_FAILED))] if len(systems) and "excluded" in systems \
        else systems.iloc[0:0]
    blocks = [Block("Not ranked", [Sentence(f"**{r.system}**: {r.excluded} — the terminal and its manifest say why; "
                                            f"fix the server and run it again.", ())
                                   for r in failed.itertuples()])] if len(failed) else []
    blocks += [_host_block(tables)] if "on_this_host" in tables else []
    if not ours:  # with ours, the deployments table's key names them
        blocks.append(Block("What was judged", [_judged(ours, data)]))
    for key, rows in (data.groupby("regime_key", sort=False) if len(data) else []):
        mine = rows[rows["source"] == THIS_RUN]
        if key in regimes and (mine.empty or mine["eligible"].astype(bool).any()):
            # where none of ours is eligible the regimes table says who is on the frontier and why ours are not
            blocks.append(_regime_block(regimes[key], rows, systems, tables.get("frontier_sensitivity")))
    if ours:
        blocks.append(_deployment_block(ours, tables))
    short = short_names(tables)
    for block in blocks:  # each deployment by its short label: the deployments table's key says the full name once
        block.sentences = [Sentence(glance.relabel(s.text, short), s.rests_on) for s in block.sentences]
    return Summary("Summary: which deployment for what, and how sure", blocks, labels,
                   _verdict(tables, ours, list(failed["system"]), short))


def short_names(tables: Mapping[str, Table]) -> dict[str, str]:
    """Our deployments' full names → the short labels the deployments table gives them ({} without runs)."""
    found = tables["deployments"].data if "deployments" in tables else pd.DataFrame()
    return dict(zip(found["deployment"], found["label"])) if len(found) else {}


def _verdict(tables: Mapping[str, Table], ours: Sequence[str], unranked: Sequence[str],
             short: Mapping[str, str]) -> str:
    """The verdict in one sentence: between our deployments on this host (views.glance, analysis.host's words), or
    what there is to say without a pair (those not ranked, analysis.failures.not_ranked, named)."""
    left = "; not ranked: " + ", ".join(short.get(n, n) for n in unranked) + " (its graded answers failed)" \
        if unranked else ""
    if "on_this_host" in tables and len(tables["on_this_host"].data):
        return glance.verdict_sentence(tables["on_this_host"].data, short).removesuffix(".") + left + "."
    ranked = [name for name in ours if name not in unranked]
    if len(ranked) == 1:
        return (f"One deployment of ours ranked, {short.get(ranked[0], ranked[0])}: nothing on this host to compare "
                f"it with{left}; the table and the regimes below say how it stands.")
    if not ours:
        return "No deployment of ours yet (`make run` measures one): the regimes below are the published systems'."
    return f"None of our deployments is ranked{left}." if unranked else ""


HOST = (("table", "on_this_host"), ("figure", "on_this_host"))
PAIRED = (("table", "graded_paired"),)
PLAN = (("table", "quality_plan"),)


def _host_block(tables: Mapping[str, Table]) -> Block:
    """Our deployments against each other: per pair, every axis with the interval deciding it and who dominates;
    the smoke tasks beside the verdict; the graded items each used (at most MAX_HOST_LINES sentences)."""
    frame = tables["on_this_host"].data
    block = Block("On this host")
    pairs = list(frame.groupby(["a", "b"], sort=False))
    plan = tables["quality_plan"].data if "quality_plan" in tables else pd.DataFrame()
    room = MAX_HOST_LINES - 2 - (1 if len(plan) else 0)  # the ranking, the smoke line, the plan line
    verdicts = dict(((a, b), text) for a, b, text in host.dominance(frame))
    block.sentences.append(Sentence("Ranked on this host (axes where one is better than another, out of speed, time "
                                    "to first token, graded answers and energy): " + ", ".join(
                                        f"{i}. **{name}** ({wins})" for i, (name, wins) in
                                        enumerate(host.ranked(frame), 1)) + ".", HOST))
    for (a, b), rows in pairs[:room - (1 if len(pairs) > room else 0)]:
        parts = [_host_axis(r) for _, r in rows.iterrows() if r["axis"] != "smoke"]
        block.sentences.append(Sentence(f"**{a}** against **{b}**: " + "; ".join(parts)
                                        + f" — {_bold(verdicts[(a, b)], a, b)}.", HOST + PAIRED))
    if len(pairs) > room:
        block.sentences.append(Sentence(f"{len(pairs) - room + 1} more pairs in the on-this-host table.", HOST))
    smoke = frame[(frame["axis"] == "smoke") & (frame["n"] > 0)]
    if len(smoke):
        block.sentences.append(Sentence("Beside the verdict, not part of it — the seeds' smoke tasks: " + "; ".join(
            f"{r.a} {fmt(r.a_value, '.0%')} vs {r.b} {fmt(r.b_value, '.0%')} on {int(r.n)} items ("
            f"{r.better if r.better == host.UNDECIDED else r.better + ' better'})" for r in smoke.head(3).itertuples())
            + ".", HOST))
    if len(plan):
        block.sentences.append(Sentence("Graded items: " + "; ".join(
            f"**{r.system}** {r.sent} sent" + ("" if r.plan == "fixed" else f" of {r.planned_n} planned")
            + f", {r.answered} answered, {r.scored} scored ({_stopped(r)})"
            for r in plan.itertuples())
            + ".", PLAN))
    return block


def _bold(text: str, *names: str) -> str:
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, f"**{name}**")
    return text


def _stopped(row: Any) -> str:
    """Why a deployment's quality plan stopped, in words."""
    against = f" against {row.baseline}" if row.plan == "compare" and row.baseline else ""
    return {"decided": f"decided{against} at look {row.looks}, {row.detail}",
            "precision reached": f"precision reached at look {row.looks}, {row.detail}",
            "pool exhausted": f"pool exhausted{against}, undecided: {row.detail}" if row.plan == "compare"
            else f"pool exhausted, {row.detail}",
            "budget": f"its time budget ran out at look {row.looks}, {row.detail}"}.get(row.reason, row.reason)


def _host_axis(row: pd.Series) -> str:
    """One axis of a pair: both values with their intervals, and what decides between them (a speed axis: its
    verdict's word and evidence; 'undecided', 'not measured')."""
    words = row["words"]
    if row["better"] == host.NOT_MEASURED:
        return f"{words} not compared ({row['note']})" if row["note"] else f"{words} not measured"
    if row["axis"] in host.SPEED_COLUMNS:  # the speed verdict: its word, the ratio and what it rests on
        mixed = row["better"] == host.MIXED
        evidence = row["rule"] if mixed else str(row["rule"]).split("; per task")[0]
        spec = ".1f"
        return (f"{words} {host.interval_text(row['a_value'], row['a_lo'], row['a_hi'], spec)} vs "
                f"{host.interval_text(row['b_value'], row['b_lo'], row['b_hi'], spec)} {row['unit']} "
                f"({row['note']}: {evidence})")
    outcome = row["better"] if row["better"] == host.UNDECIDED else f"{row['better']} better"
    if row["axis"] == "graded" and isinstance(row.get("rule"), str) and row["rule"]:  # a compare plan's verdict
        outcome = row["rule"] if row["better"] == host.UNDECIDED else f"{outcome}, {row['rule']}"
    if row["axis"] == "graded":
        return (f"{words} {fmt(row['a_value'], '.0%')} vs {fmt(row['b_value'], '.0%')} on the same {int(row['n'])} "
                f"items, difference {point_difference(row['difference'], row['difference_lo'], row['difference_hi'])}, "
                f"p = {fmt(row['p_value'], '.2g')} ({outcome})")
    spec = ".3g" if row["axis"] == "tokens_per_joule" else ".1f"
    return (f"{words} {host.interval_text(row['a_value'], row['a_lo'], row['a_hi'], spec)} vs "
            f"{host.interval_text(row['b_value'], row['b_lo'], row['b_hi'], spec)} {row['unit']} ({outcome})")


def _judged(ours: Sequence[str], data: pd.DataFrame) -> Sentence:
    published = data.loc[data["source"] != THIS_RUN, "source"].map(source_label).unique().tolist() \
        if len(data) else []
    beside = f" beside the published systems of {', '.join(published)}" if published else ""
    if not ours:
        return Sentence("No deployment of ours yet (`make run` measures one): every verdict below is the published "
                        f"systems' alone{beside}.", RUNS)
    return Sentence(f"{_count(len(ours))} of ours (named model · server · settings · host): "
                    + ", ".join(f"**{name}**" for name in ours) + f"; judged{beside}.", RUNS)


def _count(n: int) -> str:
    return f"{n} deployment{'' if n == 1 else 's'}"


def _why(dominated_by: str) -> str:
    return str(dominated_by).removeprefix("not eligible: ")


def _regime_block(regime: frontier.Regime, rows: pd.DataFrame, systems: pd.DataFrame,
                  sensitivity: Table | None) -> Block:
    block = Block(f"{regime.title} ({rows['axes_spec'].iloc[0]})")
    members = rows[rows["on_frontier"].astype(bool)]
    if len(members):
        block.sentences.append(Sentence(
            "On the frontier: " + "; ".join(f"**{r.system}** [{source_label(r.source)}]: {r.axes}"
                                            for r in members.itertuples()) + ".", FRONTIER))
    else:
        block.sentences.append(Sentence("No system is on the frontier: none is eligible.", FRONTIER))
    block.sentences += _local(regime, rows, systems)
    if sensitivity is not None and len(sensitivity.data):
        block.sentences.append(_flips(sensitivity.data[sensitivity.data["regime_key"] == regime.key]))
    excluded = rows[~rows["eligible"].astype(bool) & (rows["source"] != THIS_RUN)]  # ours: said above
    if len(excluded):
        block.sentences.append(Sentence(
            "Not eligible among the published: " + "; ".join(
                f"**{r.system}** [{source_label(r.source)}] — {in_words(_why(r.dominated_by))}"
                for r in excluded.itertuples())
            + ".", FRONTIER))
    return block


def _local(regime: frontier.Regime, rows: pd.DataFrame, systems: pd.DataFrame) -> list[Sentence]:
    """Which of our deployments wins this regime among ours (and how it stands overall), or why none can."""
    ours = rows[rows["source"] == THIS_RUN]
    if ours.empty:
        return []
    eligible = ours[ours["eligible"].astype(bool)]
    if eligible.empty:
        lead = "Our one deployment is not eligible" if len(ours) == 1 else f"None of our {_count(len(ours))} is eligible"
        return [Sentence(f"{lead}, so none of ours wins this regime: "
                         + "; ".join(f"**{r.system}** — {_reason(regime, r, systems)}"
                                     for r in ours.itertuples()) + ".", FRONTIER)]
    mine = systems[systems["system"].isin(eligible["system"])] if len(systems) else systems
    axes = regime.all_axes()
    winners = frontier.regime_members(mine, regime, axes) if len(mine) else eligible["system"].tolist()
    by_name = ours.set_index("system")
    parts = []
    for name in winners:
        row = by_name.loc[name]
        overall = "on the overall frontier too" if bool(row["on_frontier"]) else \
            f"overall dominated by {row['dominated_by']}"
        parts.append((f"**{name}**", f"{row['axes']}; {overall}"))
    lead = (f"Of ours, {parts[0][0]} wins: {parts[0][1]}" if len(parts) == 1 else
            "Of ours, " + " and ".join(n for n, _ in parts) + " share the frontier (neither beats the other on "
            "every axis): " + "; ".join(f"{n}: {text}" for n, text in parts))
    sentences = [Sentence(lead + ".", FRONTIER + DOMINANCE)]
    beaten = frontier.dominance_pairs(mine, axes) if len(mine) > len(winners) else pd.DataFrame()
    if len(beaten):  # the dominance among ours, with the axes undecided (the paired verdict's on quality)
        sentences.append(Sentence("Of ours, beaten: " + "; ".join(
            f"**{p.dominated}** by {p.dominated_by} (better on {', '.join(p.better_on)}"
            + (f"; neither better on {', '.join(p.undecided_on)}" if p.undecided_on else "") + ")"
            for p in beaten.itertuples()) + ".", DOMINANCE))
    left_out = ours[~ours["eligible"].astype(bool)]
    if len(left_out):
        sentences.append(Sentence("Of ours, not eligible: " + "; ".join(
            f"**{r.system}** — {_reason(regime, r, systems)}"
            for r in left_out.itertuples()) + ".", FRONTIER))
    quality = _paired_quality(regime, winners, eligible["system"].tolist(), mine)
    if quality:
        sentences.append(Sentence("Quality, paired on the same items: " + "; ".join(quality) + ".", DOMINANCE))
    return sentences


def _quality(regime: frontier.Regime, name: str, systems: pd.DataFrame) -> tuple[str, str]:
    """('accuracy_edge 67% [30%–90%]', 'measured'): a deployment's quality axis with its 95 % interval, and its
    basis; ('', '') where it has none."""
    axis = regime.quality_axis
    row = systems[systems["system"] == name] if axis and axis in systems else systems.iloc[0:0]
    if row.empty or is_missing(row[axis].iloc[0]):
        return "", ""
    row = row.iloc[0]
    low, high = row.get(f"{axis}_lo"), row.get(f"{axis}_hi")
    spread = "" if is_missing(low) or is_missing(high) else f" [{fmt(low, '.0%')}–{fmt(high, '.0%')}]"
    basis = row.get(f"{axis}_basis")
    return f"accuracy {fmt(row[axis], '.0%')}{spread}", basis if isinstance(basis, str) else ""


def _reason(regime: frontier.Regime, row: Any, systems: pd.DataFrame) -> str:
    """Why one of ours is not eligible, in words, its quality with the interval: 'no tokens/s per watt measured;
    accuracy 67% [30%–90%] (measured) is below the 80% accuracy floor that the edge regime asks', or '…
    (accuracy 67% [30%–90%], measured)' when the floor is not what excludes it."""
    why, (quality, basis) = _why(row.dominated_by), _quality(regime, row.system, systems)
    below = re.compile(rf"{re.escape(regime.quality_axis)} (\S+) < floor (\d+%)") if regime.quality_axis else None
    if below is not None and below.search(why):
        return in_words(below.sub(lambda m: f"{quality or 'accuracy ' + m.group(1)}"
                                            + (f" ({basis})" if basis else "")
                                            + f" is below the {m.group(2)} accuracy floor that the {regime.key} "
                                              "regime asks", why))
    return in_words(why) + (f" ({quality}{f', {basis}' if basis else ''})" if quality else "")


IDENTIFIER = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")


def metric_words(name: str) -> str:
    """A metric identifier as a reader says it ('tps_per_w' → 'tokens/s per watt'); unknown ones without '_'."""
    try:
        return metrics.label(name, with_unit=False)
    except KeyError:
        return name.replace("_", " ")


def _either(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def in_words(text: str) -> str:
    """Eligibility reasons and axis changes with every metric identifier in words: 'no tps_per_w, peak_temp_c' →
    'no tokens/s per watt or peak temperature measured'."""
    text = re.sub(r"\bno ((?:[a-z][a-z0-9_]*)(?:, [a-z][a-z0-9_]*)*)", lambda m: "no " + _either(
        [metric_words(n) for n in m.group(1).split(", ")]) + " measured", text)
    return IDENTIFIER.sub(lambda m: metric_words(m.group(0)), text)


def _paired_quality(regime: frontier.Regime, winners: Sequence[str], eligible: Sequence[str],
                    systems: pd.DataFrame) -> list[str]:
    """Each local winner against each other eligible deployment of ours on the regime's quality tasks, where
    both answered the same items (paired.compare: the verdict, the difference and its 95 % interval)."""
    column = f"{regime.quality_axis}_items"
    if not regime.quality_axis or column not in systems:
        return []
    items = dict(zip(systems["system"], systems[column]))
    plans = paired.system_plans(systems)  # a pair a compare plan compared: the plan's verdict
    out = []
    for winner in winners:
        for other in eligible:
            a, b = items.get(winner), items.get(other)
            if other == winner or (other in winners and winners.index(other) < winners.index(winner)):
                continue
            if not isinstance(a, dict) or not isinstance(b, dict):
                continue
            result = paired.with_plan(paired.compare(a, b, winner, other), plans)
            if not result.n:
                continue
            verdict = result.verdict if result.winner else "undecided (the difference's interval includes 0)"
            verdict = (f"{result.verdict}, {result.rule}" if result.winner else result.rule) if result.rule else verdict
            out.append(f"{winner} {fmt(result.accuracy_a, '.0%')} vs {other} {fmt(result.accuracy_b, '.0%')} on "
                       f"{result.n} items, difference "
                       f"{point_difference(result.difference, result.difference_lo, result.difference_hi)}: {verdict}")
    return out


def _change_words(change: str) -> str:
    """A sensitivity change ('drop tps_per_w', 'add peak_temp_c ↓', or a swap already in words) as a clause."""
    kind, _, rest = change.partition(" ")
    if kind == "drop":
        return f"{metric_words(rest)} were not judged"
    if kind == "add":
        axis, _, arrow = rest.partition(" ")
        return f"{metric_words(axis)} were judged too ({'higher' if arrow == '↑' else 'lower'} is better)"
    return change


def _flips(changes: pd.DataFrame) -> Sentence:
    """The single axis changes that change this regime's verdict (the first MAX_FLIPS), or that none does, in
    words: what changes and who would join or leave the frontier."""
    flips = changes[changes["flips"].astype(bool)] if len(changes) else changes
    if not len(flips):
        return Sentence("Robust: no single axis dropped, added or measured otherwise changes this frontier.",
                        SENSITIVITY)
    named = []
    for row in flips.head(MAX_FLIPS).itertuples():
        moved = ", ".join(filter(None, [f"{row.joined} would join" if row.joined else "",
                                        f"{row.left} would leave" if row.left else ""]))
        named.append(f"{_change_words(row.change)}: {moved}")
    more = f"; {len(flips) - MAX_FLIPS} more single changes flip it" if len(flips) > MAX_FLIPS else ""
    return Sentence("Would flip if " + "; or if ".join(named) + more + ".", SENSITIVITY)


def _deployment_block(ours: Sequence[str], tables: Mapping[str, Table]) -> Block:
    """Per deployment of ours: its thresholds PASS/FAIL, and measured decode under its bandwidth ceiling."""
    block = Block("Each of our deployments")
    decisions = tables["decisions"].data if "decisions" in tables else pd.DataFrame()
    roofline = tables["roofline"].data if "roofline" in tables else pd.DataFrame()
    for name in ours:
        hit = decisions[decisions["candidate"] == name] if len(decisions) else decisions
        if len(hit):
            row = hit.iloc[0]
            used = str(row["thresholds_used"])
            under = used.replace("this run's params: ", "its params' thresholds (") + ")" \
                if used.startswith("this run's params") else f"the {used} thresholds (its params set none)"
            meaning = glance.VERDICT_MEANING.get(row["verdict"], "")
            block.sentences.append(Sentence(f"**{name}**: {row['verdict']}{f' ({meaning})' if meaning else ''} "
                                            f"under {under} — {row['criteria']}.", DECISIONS))
        point = roofline[(roofline["source"] == THIS_RUN) & (roofline["label"] == name)] if len(roofline) \
            else roofline
        if len(point):
            block.sentences.append(_roofline_sentence(name, point.iloc[0]))
    return block


def _roofline_sentence(name: str, row: pd.Series) -> Sentence:
    per_token = f"{fmt(row['bytes_per_token_gb'], '.3g')} GB/token ({row['bytes_per_param_source']})" \
        if not str(row["bytes_per_param_source"]).startswith("GGUF") else \
        f"{fmt(row['bytes_per_token_gb'], '.3g')} GB/token from the {row['bytes_per_param_source']}"
    if is_missing(row["ceiling_tps"]):
        return Sentence(f"**{name}** decodes {fmt(row['decode_tps'], '.1f')} tok/s (its speed tasks' average); "
                        "no bandwidth ceiling: "
                        f"{row['note']}.", ROOFLINE)
    return Sentence(f"**{name}** decodes {fmt(row['decode_tps'], '.1f')} tok/s (its speed tasks' average), "
                    f"{fmt(row['efficiency'], '.0%')} of "
                    f"its bandwidth ceiling of {fmt(row['ceiling_tps'], '.1f')} tok/s "
                    f"({fmt(row['memory_bandwidth_gbs'], '.3g')} GB/s ÷ {per_token})"
                    + (f" — {above}" if (above := above_ceiling(row["efficiency"])) else "") + ".", ROOFLINE)
