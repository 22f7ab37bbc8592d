"""Prompts of an exact server-counted length: the server's tokenizer endpoint (llama-cpp-python
/extras/tokenize, llama.cpp /tokenize, vLLM /tokenize; tried in the order of the server's profile,
benchlib.config.servers), filler text, the fitting search, and the context lengths a sweep can use.

Every tokenizer call is bounded (benchlib.measure.http.bounded: TOKENIZE_DEADLINE_S, TOKENIZE_MAX_BYTES; the probe
PROBE_DEADLINE_S). An endpoint that answered the probe and then fails — an HTTP error, an answer without a token
list or a whole count, a bound passed — raises TokenizerError, one line naming the endpoint and what it sent."""

from __future__ import annotations

import random
from typing import Any, Callable

import httpx

from benchlib.config.params import BenchParams
from benchlib.measure.client.timing import count_value
from benchlib.measure.http.bounded import fetch
from benchlib.measure.http.failures import RequestFailed, server_message
from benchlib.records.secrets import cut, scrub

CONTEXT_MARGIN = 64  # tokens kept free besides the completion budget


TOKENIZE_DEADLINE_S = 60.0  # one count of a long prompt


TOKENIZE_MAX_BYTES = 64 * 2**20  # a token list of a few million tokens


PROBE_DEADLINE_S = 10.0


class TokenizerError(ValueError):
    """The server's tokenizer failed or answered something that is not a count; the message is one line."""


CONTEXT_INSTRUCTION = "Summarize the notes below in one sentence.\n\nNotes:"


# Filler vocabulary: common words that most tokenizers keep as one token each (with their leading space).
FILLER_WORDS = ("the", "of", "and", "to", "in", "is", "was", "for", "on", "as", "with", "by", "at", "from",
                "this", "that", "it", "not", "are", "be", "or", "an", "which", "have", "one", "all", "new", "more",
                "time", "year", "work", "day", "city", "water", "house", "world", "light", "road", "music", "paper",
                "river", "stone", "field", "table", "window", "garden", "market", "school", "winter", "summer")


# ---- context sweep ------------------------------------------------------------------------------------------
def context_window(params: BenchParams) -> int | None:
    """server.context_window, else the embedded server's n_ctx; None when unknown (no clipping)."""
    if params.server.context_window:
        return int(params.server.context_window)
    if params.server.kind == "embedded":
        return int(params.server.embedded.n_ctx)
    return None


def context_targets(lengths: list[int], window: int | None, max_tokens: int,
                    margin: int = CONTEXT_MARGIN) -> list[dict[str, Any]]:
    """Prompt-token targets: lengths beyond window − max_tokens − margin are dropped and that limit itself is
    run once instead (so the sweep still probes the largest prompt the deployment should take)."""
    lengths = sorted(set(int(n) for n in lengths if n >= 1))
    if window is None:
        return [{"target_tokens": n, "requested_tokens": n, "note": ""} for n in lengths]
    limit = window - max_tokens - margin
    if limit < 1:
        return []
    out = [{"target_tokens": n, "requested_tokens": n, "note": ""} for n in lengths if n <= limit]
    clipped = [n for n in lengths if n > limit]
    if clipped and all(o["target_tokens"] != limit for o in out):
        out.append({"target_tokens": limit, "requested_tokens": clipped[0],
                    "note": f"clipped: {', '.join(map(str, clipped))} exceed the window {window} − max_tokens "
                            f"{max_tokens} − margin {margin}"})
    return out


