"""The first screen answers the user's question: "On this host" opens the summary and the report — our two
deployments against each other with the intervals that decide, the graded items each used and why it stopped — and
the terminal, the summary and the frontier give one paired verdict, on the graded sets (the smoke tasks beside)."""

from __future__ import annotations

import re
from dataclasses import asdict
from itertools import takewhile

import matplotlib.pyplot as plt
import pytest

from benchlib import paper
from benchlib.analysis import frontier, paired, sequential
from benchlib.config.formatting import fmt, point_difference
from benchlib.paper.on_this_host import fig_on_this_host
from benchlib.views import run_summary
from tests.fakes.synthetic_run import SYN_HOST, SYN_MODEL, SYN_SERVER, SYN_SYSTEM, write_graded, write_synthetic_run

FAST = SYN_SYSTEM
SLOW = f"{SYN_MODEL} · {SYN_SERVER} · slow · {SYN_HOST}"
FAST_LABEL, SLOW_LABEL = SYN_MODEL, f"{SYN_MODEL} · slow"  # the summary's names: the deployments table keys them
RIGHT, ITEMS = 18, 30  # the fast one gets 18 of 30 graded items right, the slow one none: 18 vs 0 discordant
WEAK = 6  # the undecided study: 6 vs 0 discordant, p = 0.031 — a fixed-sample "beats" at 5 %, not at alpha 0.01


def looks(right: int = RIGHT, planned: int = 60) -> list[dict]:
    """What suites.quality_looks writes for the fast deployment: compare against the slow one at alpha 0.01, look 1
    at 15 items, look 2 at 30 (RIGHT: 60 planned, decided at look 2, 18 vs 0; WEAK: 30 planned, the pool exhausted
    at look 2 undecided, 6 vs 0)."""
    first = sequential.decide("compare", 1, 15, planned, right // 2, a_only=right // 2, b_only=0, alpha=0.01,
                              baseline="tiny-model+slow")
    second = sequential.decide("compare", 2, 30, planned, right, a_only=right, b_only=0, earlier=[15], alpha=0.01,
                               baseline="tiny-model+slow", last=planned == 30)
    assert not first.stop and second.stop
    return [{"run_id": "synthetic01", **asdict(look)} for look in (first, second)]


def study(tmp_path_factory, right: int, planned: int):
    root = write_synthetic_run(tmp_path_factory.mktemp("outputs"), text_passed=True)
    write_synthetic_run(root, variant="slow", speed=0.5)
    write_graded(root, [False] * ITEMS, variant="slow")
    write_graded(root, [True] * right + [False] * (ITEMS - right), plan=looks(right, planned))
    return root, paper.assemble(outputs_dir=root, out_dir=tmp_path_factory.mktemp("paper-out"),
                                figure_formats=["png"])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return study(tmp_path_factory, RIGHT, 60)


@pytest.fixture(scope="module")
def undecided(tmp_path_factory):
    return study(tmp_path_factory, WEAK, 30)


def test_on_this_host_opens_the_summary_in_at_most_ten_lines(built):
    _, assembled = built
    first = assembled.summary.blocks[0]
    assert first.heading == "On this host" and len(first.sentences) <= 10
    ranking, pair, smoke, plan = (s.text for s in first.sentences)
    assert ranking.endswith(f": 1. **{FAST_LABEL}** (2), 2. **{SLOW_LABEL}** (0).")
    p = paired.mcnemar_exact(RIGHT, 0)
    assert pair.startswith(f"**{FAST_LABEL}** against **{SLOW_LABEL}**: decode speed 31.0 [")
    # decided prompt by prompt: the slow one decodes at half the rate on each of the same 6 prompts
    assert (f"tok/s ({FAST_LABEL} faster: decode rate 2.00× [2.00×–2.00×] the other's on the same 6 prompts (paired sign-flip "
            "test, tasks weighted equally))") in pair
    assert (f"answers on the graded sets 60% vs 0% on the same {ITEMS} items, difference +60 [" in pair
            and f"p = {fmt(p, '.2g')} ({FAST_LABEL} better, decided by its compare plan at alpha 0.01: look 2, 30 of 60 "
                "items, 18 (" in pair)
    assert "energy not compared (no energy reading on this host)" in pair
    # an accuracy difference is in percentage points, signed, as the terminal writes it, in the sentence and the table
    graded = assembled.tables["on_this_host"].data.set_index("axis").loc["graded"]
    points = point_difference(graded["difference"], graded["difference_lo"], graded["difference_hi"])
    assert points.startswith("+60 [+") and points.endswith("] pp") and f"difference {points}, p = " in pair
    decides = assembled.tables["on_this_host"].display.set_index("axis").loc["answers on the graded sets",
                                                                              "what decides"]
    assert decides.startswith(f"difference {points} on {ITEMS} items, McNemar p = ")
    assert "time to first token 50.0 [50.0–50.0] vs 50.0 [50.0–50.0] ms (equivalent within ±10%: " in pair
    assert pair.endswith(f"— **{FAST_LABEL}** dominates **{SLOW_LABEL}** (faster decode, better answers; equivalent on time to "
                         "first token).")
    assert smoke.startswith("Beside the verdict, not part of it — the seeds' smoke tasks: "
                            f"{FAST_LABEL} 100% vs {SLOW_LABEL} 75% on 8 items (undecided)")
    assert plan == (f"Graded items: **{FAST_LABEL}** 30 sent of 60 planned, 30 answered, 30 scored (decided against "
                    f"tiny-model+slow at look 2, 18 vs 0 discordant, p = {fmt(p, '.2g')}); **{SLOW_LABEL}** 30 sent, 30 "
                    f"answered, 30 scored (fixed size).")


