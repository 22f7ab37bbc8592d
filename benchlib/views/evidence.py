"""What a reader of a modality notebook wants to see beside the numbers: the inputs and the answers.

    vision    each image with the model's answer and the checker's verdict
    audio     each clip as a player, with the reference transcript, the hypothesis and its WER
    video     a strip of the frames sent (sampled as the runner samples them) with the answer
    quality   each tool call the model made against the call the task expected
    text      each prompt's expected answer, the answer, the verdict

`cards(requests, suite)` builds plain records (tested without a frontend); `show(requests, suite)` displays
them with IPython.display. `wrong_items(requests)` lists, per set (task), every item a deployment got wrong — the
expected answer, the answer the checker read and the raw answer — and `show_wrong` displays it, a table per set. Media come from the task files through `request_media`, which the explorer uses
too. One card per task variant: the first measured request of it (repeats send the same input).
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
from IPython.display import HTML, Audio, display

from benchlib.config.tasks import TaskError, load_pass, load_tasks
from benchlib.measure.client.payloads import sample_frames
from benchlib.records.rows import STATUS_OK
from benchlib.records.schema import flag, number, optional_flag
from benchlib.scoring.checkers import call_parts

SHORT = 600  # characters of an answer shown on a card


@dataclass
class Media:
    kind: str  # image | audio | video
    path: Path
    exists: bool


def request_media(task: str, variant: str, suite: str | None = None) -> dict[str, Any]:
    """The media a task variant sends, resolved through benchlib.config.tasks: {'items': [Media], 'note': str}."""
    if suite == "load":
        return {"items": [], "note": "load-sweep request: a generated text prompt (benchlib.suites.load), no media"}
    try:
        tasks = load_tasks()
    except (TaskError, OSError) as exc:  # a broken task file must not break a display
        return {"items": [], "note": f"task files could not be read: {exc}"}
    if task not in tasks:
        return {"items": [], "note": f"task {task!r} is not in testdata/tasks (renamed or removed since the run)"}
    spec = tasks[task]
    variants = {v.id: v for v in spec.variants}
    if variant not in variants:
        note = ("no request was sent for this row (unsupported input), so no media either" if variant == "*"
                else f"variant {variant!r} is not in the task file any more")
        return {"items": [], "note": note}
    items = [Media(kind, path, path.is_file()) for kind, path in spec.media_paths(variants[variant]).items()]
    note = "" if items else "text only: this task sends no media"
    return {"items": items, "note": note}


def video_frames(path: str | Path, count: int = 4, fps: float = 1.0) -> list[bytes]:
    """The first `count` frames sampled at `fps` (as the runner sends them in frames mode), JPEG bytes."""
    frames = sample_frames(path, fps=fps)[:count]
    return [base64.b64decode(b64) for b64, _ in frames]


@dataclass
class Card:
    """One task variant's evidence: its input media, the expected answer, what came back, the verdict."""

    task: str
    variant: str
    status: str
    media: list[Media] = field(default_factory=list)
    expected: str = ""
    answer: str = ""
    verdict: str = ""
    passed: bool | None = None
    detail: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    n_requests: int = 0
    n_passed: int = 0


def _expected_text(expected: Any) -> str:
    if expected is None:
        return ""
    if isinstance(expected, str):
        return expected
    return json.dumps(expected, ensure_ascii=False)


def _verdict(row: Mapping[str, Any]) -> tuple[str, bool | None]:
    if row.get("status") != STATUS_OK:
        return f"not scored: {row.get('status')} ({row.get('error_kind') or 'no reason recorded'})", None
    passed = optional_flag(row.get("passed"))
    if passed is pd.NA:
        return "not scored", None
    score = number(row.get("score"))
    tail = "" if score != score else f" · score {score:.2f}"
    return ("PASS" if passed else "FAIL") + tail, bool(passed)


