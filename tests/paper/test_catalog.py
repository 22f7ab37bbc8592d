"""The paper's catalog: every table and figure declared once (name, builder, caption), every one shown in a report
section, each built table named as declared, and paper/assemble.ipynb reading the catalog instead of spelling
names."""

from __future__ import annotations

import json
import re

from benchlib import paper
from benchlib.config.paths import PAPER_DIR
from benchlib.paper.catalog import LONG_TABLE, PAPER_FIGURES, PAPER_TABLES, SECTIONS


def test_each_table_and_figure_is_declared_once_and_shown_in_one_section():
    tables = [t.name for t in PAPER_TABLES]
    figures = [f.name for f in PAPER_FIGURES]
    assert len(tables) == len(set(tables)) and len(figures) == len(set(figures))
    assert all(f.caption for f in PAPER_FIGURES)
    in_sections = [t for s in SECTIONS for t in s.tables]
    drawn_in_sections = [f for s in SECTIONS for f in s.figures]
    assert sorted(in_sections) == sorted(t for t in tables if t != LONG_TABLE)  # the long table: CSV only
    assert sorted(drawn_in_sections) == sorted(figures)
    assert paper.TABLES == [t.name for t in PAPER_TABLES if not t.optional and t.markdown]
    assert paper.FIGURES == [f.name for f in PAPER_FIGURES if not f.optional]


def test_every_built_table_carries_its_catalog_name(tmp_path):
    built = paper.build_tables(paper.load_reference_sets(), paper.load_runs(tmp_path / "no-outputs"))
    declared = [t.name for t in PAPER_TABLES]
    public = [name for name in built if not name.startswith("_")]
    assert public == [name for name in declared if name in built]  # catalog order
    assert set(paper.TABLES) | {LONG_TABLE} <= set(public)
    assert all(built[name].name == name for name in built)


def test_the_notebook_spells_no_table_or_figure_name():
    cells = json.loads((PAPER_DIR / "assemble.ipynb").read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    quoted = set(re.findall(r"""['"](\w+)['"]""", code))
    names = {t.name for t in PAPER_TABLES} | {f.name for f in PAPER_FIGURES}
    assert not quoted & names, f"the notebook names {sorted(quoted & names)}; it reads paper.SECTIONS instead"
    assert "paper.SECTIONS" in code and "_shown" not in code
