"""Echo-proof scoring: an answer that repeats its prompt scores nothing; the same echo followed by a correct
answer passes; the rule itself (long verbatim spans, whole short prompts, case and punctuation)."""

from __future__ import annotations

import hashlib

import pytest

from benchlib.config.tasks import load_tasks
from benchlib.scoring.echo import strip_echo
from benchlib.suites.runner import run_suite
from tests.helpers import perfect_answer

SUITES = ("text", "quality", "vision", "audio", "video")


def test_long_spans_and_whole_short_prompts_are_cut():
    prompt = "(ref 1a2b3c4d)\nSummarize: The city council approved a new budget for parks and libraries on Monday."
    echoed = strip_echo(prompt + "\nThe council funded parks.", [prompt])
    assert echoed.found and echoed.text == "The council funded parks."
    # the request id alone (a one-line set stops an echo after its first line) is an echo too; another id is not
    only_id = strip_echo("(ref 1a2b3c4d)\n", [prompt])
    assert only_id.found and only_id.text.strip() == ""
    assert not strip_echo("(ref 99999999) parks", [prompt]).found
    question = "What is the capital of France?"
    short = f"(ref 0badcafe)\n{question}"  # as sent; the runner passes the task's own text as a source too
    assert strip_echo("what is the capital of france? Paris.", [short, question]).text == "Paris."
    assert strip_echo(short + " Paris", [short, question]).text == "Paris"
    # a legitimate answer sharing a few words with the prompt keeps them
    kept = strip_echo("The capital of France is Paris.", [short])
    assert not kept.found and kept.text == "The capital of France is Paris."
    assert "3 of" not in kept.note() and strip_echo("", [short]).text == ""
    # the system prompt counts as a source too, and non-Latin scripts are words like any other
    kannada = "ನಮಸ್ಕಾರ ನೀವು ಹೇಗಿದ್ದೀರಿ ಇಂದು ಹವಾಮಾನ ಹೇಗಿದೆ ಎಂದು ಹೇಳಿ ದಯವಿಟ್ಟು"
    assert strip_echo(kannada, ["system words here", kannada]).text == ""


def _params(params_for, fake):  # 4 items of each graded set (20), not the full pools the default sends
    return params_for(fake, server={"modalities": ["text", "vision", "audio", "video"]},
                      run={"repeats": 1, "max_tokens": 4096, "graded_items": 4})


def _replies():
    """A perfect answer per variant a run sends, keyed by its prompt — or, for a generated set (one prompt for all
    its items, the speech set's the same as the transcription task's), by its picture's or clip's bytes: first."""
    by_media, by_prompt = [], []
    for task in load_tasks().values():
        if task.suite not in SUITES:
            continue
        for variant in task.variants[:4] if task.graded else task.variants:  # graded_items 4 (_params)
            answer = perfect_answer(task.checker, variant.expected)
            reply = {"text": answer.text, "tool_call": answer.tool_calls[0] if answer.tool_calls else None}
            media = task.media_paths(variant) if task.graded else {}
            if media:
                shown = hashlib.sha256(next(iter(media.values())).read_bytes()).hexdigest()
                by_media.append({"media_sha256": shown, **reply})
            else:
                by_prompt.append({"when": variant.prompt, **reply})
    return by_media + by_prompt


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.usefixtures("bounded_sandbox")
def test_an_echo_scores_nothing_and_an_echo_then_an_answer_passes(params_for, outputs, suite):
    echo = run_suite(_params(params_for, {"echo": True, "itl": 0.0005, "ttft": 0.001}), suite, progress=False)
    scored = echo.requests[echo.requests["passed"].notna()]
    assert len(scored) == len(echo.requests) > 0
    assert not scored["passed"].astype(bool).any(), scored.loc[scored["passed"].astype(bool),
                                                               ["task", "check_detail"]].to_string()
    assert scored["echo"].all()
    answered = run_suite(_params(params_for, {"echo": True, "replies": _replies(), "itl": 0.0005, "ttft": 0.001}),
                         suite, fresh=True, progress=False)
    rows = answered.requests
    # a one-line set (stop ["\n"]: word sorting) ends its answer at the first line break, which an echo reaches
    # first: there the echo is the whole answer, cut to nothing; every other task's answer after the echo passes
    one_line = rows["task"].isin([name for name, task in load_tasks().items() if task.stop])
    assert one_line.sum() == (4 if suite == "quality" else 0)
    assert rows.loc[~one_line, "passed"].astype(bool).all(), rows.loc[~rows["passed"].astype(bool) & ~one_line,
                                                                      ["task", "variant", "check_detail"]].to_string()
    stopped = rows[one_line]
    assert not stopped["passed"].astype(bool).any() and (stopped["finish_reason"] == "stop").all()
    assert stopped["response_text"].str.fullmatch(r"\(ref [0-9a-f]{8}\)\s*").all()  # the prompt's first line
    assert rows["echo"].all() and rows["check_detail"].str.startswith("echo: ").all()


def test_a_short_greeting_echoed_then_continued_in_another_script():
    """The embedded base model repeats a two-word Kannada greeting and runs on without a space: the greeting
    and its (ref …) id are cut, what it appended is judged."""
    sent, prompt = "(ref 3145d6b0)\nನಮಸ್ಕಾರ! ಹೇಗಿದ್ದೀರಾ?", "ನಮಸ್ಕಾರ! ಹೇಗಿದ್ದೀರಾ?"
    cut = strip_echo(sent + "ayakan\nmodel", [sent, prompt])
    assert cut.text == "ayakan\nmodel" and cut.removed_words == 4
    # a five-word stretch of a longer prompt is an echo even without the prompt's first word
    longer = "ಶುಭೋದಯ! ಇವತ್ತು ನಿಮ್ಮ ದಿನ ಹೇಗೆ ಶುರುವಾಯಿತು?"
    assert strip_echo("ಇವತ್ತು ನಿಮ್ಮ ದಿನ ಹೇಗೆ ಶುರುವಾಯಿತು? ಚೆನ್ನಾಗಿದೆ", [longer]).text == "ಚೆನ್ನಾಗಿದೆ"
    # vowel signs belong to their word: a different word is not an echo
    assert not strip_echo("ಹೇಗಿದ್ದೀರ ನಮಸ್ಕಾರ", ["ನಮಸ್ಕಾರ ಹೇಗಿದ್ದೀರಾ ಇಂದು"]).found
