"""The code layout the README describes: layers import one way, no import inside a function to reach another
benchlib module, modules small enough to read, each module saying what lives there."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from benchlib.paths import PROJECT_ROOT

BENCHLIB = PROJECT_ROOT / "benchlib"
MAX_LINES = 620

# Lowest first; a module may import modules of its own layer or a lower one, never a higher one.
LAYERS = {
    "foundation": ["paths", "params", "tasks", "aio", "schema", "metrics", "failures", "echo", "stats"],
    "records": ["records", "store"],
    "measurement": ["sse", "exchange", "wire", "client", "media", "embedded", "manifest", "scoring", "telemetry",
                    "server_metrics", "load.health", "load.prompts", "load.workload", "weights", "quantize",
                    "embedded_vllm", "bandwidth"],
    "analysis": ["analysis", "crosscheck", "frontier", "decisions", "roofline", "bandwidth_law", "reference",
                 "transcription", "seed_arithmetic", "seed_rebuild", "load.levels", "load.serving"],
    "suites": ["runner", "load", "evidence", "timeline", "report", "explore", "ladder"],
    "paper": ["paper"],
    "entry": ["cli"],
}
RANK = {name: rank for rank, names in enumerate(LAYERS.values()) for name in names}


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(BENCHLIB.rglob("*.py")):
        parts = path.relative_to(BENCHLIB).with_suffix("").parts
        name = ".".join(p for p in parts if p != "__init__")
        out.append((name, path))
    return out


def layer(module: str) -> int:
    """The rank of the most specific LAYERS entry that names the module or a package above it."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        key = ".".join(parts[:i])
        if key in RANK:
            return RANK[key]
    raise KeyError(f"benchlib.{module} is in no layer: add it to LAYERS (and to the README's layout)")


def benchlib_imports(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """(module under benchlib, node) for every import of a benchlib module, at any depth of the tree."""
    known = {m for m, _ in modules()}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name.removeprefix("benchlib."), node) for a in node.names if a.name.startswith("benchlib.")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "benchlib":
            base = node.module.removeprefix("benchlib").lstrip(".")
            for alias in node.names:
                candidate = f"{base}.{alias.name}".lstrip(".")
                found.append((candidate if candidate in known else base, node))
    return found


@pytest.mark.parametrize("module,path", modules(), ids=[m or "benchlib" for m, _ in modules()])
def test_imports_go_one_way_and_sit_at_the_top(module, path):
    if not module:
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(node) for node in tree.body}
    mine = layer(module)
    for target, node in benchlib_imports(tree):
        assert id(node) in top_level, f"benchlib.{module}:{node.lineno} imports benchlib.{target} inside a function"
        if target == module or target.startswith(module + ".") or module.startswith(target + "."):
            continue  # a package and its own modules
        assert layer(target) <= mine, (f"benchlib.{module} ({list(LAYERS)[mine]}) imports benchlib.{target} "
                                       f"({list(LAYERS)[layer(target)]}), a higher layer")


@pytest.mark.parametrize("module,path", modules(), ids=[m or "benchlib" for m, _ in modules()])
def test_modules_are_small_and_say_what_they_hold(module, path):
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES, f"{path.name}: {len(text.splitlines())} lines (max {MAX_LINES})"
    if module:
        assert ast.get_docstring(ast.parse(text)), f"benchlib.{module} has no module docstring"


def test_every_module_has_a_layer():
    for module, _ in modules():
        if module:
            layer(module)
