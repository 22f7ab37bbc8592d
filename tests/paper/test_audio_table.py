"""The paper's audio table: the seed's Phi-4 Multimodal and Gemma 4 E2B transcription rows (000 §4–5) beside our
deployments that ran the transcription task, a speech model behind /v1/audio/transcriptions among them, each with
its corpus WER, real-time factor and what it made of the 440 Hz tone."""

from __future__ import annotations

import pytest

from benchlib import paper
from benchlib.paper.audio_table import audio_transcription_table
from benchlib.paper.systems import SPEECH_MODEL, all_systems, roofline_points
from benchlib.suites.runner import run_suite
from tests.fakes.servers import FakeTranscriptionServer
from tests.helpers import make_params

UMBRELLA = "Tomorrow will be cloudy in the morning and rainy in the evening, so please carry an umbrella."


def test_our_speech_model_sits_beside_the_seeds_transcription_rows(outputs):
    with FakeTranscriptionServer(text=UMBRELLA, usage_seconds=6.0) as server:
        params = make_params(server.url, server={"kind": "openai", "base_url": server.url, "model": "fake-model",
                                                 "software": "fake-whisper", "api": "transcription",
                                                 "modalities": ["audio"]},
                             tasks=["transcription", "ambiguous_audio"], run={"repeats": 3, "warmups": 0})
        run_suite(params, "audio", progress=False)
    ref, runs = paper.load_reference_sets(), paper.load_runs(outputs)
    table = audio_transcription_table(ref, runs)
    rows = table.data.set_index("deployment")
    assert list(rows.index[:2]) == ["Phi-4 Multimodal @ RTX 3090 host", "Gemma 4 E2B @ RTX 3090 host"]
    assert rows.loc["Gemma 4 E2B @ RTX 3090 host", "e2e_mean_s"] == 0.44
    assert rows.loc["Phi-4 Multimodal @ RTX 3090 host", "decode_tps"] == 33.4
    assert rows.loc["Gemma 4 E2B @ RTX 3090 host", "accuracy"] == "reported correct"
    ours = rows.iloc[2]
    assert ours["kind"] == "speech model behind /v1/audio/transcriptions" and ours["clips"] == 5
    # the umbrella clip's words for all five clips: only the umbrella clip is right
    assert 0.5 < ours["corpus_wer"] < 1.5 and ours["max_clip_wer"] >= ours["corpus_wer"]
    assert ours["rtf_mean"] == pytest.approx(ours["e2e_mean_s"] / 6.0)
    assert ours["tone"] == "0/3 empty transcripts"  # the fake heard the umbrella sentence in the tone too
    shown = table.markdown()
    assert "corpus WER" in shown and "real-time factor" in shown and "reported correct" in shown
    # on no LLM frontier and no roofline: it decodes no tokens; the audio table is where it is compared
    systems = all_systems(ref, runs)
    assert systems.loc[systems["source"] == "this run", "excluded"].tolist() == [SPEECH_MODEL]
    assert not (roofline_points(ref, runs, systems)["source"] == "this run").any()


def test_without_runs_the_table_keeps_the_seeds_rows(tmp_path):
    table = audio_transcription_table(paper.load_reference_sets(), paper.load_runs(tmp_path / "none"))
    assert table.data["deployment"].tolist() == ["Phi-4 Multimodal @ RTX 3090 host", "Gemma 4 E2B @ RTX 3090 host"]
