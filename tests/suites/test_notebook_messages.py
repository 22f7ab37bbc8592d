"""What the terminal says around a suite notebook (papermill stood in for: the messages are the subject): the
torn-row and unreadable-row warnings of requests.csv reach the terminal, not only the executed notebook, and a
notebook a full disk kept from being written is never reported as done nor pointed at."""

from __future__ import annotations

import nbformat
import papermill
import pytest

from benchlib.records import rows
from benchlib.records.rows import RequestLog, RequestRecord
from benchlib.records.run_folder import prepare_out_dir
from benchlib.suites.notebooks import run_notebooks


def _papermill(monkeypatch, *, disk_full: bool = False, error: str = ""):
    """papermill's part: the executed notebook saved to the partial path; then, optionally, a full disk for what
    follows (settling the notebook into place) and a failing cell."""
    def execute(notebook, output, **kwargs):
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(nbformat.writes(nbformat.v4.new_notebook()))
        if disk_full:
            monkeypatch.setattr(rows.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(28, "No space left")))
        if error:
            raise RuntimeError(error)

    monkeypatch.setattr(papermill, "execute_notebook", execute)


@pytest.mark.parametrize("damage", ["torn last row", "unreadable middle row"])
def test_requests_csv_warnings_reach_the_terminal(params_for, outputs, monkeypatch, capsys, damage):
    params = params_for(tasks=["basic_qa"])
    folder, run_id, _ = prepare_out_dir(params, "text", False, None)
    log = RequestLog(folder / "requests.csv")
    log.append(RequestRecord(run_id=run_id, request_key="k0"))
    with log.path.open("ab") as handle:
        handle.write(b'x,"y\n' if damage == "unreadable middle row" else f'{run_id},h,m,"(ref 1'.encode())
    if damage == "unreadable middle row":
        log.append(RequestRecord(run_id=run_id, request_key="k1"))
    _papermill(monkeypatch)
    failed, _ = run_notebooks(params, "test-params.yaml", ["text"], fresh=False, progress=False)
    err = capsys.readouterr().err
    expected = "the last row was cut" if damage == "torn last row" else "1 row(s) could not be read"
    assert failed == {} and f"warning: {log.path}: " in err and expected in err, err
    if damage == "unreadable middle row":
        assert "line 3 (an unclosed quote)" in err


@pytest.mark.parametrize("error", ["", "PapermillExecutionError: a cell failed"])
def test_a_notebook_a_full_disk_kept_out_is_never_done_nor_pointed_at(params_for, outputs, monkeypatch, capsys,
                                                                        error):
    params = params_for(tasks=["basic_qa"])
    _papermill(monkeypatch, disk_full=True, error=error)
    failed, _ = run_notebooks(params, "test-params.yaml", ["text"], fresh=False, progress=False)
    out, err = capsys.readouterr()
    executed = params.suite_dir("text") / "text.ipynb"
    assert not executed.exists() and "text" in failed
    assert "✓" not in out and "warning: the executed notebook" in err
    after = out.split("▶", 1)[1].split("\n", 1)[1]  # after the "▶ text: executing … into <folder>/" line (the
    assert "text.ipynb" not in after  # pre-flight's lines are before it): never pointed at
    assert ("no executed notebook was written" if error else "its executed notebook could not be written") in out
