"""Payload builders produce the documented request shapes.

OpenAI-compatible (vLLM examples/online_serving/openai_chat_completion_client_for_multimodal.py; openai-python
ChatCompletionContentPart* types):
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}
    {"type": "input_audio", "input_audio": {"data": "<base64, no data: prefix>", "format": "wav"}}
    {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,..."}}
Ollama /api/chat (ollama docs/api.md "Chat request (with images)"):
    {"role": "user", "content": "...", "images": ["<base64, no data: prefix>"]}
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image

from benchlib.config.params import ServerParams
from benchlib.config.paths import TESTDATA_DIR
from benchlib.measure.client import payloads
from benchlib.measure.client.payloads import Payload, UnsupportedMedia, build_ollama_message, build_openai_content

GRID = Path("image/grid_a.png")
SPEECH = Path("audio/speech_umbrella.wav")
VIDEO = Path("video/digits_8s_720p.mp4")
ALL = ["text", "vision", "audio", "video"]
# Background colour of each second of the video (testdata/make_testdata.py VIDEO_SECONDS).
VIDEO_RGB = [(210, 30, 30), (245, 140, 20), (245, 220, 40), (40, 160, 60), (40, 80, 210), (120, 50, 160),
             (245, 140, 190), (128, 128, 128)]


def server(kind: str = "openai", **kw) -> ServerParams:
    url = "http://localhost:11434" if kind == "ollama" else "http://localhost:8000/v1"
    return ServerParams(kind=kind, base_url=url, model="m", modalities=kw.pop("modalities", ALL), **kw)


def b64_of(rel: Path) -> str:
    return base64.b64encode((TESTDATA_DIR / rel).read_bytes()).decode("ascii")


def data_url_bytes(url: str, mime: str) -> bytes:
    prefix = f"data:{mime};base64,"
    assert url.startswith(prefix), url[:40]
    return base64.b64decode(url[len(prefix):], validate=True)


def close(a, b, tol=16) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a, b))


# ---------------------------------------------------------------------------------------------------------
# OpenAI-compatible
# ---------------------------------------------------------------------------------------------------------
def test_openai_image_part_is_a_png_data_url_and_text_comes_last():
    p = build_openai_content("What colours?", {"image": GRID}, server())
    assert isinstance(p, Payload)
    assert [part["type"] for part in p.content] == ["image_url", "text"]
    assert p.content[-1] == {"type": "text", "text": "What colours?"}
    assert data_url_bytes(p.content[0]["image_url"]["url"], "image/png") == (TESTDATA_DIR / GRID).read_bytes()
    assert p.message == {"role": "user", "content": p.content}
    assert p.media_count == 1 and p.kinds == ["image"]
    assert p.payload_bytes == len(b64_of(GRID)) and p.media_bytes == (TESTDATA_DIR / GRID).stat().st_size


def test_openai_audio_part_is_raw_base64_wav():
    p = build_openai_content("Transcribe.", {"audio": SPEECH}, server())
    part = p.content[0]
    assert part["type"] == "input_audio" and part["input_audio"]["format"] == "wav"
    data = part["input_audio"]["data"]
    assert not data.startswith("data:")
    assert base64.b64decode(data, validate=True) == (TESTDATA_DIR / SPEECH).read_bytes()
    assert p.media_count == 1 and p.payload_bytes == len(data)


def test_openai_video_as_frames_at_1fps_gives_8_jpeg_frames_in_order():
    p = build_openai_content("Numbers?", {"video": VIDEO}, server(video_mode="frames", video_fps=1))
    frames = p.content[:-1]
    assert len(frames) == 8 and p.media_count == 8 and p.kinds == ["frame"] * 8
    assert p.content[-1]["type"] == "text"
    for second, part in enumerate(frames):
        assert part["type"] == "image_url"
        image = Image.open(io.BytesIO(data_url_bytes(part["image_url"]["url"], "image/jpeg")))
        assert image.format == "JPEG" and image.size == (1280, 720)
        assert close(image.convert("RGB").getpixel((20, 20)), VIDEO_RGB[second]), (second, image.getpixel((20, 20)))
    assert p.payload_bytes == sum(len(part["image_url"]["url"].split(",", 1)[1]) for part in frames)


def test_frame_count_follows_video_fps():
    assert build_openai_content("x", {"video": VIDEO}, server(video_fps=2)).media_count == 16
    assert build_openai_content("x", {"video": VIDEO}, server(video_fps=0.5)).media_count == 4


def test_openai_video_url_mode_sends_the_mp4():
    p = build_openai_content("Describe.", {"video": VIDEO}, server(video_mode="video_url"))
    assert [part["type"] for part in p.content] == ["video_url", "text"]
    assert data_url_bytes(p.content[0]["video_url"]["url"], "video/mp4") == (TESTDATA_DIR / VIDEO).read_bytes()
    assert p.media_count == 1 and p.kinds == ["video"]


def test_image_and_audio_together():
    p = build_openai_content("x", {"audio": SPEECH, "image": GRID}, server())
    assert [part["type"] for part in p.content] == ["image_url", "input_audio", "text"]
    assert p.media_count == 2


# ---------------------------------------------------------------------------------------------------------
# Ollama
# ---------------------------------------------------------------------------------------------------------
def test_ollama_image_goes_in_images_without_data_prefix():
    p = build_ollama_message("What colours?", {"image": GRID}, server("ollama"))
    assert p.message == {"role": "user", "content": "What colours?", "images": [b64_of(GRID)]}
    assert p.content is None and p.media_count == 1


def test_ollama_video_frames_are_images():
    p = build_ollama_message("Numbers?", {"video": VIDEO}, server("ollama", video_fps=1))
    assert len(p.message["images"]) == 8 and p.media_count == 8
    first = Image.open(io.BytesIO(base64.b64decode(p.message["images"][0])))
    assert first.size == (1280, 720)


def test_ollama_cannot_carry_audio_or_video_files():
    with pytest.raises(UnsupportedMedia, match="audio") as info:
        build_ollama_message("Transcribe.", {"audio": SPEECH}, server("ollama"))
    assert "Ollama" in info.value.reason
    with pytest.raises(UnsupportedMedia, match="video"):
        build_ollama_message("Describe.", {"video": VIDEO}, server("ollama", video_mode="video_url"))


def test_ollama_text_only_message_has_no_images_key():
    assert build_ollama_message("hi", {}, server("ollama")).message == {"role": "user", "content": "hi"}


# ---------------------------------------------------------------------------------------------------------
# Errors, conversion, caching
# ---------------------------------------------------------------------------------------------------------
def test_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "nope.png"
    with pytest.raises(FileNotFoundError, match="nope.png"):
        build_openai_content("x", {"image": missing}, server())
    with pytest.raises(FileNotFoundError, match="nope.png"):
        build_ollama_message("x", {"image": missing}, server("ollama"))


def test_undeclared_modality_is_unsupported():
    with pytest.raises(UnsupportedMedia, match="audio"):
        build_openai_content("x", {"audio": SPEECH}, server(modalities=["text", "vision"]))
    with pytest.raises(UnsupportedMedia, match="vision"):
        build_openai_content("x", {"image": GRID}, server(modalities=["text"]))


def test_bmp_is_sent_as_png(tmp_path):
    bmp = tmp_path / "grid.bmp"
    Image.open(TESTDATA_DIR / GRID).save(bmp, format="BMP")
    p = build_openai_content("x", {"image": bmp}, server())
    png = Image.open(io.BytesIO(data_url_bytes(p.content[0]["image_url"]["url"], "image/png")))
    assert png.format == "PNG"
    assert png.convert("RGB").tobytes() == Image.open(TESTDATA_DIR / GRID).convert("RGB").tobytes()


def test_unsupported_audio_format(tmp_path):
    flac = tmp_path / "a.flac"
    flac.write_bytes(b"fLaC")
    with pytest.raises(UnsupportedMedia, match="wav or mp3"):
        build_openai_content("x", {"audio": flac}, server())


def test_encoded_media_are_cached():
    payloads.clear_cache()
    build_openai_content("a", {"image": GRID}, server())
    before = payloads._file_b64.cache_info().hits
    build_openai_content("b", {"image": GRID}, server())
    assert payloads._file_b64.cache_info().hits == before + 1
    build_openai_content("a", {"video": VIDEO}, server())
    frames_before = payloads._sampled_frames.cache_info().hits
    build_ollama_message("b", {"video": VIDEO}, server("ollama"))
    assert payloads._sampled_frames.cache_info().hits == frames_before + 1


def test_cache_notices_a_changed_file(tmp_path):
    path = tmp_path / "x.png"
    Image.new("RGB", (4, 4), "red").save(path)
    first = build_ollama_message("x", {"image": path}, server("ollama")).message["images"][0]
    Image.new("RGB", (8, 8), "blue").save(path)
    second = build_ollama_message("x", {"image": path}, server("ollama")).message["images"][0]
    assert first != second
