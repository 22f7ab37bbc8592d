"""The code layout docs/layout.md describes: benchlib/ is one folder per layer, each layer's __init__ docstring says
which layers it may import ("May import: …"), and the modules keep to it; no import inside a function reaches
another benchlib module; modules are small enough to read and each says what it holds."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from benchlib.config.paths import PROJECT_ROOT

BENCHLIB = PROJECT_ROOT / "benchlib"
MAX_LINES = 620
ENTRY = "cli"  # the command line: the one module outside a layer folder, free to import every layer


def layer_folders() -> list[str]:
    return sorted(p.parent.name for p in BENCHLIB.glob("*/__init__.py"))


def allowed_imports(layer: str) -> set[str]:
    """The layers named on the 'May import:' line of the layer's own docstring."""
    doc = ast.get_docstring(ast.parse((BENCHLIB / layer / "__init__.py").read_text(encoding="utf-8"))) or ""
    match = re.search(r"^May import: (.+?)\.?$", doc, re.M)
    assert match, f"benchlib/{layer}/__init__.py: its docstring has no 'May import:' line"
    words = match.group(1)
    if words.startswith("nothing"):
        return set()
    return {w.strip() for w in words.split(",")}


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(BENCHLIB.rglob("*.py")):
        parts = path.relative_to(BENCHLIB).with_suffix("").parts
        out.append((".".join(p for p in parts if p != "__init__"), path))
    return out


def layer_of(module: str) -> str:
    return module.split(".")[0]


def benchlib_imports(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """(module under benchlib, node) for every import of a benchlib module, at any depth of the tree."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name.removeprefix("benchlib."), node) for a in node.names if a.name.startswith("benchlib.")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "benchlib":
            found.append((node.module.removeprefix("benchlib").lstrip("."), node))
    return found


def test_the_layers_are_the_folders_and_their_order_has_no_cycle():
    layers = layer_folders()
    assert {"config", "records", "measure", "scoring", "analysis", "published", "suites", "views",
            "paper"} <= set(layers)
    allowed = {layer: allowed_imports(layer) for layer in layers}
    for layer, names in allowed.items():
        assert names <= set(layers), f"benchlib/{layer}: 'May import' names {sorted(names - set(layers))}"
        assert layer not in names
        for lower in names:  # one way: what a layer may import may not import it back, nor anything above it
            assert layer not in allowed[lower], f"{layer} and {lower} may import each other"
            assert allowed[lower] <= names, f"{layer} may import {lower} but not all that {lower} may import"


@pytest.mark.parametrize("module,path", modules(), ids=[m or "benchlib" for m, _ in modules()])
def test_imports_go_one_way_and_sit_at_the_top(module, path):
    if not module:
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(node) for node in tree.body}
    mine = layer_of(module)
    may = None if module == ENTRY else allowed_imports(mine) | {mine}
    for target, node in benchlib_imports(tree):
        assert id(node) in top_level, f"benchlib.{module}:{node.lineno} imports benchlib.{target} inside a function"
        if may is not None and target:
            assert layer_of(target) in may, (f"benchlib.{module} ({mine}) imports benchlib.{target} "
                                             f"({layer_of(target)}), which its layer may not import")


@pytest.mark.parametrize("module,path", modules(), ids=[m or "benchlib" for m, _ in modules()])
def test_modules_are_small_and_say_what_they_hold(module, path):
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES, f"{path.name}: {len(text.splitlines())} lines (max {MAX_LINES})"
    if module:
        doc = ast.get_docstring(ast.parse(text))
        assert doc, f"benchlib.{module} has no module docstring"
        assert not re.search(r"^Imports:", doc, re.M), (
            f"benchlib.{module}: a hand-kept 'Imports:' line drifts; the layer's 'May import:' line is the rule")


def test_every_module_lives_in_a_layer_folder():
    stray = [m for m, _ in modules() if m and "." not in m and m not in layer_folders() and m != ENTRY]
    assert not stray, f"modules outside a layer folder: {stray}"


def measure_rooms() -> list[str]:
    return sorted(p.parent.name for p in (BENCHLIB / "measure").glob("*/__init__.py"))


def allowed_rooms(room: str) -> set[str]:
    """The rooms of measure/ named on the 'Rooms of measure/ it may import:' line of the room's docstring."""
    doc = ast.get_docstring(ast.parse((BENCHLIB / "measure" / room / "__init__.py").read_text(encoding="utf-8")))
    match = re.search(r"^Rooms of measure/ it may import: (.+?)\.?$", doc or "", re.M)
    assert match, f"benchlib/measure/{room}/__init__.py: its docstring has no 'Rooms of measure/ it may import:' line"
    return set() if match.group(1).startswith("nothing") else {w.strip() for w in match.group(1).split(",")}


def test_the_rooms_of_measure_import_one_way():
    """measure/ is one room per concern; a room imports only the rooms its docstring names, and those never import
    it back (provenance, the one module at measure's top, may import every room)."""
    rooms = measure_rooms()
    assert {"pacing", "http", "client", "servers", "telemetry"} <= set(rooms)
    allowed = {room: allowed_rooms(room) for room in rooms}
    for room, names in allowed.items():
        assert names <= set(rooms) and room not in names
        for lower in names:
            assert room not in allowed[lower] and allowed[lower] <= names, f"measure/{room} and measure/{lower}"
    for room in rooms:
        for path in (BENCHLIB / "measure" / room).rglob("*.py"):
            for target, node in benchlib_imports(ast.parse(path.read_text(encoding="utf-8"))):
                parts = target.split(".")
                if parts[0] == "measure" and len(parts) > 1 and parts[1] != room:
                    assert parts[1] in allowed[room], (f"{path.relative_to(BENCHLIB)}:{node.lineno} imports "
                                                       f"benchlib.{target}, a room measure/{room} may not import")
    loose = sorted(p.name for p in (BENCHLIB / "measure").glob("*.py"))
    assert loose == ["__init__.py", "provenance.py"], f"modules of measure/ outside a room: {loose}"
