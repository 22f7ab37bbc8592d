"""bench/ scripts start: each imports what it measures and parses its options (a refactor that moves a
module they use must not leave `make bench` broken until someone runs it)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchlib.config.paths import PROJECT_ROOT

SCRIPTS = sorted((PROJECT_ROOT / "bench").glob("*.py"))


def test_bench_has_its_scripts():
    assert {p.name for p in SCRIPTS} >= {"measure_accuracy.py", "telemetry_overhead.py", "scheduler_lag.py", "omp_spin.py"}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_bench_script_starts(script):
    result = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                            cwd=PROJECT_ROOT, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout
