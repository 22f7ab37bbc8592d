"""What a checker reads and what it says: the answer (Response) and the verdict on it (Verdict).

Every checker — benchlib.scoring.checkers and the graded sets' scorers in benchlib.scoring.graded — takes a
Response and returns a Verdict: `passed` is the pass/fail call (None: not scorable), `score` a fraction in [0, 1]
(partial credit), `detail` one short line saying why, `answer` what it took as the final answer where it reads one out of the text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Response:
    text: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{"name":..., "arguments": {...} or str}]
    finish_reason: str = ""


@dataclass
class Verdict:
    passed: bool | None  # None = not scorable (e.g. no answer text at all)
    score: float | None = None
    detail: str = ""
    answer: str = ""  # the final answer the checker read (a graded set's reading rule, code run), when it read one