def cards(requests: pd.DataFrame, suite: str | None = None) -> list[Card]:
    """One card per task variant of the measured (non-warm-up) requests, in file order."""
    if requests is None or requests.empty:
        return []
    rows = requests[~requests["is_warmup"].map(flag)] if "is_warmup" in requests else requests
    try:
        tasks = load_tasks()
    except (TaskError, OSError):
        tasks = {}
    out: list[Card] = []
    for (task, variant), group in rows.groupby(["task", "variant"], sort=False):
        first = group.iloc[0].to_dict()
        spec = tasks.get(load_pass(str(task))[0])  # a set's pass under load has its set's items
        variants = {v.id: v for v in spec.variants} if spec else {}
        verdict, passed = _verdict(first)
        verdicts = [optional_flag(v) for v in group.get("passed", pd.Series(dtype=object))]
        calls = first.get("tool_calls")
        out.append(Card(
            task=str(task), variant=str(variant), status=str(first.get("status")),
            media=request_media(str(task), str(variant), suite)["items"],
            expected=_expected_text(variants[variant].expected) if variant in variants else "",
            answer=str(first.get("response_text") or first.get("error_message") or ""),
            verdict=verdict, passed=passed, detail=str(first.get("check_detail") or ""),
            tool_calls=list(calls) if isinstance(calls, list) else [],
            n_requests=len(group), n_passed=sum(1 for v in verdicts if v is True)))
    return out


def _short(text: str) -> str:
    return text if len(text) <= SHORT else text[:SHORT] + f" … ({len(text) - SHORT} more characters)"


def _box(label: str, text: str, empty: str = "(empty)") -> str:
    body = html.escape(_short(text)) if text else f"<i>{empty}</i>"
    return (f"<div style='margin:2px 0'><b>{label}</b><pre style='white-space:pre-wrap;background:#f6f6f6;"
            f"padding:6px;border-radius:4px;max-height:220px;overflow:auto;margin:2px 0'>{body}</pre></div>")


def _header(card: Card) -> str:
    colour = {True: "#2e7d32", False: "#c62828"}.get(card.passed, "#666")
    repeats = f" · {card.n_passed}/{card.n_requests} repeats passed" if card.n_requests > 1 else ""
    return (f"<div style='margin-top:10px'><b>{html.escape(card.task)}</b> · <code>{html.escape(card.variant)}"
            f"</code> · <span style='color:{colour}'><b>{html.escape(card.verdict)}</b></span>{repeats}</div>")


def _image_tag(path: Path, width: int = 320) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    mime = "image/png" if path.suffix.lower() == ".png" else "image/jpeg"
    return f"<img src='data:{mime};base64,{data}' width='{width}' style='margin:2px'/>"


def _frames_tag(path: Path, count: int = 8) -> str:
    try:
        frames = video_frames(path, count=count)
    except Exception as exc:  # noqa: BLE001 — PyAV missing or a broken file: say so, keep the card
        return f"<i>frames could not be decoded ({html.escape(str(exc))})</i>"
    return "".join(f"<img src='data:image/jpeg;base64,{base64.b64encode(f).decode()}' width='140' "
                   f"style='margin:1px'/>" for f in frames)


def _tool_table(card: Card) -> str:
    parts = [call_parts(call) for call in card.tool_calls]
    made = "; ".join(f"{name or '?'}({json.dumps(args, ensure_ascii=False)})" for name, args in parts) \
        or "no structured tool call"
    return (f"<table style='margin:2px 0'><tr><th style='text-align:left'>expected</th><td><code>"
            f"{html.escape(card.expected)}</code></td></tr><tr><th style='text-align:left'>made</th><td><code>"
            f"{html.escape(_short(made))}</code></td></tr><tr><th style='text-align:left'>checker</th><td>"
            f"{html.escape(card.detail)}</td></tr></table>")


def card_html(card: Card, suite: str) -> str:
    """One card as HTML (images and frames inlined; audio players are added by `show`)."""
    parts = [_header(card)]
    for item in card.media:
        if not item.exists:
            parts.append(f"<i>{item.kind} file missing: {html.escape(str(item.path))}</i>")
        elif item.kind == "image":
            parts.append(_image_tag(item.path))
        elif item.kind == "video":
            parts.append(f"<div>frames sent (1 fps): {_frames_tag(item.path)}</div>")
    if card.tool_calls or card.task == "tool_calling":
        parts.append(_tool_table(card))
    else:
        if card.expected:
            parts.append(_box("reference" if suite == "audio" else "expected", card.expected))
        parts.append(_box("answer", card.answer))
        if card.detail:
            parts.append(f"<div style='color:#555'>checker: {html.escape(card.detail)}</div>")
    return "".join(parts)


