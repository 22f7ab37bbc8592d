"""Secrets kept out of every file and the terminal: the API key is read only from the environment
(ServerParams.secret) and, wherever a server might have echoed it, replaced by *** before anything is written;
values under secret-like field names are redacted; URLs are printed without user info or query.

Where a server's text is shortened for a message, `cut` marks the cut (CUT), so a redaction that runs after it
still sees a key the cut split: the key's first characters right before the mark are redacted too. A key a
server split across two of a row's values (tool name and arguments, reasoning and content) is found by
`scrub_fields`, which looks at the row's values together, and every piece of it is redacted.
"""

from __future__ import annotations

import re
from typing import Any, Mapping
from urllib.parse import urlsplit

REDACTED = "***"
CUT = "…[cut]"  # appended where a text was shortened: never in a server's own words, so no answer is touched
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


def cut(text: str, limit: int) -> str:
    """The first `limit` characters of `text`, with CUT appended when there were more."""
    return text if len(text) <= limit else text[:limit] + CUT


def _head_of_secret(text: str, secret: str) -> int:
    """The length of the longest end of `text` that is a proper beginning of `secret` (0: none)."""
    for n in range(min(len(text), len(secret) - 1), 0, -1):
        if text.endswith(secret[:n]):
            return n
    return 0


def _scrub_text(text: str, secret: str) -> str:
    if secret in text:
        text = text.replace(secret, REDACTED)
    if CUT in text:  # a key cut short leaves its beginning right before the mark
        parts = text.split(CUT)
        for i, part in enumerate(parts[:-1]):
            n = _head_of_secret(part, secret)
            if n:
                parts[i] = part[:-n] + REDACTED
        text = CUT.join(parts)
    return text


def scrub(value: Any, secret: str) -> Any:
    """`value` with every occurrence of the secret replaced by *** (strings, and inside lists and dicts, keys
    included: tool-call names and arguments), and any beginning of it left before a CUT mark. An empty secret
    changes nothing."""
    if not secret:
        return value
    if isinstance(value, str):
        return _scrub_text(value, secret)
    if isinstance(value, list):
        return [scrub(v, secret) for v in value]
    if isinstance(value, dict):
        return {scrub(k, secret): scrub(v, secret) for k, v in value.items()}
    return value


# ---- a key split across values ----------------------------------------------------------------------------------
def _texts(value: Any, out: list[str]) -> None:
    """Every string inside `value` (dict keys included), in a fixed order `_rebuild` follows."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for v in value:
            _texts(v, out)
    elif isinstance(value, dict):
        for k, v in value.items():
            _texts(k, out)
            _texts(v, out)


def _rebuild(value: Any, texts: list[str], at: list[int]) -> Any:
    if isinstance(value, str):
        at[0] += 1
        return texts[at[0] - 1]
    if isinstance(value, list):
        return [_rebuild(v, texts, at) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = _rebuild(k, texts, at)
            out[key] = _rebuild(v, texts, at)
        return out
    return value


def _split_key(texts: list[str], secret: str) -> list[tuple[int, int, int]]:
    """Pieces of the secret spread over several texts, as (text index, start, end) spans, when some texts put
    together in some order spell the whole secret: one ends with its beginning, any number are whole middle
    parts of it, one starts with its end. Empty when no such chain exists."""
    size = len(secret)
    # edges from one position in the secret to a later one, each a span of one text
    edges: dict[int, list[tuple[int, tuple[int, int, int]]]] = {}
    for i, text in enumerate(texts):
        for n in range(1, min(len(text), size - 1) + 1):
            if text.endswith(secret[:n]):
                edges.setdefault(0, []).append((n, (i, len(text) - n, len(text))))
            if text.startswith(secret[size - n:]):
                edges.setdefault(size - n, []).append((size, (i, 0, n)))
        if 0 < len(text) < size - 1:
            start = secret.find(text, 1)
            while 0 < start and start + len(text) < size:
                edges.setdefault(start, []).append((start + len(text), (i, 0, len(text))))
                start = secret.find(text, start + 1)
    # breadth-first from position 0 to the end of the secret
    came: dict[int, tuple[int, tuple[int, int, int]]] = {0: (0, (-1, 0, 0))}
    queue = [0]
    while queue and size not in came:
        position = queue.pop(0)
        for end, span in edges.get(position, ()):
            if end not in came:
                came[end] = (position, span)
                queue.append(end)
    if size not in came:
        return []
    pieces, position = [], size
    while position:
        position, span = came[position]
        pieces.append(span)
    return pieces


def _redact_spans(text: str, spans: list[tuple[int, int]]) -> str:
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in reversed(merged):
        text = text[:start] + REDACTED + text[end:]
    return text


def scrub_fields(values: Mapping[str, Any], secret: str) -> dict[str, Any]:
    """A row's values (field → value) scrubbed as one: every value as `scrub` does, and then a key split across
    values — the strings of the row that, put together, spell it — has each of its pieces replaced by ***."""
    clean = {name: scrub(value, secret) for name, value in values.items()}
    if not secret or len(secret) < 2:
        return clean
    texts: list[str] = []
    for value in clean.values():
        _texts(value, texts)
    for _ in range(len(secret)):  # each round redacts a chain's pieces; a few rounds find every chain
        pieces = _split_key(texts, secret)
        if not pieces:
            break
        spans: dict[int, list[tuple[int, int]]] = {}
        for index, start, end in pieces:
            spans.setdefault(index, []).append((start, end))
        for index, found in spans.items():
            texts[index] = _redact_spans(texts[index], found)
    at = [0]
    return {name: _rebuild(value, texts, at) for name, value in clean.items()}


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
