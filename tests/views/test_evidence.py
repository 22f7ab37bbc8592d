"""The modality notebooks' evidence: each task variant's input (image, clip, frames), the expected answer,
the model's answer and the checker's verdict; tool calls against the expected call."""

from __future__ import annotations

import pandas as pd

from benchlib.config.tasks import load_tasks
from benchlib.records.rows import RequestLog, RequestRecord, read_requests
from benchlib.views import evidence


def rows(tmp_path, records: list[RequestRecord]) -> pd.DataFrame:
    log = RequestLog(tmp_path / "requests.csv")
    log.append_many(records)
    return read_requests(log.path)


def first_variant(task: str):
    return load_tasks()[task].variants[0]


def test_vision_cards_show_the_image_answer_and_verdict(tmp_path):
    variant = first_variant("image_description")
    frame = rows(tmp_path, [
        RequestRecord(task="image_description", variant=variant.id, repeat=0, is_warmup=True, request_key="w"),
        RequestRecord(task="image_description", variant=variant.id, repeat=0, request_key="a", passed=True,
                      score=1.0, response_text="a red ball on green grass", check_detail="3/3 groups"),
        RequestRecord(task="image_description", variant=variant.id, repeat=1, request_key="b", passed=False,
                      response_text="nothing"),
    ])
    [card] = evidence.cards(frame, "vision")
    assert (card.n_requests, card.n_passed, card.passed) == (2, 1, True)  # warm-up left out
    assert [m.kind for m in card.media] == ["image"] and card.media[0].exists
    html = evidence.card_html(card, "vision")
    assert "data:image/png;base64," in html and "a red ball" in html and "PASS" in html and "1/2 repeats" in html


def test_audio_cards_carry_reference_hypothesis_and_wer(tmp_path):
    variant = first_variant("transcription")
    frame = rows(tmp_path, [RequestRecord(task="transcription", variant=variant.id, request_key="a", passed=False,
                                          score=0.4, response_text="the quick fox",
                                          check_detail="WER 0.600 (max 0.3)")])
    [card] = evidence.cards(frame, "audio")
    assert card.expected == variant.expected and card.media[0].kind == "audio"
    html = evidence.card_html(card, "audio")
    assert "reference" in html and "the quick fox" in html and "WER 0.600" in html and "FAIL" in html


def test_video_cards_show_the_frames_sent(tmp_path):
    variant = first_variant("video_analysis")
    frame = rows(tmp_path, [RequestRecord(task="video_analysis", variant=variant.id, request_key="a",
                                          passed=True, response_text="1 red, 2 blue")])
    html = evidence.card_html(evidence.cards(frame, "video")[0], "video")
    assert html.count("data:image/jpeg;base64,") == 8  # 8 s at 1 fps


def test_tool_calls_are_shown_against_the_expected_call(tmp_path):
    variant = first_variant("tool_calling")
    call = {"name": variant.expected["function"], "arguments": {"query": "weather in Bengaluru"}}
    frame = rows(tmp_path, [RequestRecord(task="tool_calling", variant=variant.id, request_key="a", passed=True,
                                          tool_calls=[call], check_detail="ok")])
    html = evidence.card_html(evidence.cards(frame, "quality")[0], "quality")
    assert variant.expected["function"] in html and "weather in Bengaluru" in html and "expected" in html
    (tmp_path / "text-only").mkdir()
    text_only = rows(tmp_path / "text-only", [RequestRecord(task="tool_calling", variant=variant.id, request_key="b", passed=False,
                                    response_text="I would search the web")])
    assert "no structured tool call" in evidence.card_html(evidence.cards(text_only, "quality")[0], "quality")


def test_show_displays_cards_and_audio_players(tmp_path, monkeypatch):
    from IPython.display import Audio

    shown = []
    variant = first_variant("transcription")
    frame = rows(tmp_path, [RequestRecord(task="transcription", variant=variant.id, request_key="a", passed=True)])
    monkeypatch.setattr(evidence, "display", shown.append)
    built = evidence.show(frame, "audio")
    assert len(built) == 1 and any(isinstance(o, Audio) for o in shown)
    assert evidence.cards(frame.iloc[0:0], "audio") == []


def test_wrong_items_per_set_show_the_expected_the_answer_read_and_the_raw_answer(tmp_path, monkeypatch):
    arithmetic, humaneval = load_tasks()["arithmetic"].variants[:2], load_tasks()["humaneval"].variants[0]
    frame = rows(tmp_path, [
        RequestRecord(task="arithmetic", variant=arithmetic[0].id, request_key="a", status="ok", passed=True,
                      response_text=str(arithmetic[0].expected["answer"])),
        RequestRecord(task="arithmetic", variant=arithmetic[1].id, repeat=1, request_key="b", status="ok",
                      passed=False, response_text="The sum is 99, I think.", answer_read="99",
                      check_detail="read last_number: '99'; basic_arithmetic score 0.00"),
        RequestRecord(task="arithmetic@c4", variant=arithmetic[1].id, repeat=1, concurrency=4, request_key="c",
                      status="ok", passed=False, response_text="no idea", check_detail="read last_number: no answer"),
        RequestRecord(task="humaneval", variant=humaneval.id, request_key="d", status="ok", passed=False,
                      response_text="```python\nreturn None\n```", answer_read="return None"),
        RequestRecord(task="arithmetic", variant=arithmetic[1].id, request_key="w", status="ok", passed=False,
                      is_warmup=True),
        RequestRecord(task="arithmetic", variant=arithmetic[0].id, request_key="f", status="failed", passed=None),
    ])
    wrong = evidence.wrong_items(frame)
    assert wrong["set"].tolist() == ["arithmetic", "arithmetic@c4", "humaneval"]  # warm-up, passes, failures left out
    first = wrong.iloc[0]
    assert (first["item"], first["expected"], first["answer read"]) == (
        arithmetic[1].id, str(arithmetic[1].expected["answer"]), "99")
    assert first["raw answer"] == "The sum is 99, I think." and "score 0.00" in first["checker"]
    assert wrong.iloc[1]["expected"] == str(arithmetic[1].expected["answer"])  # the load pass has its set's items
    assert wrong.iloc[2]["expected"].startswith(f"passes {humaneval.expected['task_id']}'s own tests")
    shown = []
    monkeypatch.setattr(evidence, "display", shown.append)
    evidence.show_wrong(frame)
    assert [h.data.split("</h4>")[0] for h in shown] == ["<h4>arithmetic: 1 of 2 wrong", "<h4>arithmetic@c4: 1 of 1 wrong",
                                                        "<h4>humaneval: 1 of 1 wrong"]
