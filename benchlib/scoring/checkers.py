"""Checkers: data-driven answer scoring. A task names its checker; CHECKERS maps names to functions.

Every checker takes (response: Response, expected, **checker_args) and returns a Verdict
(benchlib.scoring.verdict): `passed` is the pass/fail call, `score` a fraction in [0, 1] (partial credit),
`detail` one short line.

A truncated answer (the runner sets its truncated flag from finish_reason == "length") is scored as it
stands: truncation is reported separately from wrong. Looping is likewise a separate flag:
`detect_looping(text)` is exposed for the runner and is also what the ambiguous-audio checker uses.

Checkers by name (task files use these names; an unknown name fails loudly in score()):
    contains_any, number, keywords   basic text checks (text suite)
    python_code, human_eval   code run against its tests in a sandbox (benchlib.scoring.graded)
    reasoning_gym         a graded set's answer, read by the task's rule, scored by its generator (graded)
    exact_answer, exact_words  a generated picture's or clip's known answer, exactly (graded)
    regex                 one or more regular expressions must match
    keyword_groups        every group (a list of synonyms) is a hit if any synonym appears; score = share
    color_grid            colour + (row, col) of each coloured grid cell ("row 3, column 7", "(3, 7)", …)
    wer                   ASR word error rate (jiwer) after case/punctuation normalisation, <= max_wer
    no_looping            the answer ends cleanly: not dominated by repeated lines / n-grams
    ordered_items         items (each a list of synonyms) appear in the given order; score = share found
    entity_recall         persons and places recalled from (lenient) JSON, with a name-search fallback
    tool_call             a structured tool call with the expected function and sane arguments
    script_share          enough of the answer is in one Unicode script (Kannada by default)
"""

from __future__ import annotations

import ast
import json
import re
import unicodedata
from collections import Counter
from typing import Any, Callable, Iterable

from benchlib.scoring.answers import normalize_transcript, transcript_words, word_errors  # noqa: F401 — callers' home
from benchlib.scoring.graded import SCORERS, python_code
from benchlib.scoring.verdict import Response, Verdict


# ---------------------------------------------------------------------------------------------------------
# Basic text checkers
# ---------------------------------------------------------------------------------------------------------
def contains_any(response: Response, expected: list[str], **_: Any) -> Verdict:
    text = response.text.lower()
    hits = [e for e in expected if str(e).lower() in text]
    return Verdict(bool(hits), 1.0 if hits else 0.0, f"found {hits}" if hits else f"none of {expected}")


def number(response: Response, expected: float, **_: Any) -> Verdict:
    numbers = re.findall(r"-?\d+(?:\.\d+)?", response.text.replace(",", ""))
    if not numbers:
        return Verdict(False, 0.0, "no number in answer")
    last = float(numbers[-1])
    ok = abs(last - float(expected)) < 1e-9
    return Verdict(ok, float(ok), f"final number {numbers[-1]}, expected {expected}")


def keywords(response: Response, expected: list[str], min_hits: int = 1, **_: Any) -> Verdict:
    text = response.text.lower()
    hits = [k for k in expected if k.lower() in text]
    return Verdict(len(hits) >= min_hits, len(hits) / max(len(expected), 1), f"{len(hits)}/{len(expected)} keywords")


def regex(response: Response, expected: str | list[str], mode: str = "any", flags: str = "i", **_: Any) -> Verdict:
    """expected: one pattern or a list; mode 'any' (default) or 'all'; flags from 'i', 's', 'm'."""
    patterns = [expected] if isinstance(expected, str) else list(expected)
    re_flags = 0
    for letter in flags:
        re_flags |= {"i": re.I, "s": re.S, "m": re.M}[letter]
    hits = [p for p in patterns if re.search(p, response.text, re_flags)]
    ok = len(hits) == len(patterns) if mode == "all" else bool(hits)
    return Verdict(ok, len(hits) / max(len(patterns), 1), f"{len(hits)}/{len(patterns)} patterns matched ({mode})")


# ---------------------------------------------------------------------------------------------------------
# Term matching shared by several checkers
# ---------------------------------------------------------------------------------------------------------
def _synonyms(item: Any) -> list[str]:
    if isinstance(item, (list, tuple)):
        return [str(s) for s in item]
    return [str(item)]