def test_one_speed_figure_per_deployment_on_the_first_screen_and_on_this_host(built):
    """A deployment's decode rate and TTFT carry one interval: the deployments table's (what the thresholds judge)."""
    _, assembled = built
    own = assembled.tables["deployments"].data.set_index("deployment")
    host = assembled.tables["on_this_host"].data.set_index("axis")
    for axis in ("decode_tps", "ttft_ms"):
        row = host.loc[axis]
        for side in ("a", "b"):
            shown = tuple(row[[f"{side}_value", f"{side}_lo", f"{side}_hi"]])
            assert shown == pytest.approx(tuple(own.loc[row[side], [axis, f"{axis}_lo", f"{axis}_hi"]]), nan_ok=True)
    assert own.loc[FAST, "decode_tps_lo"] < own.loc[FAST, "decode_tps"] < own.loc[FAST, "decode_tps_hi"]


def test_the_figures_panel_titles_stand_apart_under_the_suptitle(built):
    """Neighbouring panels' titles ("time to first token (ms)", "answers on the graded sets") keep a readable gap
    at the width the first screen shows the figure, and the figure's title sits above them all."""
    _, assembled = built
    figure = fig_on_this_host(assembled.tables, assembled.runs)
    renderer = figure.canvas.get_renderer()
    boxes = sorted((ax.title.get_window_extent(renderer) for ax in figure.axes), key=lambda box: box.x0)
    assert [ax.get_title().split("\n")[0] for ax in sorted(figure.axes, key=lambda ax: ax.get_position().x0)] == [
        "decode speed (tok/s)", "time to first token", "answers on the"]
    assert min(right.x0 - left.x1 for left, right in zip(boxes, boxes[1:])) > 0.04 * figure.bbox.width
    assert figure.get_suptitle() and figure._suptitle.get_window_extent(renderer).y0 > max(box.y1 for box in boxes)
    plt.close(figure)


def test_the_report_shows_on_this_host_before_the_published_comparison(built):
    _, assembled = built
    out = assembled.settings.out_dir
    report = (out / "report.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", report, re.M)
    assert headings[1] == "On this host: our deployments against each other" and headings[2] == "Runs"
    assert (out / "figures" / "on_this_host.png").is_file()
    assert (out / "tables" / "quality_plan.md").is_file() and (out / "tables" / "on_this_host.md").is_file()
    plan = assembled.tables["quality_plan"].data.set_index("system").loc[FAST]
    assert (plan["planned_n"], plan["used_n"], plan["looks"], plan["reason"]) == (60, 30, 2, sequential.DECIDED)
    fixed = assembled.tables["quality_plan"].data.set_index("system").loc[SLOW]
    assert (fixed["plan"], fixed["planned_n"], fixed["used_n"], fixed["reason"]) == ("fixed", 30, 30, sequential.FIXED)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.index("On this host") < html.index("General multimodal workstation")


def test_one_basis_terminal_summary_and_frontier_agree(built):
    """The terminal's verdict line, the summary's and the frontier's quality axis: the same 30 graded items, the
    same winner; the 8 smoke answers stay beside (100 % vs 75 %, undecided on their own)."""
    root, assembled = built
    suites = sorted(p for p in (root / SYN_HOST).glob("*/*") if p.is_dir() and "archived" not in p.name)
    lines = run_summary.paired_lines(suites)
    verdict = lines.index("the verdict, on the graded sets:")
    assert lines[verdict + 1].startswith(f"  {FAST} beats {SLOW} (decided by its compare plan at alpha 0.01: look 2, "
                                         f"30 of 60 items, 18 ({FAST}) vs 0 ({SLOW}) right where they differ")
    assert f"— 60% vs 0% on the same {ITEMS} items" in lines[verdict + 1]
    beside = lines.index("beside it, the seeds' smoke tasks (not part of the verdict):")
    assert beside > verdict and "undecided: 100% vs 75% on the same 8 items" in lines[beside + 1]
    host = assembled.tables["on_this_host"].data.set_index("axis").loc["graded"]
    assert (host["n"], host["better"]) == (ITEMS, FAST)
    systems = assembled.tables["_systems"].data.set_index("system")  # what the frontier's quality axis compares
    axis = systems.loc[[FAST, SLOW], "accuracy_workstation_items"]
    frontier_verdict = paired.compare(axis[FAST], axis[SLOW])
    assert (frontier_verdict.n, frontier_verdict.a_only, frontier_verdict.winner) == (ITEMS, RIGHT, 1)
    assert systems.loc[SLOW, "accuracy_workstation_basis"] == paired.GRADED  # not the 8 smoke answers
    assert frontier_winners(assembled) == [(SLOW, FAST, ["accuracy_workstation"])]


