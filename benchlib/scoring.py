"""Checkers: data-driven answer scoring. A task names its checker; CHECKERS maps names to functions.

Every checker takes (response: Response, expected, **checker_args) and returns a Verdict.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Callable


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


def python_code(response: Response, expected: dict, **_: Any) -> Verdict:
    blocks = re.findall(r"```(?:python|py)?\s*\n(.*?)```", response.text, flags=re.S)
    code = max(blocks, key=len) if blocks else response.text
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return Verdict(False, 0.0, f"syntax error: {exc.msg} (line {exc.lineno})")
    names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    ok = expected["function"] in names
    return Verdict(ok, float(ok), f"defines {sorted(names)}")


def keywords(response: Response, expected: list[str], min_hits: int = 1, **_: Any) -> Verdict:
    text = response.text.lower()
    hits = [k for k in expected if k.lower() in text]
    return Verdict(len(hits) >= min_hits, len(hits) / max(len(expected), 1), f"{len(hits)}/{len(expected)} keywords")


CHECKERS: dict[str, Callable[..., Verdict]] = {
    "contains_any": contains_any,
    "number": number,
    "python_code": python_code,
    "keywords": keywords,
}


def score(checker: str, response: Response, expected: Any, checker_args: dict | None = None) -> Verdict:
    """Run a named checker. A truncated answer is scored as it stands; truncation is reported separately."""
    if checker not in CHECKERS:
        raise KeyError(f"unknown checker '{checker}' (known: {', '.join(sorted(CHECKERS))})")
    if not response.text.strip() and not response.tool_calls:
        return Verdict(False, 0.0, "empty answer")
    return CHECKERS[checker](response, expected, **(checker_args or {}))
