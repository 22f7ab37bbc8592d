"""Helpers shared by test modules: params pointing at a local fake server, one request through a backend, the
embedded params the ladder tests start from, and an answer each checker accepts."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from benchlib.config.params import validate
from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure.client.backends import ChatRequest, make_backend
from benchlib.measure.pacing import event_loop
from benchlib.records.rows import RequestRecord
from benchlib.scoring.checkers import Response


def make_params(base_url: str, fake: dict | None = None, kind: str = "openai", **overrides):
    data = {
        "host": {"name": "test-host"},
        "server": {"kind": kind, "base_url": base_url, "model": "fake-model", "software": "fake",
                   "extra_body": {"fake": fake or {}}},
        "run": {"warmups": 0, "repeats": 1, "max_tokens": 64, "timeout_s": 5, "connect_timeout_s": 2,
                "retries_429": 2},
        "telemetry": {"enabled": False, "idle_baseline_s": 0, "loaded_baseline_s": 0},
    }
    for section, values in overrides.items():
        if isinstance(values, dict):
            data.setdefault(section, {}).update(values)
        else:
            data[section] = values
    return validate(data, source="test-params.yaml")


def send(params, max_tokens=64, thinking=False):
    backend = make_backend(params.server, params.run)
    record = RequestRecord(model=params.server.model, task="t", suite="s", host=params.host.name)
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=max_tokens, thinking=thinking)
    try:
        event_loop.run(backend.execute(request, record))
    finally:
        event_loop.run(backend.aclose())
    assert record.status == "ok", record.error_message
    return record


def ladder_params(tmp_path: Path) -> Path:
    """The embedded default as a one-task ladder params file (host ladder-host), written under tmp_path."""
    data = yaml.safe_load((PROJECT_ROOT / "params" / "embedded.yaml").read_text())
    data["host"]["name"] = "ladder-host"
    data["run"] = {"warmups": 1, "repeats": 1, "max_tokens": 16, "timeout_s": 60, "notebooks": ["text"]}
    data["tasks"] = ["basic_qa"]
    data["telemetry"] = {"idle_baseline_s": 0.3, "loaded_baseline_s": 0.3}
    path = tmp_path / "ladder.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def perfect_answer(checker: str, expected) -> Response:
    """An answer each checker must accept, built from the task variant's expected value."""
    r = lambda text="", **kw: Response(text=text, **kw)  # noqa: E731
    first = lambda item: item[0] if isinstance(item, list) else str(item)  # noqa: E731
    if checker == "color_grid":
        return r("\n".join(f"{c['color']}: row {c['row']}, column {c['col']}" for c in expected))
    if checker in ("wer", "exact_words"):
        return r(expected)
    if checker == "exact_answer":  # a picture's known answer, in a sentence as a chat model writes it
        return r(f"The answer is {expected['answer']}.")
    if checker in ("keyword_groups", "ordered_items"):
        return r(", ".join(first(g) for g in expected))
    if checker == "no_looping":
        return r("A steady tone; there is no speech.", finish_reason="stop")
    if checker == "entity_recall":
        return r(json.dumps({"persons": expected["persons"], "places": expected["places"]}))
    if checker == "tool_call":
        fn = expected["function"]
        arg = "name" if fn == "get_entity_details" else "query"
        value = " ".join((expected.get("contains") or {}).values()) or "something"
        return r(tool_calls=[{"name": fn, "arguments": {arg: value}}])
    if checker == "script_share":
        return r("ನಮಸ್ಕಾರ! ನಾನು ಚೆನ್ನಾಗಿದ್ದೇನೆ, ಧನ್ಯವಾದಗಳು.")
    if checker == "contains_any":
        return r(str(expected[0]))
    if checker == "number":
        return r(f"The answer is {expected}.")
    if checker == "python_code":  # the task's reference solution, fenced as a chat model writes it
        return r(f"```python\n{expected['solution']}```" if expected.get("tests") else
                 f"def {expected['function']}(x):\n    return x\n")
    if checker == "human_eval":  # the problem's canonical solution, restating the function as models do
        return r(f"```python\n{expected['prompt']}{expected['canonical_solution']}```")
    if checker == "reasoning_gym":
        return r(str(expected["answer"]))
    if checker == "keywords":
        return r(" ".join(expected))
    raise AssertionError(f"no perfect answer for checker {checker}")


def start_server(argv: list[str], ready_url: str, timeout_s: float = 120, **popen: Any) -> subprocess.Popen:
    """A real server process, started as a user starts it, once `ready_url` answers 200; killed, and RuntimeError,
    when it does not within `timeout_s`."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **popen)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(ready_url, timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    process.kill()
    process.wait()
    raise RuntimeError(f"{argv[0]} did not answer {ready_url} within {timeout_s:g} s")
