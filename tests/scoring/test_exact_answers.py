"""The generated sets' scorers: exact_answer reads a picture's answer by the task's rule (last_number, one_choice)
and requires the known answer; exact_words passes a clip's transcript only at WER 0 and says the WER."""

from __future__ import annotations

import pytest

from benchlib.analysis.paired import GRADED, SMOKE, basis_of
from benchlib.config import image_set
from benchlib.scoring.answers import read_choice
from benchlib.scoring.checkers import CHECKERS, Response, score
from benchlib.scoring.graded import GRADED_CHECKERS

COLOURS = {"dataset": "name_colour", "answer": "gray", "choices": [names for _, names in image_set.COLOURS.values()]}
POSITION = {"dataset": "name_position", "answer": "centre", "choices": list(image_set.POSITIONS.values())}
WORD = {"dataset": "read_word", "answer": "orange", "choices": [[w] for w in image_set.WORDS]}
COUNT = {"dataset": "count_shapes", "answer": "5"}
SENTENCE = "The hungry farmer carries the small basket every morning."


def verdict(text: str, expected, read: str | None = None, checker: str = "exact_answer"):
    return score(checker, Response(text=text), expected, {"read": read} if read else {})


@pytest.mark.parametrize("text, expected, read, passed, answer", [
    ("5", COUNT, "last_number", True, "5"),
    ("There are five circles.", COUNT, "last_number", True, "5"),
    ("I count 4 circles, no, 5.", COUNT, "last_number", True, "5"),
    ("There are 5 circles and 2 squares.", COUNT, "last_number", False, "2"),  # the last number is the answer
    ("<answer>5</answer> (I also see 3 squares)", COUNT, "last_number", True, "5"),  # an answer tag wins
    ("The shape is grey.", COLOURS, "one_choice", True, "gray"),
    ("GRAY", COLOURS, "one_choice", True, "gray"),
    ("It is gray on a white background.", COLOURS, "one_choice", True, "gray"),  # white is no choice: the canvas
    ("red", COLOURS, "one_choice", False, "red"),
    ("It is the centre.", POSITION, "one_choice", True, "centre"),
    ("In the middle of the image", POSITION, "one_choice", True, "centre"),
    ("center", POSITION, "one_choice", True, "centre"),
    ("The word is ORANGE.", WORD, "one_choice", True, "orange"),
    ("The word is oranges.", WORD, "one_choice", False, ""),  # whole words only
])
def test_the_reading_rules_give_the_known_answer(text, expected, read, passed, answer):
    result = verdict(text, expected, read)
    assert result.passed is passed and result.score == float(passed) and result.answer == answer
    assert f"read {read}" in result.detail and repr(expected["answer"]) in result.detail


def test_naming_several_choices_or_none_reads_no_answer():
    hedge = verdict("It could be red or orange.", COLOURS, "one_choice")
    assert hedge.passed is False and hedge.answer == "" and "names red, orange" in hedge.detail
    corner = verdict("top left", POSITION, "one_choice")
    assert corner.passed is False and "names left, top" in corner.detail
    echo = verdict("Where is the shape: left, right, top, bottom or centre?", POSITION, "one_choice")
    assert echo.passed is False  # a question that lists every choice answers none of them
    assert verdict("I cannot see a shape.", COLOURS, "one_choice").detail.startswith(
        "read one_choice: names none of the choices")
    assert verdict("many", COUNT, "last_number").detail == "read last_number: no answer found; expected '5'"
    assert read_choice("<answer>top</answer> not left", POSITION["choices"]) == ("top", ["top"])
    assert verdict("", COUNT, "last_number").passed is False  # an empty answer fails unchecked


def test_exact_words_passes_only_the_exact_sentence_and_says_its_wer():
    right = verdict("the hungry farmer carries the small basket, every morning", SENTENCE, checker="exact_words")
    assert right.passed is True and right.score == 1.0 and right.detail == "WER 0.000 (0 of 9 words wrong)"
    quoted = verdict('Here is the transcript: "The hungry farmer carries the small basket every morning."',
                     SENTENCE, checker="exact_words")
    assert quoted.passed is True and quoted.answer == SENTENCE.lower().rstrip(".")
    one_off = verdict("The hungry farmer carries the small blanket every morning.", SENTENCE, checker="exact_words")
    assert one_off.passed is False and one_off.score == pytest.approx(8 / 9)
    assert one_off.detail == "WER 0.111 (1 of 9 words wrong)"
    longer = verdict(SENTENCE + " Thank you for watching.", SENTENCE, checker="exact_words")
    assert longer.passed is False and longer.detail.startswith("WER 0.444")
    nothing = score("exact_words", Response(text=""), SENTENCE, {}, empty_is_answer=True)
    assert nothing.passed is False and "WER 1.000 (9 of 9 words wrong)" in nothing.detail


def test_the_generated_sets_scorers_are_graded_checkers():
    assert {"exact_answer", "exact_words"} <= GRADED_CHECKERS and GRADED_CHECKERS <= set(CHECKERS)
    assert basis_of("count_shapes", "exact_answer") == GRADED and basis_of("spoken_sentences", "exact_words") == GRADED
    assert basis_of("transcription", "wer") == SMOKE  # the seeds' five clips stay beside the verdict
