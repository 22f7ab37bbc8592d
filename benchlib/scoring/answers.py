"""Reading the final answer out of a model's text: thinking left out, then one declared rule.

Thinking: a server that keeps reasoning apart sends it as reasoning text (never graded); a model that writes it
inline wraps it in <think>…</think> (also <thinking>, <reasoning>). `strip_thinking` removes such blocks, and an
opened block never closed (cut by max_tokens) to the end, before any checker reads the answer.

Answer rules (a graded task names one in checker_args `read`; the rule and what it read go into check_detail, the
raw answer stays in response_text). Under every rule an <answer>…</answer> tag — reasoning-gym's own convention —
wins when the model wrote one (the last tag counts):
    last_number   the last number in the text ("2 + 8 = 10" -> "10"; "1,000" -> "1000"; "3.0" -> "3"); number
                  words count too ("appears only once" -> "1"; zero to twenty, once, twice, thrice)
    first_line    the first non-empty line, without markdown emphasis (* and `), quotes or a trailing full stop; a set
                  read by it may stop each answer at the first line break (Task.stop, ONE_LINE_RULES): the answer
                  is then the first line the model wrote, so an answer that opens with a blank line or a restated
                  question (cut as an echo) reads as none
    last_line     the last non-empty line, likewise
    whole         the whole text, stripped
    one_choice    the one of the item's choices (each a list of names that count as it) that the text names, as
                  whole words, case aside: "The shape is grey." -> "gray"; none named, or two different ones
                  ("red or blue"), reads as no answer — an echo of a question that lists them all reads as none
                  (`read_choice`: it needs the choices, which the item carries)
Transcripts: `transcript_words` is what a word error rate counts (a leading "Here is the transcript:" and quotes
dropped, case and punctuation aside); `word_errors` counts them against the reference with jiwer.
Code answers: `extract_code` takes the longest fenced block (```python … ```), a fence cut off by max_tokens up to
the end, or else the whole text.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable, Sequence

_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.S | re.I)
_THINK_OPEN = re.compile(r"<(?:think|thinking|reasoning)>.*\Z", re.S | re.I)
_ANSWER_TAG = re.compile(r"<answer>\s?(.*?)\s?</answer>", re.S)
_NUMBER_WORDS = {word: str(value) for value, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())} | {"once": "1", "twice": "2", "thrice": "3"}
_NUMBER = re.compile(r"(?<![\w.])[-−]?\d+(?:\.\d+)?(?!\w)|\b(?:" + "|".join(_NUMBER_WORDS) + r")\b", re.I)
_DECOR = " \t*`\"'“”‘’"


def strip_thinking(text: str) -> str:
    """The text without inline thinking blocks (and without an unclosed one to its end)."""
    kept = _THINK_OPEN.sub("", _THINK_BLOCK.sub("", text or ""))
    return kept if kept == text else kept.strip()


def _clean(line: str) -> str:
    line = line.strip().strip(_DECOR)
    return line[:-1].rstrip(_DECOR) if line.endswith(".") else line


def _lines(text: str) -> list[str]:
    return [line for line in (_clean(raw) for raw in text.splitlines()) if line]


def _last_number(text: str) -> str | None:
    found = _NUMBER.findall(re.sub(r"(?<=\d),(?=\d{3}\b)", "", text))
    if not found:
        return None
    value = found[-1].replace("−", "-")
    value = _NUMBER_WORDS.get(value.lower(), value)
    if re.fullmatch(r"-?\d+\.0+", value):
        value = value.split(".")[0]
    return "0" if value == "-0" else value


READERS: dict[str, Callable[[str], str | None]] = {
    "last_number": _last_number,
    "first_line": lambda text: next(iter(_lines(text)), None),
    "last_line": lambda text: (_lines(text) or [None])[-1],
    "whole": lambda text: text.strip() or None,
}


# Rules that read nothing past the first line: a set read by one may stop each answer at its first line break
# (Task.stop ["\n"]). The other rules read the whole text (last_number's last number may sit on a later line).
ONE_LINE_RULES = frozenset({"first_line"})


def stop_refused(rule: str, stop: list[str]) -> str:
    """Why a task's stop sequences would cut what its reading rule reads ("" when they cut nothing it reads): only
    line breaks, under a rule that reads the first line only."""
    if not stop:
        return ""
    if rule not in ONE_LINE_RULES:
        return (f"stop {stop!r} would cut what read {rule!r} reads (the whole answer): a stop needs a one-line "
                f"rule ({', '.join(sorted(ONE_LINE_RULES))})")
    if any("\n" not in sequence for sequence in stop):
        return f"stop {stop!r}: only line breaks end a one-line answer where read {rule!r} stops reading"
    return ""


def read_answer(text: str, rule: str) -> str | None:
    """The final answer under `rule` (an answer tag wins), None when the text holds none."""
    if rule not in READERS:
        raise KeyError(f"unknown answer rule '{rule}' (known: {', '.join(READERS)})")
    tags = _ANSWER_TAG.findall(text or "")
    if tags:
        return tags[-1].strip()
    return READERS[rule](text or "")


def extract_code(text: str) -> tuple[str, str]:
    """(code, how it was found): the longest fenced block, an unterminated fence's rest, or the whole text."""
    blocks = re.findall(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", text, flags=re.S | re.I)
    if blocks:
        return max(blocks, key=len), "fenced block"
    opened = re.search(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*)\Z", text, flags=re.S | re.I)
    if opened:
        return opened.group(1), "unterminated fence"
    return text, "whole answer"


_PREAMBLE = re.compile(r"^[\s*_#>]*(?:sure[,!.]?\s*)?(?:here\s+is|here's|the\s+transcript(?:ion)?|transcript(?:ion)?)"
                       r"[^:\n]{0,60}:\s*", re.I)


def normalize_transcript(text: str) -> str:
    """Lower case, no punctuation (apostrophes dropped: "it's" -> "its"), hyphens as spaces, single spaces."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = text.replace("'", "").replace("\u2019", "")
    text = re.sub(r"[^\w\s]|_", " ", text)
    return " ".join(text.split())


def transcript_words(answer: str) -> str:
    """The words a WER counts: a leading 'Here is the transcript:' and quotes dropped, then normalize_transcript."""
    return normalize_transcript(_PREAMBLE.sub("", answer.strip(), count=1).strip().strip("\"'\u201c\u201d"))


def word_errors(expected: str, answer: str) -> tuple[int, int]:
    """(substitutions + deletions + insertions, reference words): summed over clips, their ratio is the corpus WER."""
    import jiwer

    ref, hyp = normalize_transcript(expected), transcript_words(answer)
    if not hyp:
        return len(ref.split()), len(ref.split())  # every reference word deleted
    out = jiwer.process_words(ref, hyp)
    return out.substitutions + out.deletions + out.insertions, len(ref.split())


def read_choice(text: str, choices: Sequence[Sequence[str]]) -> tuple[str | None, list[str]]:
    """(the one choice the text names, by its first name, or None; every choice it names). An answer tag wins."""
    tags = _ANSWER_TAG.findall(text or "")
    said = tags[-1] if tags else (text or "")
    named = [names[0] for names in choices
             if any(re.search(rf"(?<!\w){re.escape(name)}(?!\w)", said, re.I) for name in names)]
    return (named[0] if len(named) == 1 else None), named
