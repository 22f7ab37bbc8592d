"""Request payload builders: a prompt plus media files -> what an OpenAI-compatible or Ollama server accepts.

OpenAI-compatible chat content (vLLM, SGLang, llama.cpp, OpenAI) is a list of parts:
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}
    {"type": "input_audio", "input_audio": {"data": "<base64 WAV, no data: prefix>", "format": "wav"}}
    {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,..."}}        (video_mode: video_url)
    {"type": "text", "text": prompt}
Sources: vLLM's examples/online_serving/openai_chat_completion_client_for_multimodal.py (image_url with a
base64 data URL, video_url with "data:video/mp4;base64,…", input_audio {"data", "format": "wav"});
openai-python's ChatCompletionContentPartInputAudioParam (data: base64 without a data: prefix,
format "wav" | "mp3") and ChatCompletionContentPartImageParam (url may be a base64 data URL).
With video_mode "frames" the video is sampled at server.video_fps with PyAV and each frame is sent as
its own JPEG image_url part, which every vision server accepts.

Ollama's native /api/chat message (ollama docs/api.md, "Chat request (with images)"):
    {"role": "user", "content": prompt, "images": ["<base64>", ...]}   # plain base64, no data: prefix
Video goes as sampled frames in `images`. The message has no field for audio or a video file, so those
raise UnsupportedMedia with the reason (the runner records an 'unsupported' row, not a crash).

Media parts come before the text part (the order Gemma and Qwen model cards show); encoded media are
cached per (path, size, mtime) because the same file is sent on every repeat.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from benchlib.config.params import ServerParams
from benchlib.config.paths import resolve_data_path

# Media kind (task variant field) -> the modality a server must declare to receive it.
KIND_MODALITY = {"image": "vision", "audio": "audio", "video": "video"}
IMAGE_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
              ".gif": "image/gif"}
AUDIO_FORMATS = {".wav": "wav", ".mp3": "mp3"}  # the two formats OpenAI's input_audio accepts
VIDEO_MIME = {".mp4": "video/mp4", ".webm": "video/webm", ".mov": "video/quicktime", ".mkv": "video/x-matroska"}
FRAME_FORMAT = "JPEG"
FRAME_QUALITY = 90


class UnsupportedMedia(Exception):
    """This server/protocol cannot carry this media; `reason` says why (one line)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Payload:
    """What to send for one user turn.

    content: the OpenAI-compatible `content` (list of parts; None for Ollama payloads)
    message: the whole user message ({"role": "user", "content": ...} plus "images" for Ollama)
    media_count: media items actually sent (each video frame counts; a video_url counts 1)
    payload_bytes: bytes of base64 media text put on the wire
    media_bytes: bytes of the binary media before base64 (files, or encoded frames)
    kinds: media kind per item sent ("image", "audio", "video", "frame")
    """

    content: Any = None
    message: dict[str, Any] = field(default_factory=dict)
    media_count: int = 0
    payload_bytes: int = 0
    media_bytes: int = 0
    kinds: list[str] = field(default_factory=list)

    def count(self, b64: str, size: int, kind: str) -> None:
        """Account for one media item put into the request."""
        self.media_count += 1
        self.payload_bytes += len(b64)
        self.media_bytes += size
        self.kinds.append(kind)


# ---------------------------------------------------------------------------------------------------------
# Encoding (cached)
# ---------------------------------------------------------------------------------------------------------
def _resolve(path: str | Path) -> Path:
    resolved = resolve_data_path(path)
    if not resolved.is_file():
        raise FileNotFoundError(f"media file not found: {resolved}")
    return resolved


def _stamp(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path), stat.st_size, stat.st_mtime_ns


@lru_cache(maxsize=64)
def _file_b64(key: tuple[str, int, int]) -> tuple[str, int]:
    data = Path(key[0]).read_bytes()
    return base64.b64encode(data).decode("ascii"), len(data)


@lru_cache(maxsize=16)
def _png_b64(key: tuple[str, int, int]) -> tuple[str, int]:
    """Images in formats servers handle badly (BMP silently failed in the her-os report) re-encoded as PNG."""
    from PIL import Image

    with Image.open(key[0]) as img:
        buf = io.BytesIO()
        img.convert("RGBA" if img.mode in ("RGBA", "LA", "P") else "RGB").save(buf, format="PNG")
    data = buf.getvalue()
    return base64.b64encode(data).decode("ascii"), len(data)


def encode_image(path: str | Path) -> tuple[str, str, int]:
    """(mime type, base64, binary size) of an image; formats other than PNG/JPEG/WebP/GIF become PNG."""
    resolved = _resolve(path)
    mime = IMAGE_MIME.get(resolved.suffix.lower())
    if mime:
        b64, size = _file_b64(_stamp(resolved))
        return mime, b64, size
    b64, size = _png_b64(_stamp(resolved))
    return "image/png", b64, size


def encode_file(path: str | Path) -> tuple[str, int]:
    """(base64, binary size) of a file, cached."""
    return _file_b64(_stamp(_resolve(path)))



def _frame_targets(duration: float, fps: float) -> list[float]:
    """Sample times: the middle of each 1/fps interval, so a frame never sits on a scene boundary."""
    count = max(1, int(duration * fps + 1e-6))
    return [(i + 0.5) / fps for i in range(count)]


def _duration(container: Any, stream: Any) -> float:
    """Seconds of video from the stream header: frames / rate, else the stream or container duration."""
    rate = float(stream.average_rate) if stream.average_rate else 0.0
    if stream.frames and rate:
        return stream.frames / rate
    if stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    if container.duration:
        return container.duration / 1_000_000
    return 0.0


@lru_cache(maxsize=8)
def _sampled_frames(key: tuple[str, int, int], fps: float, fmt: str, quality: int) -> tuple[tuple[str, int], ...]:
    import av

    chosen = []
    with av.open(key[0]) as container:
        stream = container.streams.video[0]
        targets = _frame_targets(_duration(container, stream), fps)
        previous = None
        index = 0
        for frame in container.decode(stream):  # one pass; only the chosen frames become images
            while index < len(targets) and frame.time is not None and frame.time >= targets[index]:
                target = targets[index]
                nearer = previous is not None and abs(previous.time - target) < abs(frame.time - target)
                chosen.append((previous if nearer else frame).to_image())
                index += 1
            previous = frame
            if index == len(targets):
                break
        if previous is None:
            raise UnsupportedMedia(f"{key[0]}: no video frames could be decoded")
        while index < len(targets):  # targets past the last frame (header longer than the stream)
            chosen.append(previous.to_image())
            index += 1
    out = []
    for image in chosen:
        buf = io.BytesIO()
        image.convert("RGB").save(buf, format=fmt, quality=quality)
        data = buf.getvalue()
        out.append((base64.b64encode(data).decode("ascii"), len(data)))
    return tuple(out)


def sample_frames(path: str | Path, fps: float = 1.0, fmt: str = FRAME_FORMAT,
                  quality: int = FRAME_QUALITY) -> list[tuple[str, int]]:
    """[(base64, binary size)] of frames sampled at `fps` (floor(duration x fps) frames, at least one),
    each encoded as `fmt` (JPEG by default). An 8 s video at 1 fps gives 8 frames."""
    return list(_sampled_frames(_stamp(_resolve(path)), float(fps), fmt.upper(), int(quality)))


def clear_cache() -> None:
    for cached in (_file_b64, _png_b64, _sampled_frames):
        cached.cache_clear()


# ---------------------------------------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------------------------------------
def _check_modalities(media: dict[str, Path], server: ServerParams) -> None:
    for kind in media:
        if kind not in KIND_MODALITY:
            raise ValueError(f"unknown media kind '{kind}' (known: {', '.join(KIND_MODALITY)})")
        needed = KIND_MODALITY[kind]
        if needed not in server.modalities:
            raise UnsupportedMedia(f"{server.model} is declared without '{needed}' input "
                                   f"(server.modalities={list(server.modalities)}); cannot send {kind}")


def _ordered(media: dict[str, Path]) -> list[tuple[str, Path]]:
    return [(kind, media[kind]) for kind in ("image", "video", "audio") if kind in media]


def build_openai_content(prompt: str, media: dict[str, Path], server: ServerParams) -> Payload:
    """OpenAI-compatible user content: media parts, then the text part (see the module docstring)."""
    _check_modalities(media, server)
    parts: list[dict[str, Any]] = []
    payload = Payload()

    def add(part: dict[str, Any], b64: str, size: int, kind: str) -> None:
        parts.append(part)
        payload.count(b64, size, kind)

    for kind, path in _ordered(media):
        if kind == "image":
            mime, b64, size = encode_image(path)
            add({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{b64}"}}, b64, size, "image")
        elif kind == "audio":
            resolved = _resolve(path)
            fmt = AUDIO_FORMATS.get(resolved.suffix.lower())
            if fmt is None:
                raise UnsupportedMedia(f"{resolved.name}: input_audio takes only wav or mp3 "
                                       f"(got '{resolved.suffix}')")
            b64, size = encode_file(resolved)
            add({"type": "input_audio", "input_audio": {"data": b64, "format": fmt}}, b64, size, "audio")
        elif server.video_mode == "video_url":
            resolved = _resolve(path)
            mime = VIDEO_MIME.get(resolved.suffix.lower(), "video/mp4")
            b64, size = encode_file(resolved)
            add({"type": "video_url", "video_url": {"url": f"data:{mime};base64,{b64}"}}, b64, size, "video")
        else:
            for b64, size in sample_frames(path, server.video_fps):
                add({"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{b64}"}}, b64, size,
                    "frame")
    parts.append({"type": "text", "text": prompt})
    payload.content = parts
    payload.message = {"role": "user", "content": parts}
    return payload


def build_ollama_message(prompt: str, media: dict[str, Path], server: ServerParams) -> Payload:
    """Ollama /api/chat user message: images (and sampled video frames) as plain base64 in `images`."""
    _check_modalities(media, server)
    payload = Payload()
    images: list[str] = []

    def add(b64: str, size: int, kind: str) -> None:
        images.append(b64)
        payload.count(b64, size, kind)

    for kind, path in _ordered(media):
        if kind == "audio":
            raise UnsupportedMedia("Ollama's /api/chat message has no audio field (only 'images'); "
                                   "audio cannot be sent to an Ollama server")
        if kind == "image":
            _, b64, size = encode_image(path)
            add(b64, size, "image")
        elif server.video_mode == "video_url":
            raise UnsupportedMedia("Ollama's /api/chat cannot carry a video file (video_url); "
                                   "use server.video_mode: frames to send sampled frames as images")
        else:
            for b64, size in sample_frames(path, server.video_fps):
                add(b64, size, "frame")
    payload.message = {"role": "user", "content": prompt}
    if images:
        payload.message["images"] = images
    return payload
