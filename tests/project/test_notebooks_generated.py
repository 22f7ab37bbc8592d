"""The committed suite notebooks are what tools/make_notebooks.py writes: `make notebooks` must not drop a section a
notebook gained by hand. And every committed notebook is committed without outputs."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from benchlib.config.paths import PROJECT_ROOT

NOTEBOOKS = PROJECT_ROOT / "notebooks"
GENERATOR = PROJECT_ROOT / "tools" / "make_notebooks.py"
HAND_WRITTEN = {"explore.ipynb"}  # the request explorer shares no cell with the suites; the generator leaves it


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, nbformat.NotebookNode]:
    out = tmp_path_factory.mktemp("notebooks")
    # the script as `make notebooks` runs it, so its command line and output folder are tested too
    subprocess.run([sys.executable, str(GENERATOR), "--out", str(out)], check=True, cwd=PROJECT_ROOT,
                   capture_output=True, text=True, timeout=120)
    return {path.name: nbformat.read(path, as_version=4) for path in sorted(out.glob("*.ipynb"))}


def committed_notebooks() -> list[str]:
    return sorted(path.name for path in NOTEBOOKS.glob("*.ipynb"))


def cell_view(cell: nbformat.NotebookNode) -> dict:
    return {"cell_type": cell.cell_type, "id": cell.get("id"), "tags": cell.metadata.get("tags", []),
            "source": cell.source}


def test_the_generator_writes_every_committed_suite_notebook(generated):
    assert set(committed_notebooks()) - HAND_WRITTEN == set(generated)
    assert not HAND_WRITTEN & set(generated)


@pytest.mark.parametrize("name", sorted(set(committed_notebooks()) - HAND_WRITTEN))
def test_a_generated_notebook_equals_the_committed_one_cell_by_cell(generated, name):
    committed = nbformat.read(NOTEBOOKS / name, as_version=4)
    mine = generated[name]
    assert [c.id for c in mine.cells] == [c.id for c in committed.cells], f"{name}: cells added, dropped or moved"
    for index, (new, old) in enumerate(zip(mine.cells, committed.cells)):
        assert cell_view(new) == cell_view(old), f"{name} cell {index} ({old.id}) differs from the generator's"
    assert mine.metadata == committed.metadata
    assert (mine.nbformat, mine.nbformat_minor) == (committed.nbformat, committed.nbformat_minor)


@pytest.mark.parametrize("name", committed_notebooks())
def test_a_committed_notebook_has_no_outputs_nor_execution_counts(name):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code
    for cell in code:
        assert cell.outputs == [], f"{name} cell {cell.id} has outputs; strip them before committing"
        assert cell.execution_count is None, f"{name} cell {cell.id} has an execution count"
