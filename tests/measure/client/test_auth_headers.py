"""One header rule on every path (issue 46.3): the lean wire client, the openai SDK, Ollama's client and the
transcription upload send the same Authorization header — none where the params name no key (a proxy that demands one
then refuses every path alike, never one only), `Bearer <key>` where they name one — as local servers that record
what arrives see it. The SDK never falls back to an OPENAI_API_KEY the environment happens to hold."""

from __future__ import annotations

import httpx
import pytest

from benchlib.config.paths import resolve_data_path
from benchlib.measure.client.backends import make_backend
from benchlib.measure.client.transcription import TranscriptionRequest
from benchlib.measure.pacing import event_loop
from benchlib.records.rows import RequestRecord
from tests.fakes.servers import FakeTranscriptionServer
from tests.helpers import make_params, send

CHAT_PATHS = [("openai", "wire"), ("openai", "sdk"), ("ollama", "wire")]  # Ollama has one path (httpx)
KEY = "sk-test-9f8e7d6c"


def chat_headers(fake_server, kind: str, http_client: str, key_env: str) -> dict[str, str]:
    """The headers the server received with a chat request sent along one path."""
    params = make_params(fake_server.url, {"tokens": 3}, kind,
                         server={"kind": kind, "base_url": fake_server.url, "model": "fake-model", "software": "fake",
                                 "api_key_env": key_env, "extra_body": {"fake": {"tokens": 3}}},
                         run={"http_client": http_client, "max_tokens": 8})
    send(params, max_tokens=8)
    return httpx.get(f"{fake_server.url}/log").json()[-1]["headers"]


def transcription_headers(key_env: str) -> dict[str, str]:
    with FakeTranscriptionServer() as server:
        params = make_params(server.url, server={"kind": "openai", "base_url": server.url, "model": "fake-model",
                                                 "api": "transcription", "modalities": ["audio"],
                                                 "api_key_env": key_env})
        backend = make_backend(params.server, params.run)
        record = RequestRecord(model=params.server.model, task="transcription", suite="audio")
        try:
            event_loop.run(backend.execute(TranscriptionRequest(audio=resolve_data_path("audio/speech_garden.wav")), record))
        finally:
            event_loop.run(backend.aclose())
        assert record.status == "ok", record.error_message
        return server.headers[-1]


@pytest.mark.parametrize("key_env, expected", [("", None), ("BENCH_TEST_KEY", f"Bearer {KEY}")])
def test_every_path_sends_the_same_authorization(fake_server, monkeypatch, key_env, expected):
    monkeypatch.setenv("BENCH_TEST_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")  # never picked up by the SDK
    sent = {f"{kind}/{client}": chat_headers(fake_server, kind, client, key_env).get("authorization")
            for kind, client in CHAT_PATHS}
    sent["transcription"] = transcription_headers(key_env).get("authorization")
    assert sent == dict.fromkeys(sent, expected)


def test_a_named_key_missing_from_the_environment_is_sent_alike_on_every_path(fake_server, monkeypatch):
    monkeypatch.delenv("BENCH_TEST_KEY", raising=False)
    sent = {chat_headers(fake_server, kind, client, "BENCH_TEST_KEY").get("authorization")
            for kind, client in CHAT_PATHS}
    sent.add(transcription_headers("BENCH_TEST_KEY").get("authorization"))
    assert len(sent) == 1, sent
