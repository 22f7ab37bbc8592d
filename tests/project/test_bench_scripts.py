"""bench/ scripts start: each imports what it measures and parses its options (a refactor that moves a
module they use must not leave `make bench` broken until someone runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from benchlib.config.paths import PROJECT_ROOT

SCRIPTS = sorted((PROJECT_ROOT / "bench").glob("*.py"))

# Every script's `--help` as its own __main__, one after another in one interpreter: the imports they share are
# paid once (twenty interpreters cost ~1.5 min of make test), and each still runs its whole module and its parser.
HELP_ALL = textwrap.dedent("""
    import contextlib, io, json, runpy, sys, traceback
    results = {}
    for path in sys.argv[1:]:
        out, err, code = io.StringIO(), io.StringIO(), 0
        sys.argv = [path, "--help"]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(path, run_name="__main__")
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:
                traceback.print_exc()
                code = 1
        results[path] = {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
    print(json.dumps(results))
""")


@pytest.fixture(scope="module")
def helped() -> dict[str, dict]:
    done = subprocess.run([sys.executable, "-c", HELP_ALL, *map(str, SCRIPTS)], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_bench_has_its_scripts():
    assert {p.name for p in SCRIPTS} >= {"measure_accuracy.py", "telemetry_overhead.py", "scheduler_lag.py", "omp_spin.py"}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_bench_script_starts(script, helped):
    result = helped[str(script)]
    assert result["code"] == 0, result["stderr"][-2000:]
    assert "usage:" in result["stdout"]
