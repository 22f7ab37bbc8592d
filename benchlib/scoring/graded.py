"""Scorers of graded sets and of code: the set's own scorer, or the code run against its tests.

    reasoning_gym   the final answer read by the task's rule (benchlib.scoring.answers, checker_args `read`), scored
                    by the generator's own `score_answer` (reasoning_gym.get_score_answer_fn); score = its reward
                    (partial credit where the generator gives it), passed = full credit
    human_eval      HumanEval pass@1: the answer's code (benchlib.scoring.answers.extract_code) after the problem's
                    prompt — a whole function redefines the stub, a bare body completes it — runs in the sandbox;
                    the problem's own `check(entry_point)` runs in the sandbox's judge, after the prompt (its helpers),
                    and decides (benchlib.scoring.sandbox.run_tests)
    python_code     the answer must parse and define expected["function"]; with expected["tests"] (assert lines)
                    those run against it the same way and decide
    exact_answer    a generated picture's known answer (benchlib.config.image_set): read by the task's rule
                    (checker_args `read`: last_number, or one_choice among the item's expected["choices"]) and
                    equal to expected["answer"]; score 1 or 0
    exact_words     a generated clip's known sentence (benchlib.config.speech_set): its word errors counted with
                    jiwer after the transcript normalisation the `wer` checker uses; passed at WER 0, score =
                    max(0, 1 − WER), the WER and the error count in the detail (transcription.csv has it per clip)

Code checkers read the answer whole (CODE_CHECKERS): executing it is echo-proof by construction (a repeated
prompt defines no working function), while cutting the prompt's spans out would break a correct answer that
restates the function's signature and docstring. The runner still flags the echo.
Sandbox limits come from checker_args: timeout_s (wall clock), cpu_s, memory_mb. Where the machine gives the sandbox
less than its full isolation, the detail says what was missing; where nothing on it bounds the code (docs/sandbox.md)
the code is not run and the answer is not scored (passed empty, the reason in the detail).
"""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import Any, Callable

from benchlib.scoring import sandbox
from benchlib.scoring.answers import extract_code, read_answer, read_choice, stop_refused, transcript_words, word_errors
from benchlib.scoring.verdict import Response, Verdict

CODE_CHECKERS = frozenset({"python_code", "human_eval"})


@lru_cache(maxsize=64)
def _gym_scorer(dataset: str) -> Callable[[str | None, dict], float]:
    import reasoning_gym  # imported on first use: it takes a second and most runs score nothing with it

    return reasoning_gym.get_score_answer_fn(dataset)


def reasoning_gym(response: Response, expected: dict, read: str = "last_number", **_: Any) -> Verdict:
    """expected: the generator's entry (question, answer, metadata) and its `dataset` name."""
    answer = read_answer(response.text, read)
    if answer is None:
        return Verdict(False, 0.0, f"read {read}: no answer found")
    score = float(_gym_scorer(expected["dataset"])(answer, expected))
    shown = answer if len(answer) <= 60 else answer[:57] + "..."
    return Verdict(score >= 1.0 - 1e-9, score, f"read {read}: {shown!r}; {expected['dataset']} score {score:.2f}",
                   answer)


def stop_refusal(checker: str, checker_args: dict[str, Any], stop: list[str]) -> str:
    """Why a task may not send its stop sequences ("" when it may): only a set scored by reasoning_gym under a
    one-line reading rule (benchlib.scoring.answers.ONE_LINE_RULES) loses nothing it reads."""
    if stop and checker != "reasoning_gym":
        return f"stop {stop!r}: checker {checker} reads the whole answer, a stop would cut it"
    return stop_refused(str(checker_args.get("read", "last_number")), stop)


def _limits(args: dict[str, Any]) -> dict[str, Any]:
    return {"timeout_s": float(args.get("timeout_s", sandbox.TIMEOUT_S)),
            "cpu_s": int(args.get("cpu_s", sandbox.CPU_S)),
            "memory_mb": int(args.get("memory_mb", sandbox.MEMORY_MB))}


