"""The sandbox without namespaces (issue 53, item 1): where `unshare` is missing or refused and the worker runs as
the benchmark's own uid, code written to beat it cannot forge its verdict through /proc, read the benchmark's
environment, look into other processes' /proc entries or signal them; and where nothing on the machine holds it
(no namespaces, no throwaway uid, no Landlock) it refuses to run the code, and the answer is not scored.

The degraded mode is forced through the sandbox's own probe (no unshare, no throwaway uid), so these run on any
machine; the routes are the ones the issue's hostile round used. A case that needs Landlock skips, with the reason,
where the kernel has none: there the sandbox refuses to run (the last tests show it)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

from benchlib.config.tasks import load_tasks
from benchlib.scoring import sandbox
from benchlib.scoring.checkers import Response, score
from benchlib.suites.runner import run_suite

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-fb-test-" + uuid.uuid4().hex
LIMITS = {"timeout_s": 5.0, "cpu_s": 2, "memory_mb": 512}
PROBLEM = {"task_id": "HumanEval/forge", "entry_point": "add", "prompt": "def add(a, b):\n    \"\"\"a + b\"\"\"\n",
           "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"}


def degraded_isolation() -> sandbox.Isolation:
    """What this machine gives the sandbox when there is no unshare and no throwaway uid."""
    return sandbox._probe(None, None, sandbox.landlock_abi())


def bare_isolation() -> sandbox.Isolation:
    """... and no Landlock either."""
    return sandbox._probe(None, None, (0, "none, in this test"))


@pytest.fixture
def landlock():
    """The kernel's Landlock ABI, or the test skips: without it the degraded sandbox does not run code at all."""
    abi, why_not = sandbox.landlock_abi()
    if not abi:
        pytest.skip(f"no Landlock here ({why_not}): the sandbox without namespaces refuses to run code, as "
                    "test_where_nothing_holds_the_code_is_not_run_and_not_scored shows")
    return abi


# A HumanEval answer that returns None and forges its pass the way the hostile round did: it opens /proc as a
# directory and reaches the benchmark process (PARENT) through dir_fd, which the audit hook resolved against the
# current folder; it kills the judge (its sibling) with a pidfd, which raises no audit event, and writes a pass into
# every pipe the benchmark holds — one of them is the verdict's. Only the judge of this test's own process is hit.
FORGER = '''import os, signal

def _forge(parent):
    try:
        proc = os.open("/proc", os.O_RDONLY)
        writers = []  # held before the judge dies: its verdict pipe must not end before the pass is in it
        for n in os.listdir(os.open(f"{parent}/fd", os.O_RDONLY, dir_fd=proc)):
            try:
                if os.readlink(f"{parent}/fd/{n}", dir_fd=proc).startswith("pipe:"):
                    writers.append(os.open(f"{parent}/fd/{n}", os.O_WRONLY | os.O_NONBLOCK, dir_fd=proc))
            except OSError:
                pass
        for name in os.listdir(proc):
            try:
                fd = os.open(name + "/stat", os.O_RDONLY, dir_fd=proc)
                ppid = int(os.read(fd, 4096).rsplit(b")", 1)[1].split()[1])
                fd = os.open(name + "/cmdline", os.O_RDONLY, dir_fd=proc)
                judge = os.read(fd, 1 << 20).endswith(b"\\0judge\\0")
            except (OSError, IndexError, ValueError):
                continue
            if judge and ppid == parent:
                signal.pidfd_send_signal(os.pidfd_open(int(name)), signal.SIGKILL)
        for fd in writers:
            try:
                os.write(fd, b'\\n{"passed": true}\\n')
            except OSError:
                pass
        os._exit(0)
    except OSError:
        pass


def add(a, b):
    _forge(PARENT)  # the judge is waiting for this answer now
    return None
'''

# Reads the benchmark process's environment through the same route and hands the key out base64-encoded (a byte
# scan of the output misses it).
ENVIRON_READER = '''import base64, os
found = "none"
try:
    fd = os.open(f"PARENT/environ", os.O_RDONLY, dir_fd=os.open("/proc", os.O_RDONLY))
    for item in os.read(fd, 1 << 16).split(b"\\0"):
        if item.startswith(b"FB_SANDBOX_TEST_KEY="):
            found = "key " + base64.b64encode(item.split(b"=", 1)[1]).decode()
except OSError as exc:
    found = f"refused ({exc.strerror})"
raise RuntimeError(found)
'''

