"""A sized quality plan end to end through the fake server (suites.quality_looks): the graded sets are sent look by
look, the rule (analysis.sequential) is asked between looks, and quality_plan.csv records the used and planned n
and why it stopped."""

from __future__ import annotations

import pandas as pd
import pytest

from benchlib.analysis import sequential
from benchlib.config.params import ParamsError
from benchlib.config.tasks import load_pass, load_tasks
from benchlib.suites.quality_looks import QUALITY_PLAN_CSV, compare_plans
from benchlib.suites.runner import run_suite
from benchlib.views import run_summary
from tests.helpers import make_params

SETS = ["arithmetic", "letter_counting"]
ITEMS = 20  # per set: 40 planned items a deployment


def replies(all_right: bool) -> list[dict]:
    tasks = load_tasks()
    return [{"when": v.prompt, "text": str(v.expected["answer"]) if all_right else "I do not know."}
            for name in SETS for v in tasks[name].variants[:ITEMS]]


def run(params_for, all_right: bool, variant: str, quality: dict | None = None, graded_concurrency: int = 1):
    params = params_for({"replies": replies(all_right), "itl": 0.0002, "ttft": 0.0005}, server={"variant": variant},
                        run={"graded_items": ITEMS, "max_tokens": 32, "graded_concurrency": graded_concurrency,
                             **({"quality": quality} if quality else {})}, tasks=SETS)
    result = run_suite(params, "quality", fresh=True, progress=False)
    looks = pd.read_csv(result.out_dir / QUALITY_PLAN_CSV) if (result.out_dir / QUALITY_PLAN_CSV).is_file() \
        else pd.DataFrame()
    return result, looks


def first_pass(result) -> pd.DataFrame:
    """The graded sets' first pass (sent graded_in_flight at a time), not their pass under load ('<set>@c<n>')."""
    rows = result.requests[~result.requests["is_warmup"].astype(bool)]
    return rows[[load_pass(task)[1] == 1 for task in rows["task"]]]


def test_compare_stops_once_the_spent_alpha_decides(params_for, outputs):
    base, _ = run(params_for, False, "base")  # fixed plan: every planned item, no quality_plan.csv
    assert len(first_pass(base)) == 2 * ITEMS and not (base.out_dir / QUALITY_PLAN_CSV).exists()
    strong, looks = run(params_for, True, "strong", {"plan": "compare", "baseline": "fake-model+base",
                                                     "alpha": 0.01}, graded_concurrency=2)
    # look 1: 10 of 40 items, 10 vs 0 discordant (p = 0.002) is far from the 1e-7 that look may spend;
    # look 2: 20 of 40, 20 vs 0 (p = 2e-6) below its level (2.7e-4): decided with half the items
    assert looks["n"].tolist() == [10, 20] and looks["planned_n"].tolist() == [40, 40]
    assert looks["a_only"].tolist() == [10, 20] and looks["b_only"].tolist() == [0, 0]
    assert looks["stop"].tolist() == [False, True] and looks["reason"].iloc[-1] == sequential.DECIDED
    assert looks["p_value"].iloc[0] > looks["nominal_alpha"].iloc[0]
    assert looks["p_value"].iloc[1] <= looks["nominal_alpha"].iloc[1]
    assert looks["baseline"].iloc[-1] == "fake-model+base" and looks["alpha"].iloc[-1] == 0.01
    # the pair's verdict is the plan's (paired.planned): the plan found with its baseline, then the terminal's line
    plans = compare_plans([base.out_dir, strong.out_dir], lambda folder: folder.parent.name)
    assert plans[["system", "against", "reason"]].values.tolist() == [
        [strong.out_dir.parent.name, base.out_dir.parent.name, sequential.DECIDED]] and int(plans["look"][0]) == 2
    assert plans["tasks"][0] == ",".join(sorted(SETS))  # the sets it judged (the frontier's axes that hold them)
    line = next(text for text in run_summary.paired_lines([base.out_dir, strong.out_dir]) if " beats " in text)
    assert "(decided by its compare plan at alpha 0.01: look 2, 20 of 40 items, 20 (" in line
    assert "— 100% vs 0% on the same 20 items" in line  # the items both answered: the plan's 20
    sent = first_pass(strong)
    assert sent.groupby("task").size().to_dict() == {name: ITEMS // 2 for name in SETS}
    loaded = strong.requests[strong.requests["concurrency"] == 2]  # the pass under load: the same items only
    assert sorted(loaded["variant"]) == sorted(sent["variant"])


def test_precision_stops_when_the_interval_is_narrow_enough(params_for, outputs):
    _, looks = run(params_for, True, "precise", {"plan": "precision", "half_width": 0.2})
    # 10 of 10 right: Wilson 95 % [72 %, 100 %], the larger side 0.28 > 0.2; 20 of 20: 0.16, precise enough
    assert looks["n"].tolist() == [10, 20]
    assert looks["reason"].fillna("").tolist() == ["", sequential.PRECISION]
    assert looks["half_width"].iloc[-1] == pytest.approx(sequential.half_width(20, 20))


def test_without_the_baselines_answers_every_planned_item_is_sent(params_for, outputs, capsys):
    result, looks = run(params_for, True, "alone", {"plan": "compare", "baseline": "not-run-yet"})
    assert compare_plans([result.out_dir], lambda folder: folder.parent.name).empty  # no comparison, no verdict
    assert len(first_pass(result)) == 2 * ITEMS
    assert looks["reason"].tolist() == [sequential.FIXED] and looks["plan"].tolist() == ["fixed"]
    assert "baseline 'not-run-yet' has no quality results on this host yet" in capsys.readouterr().out


def test_a_plan_is_checked_when_the_params_are_read():
    with pytest.raises(ParamsError, match="baseline"):
        make_params("http://127.0.0.1:9", run={"quality": {"plan": "compare"}})
    with pytest.raises(ParamsError, match="looks"):
        make_params("http://127.0.0.1:9", run={"quality": {"plan": "precision", "looks": [0.5, 0.25]}})


def test_a_plan_of_more_looks_than_the_integration_holds_is_one_line():
    """2,000 looks gave a silently wrong boundary (z = 12.4): the plan is refused when the params are read."""
    with pytest.raises(ParamsError) as caught:
        make_params("http://127.0.0.1:9", run={"quality": {"plan": "compare", "baseline": "other",
                                                            "looks": [i / 2000 for i in range(1, 2001)]}})
    message = str(caught.value)
    assert "looks: 2000 shares, at most 100" in message and "\n" not in message.strip()
