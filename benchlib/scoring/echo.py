"""What the model added: long verbatim spans copied from the prompt are cut from an answer before any checker
reads it, so a model that repeats its prompt (the embedded base model does) cannot pass on the prompt's own
keywords, numbers or script.

Rule: a run of at least `span` consecutive words of the answer that also occurs, word for word, in a prompt
source (the user prompt as sent with its `(ref …)` id, the task's prompt text without it, and the task's
system prompt) is an echo, and so is the prompt's `(ref …)` id repeated (REQUEST_ID). `span` is
5 words, or the whole source when it is shorter (a 4-word greeting repeated whole is an echo too; sources
under 3 words are ignored). A word is a run of letters, digits and combining marks (so Kannada vowel signs
stay inside their word) and punctuation separates words: "ಹೇಗಿದ್ದೀರಾ?ayakan" is two words. Words are compared
case-insensitively, so "Paris." matches "paris". Echoed words are removed; what remains keeps its line breaks. The row is flagged `echo` and its
check_detail says how many words were cut.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable

SPAN = 5
MIN_SOURCE_WORDS = 3
# The request id a sent prompt opens with (suites.runner Session.unique_prompt): repeated, it is an echo however
# short — a one-line set stops an echoing model right after it (Task.stop)
REQUEST_ID = re.compile(r"\(ref [0-9a-f]{8}\)")


@dataclass(frozen=True)
class Echo:
    text: str  # the answer without the echoed spans
    removed_words: int
    total_words: int

    @property
    def found(self) -> bool:
        return self.removed_words > 0

    def note(self, cut: bool = True) -> str:
        """What check_detail says about the echo: the words were ignored, or (cut=False: code, run whole) only
        that they repeat the prompt."""
        if not self.found:
            return ""
        what = "were ignored" if cut else "repeat the prompt (code is run whole)"
        return f"echo: {self.removed_words} of {self.total_words} answer words copied from the prompt {what}"


def _is_word_char(char: str) -> bool:
    return unicodedata.category(char)[0] in "LNM"


def _words(text: str) -> list[tuple[int, int, str]]:
    """(start, end, lower-cased word) for every run of letters, digits and combining marks."""
    out, start = [], None
    for i, char in enumerate(text):
        inside = _is_word_char(char)
        if inside and start is None:
            start = i
        elif not inside and start is not None:
            out.append((start, i, text[start:i].lower()))
            start = None
    if start is not None:
        out.append((start, len(text), text[start:].lower()))
    return out


def _ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def strip_echo(answer: str, sources: Iterable[str], span: int = SPAN) -> Echo:
    """The answer with every long verbatim span of a source removed (see the module rule)."""
    answer = answer or ""
    spans = _words(answer)
    words = [w for _, _, w in spans]
    echoed = [False] * len(spans)
    for request_id in {found for source in sources for found in REQUEST_ID.findall(source or "")}:
        for match in re.finditer(re.escape(request_id), answer):
            for index, (begin, end, _) in enumerate(spans):
                echoed[index] = echoed[index] or (begin >= match.start() and end <= match.end())
    for source in sources:
        source_words = [w for _, _, w in _words(source or "")]
        n = min(span, len(source_words))
        if n < MIN_SOURCE_WORDS:
            continue
        grams = _ngrams(source_words, n)
        for start in range(len(words) - n + 1):
            if tuple(words[start:start + n]) in grams:
                for j in range(start, start + n):
                    echoed[j] = True
    removed = sum(echoed)
    if not removed:
        return Echo(answer, 0, len(spans))
    # cut each run of echoed words with the punctuation inside it and attached to its ends ("(ref", "?")
    cuts: list[list[int]] = []
    for index, (begin, end, _) in enumerate(spans):
        if not echoed[index]:
            continue
        if cuts and echoed[index - 1]:
            cuts[-1][1] = end
        else:
            cuts.append([begin, end])
    for cut in cuts:
        while cut[0] > 0 and not answer[cut[0] - 1].isspace() and not _is_word_char(answer[cut[0] - 1]):
            cut[0] -= 1
        while cut[1] < len(answer) and not answer[cut[1]].isspace() and not _is_word_char(answer[cut[1]]):
            cut[1] += 1
    pieces, last = [], 0
    for begin, end in cuts:
        pieces.append(answer[last:begin])
        last = end
    pieces.append(answer[last:])
    text = "".join(pieces)
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r"\n\s*\n+", "\n", text).strip()
    if not any(_is_word_char(c) for c in text):
        text = ""  # only punctuation of the echo is left: nothing was added
    return Echo(text, removed, len(spans))
