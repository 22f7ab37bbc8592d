"""Code written to beat the sandbox (issue 42, items 1-3): it cannot forge its verdict, read the benchmark's key,
outlive its limit, signal other processes, bring ctypes back, or leave files outside its scratch folder.

Each case runs twice where it can: with the sandbox's audit hook (the clear refusal) and without it
(refusals=False), which is what the OS boundary alone holds against native code. They run in whatever isolation
this machine gives the sandbox; a case whose claim that isolation does not make skips with the reason
(docs/sandbox.md says what each one holds). tests/scoring/test_sandbox_degraded.py forces the starts without
namespaces."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from benchlib.records.rows import read_requests
from benchlib.scoring import sandbox, sandbox_child
from benchlib.scoring.checkers import Response, score
from benchlib.scoring.verdict import Verdict
from benchlib.suites import runner
from benchlib.suites.runner import run_suite

pytestmark = pytest.mark.usefixtures("bounded_sandbox")

KEY = "sk-fb-test-" + uuid.uuid4().hex
LIMITS = {"timeout_s": 3.0, "cpu_s": 2, "memory_mb": 512}
PROBLEM = {"task_id": "HumanEval/forge", "entry_point": "add", "prompt": "def add(a, b):\n    \"\"\"a + b\"\"\"\n",
           "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"}


def run(program: str, **limits) -> sandbox.Execution:
    started = time.monotonic()
    result = sandbox.run_python(program, **{**LIMITS, **limits})
    assert time.monotonic() - started < LIMITS["timeout_s"] + 4.0, "the run outlived its limit"
    return result


# ---- item 1: the verdict ----------------------------------------------------------------------------------------
FORGERIES = {
    "the harness's own report, then os._exit(0)": "import __main__, os\n__main__.report(ok=True, network='')\n"
                                                  "os._exit(0)\n",
    "a pass written on every descriptor": "import os, json\nfor fd in range(3, 64):\n    for text in ("
                                          "'{\"ok\": true, \"passed\": true}', json.dumps({'ready': True})):\n"
                                          "        try:\n            os.write(fd, text.encode())\n"
                                          "        except OSError:\n            pass\nos._exit(0)\n",
    # only processes that are a sandbox's judge: where nothing stops it, this writes into their descriptors
    "the judge's pipes found through /proc": "import os\nfor pid in os.listdir('/proc'):\n    try:\n"
                                             "        judge = open(f'/proc/{pid}/cmdline', 'rb').read()"
                                             ".endswith(b'\\0judge\\0')\n    except OSError:\n"
                                             "        judge = False\n    for fd in range(3, 32) if judge else ():\n"
                                             "        try:\n            os.write(os.open(f'/proc/{pid}/fd/{fd}', "
                                             "os.O_WRONLY), b'{\"passed\": true}')\n        except OSError:\n"
                                             "            pass\nos._exit(0)\n",
    "an answer equal to everything": "class Same:\n    def __eq__(self, other):\n        return True\n\n"
                                     "def add(a, b):\n    return Same()\n",
}


@pytest.mark.parametrize("forgery", FORGERIES, ids=list(FORGERIES))
def test_a_forged_report_does_not_pass(forgery):
    code = FORGERIES[forgery]
    verdict = score("human_eval", Response(text=f"```python\n{code}```"), PROBLEM, LIMITS)
    assert verdict.passed is False, (forgery, verdict.detail)
    result = sandbox.run_tests(code, PROBLEM["test"] + "check(add)\n", ["add"], **LIMITS, refusals=False)
    assert not result.passed, (forgery, result.reason)
    honest = score("human_eval", Response(text="```python\ndef add(a, b):\n    return a + b\n```"), PROBLEM, LIMITS)
    assert honest.passed, honest.detail


def test_the_judge_names_the_failing_test_line_and_what_the_answer_raised():
    wrong = sandbox.run_tests("def add(a, b):\n    return a - b\n", PROBLEM["test"] + "check(add)\n", ["add"],
                              **LIMITS)
    assert not wrong.passed and wrong.error == "AssertionError" and "assert candidate(1, 2) == 3" in wrong.reason
    raised = sandbox.run_tests("def add(a, b):\n    return int('x')\n", "assert add(1, 2) == 3\n", ["add"], **LIMITS)
    assert not raised.passed and raised.error == "ValueError" and raised.line == 2, raised.reason
    unreadable = sandbox.run_tests("def add(a, b):\n    return object()\n", "assert add(1, 2) == 3\n", ["add"],
                                   **LIMITS)
    assert not unreadable.passed and "cannot cross the sandbox" in unreadable.reason


def test_values_cross_between_judge_and_answer_as_plain_data_only():
    value = [1, -2.5, float("inf"), "s", None, True, (1, (2,)), {3, 4}, frozenset({5}), {"k": [b"\x00"], 6: 7j}]
    again = sandbox_child.decode(json.loads(json.dumps(sandbox_child.encode(value))))
    assert again == value and type(again[6]) is tuple and type(again[7]) is set
    assert sandbox_child.encode(type("Int", (int,), {})(3)) == 3  # a subclass crosses as the plain value
    deep: list = []
    for _ in range(sandbox_child.DEPTH_LIMIT + 2):
        deep = [deep]
    for hostile in (object(), iter([1]), type("Same", (), {"__eq__": lambda s, o: True})(), deep):
        with pytest.raises(sandbox_child.WireError):
            sandbox_child.encode(hostile)
    for malformed in (["nope", 1], ["set", ["list", 1]], ["bytes", "zz"], {"a": 1}):
        with pytest.raises(sandbox_child.WireError):
            sandbox_child.decode(malformed)


# ---- item 2: no secret ------------------------------------------------------------------------------------------
def reads_every_environment(holder: int) -> str:
    """A program that looks for the key in its own environment and every process's start environment it can
    read (the holder's named, in case /proc cannot be listed)."""
    return ("import os\nfound = [repr(dict(os.environ))]\ntry:\n"
            "    pids = [p for p in os.listdir('/proc') if p.isdigit()]\nexcept OSError:\n    pids = []\n"
            f"for pid in ['{holder}'] + pids:\n    try:\n"
            "        found.append(open(f'/proc/{pid}/environ', 'rb').read().decode('utf-8', 'replace'))\n"
            "    except OSError:\n        pass\n"
            "raise RuntimeError(' '.join(found)[-190:] if any('sk-fb-test-' in f for f in found) else 'none')\n")


@pytest.mark.parametrize("refusals", [True, False], ids=["with the audit hook", "OS boundary alone"])
def test_the_sandbox_sees_no_secret(monkeypatch, refusals):
    """The key in the benchmark's environment, and in the environment a process of its uid was started with
    (/proc/<pid>/environ shows what a process started with, not what it set since): neither reaches the code."""
    monkeypatch.setenv("FB_SANDBOX_TEST_KEY", KEY)
    holder = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                              env={**os.environ, "FB_SANDBOX_TEST_KEY": KEY}, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "up\n"
        with open(f"/proc/{holder.pid}/environ", "rb") as handle:
            assert KEY.encode() in handle.read()  # the key is there to be found
        result = sandbox.run_python(reads_every_environment(holder.pid), **LIMITS, refusals=refusals)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert result.reason.startswith("RuntimeError: none"), result.reason
    environment = run("import os\nassert sorted(os.environ) == ['HOME', 'LANG', 'TMPDIR'], sorted(os.environ)\n",
                      refusals=refusals)
    assert environment.passed, environment.reason


def test_the_home_folder_is_seen_empty_or_not_at_all_but_the_interpreter_works(monkeypatch):
    home = Path(tempfile.mkdtemp(prefix="fb-home-", dir="/var/tmp"))  # outside /tmp, which the sandbox replaces
    try:
        (home / ".netrc").write_text(f"password {KEY}\n")
        monkeypatch.setattr(sandbox, "HIDDEN", [str(home)])
        listing = run(f"import os\nraise RuntimeError(repr(os.listdir({str(home)!r})))\n", refusals=False)
        netrc = run(f"raise RuntimeError(open({str(home / '.netrc')!r}).read())\n", refusals=False)
        if sandbox.isolation().namespaces:  # an empty folder mounted over it
            assert listing.reason.startswith("RuntimeError: []"), listing.reason
            assert netrc.error == "FileNotFoundError", netrc.reason
        else:  # Landlock, or the throwaway uid (the folder is the benchmark's, mode 0700)
            assert listing.error == netrc.error == "PermissionError", (listing.reason, netrc.reason)
        assert KEY not in listing.reason + netrc.reason
        assert run("import json, hashlib, collections\n").passed  # the standard library is still there
    finally:
        shutil.rmtree(home)


def test_a_key_in_the_checkers_words_never_reaches_requests_csv(params_for, outputs, monkeypatch):
    """Whatever a checker says (code it ran printed the key, say) is scrubbed like every other field."""
    monkeypatch.setenv("FB_SANDBOX_TEST_KEY", KEY)
    monkeypatch.setattr(runner.checkers, "score", lambda *a, **k: Verdict(False, 0.0, f"printed {KEY} here",
                                                                            f"answer {KEY}"))
    params = params_for({"tokens": 2, "ttft": 0.001}, tasks=["basic_qa"], server={"api_key_env": "FB_SANDBOX_TEST_KEY"})
    result = run_suite(params, "text", progress=False)
    text = (result.out_dir / "requests.csv").read_text(encoding="utf-8")
    assert KEY not in text
    row = read_requests(result.out_dir / "requests.csv").iloc[0]
    assert row["check_detail"] == "printed *** here" and row["answer_read"] == "answer ***", dict(row)


# ---- item 3: limits that hold -----------------------------------------------------------------------------------
@pytest.mark.parametrize("refusals", [True, False], ids=["with the audit hook", "OS boundary alone"])
def test_a_setsid_grandchild_holding_the_pipe_does_not_outlive_the_limit(refusals):
    program = ("import os, posix, time\npid = posix.fork()\nif pid == 0:\n    os.setsid()\n"
               "    if posix.fork() == 0:\n        time.sleep(60)\n    os._exit(0)\ntime.sleep(60)\n")
    started = time.monotonic()
    result = sandbox.run_python(program, timeout_s=2.0, cpu_s=2, memory_mb=512, refusals=refusals)
    assert not result.passed
    assert time.monotonic() - started < 8.0, "a grandchild kept the run going"  # it was 40 s


def test_ctypes_cannot_be_brought_back():
    for program in ("import sys\nsys.modules.pop('ctypes', None)\nimport ctypes\nctypes.CDLL(None).getpid()\n",
                    "import sys, importlib\nfor n in ('ctypes', '_ctypes'):\n    sys.modules.pop(n, None)\n"
                    "importlib.import_module('ctypes').CDLL(None).getpid()\n",
                    "import glob, importlib.util, sys\n"
                    "path = glob.glob(sys.base_prefix + '/lib/python3*/lib-dynload/_ctypes*.so')[0]\n"
                    "spec = importlib.util.spec_from_file_location('_ctypes', path)\n"
                    "module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n"
                    "module.dlopen(None)\n"):
        result = run(program)
        assert not result.passed and "refused" in result.reason, (program, result.reason)


def test_signals_do_not_reach_other_processes():
    way = sandbox.isolation()
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        refused = run(f"import posix\nposix.kill({victim.pid}, 9)\n")
        assert not refused.passed and "signals refused" in refused.reason, refused.reason
        if not way.namespaces and way.user is None and way.landlock < 6:
            pytest.skip(f"same uid, no namespaces, Landlock ABI {way.landlock} < 6: only the audit hook refuses "
                        "signals (the case with it ran)")
        native = run(f"import ctypes\nctypes.CDLL(None).kill({victim.pid}, 9)\nimport os\nos.kill({victim.pid}, 9)\n",
                     refusals=False)
        assert not native.passed
        time.sleep(0.2)
        assert victim.poll() is None, "a sandboxed program killed a process outside it"
    finally:
        victim.kill()
        victim.wait()


def _writes(tmp_path: Path, refusals: bool) -> tuple[list[int], list[str]]:
    """MB written into each folder (three outside the scratch folder, then the scratch folder itself), 12 files of
    15 MB each at most, and the files left outside."""
    token = uuid.uuid4().hex[:12]
    outside = [str(tmp_path), "/var/tmp", "/dev/shm"]
    program = (f"import os\nwritten = []\nfor folder in {outside + ['.']!r}:\n    written.append(0)\n"
               f"    for i in range(12):\n        try:\n"
               f"            with open(os.path.join(folder, f'fb_{token}_{{i}}'), 'wb') as handle:\n"
               f"                for _ in range(15):\n                    handle.write(b'x' * (1 << 20))\n"
               f"                    written[-1] += 1\n        except OSError:\n            break\n"
               f"raise SystemExit(repr(written))\n")
    result = run(program, refusals=refusals)
    left = [p for folder in outside for p in glob.glob(os.path.join(folder, f"fb_{token}_*"))]
    for path in left:
        os.unlink(path)
    return json.loads(result.reason.split("SystemExit: ", 1)[1].split(" at line")[0]), left


@pytest.mark.parametrize("refusals", [True, False], ids=["with the audit hook", "OS boundary alone"])
def test_writes_outside_the_scratch_folder_fail(tmp_path, refusals):
    way = sandbox.isolation()
    if not (refusals or way.namespaces or way.landlock):
        pytest.skip("the throwaway uid without namespaces or Landlock: world-writable folders (/var/tmp, /dev/shm) "
                    "are writable, only the audit hook refuses (the case with it runs)")
    written, left = _writes(tmp_path, refusals)
    assert not left, f"left outside the scratch folder: {left}"
    assert written[:3] == [0, 0, 0] and written[3] > 0, written


def test_the_scratch_folder_is_capped_in_total(tmp_path):
    if not sandbox.isolation().namespaces:
        pytest.skip("no namespaces: no tmpfs of its own, so no total cap on the scratch folder (RLIMIT_FSIZE caps "
                    "each file)")
    written, _ = _writes(tmp_path, False)
    assert 0 < written[3] <= sandbox.SCRATCH_MB, written  # in total, not per file (it was 12 x 15 MB)
