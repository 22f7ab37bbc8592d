"""The transcription request kind: a clip sent as multipart/form-data to /v1/audio/transcriptions (file, model,
language, response_format json), timed whole (e2e, real-time factor), its text recorded and scored as the answer;
every failure a row with its reason. Against tests/fakes/servers.FakeTranscriptionServer, which parses the body
itself."""

from __future__ import annotations

import wave

import pandas as pd
import pytest

from benchlib.config.paths import resolve_data_path
from benchlib.config.tasks import load_tasks
from benchlib.measure.client.backends import make_backend
from benchlib.measure.client.payloads import UnsupportedMedia
from benchlib.measure.client.transcription import TranscriptionRequest
from benchlib.measure.pacing import event_loop
from benchlib.records.rows import RequestRecord, read_requests
from benchlib.suites.runner import TRANSCRIPTION_CSV, Session, run_suite
from tests.fakes.servers import FakeTranscriptionServer
from tests.helpers import make_params

CLIP = resolve_data_path("audio/speech_garden.wav")
GARDEN = "My grandmother planted roses and sunflowers in the garden behind the old house."


def speech_params(url: str, **overrides):
    return make_params(url, server={"kind": "openai", "base_url": url, "model": "fake-model", "api": "transcription",
                                    "language": "en", "modalities": ["audio"]}, **overrides)


def transcribe(server: FakeTranscriptionServer, path=CLIP, language: str = "en") -> RequestRecord:
    params = speech_params(server.url)
    backend = make_backend(params.server, params.run)
    record = RequestRecord(model=params.server.model, task="transcription", suite="audio")
    try:
        event_loop.run(backend.execute(TranscriptionRequest(audio=path, language=language), record))
    finally:
        event_loop.run(backend.aclose())
    return record


def test_the_clip_goes_as_multipart_form_data_with_model_language_and_json_format():
    with FakeTranscriptionServer(text=GARDEN, usage_seconds=5.917) as server:
        record = transcribe(server)
    assert record.status == "ok", record.error_message
    parts = server.received[0]
    assert parts["file"][0] == "speech_garden.wav" and parts["file"][1] == "audio/wav"
    assert parts["file"][2] == CLIP.read_bytes()  # the WAV byte for byte, not re-encoded
    assert parts["model"][2] == b"fake-model" and parts["language"][2] == b"en"
    assert parts["response_format"][2] == b"json"
    assert record.request_kind == "transcription" and record.response_text == GARDEN and record.http_status == 200
    assert record.audio_s == 5.917  # the server's usage.seconds
    assert record.e2e_s > 0 and record.rtf == pytest.approx(record.e2e_s / 5.917)


def test_without_usage_the_clip_length_comes_from_the_wav_header_and_no_language_is_sent_when_none_is_set():
    with wave.open(str(CLIP), "rb") as clip:
        seconds = clip.getnframes() / clip.getframerate()
    with FakeTranscriptionServer(usage_seconds=None) as server:
        record = transcribe(server, language="")
    assert record.status == "ok" and record.audio_s == pytest.approx(seconds)
    assert record.rtf == pytest.approx(record.e2e_s / seconds)
    assert "language" not in server.received[0]


def test_an_empty_transcript_is_an_answer_not_a_failure():
    with FakeTranscriptionServer(text="  ") as server:
        record = transcribe(server)
    assert record.status == "ok" and record.response_text == "" and record.error_kind == ""


@pytest.mark.parametrize("fault, kind, words", [
    ("http_500", "http_500", "the decoder fell over"),
    ("model", "http_404", "The model 'fake-model' does not exist"),
    ("not_json", "bad_response", "not JSON"),
    ("no_text", "bad_response", "no text field"),
    ("text_number", "bad_response", "no text field"),
])
def test_failures_are_rows_with_the_reason(fault, kind, words):
    with FakeTranscriptionServer(fault=fault, served="another-model") as server:
        record = transcribe(server)
    assert record.status == "failed" and record.error_kind == kind and words in record.error_message
    assert record.response_text == "" and record.rtf is None


