"""The code sandbox: a model's program runs in a child with limits, and what it must not do is refused with a
reason — never obeyed, never allowed to stall or outlive the run. Each case stays well under 5 s."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from benchlib.scoring.sandbox import run_python

pytestmark = pytest.mark.usefixtures("bounded_sandbox")


def run(program: str, **limits):
    started = time.monotonic()
    limits = {"timeout_s": 3.0, "cpu_s": 2, "memory_mb": 512, **limits}
    result = run_python(program, **limits)
    assert time.monotonic() - started < limits["timeout_s"] + 2.0, "a sandbox case outlived its wall clock"
    return result


def test_a_working_program_passes_and_a_failing_assert_says_which_line():
    assert run("def f(x):\n    return x + 1\n\nassert f(1) == 2\n").passed
    failed = run("def f(x):\n    return x\n\nassert f(1) == 2, 'off by one'\n")
    assert not failed.passed and failed.error == "AssertionError" and failed.line == 4
    assert "off by one" in failed.reason and "assert f(1) == 2" in failed.reason
    syntax = run("def f(:\n    pass\n")
    assert not syntax.passed and syntax.error == "SyntaxError"


def test_an_endless_loop_is_stopped_by_the_cpu_limit_and_a_sleeper_by_the_wall_clock():
    spin = run("while True:\n    pass\n", cpu_s=1, timeout_s=12.0)  # 1 CPU second: 4-8 s on a loaded 2-core box
    assert not spin.passed and spin.error == "cpu_limit" and "CPU time limit (1 s)" in spin.reason
    sleeper = run("import time\ntime.sleep(60)\n", timeout_s=1.0)
    assert not sleeper.passed and sleeper.error == "timeout" and "timed out after 1 s" in sleeper.reason
    assert sleeper.seconds < 3.0


def test_a_10_gb_allocation_fails_with_a_memory_error():
    result = run("data = bytearray(10 * 1024 ** 3)\n")
    assert not result.passed and result.error == "MemoryError" and result.line == 1


def test_forking_is_refused_and_nothing_outlives_the_run():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    result = run("import os\nwhile True:\n    os.fork()\n")
    assert not result.passed and result.error == "PermissionError"
    assert "process creation refused" in result.reason and result.line == 3
    for program in ("import subprocess\nsubprocess.run(['true'])\n", "import multiprocessing\n",
                    "import ctypes\nctypes.CDLL(None).fork()\n", "import os\nos.system('true')\n"):
        assert not run(program).passed, program
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_network_access_is_refused():
    for program in ("import socket\nsocket.create_connection(('127.0.0.1', 9))\n",
                    "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM)\n",
                    "import _socket\n_socket.socket()\n",
                    "import socket\nsocket.getaddrinfo('example.com', 80)\n"):
        result = run(program)
        assert not result.passed and "network access refused" in result.reason, (program, result.reason)
    fetch = run("import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9/', timeout=1)\n")
    assert not fetch.passed and "network access refused" in fetch.reason
    assert "socket calls refused" in fetch.network  # and, where the kernel allows it, an empty namespace


def test_leaving_early_is_not_passing():
    for program in ("import os\nos._exit(0)\nassert False\n", "import sys\nsys.exit(0)\nassert False\n",
                    "raise SystemExit\n"):
        result = run(program)
        assert not result.passed, program
    assert run("import sys\nsys.exit(0)\n").error == "SystemExit"


def test_the_program_runs_in_a_scratch_directory_that_is_removed(tmp_path, monkeypatch):
    """Nothing outside the scratch folder is writable (issue 42), so the program says where it ran by failing."""
    monkeypatch.chdir(tmp_path)
    name = f"left_behind_{os.getpid()}.txt"
    result = run(f"import os\nopen({name!r}, 'w').write('x')\n"
                 f"assert sorted(os.listdir('.')) == [{name!r}, 'program.py'], os.listdir('.')\n"
                 f"assert os.getcwd() != {str(tmp_path)!r}\nraise RuntimeError('ran in ' + os.getcwd())\n")
    assert result.error == "RuntimeError" and "ran in /" in result.reason, result.reason
    scratch = result.reason.split("ran in ", 1)[1].split(" at line")[0]
    assert not (Path(scratch) / name).exists() and not (tmp_path / name).exists()
    assert not list(Path(tempfile.gettempdir()).glob(f"fb-sandbox-*/{name}"))


@pytest.mark.parametrize("program", ["print('x' * 10_000_000)\n", "import sys\nsys.stdout.write('y' * 5_000_000)\n"])
def test_output_is_discarded_not_collected(program):
    assert run(program).passed
