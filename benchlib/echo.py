"""What the model added: long verbatim spans copied from the prompt are cut from an answer before any checker
reads it, so a model that repeats its prompt (the embedded base model does) cannot pass on the prompt's own
keywords, numbers or script.

Rule: a run of at least `span` consecutive words of the answer that also occurs, word for word, in a prompt
source (the user prompt as sent with its `(ref …)` id, the task's prompt text without it, and the task's
system prompt) is an echo. `span` is
8 words, or the whole source when it is shorter (a 6-word question repeated whole is an echo too; sources
under 3 words are ignored). Words are compared case-insensitively without punctuation, so "Paris." matches
"paris". Echoed words are removed; what remains keeps its line breaks. The row is flagged `echo` and its
check_detail says how many words were cut.

Imports: nothing from benchlib.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

SPAN = 8
MIN_SOURCE_WORDS = 3
_WORD = re.compile(r"\S+")
_STRIP = re.compile(r"[^\w]+", re.UNICODE)


@dataclass(frozen=True)
class Echo:
    text: str  # the answer without the echoed spans
    removed_words: int
    total_words: int

    @property
    def found(self) -> bool:
        return self.removed_words > 0

    def note(self) -> str:
        return (f"echo: {self.removed_words} of {self.total_words} answer words copied from the prompt were "
                f"ignored" if self.found else "")


def _norm(word: str) -> str:
    return _STRIP.sub("", word).lower()


def _ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def strip_echo(answer: str, sources: Iterable[str], span: int = SPAN) -> Echo:
    """The answer with every long verbatim span of a source removed (see the module rule)."""
    matches = list(_WORD.finditer(answer or ""))
    words = [_norm(m.group()) for m in matches]
    echoed = [False] * len(matches)
    for source in sources:
        source_words = [w for w in (_norm(m.group()) for m in _WORD.finditer(source or "")) if w]
        n = min(span, len(source_words))
        if n < MIN_SOURCE_WORDS:
            continue
        grams = _ngrams(source_words, n)
        # compare over the answer's non-empty words, mapping back to their positions
        index = [i for i, w in enumerate(words) if w]
        kept = [words[i] for i in index]
        for start in range(len(kept) - n + 1):
            if tuple(kept[start:start + n]) in grams:
                for j in range(start, start + n):
                    echoed[index[j]] = True
    removed = sum(echoed)
    if not removed:
        return Echo(answer or "", 0, len(matches))
    pieces, last = [], 0
    for match, cut in zip(matches, echoed):
        if cut:
            pieces.append((answer[last:match.start()]))
            last = match.end()
    pieces.append(answer[last:])
    text = "".join(pieces)
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r"\n\s*\n+", "\n", text).strip()
    return Echo(text, removed, len(matches))
