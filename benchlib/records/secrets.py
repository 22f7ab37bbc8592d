"""Secrets kept out of every file and the terminal: the API key is read only from the environment
(ServerParams.secret) and, wherever a server might have echoed it, replaced by *** before anything is written;
values under secret-like field names are redacted; URLs are printed without user info or query.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

REDACTED = "***"
# Field names whose values are secrets wherever they appear (exact words at the end of the name, so max_tokens,
# bos_token_id or tokenizer_path stay readable).
SECRET_KEY = re.compile(r"(^|[_\-.])(api_?key|apikey|secret|secret_key|password|passwd|authorization|"
                        r"(hf|access|auth|bearer|api|admin|session)_?token)$", re.IGNORECASE)


class SecretLeak(RuntimeError):
    """The API key's value would have been written; nothing was written."""


def redact(value: Any) -> Any:
    """A copy with values under secret-like keys replaced by '***' (dicts and lists, recursively)."""
    if isinstance(value, dict):
        return {k: (REDACTED if isinstance(k, str) and SECRET_KEY.search(k) and v not in (None, "", [], {})
                    else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def scrub(value: Any, secret: str) -> Any:
    """`value` with every occurrence of the secret replaced by *** (strings, and inside lists and dicts, keys
    included: tool-call names and arguments). An empty secret changes nothing."""
    if not secret:
        return value
    if isinstance(value, str):
        return value.replace(secret, REDACTED) if secret in value else value
    if isinstance(value, list):
        return [scrub(v, secret) for v in value]
    if isinstance(value, dict):
        return {scrub(k, secret): scrub(v, secret) for k, v in value.items()}
    return value


def assert_no_secret(text: str, secret: str, name: str) -> None:
    """Refuse text that still holds the secret (the value of $name)."""
    if secret and secret in text:
        raise SecretLeak(f"the value of ${name} would have been written; nothing was written")


def redact_url(url: str) -> str:
    """The URL with any user info and query removed (safe to print)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return f"{parts.scheme}://{netloc}{parts.path}"