def _term_regex(term: str) -> re.Pattern:
    """Case-insensitive match of a term. Latin-alphanumeric terms need a word start (so 'red' is not found
    in 'covered'); they may carry a suffix ('tomato' finds 'tomatoes') except numbers ('3' is not in '30').
    Terms in other scripts match as substrings."""
    escaped = re.escape(term.strip())
    if re.match(r"[A-Za-z0-9]", term.strip()):
        escaped = r"(?<![A-Za-z0-9])" + escaped
        if re.search(r"[0-9]$", term.strip()):
            escaped += r"(?![0-9])"
    return re.compile(escaped, re.I)


def _find_term(text: str, synonyms: Iterable[str], start: int = 0) -> tuple[int, int, str] | None:
    """Earliest match of any synonym at or after `start`: (start, end, synonym)."""
    best = None
    for syn in synonyms:
        if not syn.strip():
            continue
        m = _term_regex(syn).search(text, start)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), m.end(), syn)
    return best


def keyword_groups(response: Response, expected: list, min_fraction: float = 1.0, min_hits: int | None = None,
                   **_: Any) -> Verdict:
    """expected: list of groups; a group is a term or a list of synonyms. Score = share of groups hit.
    Passes when hits >= min_hits (if given) else share >= min_fraction."""
    groups = [_synonyms(g) for g in expected]
    hit, missed = [], []
    for group in groups:
        (hit if _find_term(response.text, group) else missed).append(group[0])
    share = len(hit) / max(len(groups), 1)
    ok = len(hit) >= min_hits if min_hits is not None else share >= min_fraction - 1e-9
    detail = f"{len(hit)}/{len(groups)} groups" + (f"; missing {missed}" if missed else "")
    return Verdict(ok, share, detail)


# ---------------------------------------------------------------------------------------------------------
# Colour grid
# ---------------------------------------------------------------------------------------------------------
_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
    "ninth": 9, "tenth": 10,
}
_N = r"(10|[1-9]|one|two|three|four|five|six|seven|eight|nine|ten|first|second|third|fourth|fifth|sixth|" \
     r"seventh|eighth|ninth|tenth)(?:st|nd|rd|th)?"
_END = r"(?![0-9])"
_ROW = r"(?:rows?|r(?=\s*\d))"
_COL = r"(?:columns?|cols?|c(?=\s*\d))"
_SEP = r"[\s\"':=#]*"
_JOIN = r"[^a-z0-9\n]{0,12}(?:(?:and|in|at|of|the|&)\s*){0,2}"
# Each pattern yields two numbers and whether they are (row, col) or (col, row).
_COORD_PATTERNS: list[tuple[re.Pattern, bool]] = [
    (re.compile(rf"(?<![a-z]){_ROW}{_SEP}{_N}{_END}{_JOIN}{_COL}{_SEP}{_N}{_END}", re.I), True),
    (re.compile(rf"(?<![a-z]){_COL}{_SEP}{_N}{_END}{_JOIN}{_ROW}{_SEP}{_N}{_END}", re.I), False),
    (re.compile(rf"\b{_N}\s+row\b{_JOIN}{_N}\s+col(?:umn)?\b", re.I), True),
    (re.compile(rf"\b{_N}\s+col(?:umn)?\b{_JOIN}{_N}\s+row\b", re.I), False),
    (re.compile(rf"[(\[]\s*{_N}\s*,\s*{_N}\s*[)\]]", re.I), True),
]
_DEFAULT_COLOR_WORDS: dict[str, list[str]] = {
    "red": ["red"], "blue": ["blue"], "green": ["green"], "yellow": ["yellow"], "purple": ["purple", "violet"],
    "orange": ["orange"], "pink": ["pink", "magenta"], "brown": ["brown"], "black": ["black"],
    "gray": ["gray", "grey"], "cyan": ["cyan", "teal", "turquoise"],
}


def _num(token: str) -> int:
    token = token.lower()
    return int(token) if token.isdigit() else _NUMBER_WORDS[token]


def _clauses(text: str) -> list[tuple[int, str]]:
    """Split on newlines, semicolons, sentence ends and JSON object boundaries; keep offsets."""
    out, start = [], 0
    for m in re.finditer(r"\n|;|\.(?=\s|$)|\}\s*,?", text):
        out.append((start, text[start:m.start()]))
        start = m.end()
    out.append((start, text[start:]))
    return [(s, c) for s, c in out if c.strip()]


