"""Nothing is ranked on answers it did not get: a deployment whose graded sets mostly failed (a server that cut its
answers) is on no frontier and in no "On this host" ranking; the summary says so first, and the graded counts are
sent, answered and scored — never the answered ones alone as if they were the plan."""

from __future__ import annotations

import pytest

from benchlib import paper
from benchlib.analysis.failures import GRADED_FAILED
from tests.fakes.synthetic_run import SYN_HOST, SYN_MODEL, SYN_SERVER, SYN_SYSTEM, write_graded, write_synthetic_run

CUT = f"{SYN_MODEL} · {SYN_SERVER} · cut · {SYN_HOST}"
CUT_LABEL = f"{SYN_MODEL} · cut"  # how the summary names it, the deployments table keying it to its full name


@pytest.fixture(scope="module")
def assembled(tmp_path_factory):
    root = write_synthetic_run(tmp_path_factory.mktemp("outputs"), text_passed=True)
    write_synthetic_run(root, variant="cut", speed=2.0)  # faster: it would rank first on speed
    write_graded(root, [True] * 5, variant="cut", cut=45)  # 5 of 50 answered, all right
    write_graded(root, [True] * 12 + [False] * 18)
    return paper.assemble(outputs_dir=root, out_dir=tmp_path_factory.mktemp("paper-out"), figure_formats=["png"])


def test_a_deployment_whose_graded_sets_failed_is_not_ranked_and_the_summary_says_why(assembled):
    systems = assembled.tables["_systems"].data
    cut = systems[systems["system"] == CUT].iloc[0]
    assert cut["excluded"].startswith(GRADED_FAILED) and "45 of 50 sent failed (stream_cut 45)" in cut["excluded"]
    frontier = assembled.tables["frontier"].data
    assert not frontier.loc[frontier["system"] == CUT, "on_frontier"].any()
    assert not frontier.loc[frontier["system"] == CUT, "eligible"].any()
    first = assembled.summary.blocks[0]
    assert first.heading == "Not ranked" and first.sentences[0].text.startswith(f"**{CUT_LABEL}**: ")
    assert "5 answered" in first.sentences[0].text
    assert assembled.summary.verdict == (f"One deployment of ours ranked, {SYN_MODEL}: nothing on this host to compare "
                                         f"it with; not ranked: {CUT_LABEL} (its graded answers failed); the table "
                                         "and the regimes below say how it stands.")
    # with one deployment left, there is no pair to rank on this host
    assert "on_this_host" not in assembled.tables or CUT not in set(assembled.tables["on_this_host"].data["a"]) | \
        set(assembled.tables["on_this_host"].data["b"])


def test_graded_counts_are_sent_answered_and_scored(assembled):
    plan = assembled.tables["quality_plan"].data.set_index("system")
    assert plan.loc[CUT, ["sent", "answered", "scored"]].tolist() == [50, 5, 5]
    assert plan.loc[SYN_SYSTEM, ["sent", "answered", "scored"]].tolist() == [30, 30, 30]
