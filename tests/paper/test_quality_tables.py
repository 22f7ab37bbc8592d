"""The paper's graded-set tables: per deployment and set the accuracy with its n and interval (and under load), and
the paired verdicts between deployments on the items both answered."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from benchlib.analysis import paired, stats
from benchlib.config.graded_run import reduced_note
from benchlib.paper.quality_tables import graded_table, paired_table
from benchlib.paper.runs import META_COLUMNS, Runs

NAMES = {"strong": "tiny-instruct · llama-cpp-python · local", "weak": "tiny-base · llama-cpp-python · local"}


def runs(passes: dict[tuple[str, str], list[bool]]) -> Runs:
    """Runs of two deployments (models 'strong', 'weak' on host 'h', each frame's `system` its name, as load_runs
    writes it) with per-item outcomes per task."""
    requests, summary = [], []
    for (model, task), outcomes in passes.items():
        for index, ok in enumerate(outcomes):
            requests.append({"host": "h", "model": model, "system": NAMES[model], "suite": "quality", "task": task,
                             "variant": f"s1-{index}", "repeat": index, "status": "ok", "is_warmup": False,
                             "passed": ok, "checker": "reasoning_gym"})  # as a graded set's rows carry it
        low, high = stats.wilson_interval(sum(outcomes), len(outcomes))
        summary.append({"host": "h", "model": model, "system": NAMES[model], "suite": "quality", "task": task,
                        "checker": "reasoning_gym",
                        "n_scored": len(outcomes), "n_passed": sum(outcomes), "accuracy": sum(outcomes) / len(outcomes),
                        "accuracy_lo": low, "accuracy_hi": high, "joules_per_correct": 2.5, "tokens_per_joule": 4.0})
    summary.append({"host": "h", "model": "strong", "system": NAMES["strong"], "suite": "quality",
                    "task": "tool_calling", "checker": "tool_call", "n_scored": 8, "n_passed": 8,
                    "accuracy": 1.0})  # a seed task: not a graded set
    meta = pd.DataFrame([{"host": "h", "model": m, "system": NAMES[m]} for m in NAMES]).reindex(columns=META_COLUMNS)
    return Runs(Path("outputs"), pd.DataFrame(summary), pd.DataFrame(requests), pd.DataFrame(), meta)


def test_each_deployments_sets_with_n_interval_and_the_pass_under_load():
    table = graded_table(runs({("strong", "arithmetic"): [True] * 9 + [False], ("weak", "arithmetic"): [False] * 10,
                               ("strong", "arithmetic@c4"): [True] * 5 + [False] * 5}))
    data = table.data
    assert set(data["set"]) == {"arithmetic"} and "tool_calling" not in set(data["set"])
    strong = data[(data["deployment"] == NAMES["strong"])].set_index("in_flight")
    assert strong.loc[1, "n"] == 10 and strong.loc[1, "accuracy"] == 0.9 and strong.loc[4, "accuracy"] == 0.5
    low, high = stats.wilson_interval(9, 10)
    shown = table.display[(table.display["deployment"] == NAMES["strong"]) & (table.display["in flight"] == 1)]
    assert shown["accuracy [95% CI] (n)"].tolist() == [f"90% [{low:.0%}–{high:.0%}] (n=10)"]
    assert graded_table(runs({})) is None


def test_paired_verdicts_per_set_pooled_and_under_load():
    table = paired_table(runs({("strong", "arithmetic"): [True] * 8, ("weak", "arithmetic"): [False] * 8,
                               ("strong", "leg_counting"): [True, False], ("weak", "leg_counting"): [False, False],
                               ("strong", "arithmetic@c4"): [True] * 8}))
    data = table.data.set_index(["set", "a"])
    pooled = data.loc[(paired.ALL_SETS, NAMES["strong"])]
    assert (pooled["n"], pooled["a_only"], pooled["b_only"]) == (10, 9, 0)
    assert pooled["verdict"] == f"{NAMES['strong']} beats {NAMES['weak']}"
    assert pooled["p_value"] == pytest.approx(2 * 0.5 ** 9)
    assert data.loc[("leg_counting", NAMES["strong"]), "verdict"] == "undecided"  # 1 discordant item of 2
    shown = table.display.set_index(["set", "A"]).loc[(paired.ALL_SETS, NAMES["strong"]), "A − B [95% CI]"]
    assert shown.startswith("+90 [+") and shown.endswith("] pp")  # an accuracy difference: percentage points
    load = table.data[table.data["a"] == f"{NAMES['strong']} (c1)"].iloc[0]
    # the same answers at 4 in flight
    assert (load["set"], load["n"], load["verdict"]) == ("arithmetic", 8, "undecided")
    assert paired_table(runs({("strong", "arithmetic"): [True]})) is None  # nothing to compare with


def test_a_reduced_run_says_so_beside_its_accuracy_and_rows_give_their_in_flight():
    """The embedded demo's manifest marks its graded sets reduced: the table prints 'reduced: N of M items'
    for that deployment, 'full pools' for the other; 'in flight' is what the rows were sent at."""
    data = runs({("strong", "arithmetic"): [True] * 4, ("weak", "arithmetic"): [False] * 4})
    data.requests["concurrency"] = [16 if model == "strong" else 1 for model in data.requests["model"]]
    notes = {"weak": reduced_note({"reduced": True, "items": 20, "pool": 964}),
             "strong": reduced_note({"reduced": False, "items": 964, "pool": 964})}
    data.meta["graded_reduced"] = data.meta["model"].map(notes)
    table = graded_table(data)
    shown = table.display.set_index("deployment")
    assert shown.loc[NAMES["weak"], "run size"] == "reduced: 20 of 964 items"
    assert shown.loc[NAMES["strong"], "run size"] == "full pools"
    assert table.data.set_index("deployment").loc[NAMES["strong"], "in_flight"] == 16
    assert reduced_note(None) == "" and reduced_note({"reduced": True, "items": 3, "pool": 10}) == \
        "reduced: 3 of 10 items"


def test_a_sized_plan_is_not_called_reduced():
    """Issue 56: a study whose quality plan stops when the comparison is decided is no 'reduced demo'."""
    sized = reduced_note({"reduced": True, "items": 84, "pool": 964, "plan": "compare", "baseline": "smollm2+full"})
    assert sized == "sized by its compare plan against smollm2+full: at most 84 of 964 items"
    assert "demo" not in sized and "demo" not in reduced_note({"reduced": True, "items": 3, "pool": 10})