def grid_claims(text: str, color_words: dict[str, list[str]] | None = None) -> set[tuple[str, int, int]]:
    """(color, row, col) triples an answer claims. Within each clause every coordinate mention is given
    to the nearest colour word; a markdown table row with one colour and no labelled coordinate but exactly
    two small numbers reads them as row, column."""
    words = color_words or _DEFAULT_COLOR_WORDS
    claims: set[tuple[str, int, int]] = set()
    for _, clause in _clauses(text):
        colors = []
        for name, syns in words.items():
            for syn in syns:
                for m in _term_regex(syn).finditer(clause):
                    if not re.match(r"[a-z]", clause[m.end():m.end() + 1], re.I):  # whole word
                        colors.append((m.start(), m.end(), name))
        if not colors:
            continue
        coords = []
        taken: list[tuple[int, int]] = []
        for pattern, row_first in _COORD_PATTERNS:
            for m in pattern.finditer(clause):
                if any(m.start() < e and s < m.end() for s, e in taken):
                    continue
                a, b = _num(m.group(1)), _num(m.group(2))
                coords.append((m.start(), m.end(), (a, b) if row_first else (b, a)))
                taken.append((m.start(), m.end()))
        if not coords and "|" in clause and len({c[2] for c in colors}) == 1:
            nums = [int(n) for n in re.findall(r"(?<![\w.])(10|[1-9])(?![\w.])", clause)]
            if len(nums) == 2:
                coords.append((0, len(clause), (nums[0], nums[1])))
        for cs, ce, (row, col) in coords:
            def distance(color: tuple[int, int, str]) -> tuple[int, int]:
                s, e, _ = color
                gap = cs - e if e <= cs else (s - ce if s >= ce else 0)
                return (gap, 0 if e <= cs else 1)  # ties go to the colour written before the coordinate
            claims.add((min(colors, key=distance)[2], row, col))
    return claims


def color_grid(response: Response, expected: list[dict], color_aliases: dict[str, list[str]] | None = None,
               min_fraction: float = 1.0, **_: Any) -> Verdict:
    """expected: [{color, row, col}, ...] (1-based). Score = share of cells named with the right colour
    at the right position; passes at min_fraction (default all). Extra claimed cells are listed in detail."""
    words = {k: list(v) for k, v in _DEFAULT_COLOR_WORDS.items()}
    for name, aliases in (color_aliases or {}).items():
        words.setdefault(name, [name])
        words[name] = list(dict.fromkeys(words[name] + list(aliases)))
    for cell in expected:
        words.setdefault(cell["color"], [cell["color"]])
    claims = grid_claims(response.text, words)
    want = {(c["color"], int(c["row"]), int(c["col"])) for c in expected}
    found = want & claims
    share = len(found) / max(len(want), 1)
    missing = sorted(want - claims, key=lambda c: (c[1], c[2]))
    extra = sorted(claims - want, key=lambda c: (c[1], c[2]))
    detail = f"{len(found)}/{len(want)} cells"
    if missing:
        detail += "; missing " + ", ".join(f"{c} r{r}c{k}" for c, r, k in missing)
    if extra:
        detail += "; extra " + ", ".join(f"{c} r{r}c{k}" for c, r, k in extra[:5])
    return Verdict(share >= min_fraction - 1e-9, share, detail)


# ---------------------------------------------------------------------------------------------------------
# Speech recognition
# ---------------------------------------------------------------------------------------------------------
def wer(response: Response, expected: str, max_wer: float = 0.3, **_: Any) -> Verdict:
    """Word error rate of the answer against the exact transcript; a leading 'Here is the transcript:'
    and surrounding quotes are ignored. Score = max(0, 1 - WER)."""
    import jiwer

    ref, hyp = normalize_transcript(expected), transcript_words(response.text)
    if not hyp:
        return Verdict(False, 0.0, "no words in answer")
    rate = float(jiwer.wer(ref, hyp))
    return Verdict(rate <= max_wer, max(0.0, 1.0 - rate), f"WER {rate:.3f} (max {max_wer})")


