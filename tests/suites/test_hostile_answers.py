"""Answers a real model can produce never stop a suite: a checker that raises on an answer leaves a row scored as
not passed (error_kind check_error, with the reason), text UTF-8 cannot encode is written with its bad code points
replaced (text_replaced), and a resume does not send those requests again."""

from __future__ import annotations

import pytest

from benchlib.records.rows import read_requests
from benchlib.suites import runner
from benchlib.suites.runner import run_suite


@pytest.mark.parametrize("suite, task, answer", [
    ("text", "coding", "-" * 3000 + "1"),  # RecursionError / MemoryError in ast.parse
    ("quality", "entity_extraction", "[" * 1000),  # RecursionError in the lenient JSON reader
])
def test_an_answer_a_checker_cannot_take_is_a_row_scored_not_passed(params_for, outputs, suite, task, answer):
    params = params_for({"replies": [{"when": "", "text": answer}], "tokens": 1, "ttft": 0.001}, tasks=[task])
    result = run_suite(params, suite, progress=False)
    rows = read_requests(result.out_dir / "requests.csv")
    assert len(rows) == 1 and rows["status"].tolist() == ["ok"] and rows["response_text"].iloc[0].strip() == answer
    row = rows.iloc[0]
    assert row["passed"] == False and row["checker"]  # noqa: E712 — nullable boolean
    if row["error_kind"] == "check_error":  # a checker that raised; one that copes scores it as failed too
        assert row["check_detail"].startswith("check_error: ") and row["error_message"] in row["check_detail"]
    assert len(run_suite(params, suite, progress=False).requests) == 1  # the resume sends nothing again


def test_a_checker_that_raises_records_check_error_with_the_reason(params_for, outputs, monkeypatch):
    def broken(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded while decoding a JSON array")

    monkeypatch.setattr(runner.checkers, "score", broken)
    params = params_for({"tokens": 2, "ttft": 0.001}, tasks=["basic_qa"], run={"repeats": 2})
    result = run_suite(params, "text", progress=False)
    assert result.requests["status"].tolist() == ["ok", "ok"]
    assert result.requests["error_kind"].tolist() == ["check_error", "check_error"]
    assert result.requests["passed"].tolist() == [False, False]
    assert result.requests["error_message"].iloc[0] == ("RecursionError: maximum recursion depth exceeded while "
                                                        "decoding a JSON array")
    assert result.summary.set_index("task").loc["basic_qa", "n_ok"] == 2  # the timings count; the answers failed


def test_text_utf8_cannot_encode_is_written_replaced_and_flagged(params_for, outputs):
    """A lone surrogate (\\ud800, sent as a JSON escape) in the answer and in the reasoning."""
    fake = {"replies": [{"when": "", "text": "Paris \\ud800 end"}], "reasoning_tokens": 1,
            "reasoning_text": "thinking \\ud800", "unescape": True, "ttft": 0.001}
    result = run_suite(params_for(fake, tasks=["basic_qa"]), "text", progress=False)
    row = read_requests(result.out_dir / "requests.csv").iloc[0]
    assert row["status"] == "ok" and bool(row["text_replaced"])
    assert row["response_text"].startswith("Paris \ufffd end") and "thinking \ufffd" in row["reasoning_text"]
    assert "\ud800" not in (result.out_dir / "requests.csv").read_text(encoding="utf-8")
