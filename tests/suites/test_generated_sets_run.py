"""The generated sets end to end: the vision suite sends each picture to a fake vision server that answers by what
it was shown (the picture's SHA-256), right or wrong, and the audio suite sends each clip to a fake speech model;
each item is one request scored exactly, the accuracy comes with its n, and two deployments that answered the same
items get the paired verdict on the graded basis; a random-weights deployment's answers are never scored."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from benchlib.analysis import paired
from benchlib.config.tasks import load_tasks
from benchlib.records.rows import read_requests
from benchlib.suites.runner import TRANSCRIPTION_CSV, run_suite
from tests.fakes.servers import FakeTranscriptionServer
from tests.helpers import make_params

SETS = ["count_shapes", "name_colour", "read_word"]
ITEMS = 4
WRONG = {"count_shapes": "42", "name_colour": "I am not sure.", "read_word": "zzz"}


def replies(right: dict[str, set[int]]) -> list[dict]:
    """One reply per planned picture, keyed by its bytes: its answer for the item indexes in right[set]."""
    tasks = load_tasks()
    out = []
    for name in SETS:
        task = tasks[name]
        for index, variant in enumerate(task.variants[:ITEMS]):
            shown = hashlib.sha256(task.media_paths(variant)["image"].read_bytes()).hexdigest()
            answer = variant.expected["answer"]
            text = f"The answer is {answer}." if index in right.get(name, set()) else WRONG[name]
            out.append({"media_sha256": shown, "text": text})
    return out


def run(params_for, right: dict[str, set[int]], host: str):
    params = params_for({"replies": replies(right), "itl": 0.0005, "ttft": 0.001}, host={"name": host},
                        server={"modalities": ["text", "vision"]}, run={"graded_items": ITEMS}, tasks=SETS)
    return run_suite(params, "vision", fresh=True, progress=False)


def test_a_vision_server_is_scored_by_what_it_read_from_each_picture(params_for, outputs):
    strong = run(params_for, {name: set(range(ITEMS)) for name in SETS}, "strong")
    rows = strong.requests
    assert len(rows) == ITEMS * len(SETS) and (rows["status"] == "ok").all()
    assert (rows["media_count"] == 1).all() and rows["passed"].astype(bool).all()
    assert rows.loc[rows["task"] == "name_colour", "check_detail"].str.startswith("read one_choice").all()
    weak = run(params_for, {"count_shapes": {0, 1}}, "weak")
    summary = weak.summary.set_index("task")
    assert summary.loc["count_shapes", ["n_scored", "n_passed"]].tolist() == [ITEMS, 2]
    assert summary.loc["name_colour", "n_passed"] == 0 and summary.loc["read_word", "n_passed"] == 0
    details = weak.requests.set_index(["task", "repeat"])["check_detail"]
    assert details[("count_shapes", 3)].startswith("read last_number: '42'")
    assert "names none of the choices" in details[("name_colour", 0)]

    items = paired.item_results(pd.concat([strong.requests, weak.requests], ignore_index=True))
    assert set(items["basis"]) == {paired.GRADED}
    verdict = paired.verdicts(items).iloc[0]
    assert (verdict["basis"], verdict["n"], verdict["a_only"], verdict["b_only"]) == (paired.GRADED, 12, 10, 0)
    assert verdict["verdict"] == "fake-model · strong beats fake-model · weak"
    assert verdict["p_value"] == pytest.approx(2 * 0.5 ** 10)


def test_a_speech_model_transcribes_the_generated_clips_with_their_wer(outputs):
    clips = load_tasks()["spoken_sentences"].variants
    with FakeTranscriptionServer(text=clips[1].expected, usage_seconds=3.0) as server:
        params = make_params(server.url, server={"kind": "openai", "base_url": server.url, "model": "fake-model",
                                                 "api": "transcription", "language": "en", "modalities": ["audio"]},
                             run={"graded_items": 3}, tasks=["spoken_sentences"])
        result = run_suite(params, "audio", progress=False)
    assert sorted(parts["file"][0] for parts in server.received) == [f"{v.id}.wav" for v in clips[:3]]
    rows = read_requests(result.out_dir / "requests.csv").set_index("variant").sort_index()
    assert rows["passed"].tolist() == [False, True, False]
    assert rows.loc[clips[1].id, "check_detail"].startswith("WER 0.000 (0 of")
    assert rows.loc[clips[0].id, "check_detail"].startswith("WER ") and rows.loc[clips[0].id, "score"] < 1
    per_clip = pd.read_csv(result.out_dir / TRANSCRIPTION_CSV)
    per_clip = per_clip[(per_clip["scope"] == "clip") & (per_clip["task"] == "spoken_sentences")]
    wer = per_clip.set_index("variant")["wer"].sort_index()
    assert wer.iloc[1] == 0 and wer.iloc[0] > 0 and wer.iloc[2] > 0


def test_a_random_weights_deployment_sends_the_pictures_and_is_never_scored(params_for, outputs):
    params = params_for({"replies": replies({name: set(range(ITEMS)) for name in SETS}), "ttft": 0.001},
                        server={"modalities": ["text", "vision"], "weights": "random"},
                        run={"graded_items": 2}, tasks=SETS)
    rows = run_suite(params, "vision", fresh=True, progress=False).requests
    assert len(rows) == 2 * len(SETS) and (rows["status"] == "ok").all() and (rows["media_count"] == 1).all()
    assert rows["passed"].isna().all() and (rows["check_detail"] == "random weights: not scored").all()
    assert paired.item_results(rows).empty  # off the paired verdict and every quality axis
