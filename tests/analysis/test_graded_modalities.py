"""The GRADED RULE by modality: each regime's quality axis pools the graded sets of its own modalities — text for
edge and serving, the generated speech set for audio, every modality's for the workstation and the split frontier —
and a regime whose modality has no graded set keeps its own tasks."""

from __future__ import annotations

import pandas as pd
import pytest

from benchlib.analysis import frontier
from benchlib.analysis.deployments import task_accuracy

SUMMARY = pd.DataFrame([  # one deployment: a text set, a vision set, the speech set, a seed's smoke task
    {"model": "m", "host": "h", "task": "arithmetic", "checker": "reasoning_gym", "modality": "text",
     "n_passed": 8, "n_scored": 10},
    {"model": "m", "host": "h", "task": "count_shapes", "checker": "exact_answer", "modality": "vision",
     "n_passed": 2, "n_scored": 10},
    {"model": "m", "host": "h", "task": "spoken_sentences", "checker": "exact_words", "modality": "audio",
     "n_passed": 5, "n_scored": 20},
    {"model": "m", "host": "h", "task": "basic_qa", "checker": "contains_any", "modality": "text",
     "n_passed": 3, "n_scored": 3},
])


def test_each_regime_pools_the_graded_sets_of_its_modalities():
    accuracy = task_accuracy(SUMMARY)
    assert accuracy.set_index("task")["modality"].to_dict() == {
        "arithmetic": "text", "count_shapes": "vision", "spoken_sentences": "audio", "basic_qa": "text"}
    out = frontier.quality_columns(pd.DataFrame({"system": ["m · h"]}), accuracy).iloc[0]
    assert out["accuracy_edge"] == pytest.approx(8 / 10) and out["accuracy_serving"] == pytest.approx(8 / 10)
    assert out["accuracy_audio"] == pytest.approx(5 / 20) and out["accuracy_audio_basis"] == frontier.GRADED
    assert out["accuracy_workstation"] == pytest.approx(15 / 40) and out["accuracy_workstation_tasks"] == 3
    assert out["accuracy_all"] == pytest.approx(15 / 40)


def test_a_regime_without_graded_sets_of_its_modality_keeps_its_tasks():
    accuracy = task_accuracy(SUMMARY[SUMMARY["task"] != "spoken_sentences"])
    out = frontier.quality_columns(pd.DataFrame({"system": ["m · h"]}), accuracy).iloc[0]
    assert out["accuracy_audio"] == 1.0 and out["accuracy_audio_basis"] == "measured"  # basic_qa: 3 of 3
    no_modality = accuracy.drop(columns="modality")  # a frame from before modalities: its sets are text
    assert frontier.quality_columns(pd.DataFrame({"system": ["m · h"]}), no_modality).iloc[0][
        "accuracy_edge"] == pytest.approx(10 / 20)