def test_a_refused_connection_is_a_row():
    with FakeTranscriptionServer() as server:
        url = server.url
    params = speech_params(url)
    backend = make_backend(params.server, params.run)
    record = RequestRecord()
    event_loop.run(backend.execute(TranscriptionRequest(audio=CLIP), record))
    event_loop.run(backend.aclose())
    assert record.status == "failed" and record.error_kind in ("connection_refused", "connect_error")


def test_ollama_takes_no_transcription_params():
    with pytest.raises(ValueError, match="Ollama has no transcription endpoint"):
        make_params("http://127.0.0.1:1", kind="ollama", server={"kind": "ollama", "base_url": "http://127.0.0.1:1",
                                                                 "model": "m", "api": "transcription"})


def test_the_audio_suite_through_a_transcription_endpoint(outputs):
    """Each clip of the transcribing tasks is sent as it is and scored by the task's own checker; audio Q&A is
    unsupported with the reason; transcription.csv has each clip's word errors and the task's corpus WER."""
    with FakeTranscriptionServer(text=GARDEN, usage_seconds=6.0) as server:
        params = speech_params(server.url, tasks=["transcription", "audio_qa", "ambiguous_audio"],
                               run={"repeats": 1, "warmups": 0, "max_tokens": 64, "timeout_s": 5})
        result = run_suite(params, "audio", progress=False)
    rows = read_requests(result.out_dir / "requests.csv").set_index("variant")
    sent = {parts["file"][0] for parts in server.received}
    assert sent == {"speech_umbrella.wav", "speech_grocery.wav", "speech_library.wav", "speech_garden.wav",
                    "speech_meeting.wav", "tone_440hz.wav"}
    assert rows.loc["garden", "passed"] == True  # noqa: E712 — nullable boolean
    assert rows.loc["garden", "check_detail"] == "WER 0.000 (max 0.3)"
    assert rows.loc["umbrella", "passed"] == False  # noqa: E712 — another clip's words
    qa = rows[rows["task"] == "audio_qa"]
    assert (qa["status"] == "unsupported").all() and qa["error_message"].str.contains("speech model").all()
    clips = pd.read_csv(result.out_dir / TRANSCRIPTION_CSV)
    corpus = clips[(clips["scope"] == "corpus") & (clips["task"] == "transcription")].iloc[0]
    garden = clips[clips["variant"] == "garden"].iloc[0]
    assert garden["errors"] == 0 and garden["reference_words"] == 13 and garden["rtf"] > 0
    scored = clips[(clips["scope"] == "clip") & (clips["task"] == "transcription")]
    assert corpus["corpus_wer"] == pytest.approx(scored["errors"].sum() / scored["reference_words"].sum())
    assert corpus["clips"] == 5 and corpus["audio_s"] == 30.0


def test_a_speech_model_transcribing_a_tone_as_nothing_is_recorded_as_an_empty_transcript(outputs):
    with FakeTranscriptionServer(text="", usage_seconds=4.0) as server:
        params = speech_params(server.url, tasks=["ambiguous_audio"], run={"repeats": 3, "warmups": 0})
        result = run_suite(params, "audio", progress=False)
    rows = read_requests(result.out_dir / "requests.csv")
    assert (rows["status"] == "ok").all() and (rows["response_text"].fillna("") == "").all()
    assert rows["check_detail"].str.startswith("empty transcript (no speech heard); no looping").all()
    corpus = pd.read_csv(result.out_dir / TRANSCRIPTION_CSV).query("scope == 'corpus'").iloc[0]
    assert corpus["empty_transcripts"] == corpus["clips"] == 3 and pd.isna(corpus["corpus_wer"])


def test_a_speech_deployment_sends_the_clip_alone_and_refuses_a_question(outputs):
    tasks = load_tasks()
    params = speech_params("http://127.0.0.1:1")
    session = Session(params, "audio", outputs, "run", "salt")
    with pytest.raises(UnsupportedMedia, match="speech model"):
        session.build(tasks["audio_qa"], tasks["audio_qa"].variants[0], RequestRecord())
    request = session.build(tasks["transcription"], tasks["transcription"].variants[0], RequestRecord())
    assert isinstance(request, TranscriptionRequest) and request.audio.name == "speech_umbrella.wav"