# Runs one case in a process of its own, started with the key in its environment (so /proc/<pid>/environ holds
# it, as it does for a benchmark started with the key exported) and holding no pipes but its own.
SCRIPT = '''import json, os, sys
from benchlib.scoring import sandbox
from benchlib.scoring.graded import human_eval, human_eval_program, human_eval_tests
from benchlib.scoring.verdict import Response
sandbox.isolation = lambda: sandbox._probe(None, None, sandbox.landlock_abi())  # as degraded_isolation
how, code = sys.argv[1], sys.argv[2].replace("PARENT", str(os.getpid()))
problem, limits = map(json.loads, sys.argv[3:])
if how == "scored":  # the graded checker: the audit hook on
    verdict = human_eval(Response(text=f"```python\\n{code}```"), problem, **limits)
    outcome = {"passed": verdict.passed, "detail": verdict.detail}
elif how == "judged, OS boundary alone":
    result = sandbox.run_tests(human_eval_program(problem, code), human_eval_tests(problem), [problem["entry_point"]],
                               setup=problem["prompt"], **limits, refusals=False)
    outcome = {"passed": result.passed, "detail": result.reason}
else:
    result = sandbox.run_python(code, **limits, refusals=how == "with the audit hook")
    outcome = {"passed": result.passed, "detail": result.reason, "error": result.error}
print("\\n" + json.dumps(outcome))
'''


def in_a_process_of_its_own(how: str, code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, how, code, json.dumps(PROBLEM), json.dumps(LIMITS)],
                          capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT),
                                         "FB_SANDBOX_TEST_KEY": KEY})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("how", ["scored", "judged, OS boundary alone"])
def test_a_forged_pass_through_proc_and_dir_fd_does_not_pass(landlock, how):
    verdict = in_a_process_of_its_own(how, FORGER)
    assert verdict["passed"] is False, verdict["detail"]
    assert "assert candidate(1, 2) == 3" in verdict["detail"], verdict["detail"]  # the judge's own failing line


@pytest.mark.parametrize("how", ["with the audit hook", "OS boundary alone"])
def test_the_benchmarks_environment_is_out_of_reach(landlock, how):
    outcome = in_a_process_of_its_own(how, ENVIRON_READER)
    assert base64.b64encode(KEY.encode()).decode() not in outcome["detail"] and KEY not in outcome["detail"]
    assert outcome["detail"].startswith("RuntimeError: refused"), outcome["detail"]


@pytest.mark.parametrize("refusals", [True, False], ids=["with the audit hook", "OS boundary alone"])
def test_other_processes_proc_entries_cannot_be_listed_or_read(landlock, monkeypatch, refusals):
    monkeypatch.setattr(sandbox, "isolation", degraded_isolation)
    victim = os.getpid()
    program = (f"import os\noutcomes = []\nfor look in (lambda: os.listdir('/proc/{victim}/fd'), "
               f"lambda: os.readlink('/proc/{victim}/cwd'), lambda: os.readlink('/proc/{victim}/fd/0'), "
               f"lambda: list(os.scandir('/proc/{victim}/task'))):\n"
               "    try:\n        outcomes.append(repr(look())[:20])\n"
               "    except OSError as exc:\n        outcomes.append(type(exc).__name__)\n"
               "raise RuntimeError(repr(outcomes))\n")
    result = sandbox.run_python(program, **LIMITS, refusals=refusals)
    assert result.reason.startswith("RuntimeError: ['PermissionError', 'PermissionError', 'PermissionError', "
                                    "'PermissionError']"), result.reason


@pytest.mark.parametrize("refusals", [True, False], ids=["with the audit hook", "OS boundary alone"])
def test_a_pidfd_signal_does_not_reach_another_process(landlock, monkeypatch, refusals):
    if not refusals and landlock < 6:
        pytest.skip(f"Landlock ABI {landlock} < 6 does not scope signals: the audit hook's refusal is all there is "
                    "(the case with it runs)")
    monkeypatch.setattr(sandbox, "isolation", degraded_isolation)
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        result = sandbox.run_python(f"import os, signal\nsignal.pidfd_send_signal(os.pidfd_open({victim.pid}), "
                                    "signal.SIGKILL)\n", **LIMITS, refusals=refusals)
        time.sleep(0.2)
        assert victim.poll() is None, "a sandboxed program killed a process outside it"
        assert result.error == "PermissionError", result.reason
    finally:
        victim.kill()
        victim.wait()


