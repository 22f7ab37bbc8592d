"""The speech deployment's server process: faster-whisper (CTranslate2) behind OpenAI's transcription endpoint.

Run as `python -m benchlib.measure.servers.whisper_app --model-dir DIR --served-name NAME --port N` by
benchlib.measure.servers.whisper (never imported by the benchmark process itself). It answers

    GET  /v1/models                    {"object": "list", "data": [{"id": NAME, "object": "model", ...}]}
    POST /v1/audio/transcriptions      multipart/form-data: file (required), model (must be NAME), language,
                                       response_format (json | text | verbose_json), temperature, prompt
                                       -> {"text": ..., "usage": {"type": "duration", "seconds": ...}}

as OpenAI's API reference describes it (errors as {"error": {"message", "type", "param", "code"}}); an unknown
`model` is a 404 like OpenAI's, so a params file naming the wrong model fails instead of being served anyway.

Why our own few lines and not a published server: see docs/servers.md, "The speech deployment". The standard library
serves HTTP (one request decoded at a time, as one CTranslate2 model on 2 cores runs best) and parses the
multipart body (email.parser, the MIME parser multipart/form-data is defined on), so the only dependency beyond
the model is faster-whisper itself. Everything that decides the figures — the weights, the decoder, beam search,
the audio decoding (PyAV) — is faster-whisper's. No hub access: the model is a folder on disk and HF_HUB_OFFLINE
is set by the launcher.
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import json
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from faster_whisper import WhisperModel

FORMATS = ("json", "text", "verbose_json")
MAX_BODY = 64 * 1024 * 1024  # an upload past this is refused (413) before it is read


class BadRequest(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


def form_fields(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """multipart/form-data → {name: (filename or None, bytes)}; a body that is not one is a 400."""
    if not content_type.lower().startswith("multipart/form-data"):
        raise BadRequest(400, f"expected multipart/form-data, got {content_type or 'no Content-Type'}")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body)
    if not message.is_multipart():
        raise BadRequest(400, "the multipart body could not be parsed (boundary missing or wrong)")
    found: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name:
            found[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return found


class Transcriber:
    """One WhisperModel, used by one request at a time."""

    def __init__(self, model_dir: str, served_name: str, compute_type: str, beam_size: int, threads: int):
        self.served_name = served_name
        self.beam_size = beam_size
        self.model = WhisperModel(model_dir, device="cpu", compute_type=compute_type, cpu_threads=threads,
                                  local_files_only=True)
        self.lock = threading.Lock()
        self.created = int(time.time())

    def transcribe(self, fields: dict[str, tuple[str | None, bytes]]) -> tuple[int, str, bytes]:
        """(status, content type, body) for one transcription request."""
        if "file" not in fields or not fields["file"][1]:
            raise BadRequest(400, "the 'file' field is required (the audio to transcribe)", "file")
        model = fields.get("model", (None, b""))[1].decode("utf-8", "replace").strip()
        if not model:
            raise BadRequest(400, "the 'model' field is required", "model")
        if model != self.served_name:
            raise BadRequest(404, f"The model '{model}' does not exist (this server serves '{self.served_name}')",
                             "model", "model_not_found")
        fmt = fields.get("response_format", (None, b"json"))[1].decode().strip() or "json"
        if fmt not in FORMATS:
            raise BadRequest(400, f"response_format '{fmt}' is not supported here (use one of {', '.join(FORMATS)})",
                             "response_format")
        language = fields.get("language", (None, b""))[1].decode().strip() or None
        prompt = fields.get("prompt", (None, b""))[1].decode("utf-8", "replace").strip() or None
        try:
            temperature = float(fields.get("temperature", (None, b"0"))[1] or 0)
        except ValueError:
            raise BadRequest(400, "temperature must be a number", "temperature") from None
        with tempfile.NamedTemporaryFile(suffix=".audio") as audio:  # PyAV probes the container from the bytes
            audio.write(fields["file"][1])
            audio.flush()
            started = time.perf_counter()
            with self.lock:
                try:
                    segments, info = self.model.transcribe(audio.name, language=language, beam_size=self.beam_size,
                                                           temperature=temperature, initial_prompt=prompt)
                    segments = list(segments)  # the generator decodes lazily: consume it inside the lock
                except (ValueError, RuntimeError, OSError) as exc:  # undecodable audio (PyAV: InvalidDataError)
                    raise BadRequest(400, f"the audio could not be decoded: {exc}", "file") from None
            elapsed = time.perf_counter() - started
        text = "".join(segment.text for segment in segments).strip()
        print(f"transcribed {info.duration:.2f} s of audio in {elapsed:.3f} s ({len(segments)} segments, "
              f"language {info.language})", flush=True)
        if fmt == "text":
            return 200, "text/plain; charset=utf-8", text.encode("utf-8")
        body: dict[str, Any] = {"text": text, "usage": {"type": "duration", "seconds": round(info.duration, 3)}}
        if fmt == "verbose_json":
            body.update(task="transcribe", language=info.language, duration=info.duration,
                        segments=[{"id": s.id, "start": s.start, "end": s.end, "text": s.text,
                                   "avg_logprob": s.avg_logprob, "no_speech_prob": s.no_speech_prob}
                                  for s in segments])
        return 200, "application/json", json.dumps(body, ensure_ascii=False).encode("utf-8")


def make_handler(transcriber: Transcriber) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects

        def send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def error(self, failure: BadRequest) -> None:
            kind = "invalid_request_error" if failure.status < 500 else "server_error"
            body = {"error": {"message": failure.message, "type": kind, "param": failure.param,
                              "code": failure.code}}
            self.send(failure.status, "application/json", json.dumps(body).encode("utf-8"))

        def do_GET(self) -> None:  # noqa: N802 — http.server's naming
            if self.path.rstrip("/") == "/v1/models":
                models = {"object": "list", "data": [{"id": transcriber.served_name, "object": "model",
                                                      "created": transcriber.created, "owned_by": "faster-whisper"}]}
                self.send(200, "application/json", json.dumps(models).encode("utf-8"))
            else:
                self.error(BadRequest(404, f"no route GET {self.path}"))

        def do_POST(self) -> None:  # noqa: N802
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self.close_connection = True  # the unread body must not be taken for the next request
                    raise BadRequest(413, f"the upload is {length} bytes; this server takes at most {MAX_BODY}")
                body = self.rfile.read(length)
                if self.path.rstrip("/") != "/v1/audio/transcriptions":
                    raise BadRequest(404, f"no route POST {self.path}")
                self.send(*transcriber.transcribe(form_fields(self.headers.get("Content-Type", ""), body)))
            except BadRequest as failure:
                self.error(failure)
            except Exception as exc:  # noqa: BLE001 — the client gets the reason, not a dropped connection
                self.error(BadRequest(500, f"{type(exc).__name__}: {exc}"))

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 — http.server's signature
            sys.stdout.write(f"{self.address_string()} {format % args}\n")
            sys.stdout.flush()

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True, help="CTranslate2 Whisper folder (model.bin, config.json, ...)")
    parser.add_argument("--served-name", required=True, help="the model id requests must name")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--compute-type", default="int8")
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="CTranslate2 intra-op threads (0: its default)")
    args = parser.parse_args(argv)
    transcriber = Transcriber(args.model_dir, args.served_name, args.compute_type, args.beam_size, args.threads)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(transcriber))
    print(f"serving {args.model_dir} as {args.served_name!r} on http://{args.host}:{args.port}/v1 "
          f"(compute {args.compute_type}, beam {args.beam_size})", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