# ---------------------------------------------------------------------------------------------------------
# Looping / repetition
# ---------------------------------------------------------------------------------------------------------
def loop_reason(text: str, tail_tokens: int = 200, ngram: int = 4, min_tokens: int = 40,
                max_distinct_share: float = 0.35) -> str:
    """Why `text` looks like a generation loop, or '' when it does not. Three signals, all on the tail:
    - one non-trivial line repeated: >= 3 times and >= half of the last 12 non-empty lines;
    - repeated word n-grams: among the last `tail_tokens` words (at least `min_tokens`), the share of
      distinct `ngram`-grams is below `max_distinct_share` (prose is ~0.9+, a loop of a short phrase ~0.1);
    - a short unit containing a letter repeated >= 10 times back to back ("hahaha…", "ಹಹಹ…"; not "0000…")."""
    if not text or not text.strip():
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    tail_lines = lines[-12:]
    if len(tail_lines) >= 3:
        line, count = Counter(tail_lines).most_common(1)[0]
        trivial = not re.search(r"\w", line) or re.fullmatch(r"[|\-:\s]+", line)
        if not trivial and count >= 3 and count * 2 >= len(tail_lines):
            return f"line repeated {count}x in the last {len(tail_lines)} lines: {line[:60]!r}"
    words = re.findall(r"\w+", text.lower())
    if len(words) >= min_tokens:
        tail = words[-tail_tokens:]
        grams = [tuple(tail[i:i + ngram]) for i in range(len(tail) - ngram + 1)]
        share = len(set(grams)) / max(len(grams), 1)
        if share < max_distinct_share:
            top = " ".join(Counter(grams).most_common(1)[0][0])
            return f"distinct {ngram}-grams {share:.2f} of the last {len(tail)} words (top: {top!r})"
    for m in re.finditer(r"(.{1,20}?)\1{9,}", text[-2000:], re.S):
        if re.search(r"[^\W\d_]", m.group(1)):
            return f"unit {m.group(1)[:20]!r} repeated {len(m.group(0)) // len(m.group(1))}x back to back"
    return ""


def detect_looping(text: str) -> bool:
    """True when the answer is dominated by repetition (see loop_reason); the runner flags any such answer."""
    return bool(loop_reason(text))


def no_looping(response: Response, expected: Any = None, **_: Any) -> Verdict:
    """Ambiguous audio (paper §8: one model loops, another stops cleanly): passes when the answer is not a
    loop. If expected lists terms (e.g. tone, beep), the detail says which appear; they do not decide."""
    reason = loop_reason(response.text)
    stop = f"; finish_reason={response.finish_reason}" if response.finish_reason else ""
    if reason:
        return Verdict(False, 0.0, f"looping: {reason}{stop}")
    detail = "no looping"
    if expected:
        hits = [g[0] for g in map(_synonyms, expected) if _find_term(response.text, g)]
        detail += f"; mentions {hits}" if hits else "; mentions none of the expected terms"
    return Verdict(True, 1.0, detail + stop)


# ---------------------------------------------------------------------------------------------------------
# Ordered content (video)
# ---------------------------------------------------------------------------------------------------------
def ordered_items(response: Response, expected: list, min_fraction: float = 0.75, **_: Any) -> Verdict:
    """expected: items in order, each a term or a list of synonyms. The answer is scanned left to right;
    an item counts when found after the previous counted one (a skipped item does not move the cursor).
    Score = share counted; passes at min_fraction."""
    items = [_synonyms(i) for i in expected]
    cursor, found, missed = 0, [], []
    for group in items:
        hit = _find_term(response.text, group, cursor)
        if hit:
            found.append(group[0])
            cursor = hit[1]
        else:
            missed.append(group[0])
    share = len(found) / max(len(items), 1)
    detail = f"{len(found)}/{len(items)} in order" + (f"; missing/out of order {missed}" if missed else "")
    return Verdict(share >= min_fraction - 1e-9, share, detail)


# ---------------------------------------------------------------------------------------------------------
# Lenient JSON and entity recall
# ---------------------------------------------------------------------------------------------------------
def _json_candidates(text: str) -> list[str]:
    out = [m.group(1) for m in re.finditer(r"```(?:json|JSON)?\s*\n?(.*?)```", text, re.S)]
    unterminated = re.search(r"```(?:json|JSON)?\s*\n(.*)$", text, re.S)  # a fence cut off by max_tokens
    if unterminated and not out:
        out.append(unterminated.group(1))
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if starts:
        begin = min(starts)
        end = max(text.rfind("}"), text.rfind("]"))
        out.append(text[begin:end + 1] if end > begin else text[begin:])
        out.append(text[begin:])
    return out