def test_where_nothing_holds_the_code_is_not_run_and_not_scored(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox, "isolation", bare_isolation)
    honest = score("human_eval", Response(text="```python\ndef add(a, b):\n    return a + b\n```"), PROBLEM, LIMITS)
    assert honest.passed is None and honest.score is None, honest.detail
    assert honest.detail.startswith("HumanEval/forge") and "not scored" in honest.detail, honest.detail
    marker = tmp_path / "ran"
    result = sandbox.run_python(f"open({str(marker)!r}, 'w').write('x')\n", **LIMITS, refusals=False)
    assert not result.passed and result.error == "unsandboxed" and not marker.exists(), result.reason


def test_where_landlock_fails_at_run_time_the_code_is_not_run(landlock, monkeypatch, tmp_path):
    """The probe found Landlock, but the reaper cannot restrict itself (here: the restricting call made unknown to
    the kernel): it says so before the worker exists, and nothing of the model's runs."""
    monkeypatch.setattr(sandbox, "isolation", degraded_isolation)
    line = "SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446"
    assert line in sandbox.CHILD
    monkeypatch.setattr(sandbox, "CHILD", sandbox.CHILD.replace(line, line.replace("446", "100000")))
    marker = tmp_path / "ran"
    result = sandbox.run_python(f"open({str(marker)!r}, 'w').write('x')\n", **LIMITS, refusals=False)
    assert result.error == sandbox.UNSANDBOXED and not marker.exists(), result.reason
    assert result.reason.startswith("not run: Landlock could not be set up (landlock_restrict_self: "), result.reason
    verdict = score("human_eval", Response(text="```python\ndef add(a, b):\n    return a + b\n```"), PROBLEM, LIMITS)
    assert verdict.passed is None and "not scored: not run: Landlock could not be set up" in verdict.detail


def test_where_nothing_holds_a_coding_sets_accuracy_is_empty_with_the_reason(monkeypatch, params_for, outputs):
    monkeypatch.setattr(sandbox, "isolation", bare_isolation)
    task = load_tasks()["humaneval"]
    right = [{"when": v.prompt, "text": f"```python\n{v.expected['prompt']}{v.expected['canonical_solution']}```"}
             for v in task.variants[:2]]
    params = params_for({"replies": right, "itl": 0.0005, "ttft": 0.001}, tasks=["humaneval"],
                        run={"graded_items": 2, "max_tokens": 1024})
    result = run_suite(params, "quality", progress=False)
    rows = result.requests
    assert len(rows) == 2 and rows["passed"].isna().all() and (rows["status"] == "ok").all(), rows["passed"]
    assert rows["check_detail"].str.contains("not scored: not run: .*nothing bounds the code").all(), \
        rows["check_detail"].tolist()
    line = result.summary.set_index("task").loc["humaneval"]
    assert line["n_scored"] == 0 and pd.isna(line["accuracy"]), dict(line)


def test_without_namespaces_honest_code_passes_and_every_run_says_what_is_missing(landlock, monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox, "isolation", degraded_isolation)
    way = degraded_isolation()
    assert way.in_force == f"Landlock (ABI {landlock}), same uid, no namespaces", way.in_force
    honest = sandbox.run_python("import json, hashlib, tempfile\nopen('here.txt', 'w').write('x')\n"
                                "open('/dev/null', 'w').write('x')\ntempfile.TemporaryFile().write(b'x')\n", **LIMITS)
    assert honest.passed and honest.missing == way.missing and "without a total size cap" in honest.missing, honest
    outside = sandbox.run_python(f"open({str(tmp_path / 'x')!r}, 'w').write('x')\n", **LIMITS, refusals=False)
    assert outside.error == "PermissionError" and not (tmp_path / "x").exists(), outside.reason
    verdict = score("human_eval", Response(text="```python\ndef add(a, b):\n    return a + b\n```"), PROBLEM, LIMITS)
    assert verdict.passed and f"sandbox degraded: {way.missing}" in verdict.detail, verdict.detail
