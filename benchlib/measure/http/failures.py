"""Why a request failed, in one vocabulary for every HTTP path (the lean wire client, the openai SDK path,
Ollama's NDJSON): the failure type, the server's own message from an error body, Retry-After, and how a
connect error is classified (DNS, refused, timeout, other).

Error kinds a row can carry (docs/columns.md: error_kind): connection_refused, dns_failure, connect_timeout,
connect_error, read_timeout, deadline_exceeded, response_too_large, http_<status> (3xx included: redirects are
not followed), stream_cut, bad_response, bad_encoding, not_a_stream, bad_chunk, empty_response, server_error,
client_error (an exception the client did not expect: a bug to report), payload_error, modality_not_supported.

A server's words are shortened with benchlib.records.secrets.cut, which marks the cut, so the redaction that
runs on the finished row still finds a key the cut split.
"""

from __future__ import annotations

import errno
import json
import socket
from typing import Any

from benchlib.records.secrets import cut

MESSAGE_LIMIT = 2000
# What resolvers print when a name does not resolve, for errors that arrive as text without a gaierror.
_DNS_TEXT = ("name or service not known", "nodename nor servname", "name resolution", "no address associated",
             "getaddrinfo")


class RequestFailed(Exception):
    """A classified failure: kind (e.g. connection_refused, http_404, stream_cut), the server's message,
    the HTTP status and Retry-After when there was a response; `before_response` marks a reused connection
    that died before any byte came back (safe to retry on a fresh one)."""

    def __init__(self, kind: str, message: str, http_status: int | None = None, retry_after: float | None = None,
                 before_response: bool = False):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.http_status = http_status
        self.retry_after = retry_after
        self.before_response = before_response


def deadline_exceeded(deadline_s: float, http_status: int | None = None) -> RequestFailed:
    """The request ran past run.deadline_s, however steadily the server kept sending."""
    return RequestFailed("deadline_exceeded", f"no complete answer within run.deadline_s = {deadline_s:g} s "
                         f"(the server kept the response going: max_tokens ignored, or a slow drip)", http_status)


def too_large(max_bytes: int, http_status: int | None = None) -> RequestFailed:
    """The response passed run.max_response_bytes."""
    return RequestFailed("response_too_large", f"the response passed run.max_response_bytes = {max_bytes} bytes "
                         f"(the server did not stop: max_tokens ignored?); the rest was not read", http_status)


def retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the delta-seconds form); None when absent or not a number."""
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def server_message(body: bytes | str | Any) -> str:
    """The server's own words from an error body: {"error": {"message": ...}} (OpenAI, vLLM, SGLang,
    llama.cpp), {"error": "..."} (Ollama), {"detail": ...} (FastAPI), a decoded dict, or plain text."""
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", "replace")
    data = body
    if isinstance(body, str):
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, ValueError):
            return cut(body.strip(), MESSAGE_LIMIT)
    if isinstance(data, dict):
        inner = data.get("error", data)
        if isinstance(inner, dict):
            return cut(str(inner.get("message") or inner.get("detail") or inner), MESSAGE_LIMIT)
        return cut(str(inner), MESSAGE_LIMIT)
    return cut(str(body).strip(), MESSAGE_LIMIT)


def _redirect_message(status: int, location: str | None, words: str = "") -> str:
    """Why a 3xx ends the request: a benchmark POST is not replayed on another URL (the timing would include
    the detour, and 301/302 would turn it into a GET); the user points base_url where the server says."""
    where = f"to {location}" if location else "without a Location"
    text = f"HTTP {status} redirect {where}, not followed: set server.base_url to the address the server names"
    return f"{text} ({words})" if words and words != f"HTTP {status}" else text


def http_failure(status: int, words: str, location: str | None = None,
                 retry_after_value: str | None = None) -> RequestFailed:
    """A response status >= 300 as the failure every HTTP path raises: http_<status> with the server's words
    (a 3xx also says where it points: redirects are not followed) and Retry-After."""
    if 300 <= status < 400:
        words = _redirect_message(status, location, words)
    return RequestFailed(f"http_{status}", words, status, retry_after(retry_after_value))


def media_type(content_type: str | None) -> str:
    """'text/event-stream; charset=utf-8' -> 'text/event-stream'."""
    return (content_type or "").split(";")[0].strip().lower()


def not_a_stream(status: int, content_type: str, expected: str, words: str) -> RequestFailed:
    """A 2xx answered with another declared media type than the stream asked for (e.g. JSON from a proxy)."""
    return RequestFailed("not_a_stream", f"HTTP {status} sent {content_type} instead of {expected}: {words}", status)


def root_os_error(exc: BaseException) -> BaseException | None:
    """The most specific OSError under library wrappers ('All connection attempts failed' is an OSError
    without errno whose context holds the real ConnectionRefusedError or gaierror)."""
    seen: set[int] = set()
    found: BaseException | None = None
    stack: list[BaseException] = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError):
            if isinstance(current, socket.gaierror) or current.errno is not None:
                return current
            found = found or current
        stack.extend(getattr(current, "exceptions", ()) or ())
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return found


def connect_failure(exc: BaseException, where: str = "") -> RequestFailed:
    """A failed connect classified: dns_failure (a gaierror, or a resolver's words), connection_refused
    (ECONNREFUSED, or its words), else connect_error; `where` (host or URL) prefixes the message."""
    root = root_os_error(exc) or exc
    text = str(exc) or type(exc).__name__
    if root is not exc and str(root) and str(root) not in text:
        text = f"{text}: {root}"
    message = f"{where}: {text}" if where and where not in text else text
    lowered = text.lower()
    if isinstance(root, socket.gaierror) or any(s in lowered for s in _DNS_TEXT):
        return RequestFailed("dns_failure", message)
    if isinstance(root, ConnectionRefusedError) or getattr(root, "errno", None) == errno.ECONNREFUSED \
            or "refused" in lowered or "connect call failed" in lowered:
        return RequestFailed("connection_refused", message)
    return RequestFailed("connect_error", message)