def show(requests: pd.DataFrame, suite: str) -> list[Card]:
    """Display every card of a suite's results (HTML, with audio players); returns the cards."""
    built = cards(requests, suite)
    if not built:
        display(HTML("<i>No measured requests to show.</i>"))
        return built
    for card in built:
        display(HTML(card_html(card, suite)))
        for item in card.media:
            if item.kind == "audio" and item.exists:
                display(Audio(filename=str(item.path)))
    return built


WRONG_COLUMNS = ["set", "item", "expected", "answer read", "raw answer", "checker"]


def expected_answer(expected: Any) -> str:
    """What a correct answer is, in a line: a graded entry's answer, a HumanEval problem's tests, else the task's
    expected value as written."""
    if isinstance(expected, dict) and "answer" in expected and "question" in expected:
        return str(expected["answer"])
    if isinstance(expected, dict) and {"task_id", "test", "entry_point"} <= set(expected):
        return f"passes {expected['task_id']}'s own tests ({expected['entry_point']})"
    return _expected_text(expected)


def expected_for(task: str, variant: str) -> str:
    """The expected answer of one item (expected_answer of the task variant's `expected`; a set's pass under load has
    its set's items), '' where the task files have none."""
    try:
        spec = load_tasks().get(load_pass(str(task))[0])
    except (TaskError, OSError):
        return ""
    found = next((v for v in spec.variants if v.id == str(variant)), None) if spec else None
    return expected_answer(found.expected) if found is not None and found.expected is not None else ""


def wrong_items(requests: pd.DataFrame) -> pd.DataFrame:
    """Every measured, scored answer that did not pass, per set (task) in file order: the item, the expected answer,
    the answer the checker read (answer_read; empty where it reads the whole text), the raw answer (cut to SHORT
    characters) and the checker's line."""
    if requests is None or requests.empty or "passed" not in requests:
        return pd.DataFrame(columns=WRONG_COLUMNS)
    rows = requests[~requests["is_warmup"].map(flag)] if "is_warmup" in requests else requests
    rows = rows[(rows.get("status") == STATUS_OK) & (rows["passed"].map(optional_flag) == False)]  # noqa: E712
    out = []
    for row in rows.to_dict("records"):
        out.append({"set": row["task"], "item": row["variant"], "expected": expected_for(row["task"], row["variant"]),
                    "answer read": _short(str(row.get("answer_read") or "")),
                    "raw answer": _short(str(row.get("response_text") or "")),
                    "checker": str(row.get("check_detail") or "")})
    return pd.DataFrame(out, columns=WRONG_COLUMNS)


def wrong_html(requests: pd.DataFrame) -> list[str]:
    """wrong_items as HTML, one table per set headed '<set>: k of n wrong' (a line where none is wrong)."""
    wrong = wrong_items(requests)
    scored = requests[requests["passed"].map(optional_flag).notna()] if len(requests) and "passed" in requests \
        else pd.DataFrame(columns=["task"])
    if "is_warmup" in scored:
        scored = scored[~scored["is_warmup"].map(flag)]
    if wrong.empty:
        return [f"<i>No wrong answers among {len(scored)} scored answers.</i>"]
    return [f"<h4>{html.escape(str(name))}: {len(group)} of {int((scored['task'] == name).sum())} wrong</h4>"
            + group.drop(columns="set").to_html(index=False, escape=True)
            for name, group in wrong.groupby("set", sort=False)]


def show_wrong(requests: pd.DataFrame) -> pd.DataFrame:
    """Display wrong_html, a table per set; returns wrong_items' frame."""
    for block in wrong_html(requests):
        display(HTML(block))
    return wrong_items(requests)