def _close_brackets(text: str) -> str:
    """Append the closers an unfinished (truncated) JSON text needs, dropping a dangling partial item."""
    stack, in_str, esc = [], False, False
    for ch in text:
        if in_str:
            esc = (ch == "\\") and not esc
            if ch == '"' and not esc:
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{":
            stack.append("]" if ch == "[" else "}")
        elif ch in "]}" and stack:
            stack.pop()
    if not stack and not in_str:
        return text
    trimmed = text + ('"' if in_str else "")
    trimmed = re.sub(r",\s*(\"[^\"]*\"\s*:?\s*)?$", "", trimmed.rstrip())
    trimmed = re.sub(r":\s*$", ": null", trimmed)
    return trimmed + "".join(reversed(stack))


def _repairs(text: str) -> Iterable[str]:
    fixed = text.strip()
    yield fixed
    fixed = re.sub(r",\s*([}\]])", r"\1", fixed)                          # trailing commas
    fixed = re.sub(r'"([A-Za-z_][\w -]{0,40}):\s', r'"\1": ', fixed)      # "properties: {}  -> "properties": {}
    fixed = re.sub(r'([{,]\s*)([A-Za-z_]\w*)"\s*:', r'\1"\2":', fixed)    # properties": {}  -> "properties": {}
    fixed = re.sub(r'([{,]\s*)([A-Za-z_]\w*)\s*:', r'\1"\2":', fixed)     # unquoted keys
    yield fixed
    yield _close_brackets(fixed)
    if '"' not in fixed:
        yield _close_brackets(fixed.replace("'", '"'))


def parse_json_lenient(text: str) -> Any | None:
    """The first JSON value found in a model answer, tolerating code fences, prose around it, trailing
    commas, a dropped quote on a key (her-os report: `"properties: {}`), unquoted keys, single quotes
    (Python literals) and truncation. None when nothing parses."""
    for candidate in _json_candidates(text):
        for attempt in _repairs(candidate):
            try:
                return json.loads(attempt)
            except (json.JSONDecodeError, ValueError):
                pass
            try:
                value = ast.literal_eval(attempt)
                if isinstance(value, (dict, list)):
                    return value
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                pass
    return None


_PERSON_TYPES = {"person", "persons", "people", "human", "individual", "per", "name", "contact", "family"}
_PLACE_TYPES = {"place", "places", "location", "locations", "loc", "city", "cities", "town", "gpe", "geo",
                "country", "state", "region", "venue"}
_TITLES = {"dr", "mr", "mrs", "ms", "miss", "prof", "professor", "sir", "madam", "shri", "smt"}


def _kind(label: Any) -> str:
    tokens = re.findall(r"[a-z]+", str(label).lower())
    if any(t in _PERSON_TYPES for t in tokens):
        return "person"
    if any(t in _PLACE_TYPES for t in tokens):
        return "place"
    return "_".join(tokens) or "?"


def _walk_entities(value: Any, kind_hint: str = "?") -> list[tuple[str, str]]:
    """(name, kind) pairs from typical entity JSON shapes: a list of {name, type}, {"persons": [...]},
    {"entities": [...]}, {"people": [{"name": ...}]} …"""
    out: list[tuple[str, str]] = []
    if isinstance(value, list):
        for item in value:
            out += _walk_entities(item, kind_hint)
    elif isinstance(value, dict):
        name = next((value[k] for k in ("name", "entity", "text", "value", "label") if isinstance(value.get(k), str)),
                    None)
        if name is not None:
            label = next((value[k] for k in ("type", "entity_type", "category", "kind", "label_type")
                          if k in value), kind_hint)
            out.append((name, _kind(label)))
        for key, sub in value.items():
            if isinstance(sub, (list, dict)) and key not in ("properties", "attributes", "relationships"):
                hint = _kind(key)
                out += _walk_entities(sub, hint if hint in ("person", "place") else kind_hint)
    elif isinstance(value, str) and kind_hint in ("person", "place"):
        out.append((value, kind_hint))
    return out


def extract_entities(text: str) -> tuple[list[tuple[str, str]], str]:
    """(name, kind) pairs from an answer and how they were read: 'json', 'regex' (name/type pairs pulled
    out of JSON too broken to parse) or 'none'."""
    value = parse_json_lenient(text)
    if value is not None:
        pairs = _walk_entities(value)
        if pairs:
            return pairs, "json"
    pairs = []
    for chunk in re.split(r"\}", text):
        name = re.search(r"[\"']?name[\"']?\s*:\s*[\"']([^\"'\n]+)", chunk)
        if name:
            label = re.search(r"[\"']?(?:type|entity_type|category)[\"']?\s*:\s*[\"']?([A-Za-z_]+)", chunk)
            pairs.append((name.group(1), _kind(label.group(1)) if label else "?"))
    return pairs, ("regex" if pairs else "none")


def _name_tokens(name: str) -> set[str]:
    return {t for t in re.findall(r"\w+", name.lower()) if t not in _TITLES and len(t) > 1}


def _match_names(expected: list, pairs: list[tuple[str, str]], kind: str, raw_text: str | None) -> tuple[list, list, list]:
    """(found, wrong_type, missed) names. With raw_text the fallback is a plain name search."""
    found, wrong, missed = [], [], []
    for item in expected:
        names = _synonyms(item)
        tokens = set().union(*(_name_tokens(n) for n in names))
        if raw_text is not None:
            hit = any(_find_term(raw_text, [t]) for t in tokens)
            (found if hit else missed).append(names[0])
            continue
        kinds = {k for n, k in pairs if tokens & _name_tokens(n)}
        if kind in kinds:
            found.append(names[0])
        elif kinds:
            wrong.append(f"{names[0]} as {'/'.join(sorted(kinds))}")
        else:
            missed.append(names[0])
    return found, wrong, missed


def entity_recall(response: Response, expected: dict, min_recall: float = 0.7, **_: Any) -> Verdict:
    """expected: {persons: [...], places: [...]} (a name may be a list of aliases; titles like Dr. are
    ignored; any name token matches, so 'Meera' finds 'Meera Iyer'). JSON is parsed leniently; an entity
    counts only with the right type (a place typed 'topic' is a miss). When nothing parses, names are
    searched in the raw answer. Score = recall over persons + places; passes at min_recall."""
    pairs, how = extract_entities(response.text)
    raw = response.text if how == "none" else None
    results = {}
    for key, kind in (("persons", "person"), ("places", "place")):
        results[key] = _match_names(expected.get(key, []), pairs, kind, raw)
    total = sum(len(expected.get(k, [])) for k in ("persons", "places"))
    hits = sum(len(r[0]) for r in results.values())
    recall = hits / max(total, 1)
    parts = [f"{len(results[k][0])}/{len(expected.get(k, []))} {k}" for k in ("persons", "places")]
    detail = ", ".join(parts) + f" (read as {how if how != 'none' else 'text: no JSON'})"
    notes = [f"missing {k} {r[2]}" for k, r in results.items() if r[2]] + \
        [f"mistyped {k} {r[1]}" for k, r in results.items() if r[1]]
    if notes:
        detail += "; " + "; ".join(notes)
    return Verdict(recall >= min_recall - 1e-9, recall, detail)


# ---------------------------------------------------------------------------------------------------------
# Tool calling
# ---------------------------------------------------------------------------------------------------------
def call_parts(call: dict[str, Any]) -> tuple[str, Any]:
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    name = call.get("name") or function.get("name") or ""
    args = call.get("arguments", function.get("arguments", {}))
    if isinstance(args, str):
        parsed = parse_json_lenient(args) if args.strip() else {}
        args = parsed if parsed is not None else args
    return str(name), args


def tool_call(response: Response, expected: dict, required_args: dict[str, list[str]] | None = None,
              **_: Any) -> Verdict:
    """expected: {function: name, contains: {arg: substring}?}. Passes when Response.tool_calls holds a
    call to that function whose arguments parse to an object with every required argument (checker_args
    required_args: {function: [arg, ...]}) present and non-empty, and containing the expected substrings.
    A text-only answer fails even when it names the function (her-os report: 0/8 under the wrong parser)."""
    want = expected["function"]
    required = list((required_args or {}).get(want, [])) + list(expected.get("required", []))
    contains = {k: str(v).lower() for k, v in (expected.get("contains") or {}).items()}
    if not response.tool_calls:
        named = want in response.text
        return Verdict(False, 0.0, "text-only answer, no structured tool call" +
                       (f" (the text names {want})" if named else ""))
    problems = []
    for call in response.tool_calls:
        name, args = call_parts(call)
        name = name.rsplit(".", 1)[-1]  # "functions.web_search" -> "web_search"
        if name != want:
            problems.append(f"called {name or '?'}")
            continue
        if not isinstance(args, dict):
            problems.append(f"{name}: arguments not a JSON object ({str(args)[:40]!r})")
            continue
        empty = [a for a in required if not str(args.get(a) or "").strip()]
        if empty:
            problems.append(f"{name}: missing/empty {empty}")
            continue
        wrong = [a for a, sub in contains.items() if sub not in str(args.get(a, "")).lower()]
        if wrong:
            problems.append(f"{name}: {wrong} lack {[contains[a] for a in wrong]}")
            continue
        extra = f" (+{len(response.tool_calls) - 1} other calls)" if len(response.tool_calls) > 1 else ""
        return Verdict(True, 1.0, f"{name}({json.dumps(args, ensure_ascii=False)[:80]}){extra}")
    return Verdict(False, 0.0, f"expected {want}: " + "; ".join(problems))


# ---------------------------------------------------------------------------------------------------------
# Script detection (Kannada)
# ---------------------------------------------------------------------------------------------------------
SCRIPT_RANGES = {"kannada": (0x0C80, 0x0CFF), "devanagari": (0x0900, 0x097F), "tamil": (0x0B80, 0x0BFF),
                 "telugu": (0x0C00, 0x0C7F)}


def script_stats(text: str, script: str = "kannada") -> tuple[int, int]:
    """(characters in the script's Unicode block, letters and marks overall: categories L* and M*)."""
    lo, hi = SCRIPT_RANGES[script]
    letters = [ch for ch in text if unicodedata.category(ch)[0] in "LM"]
    return sum(lo <= ord(ch) <= hi for ch in letters), len(letters)


def script_share(response: Response, expected: Any = None, script: str = "kannada", min_share: float = 0.5,
                 min_chars: int = 10, **_: Any) -> Verdict:
    """The answer is written in `script` (Kannada U+0C80–U+0CFF by default): at least min_chars of its
    letters/marks lie in the block and they are at least min_share of all letters. Score = that share."""
    inside, letters = script_stats(response.text, script)
    share = inside / letters if letters else 0.0
    ok = inside >= min_chars and share >= min_share - 1e-9
    return Verdict(ok, share, f"{inside}/{letters} letters in {script} ({share:.0%}; need {min_chars}+ and "
                              f"{min_share:.0%})")


CHECKERS: dict[str, Callable[..., Verdict]] = {
    "contains_any": contains_any,
    "number": number,
    "python_code": python_code,
    "keywords": keywords,
    "regex": regex,
    "keyword_groups": keyword_groups,
    "color_grid": color_grid,
    "wer": wer,
    "no_looping": no_looping,
    "ordered_items": ordered_items,
    "entity_recall": entity_recall,
    "tool_call": tool_call,
    "script_share": script_share,
    **SCORERS,  # the graded sets' scorers (benchlib.scoring.graded)
}


def score(checker: str, response: Response, expected: Any, checker_args: dict | None = None,
          empty_is_answer: bool = False) -> Verdict:
    """Run a named checker. A truncated answer is scored as it stands; truncation is reported separately. An empty
    answer fails unchecked, unless it is one (empty_is_answer: a speech model's transcript of no speech)."""
    if checker not in CHECKERS:
        raise KeyError(f"unknown checker '{checker}' (known: {', '.join(sorted(CHECKERS))})")
    if not response.text.strip() and not response.tool_calls:
        if not empty_is_answer:
            return Verdict(False, 0.0, "empty answer")
        verdict = CHECKERS[checker](response, expected, **(checker_args or {}))
        return Verdict(verdict.passed, verdict.score, f"empty transcript (no speech heard); {verdict.detail}")
    return CHECKERS[checker](response, expected, **(checker_args or {}))
