"""The code passes ruff with the project's rules (pyproject.toml [tool.ruff.lint]: pyflakes' checks — unused and
undefined names — and import order), so an import left behind by a move or a name used before it is defined fails
`make test`, not a reader."""

from __future__ import annotations

import subprocess
import sys

from benchlib.config.paths import PROJECT_ROOT

CHECKED = ("benchlib", "tests", "bench", "tools", "testdata", "paper")


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *CHECKED], cwd=PROJECT_ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_ruff_checks_import_order_and_pyflakes_rules():
    """The rules above are the ones selected: a file with an unsorted import block and an unused import fails."""
    bad = "import sys\nimport os\n\nprint(os.sep)\n"
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--stdin-filename",
                             "benchlib/example.py", "-"], input=bad, cwd=PROJECT_ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1 and "I001" in result.stdout and "F401" in result.stdout, result.stdout
