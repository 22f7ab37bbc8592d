"""The transcription request kind: one audio clip for OpenAI's /v1/audio/transcriptions, as a speech model is
deployed (vLLM's Whisper, faster-whisper servers, OpenAI's own API). The body is multipart/form-data: `file` (the
clip's bytes as they are, under its own name), `model`, `language` (when params name one), `response_format`
json and `temperature`. The answer {"text": ..., "usage": {"type": "duration", "seconds": ...}} is not streamed,
so a transcription is timed whole: e2e_s from the wire to the last byte, and the real-time factor rtf = e2e_s ÷
the clip's seconds (the server's usage.seconds where it sends them, else the file's own header). An empty text is
an answer (audio without speech); a body that is not JSON or has no text is bad_response. The request itself goes
out through Backend.transcribe (benchlib.measure.client.backends), with every other request's bounds and failure rows.
"""

from __future__ import annotations

import json
import math
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib.measure.http.failures import RequestFailed
from benchlib.measure.http.sse import shown
from benchlib.records.rows import RequestRecord

RESPONSE_FORMAT = "json"


@dataclass
class TranscriptionRequest:
    """What to send: the clip, its language ('' = the server detects it) and the sampling temperature."""

    audio: Path
    language: str = ""
    temperature: float = 0.0


def audio_seconds(path: Path) -> float | None:
    """A clip's length from its own header: WAV by the standard library, anything else by PyAV's container."""
    try:
        with wave.open(str(path), "rb") as clip:
            return clip.getnframes() / clip.getframerate() if clip.getframerate() else None
    except (wave.Error, EOFError):
        pass
    import av  # imported on first use, as payloads.py does: text-only runs (a GPU check's wheels) carry no PyAV

    try:
        with av.open(str(path)) as container:
            return container.duration / 1_000_000 if container.duration else None
    except (av.FFmpegError, OSError):
        return None


def transcription_form(request: TranscriptionRequest, model: str,
                       record: RequestRecord) -> tuple[dict[str, str], dict[str, tuple[str, bytes, str]]]:
    """(form fields, file part) for httpx's multipart encoder; the record gets the kind and the clip's seconds."""
    path = Path(request.audio)
    record.request_kind, record.audio_s = "transcription", audio_seconds(path)
    fields = {"model": model, "response_format": RESPONSE_FORMAT, "temperature": f"{request.temperature:g}"}
    if request.language:
        fields["language"] = request.language
    mime = "audio/wav" if path.suffix.lower() == ".wav" else "application/octet-stream"
    return fields, {"file": (path.name, path.read_bytes(), mime)}


def _seconds(usage: Any) -> float | None:
    if not isinstance(usage, dict) or usage.get("type") != "duration":
        return None
    value = usage.get("seconds")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def read_transcription(record: RequestRecord, status: int, content: bytes, e2e_s: float) -> None:
    """A 2xx answer into the record: text, finish, e2e, the clip's seconds and the real-time factor."""
    record.e2e_s = e2e_s
    try:
        body = json.loads(content)
    except ValueError:
        raise RequestFailed("bad_response", f"HTTP {status} answered a transcription with a body that is not JSON: "
                            f"{shown(content)!r}", status) from None
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str):
        raise RequestFailed("bad_response", f"the transcription has no text field: {shown(content)!r}", status)
    record.audio_s = _seconds(body.get("usage")) or record.audio_s
    record.response_text, record.finish_reason = text.strip(), "stop"
    if record.audio_s:
        record.rtf = e2e_s / record.audio_s