def frontier_winners(assembled) -> list[tuple[str, str, list[str]]]:
    """The frontier's dominance on the quality axis alone (what the regimes build on): (dominated, by, better on)."""
    systems = assembled.tables["_systems"].data
    ours = systems[systems["system"].isin([FAST, SLOW])].reset_index(drop=True)
    pairs = frontier.dominance_pairs(ours, {"accuracy_workstation": "max"})
    return [(r.dominated, r.dominated_by, list(r.better_on)) for r in pairs.itertuples()]


def test_a_plan_that_stopped_undecided_is_no_verdict_anywhere(undecided):
    """6 vs 0 discordant: the fixed-sample test alone would say the fast one beats the slow one (p = 0.031, its
    interval above 0), but the compare plan ran out of items at its alpha: terminal, summary and frontier say
    undecided, the figures beside it."""
    root, assembled = undecided
    systems = assembled.tables["_systems"].data.set_index("system")
    axis = systems.loc[[FAST, SLOW], "accuracy_workstation_items"]
    fixed = paired.compare(axis[FAST], axis[SLOW])
    assert (fixed.n, fixed.a_only, fixed.b_only, fixed.winner) == (ITEMS, WEAK, 0, 1)  # what the peek would say
    why = f"undecided by its compare plan: {sequential.EXHAUSTED} at 30 of 30 items"
    suites = sorted(p for p in (root / SYN_HOST).glob("*/*") if p.is_dir() and "archived" not in p.name)
    lines = run_summary.paired_lines(suites)
    line = lines[lines.index("the verdict, on the graded sets:") + 1]
    # and how many more items would decide at the plan's level (6 vs 0 discordant: z 2.45 → 2.58 needs 34)
    assert line.startswith(f"  {FAST} vs {SLOW}: {why}; about 4 more items (34 in all) would decide at this split; a "
                           "fixed-sample test after looks is not a verdict — 20% vs 0%")
    assert "beats" not in line
    host = assembled.tables["on_this_host"].data.set_index("axis").loc["graded"]
    assert (host["n"], host["better"], host["rule"].startswith(why)) == (ITEMS, "undecided", True)
    pair = assembled.summary.blocks[0].sentences[1].text
    assert f"answers on the graded sets 20% vs 0% on the same {ITEMS} items" in pair and f"({why};" in pair
    assert "better answers" not in pair
    assert frontier_winners(assembled) == []
    table = assembled.tables["graded_paired"].data.set_index("set").loc[paired.ALL_SETS]  # the paper's table too
    assert (table["verdict"], table["rule"].startswith(why)) == ("undecided", True)


def test_ineligibility_in_words(built):
    _, assembled = built
    text = assembled.summary.markdown()
    assert (f"**{SLOW_LABEL}** — accuracy 0% [0%–11%] (graded sets) is below the 50% accuracy floor that the workstation "
            "regime asks") in text
    assert "< floor" not in text and "accuracy_workstation 0%" not in text
    # the regimes table says it in a few words, what both share once
    regimes = assembled.tables["regimes"].data.set_index("regime_key")
    assert regimes.loc["edge", "ours"] == ("not eligible (both): no tokens/s per watt or peak temperature measured; "
                                           f"{SLOW_LABEL} also accuracy 0%, below the 50% floor")


def test_the_terminal_gives_the_same_speed_words(built):
    """`frontier-bench study`'s terminal: the speed verdict the report's "On this host" gives, word for word."""
    root, assembled = built
    suites = sorted(p for p in (root / SYN_HOST).glob("*/*") if p.is_dir() and "archived" not in p.name)
    lines = run_summary.closing_lines(suites, root / "summary.txt")
    whole = [line for line in lines if line.startswith("  decode speed: ") or line.startswith("  time to first")]
    decode, ttft = (" ".join([line, *takewhile(lambda row: row.startswith("      "), lines[lines.index(line) + 1:])])
                    .replace("      ", "").strip() for line in whole)
    table = assembled.tables["on_this_host"].data.set_index("axis")
    # the report's words by the short labels, its evidence up to the tasks'
    assert decode == f"decode speed: {FAST_LABEL} faster — {table.loc['decode_tps', 'rule'].split('; per task')[0]}"
    assert ttft.startswith("time to first token: equivalent within ±10% — time to first token ratio tiny-model ÷ "
                           "tiny-model · slow 1.00× [1.00×–1.00×] on the same 6 prompts")
    assert not any("tie" in line for line in (decode, ttft))