def human_eval_program(problem: dict, code: str) -> str:
    """The program one HumanEval answer runs as: the prompt (imports, helpers, the stub), then the answer — a whole
    `def <entry_point>` after the prompt replaces the stub, anything else continues the stub's body."""
    entry = problem["entry_point"]
    return f"{problem['prompt']}\n\n{code}\n" if f"def {entry}(" in code else f"{problem['prompt']}{code}\n"


def human_eval_tests(problem: dict) -> str:
    """What the judge runs after the prompt: the problem's test and `check(<entry_point>)`."""
    return f"{problem['test']}\n\ncheck({problem['entry_point']})\n"


def _detail(result: sandbox.Execution) -> str:
    return f"{result.detail} [sandbox degraded: {result.missing}]" if result.missing else result.detail


def _verdict(result: sandbox.Execution, said: str, answer: str = "") -> Verdict:
    """The run's verdict; code the sandbox would not run (nothing on this machine bounds it) is not scored."""
    if result.error == sandbox.UNSANDBOXED:
        return Verdict(None, None, f"{said}not scored: {result.reason}", answer)
    return Verdict(result.passed, float(result.passed), f"{said}{_detail(result)}", answer)


def human_eval(response: Response, expected: dict, **args: Any) -> Verdict:
    """expected: the HumanEval problem (task_id, prompt, test, entry_point)."""
    code, how = extract_code(response.text)
    result = sandbox.run_tests(human_eval_program(expected, code), human_eval_tests(expected),
                               [expected["entry_point"]], setup=expected["prompt"], **_limits(args))
    return _verdict(result, f"{expected['task_id']} ({how}): ", code)


def python_code(response: Response, expected: dict, **args: Any) -> Verdict:
    """expected: {function: name, tests: [assert lines]?}. Without tests the answer only has to parse and
    define the function; with them, every test must pass when run after the code."""
    code, how = extract_code(response.text)
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return Verdict(False, 0.0, f"syntax error: {exc.msg} (line {exc.lineno})")
    names = sorted({n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))})
    if expected["function"] not in names:
        return Verdict(False, 0.0, f"defines {names}, not {expected['function']}")
    tests = list(expected.get("tests") or [])
    if not tests:
        return Verdict(True, 1.0, f"defines {names}")
    result = sandbox.run_tests(code, "\n".join(tests) + "\n", [expected["function"]], **_limits(args))
    return _verdict(result, f"defines {names}; {len(tests)} tests ({how}): ")


def exact_answer(response: Response, expected: dict, read: str = "last_number", **_: Any) -> Verdict:
    """expected: the item's answer (and, for read one_choice, its choices)."""
    if read == "one_choice":
        answer, named = read_choice(response.text, expected["choices"])
        how = f"names {', '.join(named)}" if len(named) > 1 else "names none of the choices"
    else:
        answer, how = read_answer(response.text, read), "no answer found"
    if answer is None:
        return Verdict(False, 0.0, f"read {read}: {how}; expected {expected['answer']!r}")
    passed = answer.strip().lower() == str(expected["answer"]).lower()
    return Verdict(passed, float(passed), f"read {read}: {answer!r}; expected {expected['answer']!r}", answer)


def exact_words(response: Response, expected: str, **_: Any) -> Verdict:
    """expected: the sentence spoken."""
    errors, words = word_errors(expected, response.text)
    rate = errors / words if words else 0.0
    return Verdict(errors == 0, max(0.0, 1.0 - rate), f"WER {rate:.3f} ({errors} of {words} words wrong)",
                   transcript_words(response.text))


# The graded sets' scorers: a task scored by one is a graded set (benchlib.analysis.paired's GRADED basis)
SCORERS: dict[str, Callable[..., Verdict]] = {"reasoning_gym": reasoning_gym, "human_eval": human_eval,
                                              "exact_answer": exact_answer, "exact_words": exact_words}
GRADED_CHECKERS = frozenset(SCORERS)
TRANSCRIPT_CHECKERS = frozenset({"wer", "exact_words"})  # scored against a reference transcript: its WER per clip
