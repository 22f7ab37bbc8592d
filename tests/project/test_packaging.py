"""The conda environment and pyproject must not drift apart; notebooks are committed clean."""

from __future__ import annotations

import json

import tomllib
import yaml

from benchlib.config.paths import PROJECT_ROOT


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    expected = set(project["dependencies"]) | set(project["optional-dependencies"]["embedded"])
    env = yaml.safe_load((PROJECT_ROOT / "environment.yml").read_text())
    assert any(str(d).startswith("python=3.11") for d in env["dependencies"] if isinstance(d, str))
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = {p for p in pip if not p.startswith("-e")}
    assert listed == expected, f"only in environment.yml: {listed - expected}; only in pyproject: {expected - listed}"


def test_notebooks_are_committed_without_outputs():
    notebooks = list(PROJECT_ROOT.glob("notebooks/*.ipynb")) + list(PROJECT_ROOT.glob("paper/*.ipynb"))
    assert notebooks
    for path in notebooks:
        cells = json.loads(path.read_text())["cells"]
        dirty = [c for c in cells if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
        assert not dirty, f"{path.name} has outputs; strip them before committing"