class ServerTokenizer:
    """The server's own tokenizer over HTTP (count of tokens of a text), found by probing its profile's endpoints."""

    def __init__(self, root: str, name: str, path: str, body: Callable[[str, str], dict], model: str,
                 headers: dict[str, str], timeout: float = TOKENIZE_DEADLINE_S, max_bytes: int = TOKENIZE_MAX_BYTES,
                 secret: str = ""):
        self.root, self.name, self.path, self.body, self.model = root, name, path, body, model
        self.http = httpx.Client(base_url=root, headers=headers, timeout=timeout)
        self.deadline_s, self.max_bytes = timeout, max_bytes
        self.secret = secret  # scrubbed from every message: the server's words may quote the key
        self.calls = 0

    def _error(self, what: str) -> TokenizerError:
        text = " ".join(f"the server's tokenizer ({self.name}) {what}".split())  # one line: the CLI shows the last
        return TokenizerError(scrub(text, self.secret))

    def count(self, text: str) -> int:
        """The server's token count of `text`; TokenizerError (one line) when there is none."""
        self.calls += 1
        try:
            response = fetch(self.http, "POST", self.path, json_body=self.body(self.model, text),
                             deadline_s=self.deadline_s, max_bytes=self.max_bytes)
        except RequestFailed as exc:
            raise self._error(f"failed: {exc.kind}: {exc.message}") from None
        except httpx.HTTPError as exc:
            raise self._error(f"failed: {type(exc).__name__}: {cut(str(exc), 200)}") from None
        if response.status_code != 200:
            raise self._error(f"answered HTTP {response.status_code}: {cut(server_message(response.content), 200)}")
        try:
            data = response.json()
        except ValueError:
            data = None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if isinstance(tokens, list):
            return len(tokens)
        counted = count_value(data.get("count")) if isinstance(data, dict) else None
        if counted is not None:
            return counted
        raise self._error(f"answered without a token list or a whole count: {cut(response.text.strip(), 200)!r}")

    def close(self) -> None:
        self.http.close()

    @classmethod
    def detect(cls, params: BenchParams) -> "ServerTokenizer | None":
        """Probe the profile's endpoints in its order; None when none answers sensibly."""
        root, headers = params.server.root_url(), params.server.auth_headers()
        probe = "The quick brown fox jumps over the lazy dog near the river bank."
        for endpoint in params.server.profile().tokenizer_endpoints():  # none (Ollama): calibrate instead
            tokenizer = cls(root, endpoint.label, endpoint.path, endpoint.body, params.server.request_model(), headers,
                            timeout=PROBE_DEADLINE_S, secret=params.server.secret())
            try:
                n = tokenizer.count(probe)
            except TokenizerError:
                tokenizer.close()
                continue
            if 3 <= n <= len(probe):
                tokenizer.calls = 0
                tokenizer.deadline_s = TOKENIZE_DEADLINE_S
                return tokenizer
            tokenizer.close()
        return None


def filler_words(n: int, seed: int = 0) -> list[str]:
    """n words drawn (deterministically per seed) from FILLER_WORDS, with a full stop every 12 words."""
    rng = random.Random(seed)
    words = []
    for i in range(n):
        word = rng.choice(FILLER_WORDS)
        words.append(word + "." if i % 12 == 11 else word)
    return words


def fit_to_tokens(count: Callable[[str], int], make_text: Callable[[int], str], target: int,
                  max_words: int | None = None) -> tuple[str, int, int]:
    """make_text(n words) with count() == target: binary search over n (counts grow with n), then one-token
    suffixes to close a gap a two-token word left; else the closest text. Returns (text, counted, calls)."""
    calls = 0
    cache: dict[int, int] = {}

    def measured(n: int) -> int:
        nonlocal calls
        if n not in cache:
            cache[n] = count(make_text(n))
            calls += 1
        return cache[n]

    base = measured(0)
    if base >= target:  # the instruction alone reaches the target
        return make_text(0), base, calls
    limit = max_words or 8 * target + 64
    hi = max(1, target - base)
    while measured(hi) < target and hi < limit:
        hi = min(limit, hi * 2)
    if measured(hi) < target:
        return make_text(hi), measured(hi), calls
    lo = 0  # invariant: measured(lo) <= target <= measured(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if measured(mid) <= target:
            lo = mid
        else:
            hi = mid
    for n in (lo, hi):
        if measured(n) == target:
            return make_text(n), target, calls
    for suffix in (" a", " I", ".", " ok", " a a", " a a a"):
        candidate = make_text(lo) + suffix
        counted = count(candidate)
        calls += 1
        if counted == target:
            return candidate, counted, calls
    best = lo if target - measured(lo) <= measured(hi) - target else hi
    return make_text(best), measured(best), calls
