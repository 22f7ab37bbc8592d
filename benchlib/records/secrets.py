"""Secrets kept out of every file and the terminal: the API key is read only from the environment
(ServerParams.secret) and, wherever a server might have echoed it, replaced by *** before anything is written.

ONE RULE for everything that comes from outside (another tool's files, a params file's launch command, a server's
or a tool's error text) before it is written or printed — `redact` for structured values, `clean_text` for one
string, `redact_command` for a command line:

    names      a value under a secret-like name (api_key, x-api-key, token, password, cookie, …) is ***; a
               [name, value] pair with such a name too
    headers    under a header-like name (headers, extra_headers, -H …) every header's value is ***, whatever
               the header is called (Cookie, x-goog-api-key, X-Custom-Auth): only the names stay
    commands   under a command-like name (command, cli_command, launch) the text is split into words as a shell
               would (shlex): environment prefixes (NAME=value before the program) are NAME=***, the value of a
               secret-bearing flag (--api-key, --hf-token=, -H/--header, …) is ***, an unquoted header value
               after -H is *** up to the next flag, and every other word is cleaned as text
    text       URLs keep scheme, host, port and path (no user info, query or fragment); `name: value` and
               `name=value` pairs with a secret-like name, `Bearer …` / `Basic …` credentials, keys of known
               shapes (sk-…, hf_…, ghp_…, AIza…, AKIA…, JWTs …) and long random-looking runs (20+ letters and
               digits mixing upper case, lower case and digits) are ***. Hex digests, UUIDs and model names stay.

`shareable` is what may leave the machine (an export): the rule above, and no absolute local path (a path keeps
only its last part, …/name).

Where a server's text is shortened for a message, `cut` marks the cut (CUT), so a redaction that runs after it
still sees a key the cut split: the key's first characters right before the mark are redacted too. A key a
server split across two of a row's values (tool name and arguments, reasoning and content) is found by
`scrub_fields`, which looks at the row's values together, and every piece of it is redacted.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from typing import Any, Mapping
from urllib.parse import urlsplit

REDACTED = "***"
CUT = "…[cut]"  # appended where a text was shortened: never in a server's own words, so no answer is touched
# Field names whose values are secrets wherever they appear (exact words at the end of the name, so max_tokens,
# bos_token_id or tokenizer_path stay readable); names are compared with '-' and ' ' read as '_' (x-api-key).
SECRET_KEY = re.compile(r"(^|[_\-.])(api_?key|apikey|secret|secret_key|client_secret|password|passwd|authorization|"
                        r"cookie|set_cookie|private_key|credentials?|"
                        r"(hf|access|auth|bearer|api|admin|session|refresh|id)_?token)$|^token$", re.IGNORECASE)
HEADER_KEY = re.compile(r"(^|_)headers?$", re.IGNORECASE)  # a container of headers: every value is a secret
COMMAND_KEY = re.compile(r"(^|_)(launch|command|cli_command|cmd|command_line|cmdline)$", re.IGNORECASE)
# a flag whose value is a secret, beside the names above: --key (a key file or a key), --auth
SECRET_FLAG = re.compile(r"^(key|auth)$", re.IGNORECASE)
ENV_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")
# `name: value` / `name=value` (quoted or not): the value is *** when the name is secret-like (PAIR_SECRET, at its
# end), else cleaned as text; the value may carry a scheme (Bearer x)
SECRET_PAIR = re.compile(r"(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z0-9_.\-]+)(?P<sep>\\?[\"']?\s*[:=]\s*\\?[\"']?)"
                         r"(?P<value>(?:(?:Bearer|Basic)\s+)?[^\s\"',;&}\]\\]+)")
PAIR_SECRET = re.compile(r"(api[_\-]?key|apikey|secret|password|passwd|authorization|cookie|private[_\-]?key|"
                         r"credentials?|(hf|access|auth|bearer|api|session|refresh|id)[_\-]?token)$|^token$",
                         re.IGNORECASE)
CREDENTIAL = re.compile(r"\b(?P<scheme>Bearer|Basic)\s+(?!\*\*\*)[A-Za-z0-9._~+/=\-]+", re.IGNORECASE)
# keys of known shapes: OpenAI/Anthropic sk-…, Stripe, Hugging Face, GitHub, GitLab, Slack, AWS, Google, NVIDIA,
# Groq, Replicate, Perplexity, JWTs
KNOWN_KEY = re.compile(
    r"(?<![A-Za-z0-9])(?:sk-[A-Za-z0-9_\-]{16,}|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|hf_[A-Za-z0-9]{20,}|"
    r"gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_\-]{20,}|xox[abprs]-[A-Za-z0-9\-]{10,}|"
    r"(?:AKIA|ASIA)[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{30,}|ya29\.[0-9A-Za-z_\-]{20,}|nvapi-[A-Za-z0-9_\-]{20,}|"
    r"gsk_[A-Za-z0-9]{20,}|r8_[A-Za-z0-9]{20,}|pplx-[A-Za-z0-9]{20,}|"
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*)")
RANDOM_RUN = re.compile(r"[A-Za-z0-9+/_=\-]{20,}")
SEGMENT = re.compile(r"[A-Za-z0-9]{20,}")
# every text pattern above in one pass (leftmost first; at one place, in this order)
TEXT_RULE = re.compile("|".join(f"(?P<{name}>{pattern.pattern})" if not pattern.flags & re.IGNORECASE else
                                f"(?P<{name}>(?i:{pattern.pattern}))"
                                for name, pattern in (("url", URL), ("pair", SECRET_PAIR), ("credential", CREDENTIAL),
                                                      ("known", KNOWN_KEY), ("run", RANDOM_RUN))))
LOCAL_PATH = re.compile(r"(?<![\w.:/~\-…])(?:~|[A-Za-z]:\\|/(?=[^\s/'\"]))[^\s'\"]*")
FILE_URL = re.compile(r"\bfile://[^\s'\"]*")


class SecretLeak(RuntimeError):
    """The API key's value would have been written; nothing was written."""


def secret_name(name: str) -> bool:
    """A field, header, flag or variable name whose value is a secret (x-api-key, HF_TOKEN, --api-key …)."""
    return bool(SECRET_KEY.search(name.strip().lstrip("-").replace("-", "_").replace(" ", "_")))


def _normal(name: str) -> str:
    return name.strip().lstrip("-").replace("-", "_").replace(" ", "_")


def redact(value: Any) -> Any:
    """A copy of a structured value (dicts, lists, strings) under the one rule (module docstring): secret-like names,
    header containers, command lines, and every string cleaned as text."""
    if isinstance(value, dict):
        return {(clean_text(k) if isinstance(k, str) else k): _entry(k, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if len(value) == 2 and isinstance(value[0], str) and secret_name(value[0]) and value[1] not in (None, ""):
            return [value[0], REDACTED]  # a [name, value] pair: AIPerf's --extra-inputs, header tuples
        return [redact(v) for v in value]
    if isinstance(value, str):
        return clean_text(value)
    return value


def _entry(name: Any, value: Any) -> Any:
    if not isinstance(name, str):
        return redact(value)
    if SECRET_KEY.search(_normal(name)):
        return REDACTED if value not in (None, "", [], {}) else value
    if HEADER_KEY.search(_normal(name)) or name == "-H":
        return redact_headers(value)
    if COMMAND_KEY.search(_normal(name)):
        if isinstance(value, str):
            return redact_command(value)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return redact_argv(value)
    return redact(value)


def redact_headers(value: Any) -> Any:
    """Headers with every value *** and their names kept: a dict, a list of 'Name: value' texts, of [name, value]
    pairs or of {name, value} objects, or one text of such lines."""
    if value in (None, "", [], {}):
        return value
    if isinstance(value, dict):
        if set(value) >= {"name", "value"}:
            return {**redact(value), "value": REDACTED}
        return {(clean_text(k) if isinstance(k, str) else k): (REDACTED if v not in (None, "") else v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [[clean_text(str(v[0])), REDACTED] if isinstance(v, (list, tuple)) and len(v) == 2 and
                isinstance(v[0], str) else redact_headers(v) for v in value]
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "{[":
            try:
                return json.dumps(redact_headers(json.loads(text)))
            except (ValueError, RecursionError):
                return REDACTED
        return "\n".join(_header_line(line) for line in text.splitlines())
    return REDACTED


def _header_line(line: str) -> str:
    """'Name: value' → 'Name: ***' (also Name=value and Name:value); a line without a name is ***."""
    match = re.match(r"^\s*([A-Za-z0-9_.\-]+)(\s*[:=]\s*)", line)
    return f"{match[1]}{match[2]}{REDACTED}" if match else REDACTED


def _random(run: str) -> bool:
    """A run of key characters holding a 20+ long stretch of letters and digits that mixes upper case, lower case
    and digits (a generated key); a hex digest, a UUID or a model name has no such stretch."""
    return any(not segment.isupper() and not segment.islower() and any(c.isdigit() for c in segment)
               and any(c.isalpha() for c in segment) for segment in SEGMENT.findall(run))


def _pair(match: re.Match[str]) -> str:
    if match["value"].startswith(REDACTED):
        return match[0]
    value = REDACTED if PAIR_SECRET.search(match["name"]) else clean_text(match["value"])
    return f"{match['name']}{match['sep']}{value}"


def _text_part(match: re.Match[str]) -> str:
    kind = match.lastgroup
    if kind == "url":
        return redact_url(match[0])
    if kind == "pair":
        return _pair(match)
    if kind == "credential":
        return f"{match[0].split()[0]} {REDACTED}"
    if kind == "known":
        return REDACTED
    # a run that starts before a name=value pair inside it (+x_api_key=…) still has the pair redacted
    return REDACTED if _random(match[0]) else SECRET_PAIR.sub(_pair, match[0])


def clean_text(text: str) -> str:
    """One string from outside under the rule's text part (module docstring)."""
    if len(text) < 8 or text.isdigit():
        return text
    if text.islower() and not any(c in text for c in ":=_-./") and "bearer" not in text and "basic" not in text:
        return text  # prose in lower case (most answers): no URL, pair, credential, known or random key is possible
    return _clean_short(text) if len(text) <= SHORT else TEXT_RULE.sub(_text_part, text)


SHORT = 80  # a field name, a unit, a phase name: the same few hundred short strings recur in every record


@functools.lru_cache(maxsize=4096)  # bounded: at most 4,096 strings of at most SHORT characters
def _clean_short(text: str) -> str:
    return TEXT_RULE.sub(_text_part, text)


def redact_command(command: str) -> str:
    """A command line under the rule (module docstring), its words joined back as a shell reads them."""
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: whitespace words, still never the key
        words = command.split()
    return " ".join(_shell_word(w) for w in redact_argv(words))


def _shell_word(word: str) -> str:
    return word if re.fullmatch(r"[\w@%+=:,./*\-]+", word) else shlex.quote(word)


def _flag_kind(flag: str) -> str:
    name = _normal(flag)
    if flag == "-H" or re.search(r"(^|_)headers?$", name, re.IGNORECASE):
        return "header"
    if SECRET_KEY.search(name) or SECRET_FLAG.match(name):
        return "secret"
    return ""


def _word(word: str) -> str:
    """A word that is no flag of note: a JSON argument redacted as structure, anything else cleaned as text."""
    if word[:1] in "{[":
        try:
            return json.dumps(redact(json.loads(word)), separators=(",", ":"))
        except (ValueError, RecursionError):
            pass
    return clean_text(word)


def redact_argv(words: list[str]) -> list[str]:
    """Command words under the rule: env prefixes, secret-bearing flags, header values, the rest as text."""
    out: list[str] = []
    program = False  # the first word that is no NAME=value (nor `env`): prefixes before it are the environment
    i = 0
    while i < len(words):
        word = words[i]
        assignment = ENV_ASSIGNMENT.match(word)
        if not program and assignment:
            out.append(f"{assignment[1]}={REDACTED}")
            i += 1
            continue
        program = program or word not in ("env", "export", "sudo")
        if word.startswith("-") and len(word) > 1:
            flag, eq, value = word.partition("=")
            kind = _flag_kind(flag)
            if eq:
                shown = REDACTED if kind == "secret" else _header_line(value) if kind == "header" else _word(value)
                out.append(f"{flag}={shown}")
            else:
                out.append(word)
                if kind and i + 1 < len(words) and not words[i + 1].startswith("-"):
                    value = words[i + 1]
                    i += 2
                    if kind == "secret":
                        out.append(REDACTED)
                    elif re.fullmatch(r"[A-Za-z0-9_.\-]+:", value):  # an unquoted header: its value is the next words
                        out.append(value)
                        while i < len(words) and not words[i].startswith("-"):
                            i += 1
                        out.append(REDACTED)
                    else:
                        out.append(redact_headers(value) if value[:1] in "{[" else _header_line(value))
                    continue
            i += 1
            continue
        if out and out[-1].lower() in ("bearer", "basic"):
            out.append(REDACTED)
        else:
            out.append(_word(word))
        i += 1
    return out


def shareable(value: Any) -> Any:
    """What may leave this machine (an export): the rule, and every absolute local path cut to its last part."""
    return _no_local_paths(redact(value))


def _last_part(path: str) -> str:
    name = path.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
    return f"…/{name}" if name and name != "~" else "…"


def _no_local_paths(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_local_paths(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_local_paths(v) for v in value]
    if isinstance(value, str) and ("/" in value or "\\" in value or "~" in value):
        value = FILE_URL.sub(lambda m: "file://" + _last_part(m[0][len("file://"):]), value)
        return LOCAL_PATH.sub(lambda m: _last_part(m[0]), value)
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
    """The URL with any user info, query and fragment removed (safe to print)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # an unbalanced [ in the host: keep the scheme only
        return url.split("://", 1)[0] + "://" + REDACTED
    netloc = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{netloc}{parts.path}"
