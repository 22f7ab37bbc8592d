"""Nothing lost to a torn row or a second writer: a requests.csv cut anywhere in its last row is repaired on the
next open (the fragment moved aside with a warning, its request sent again, every key exactly once), appends
always start on a fresh line, and a second run of the same suite folder refuses while the first holds it."""

from __future__ import annotations

import json
import logging

import nbformat
import pytest

from benchlib.records import rows
from benchlib.records.rows import RequestLog, RequestRecord, complete_prefix, read_requests
from benchlib.records.run_folder import RunLocked, lock_path, run_lock
from benchlib.suites.notebooks import settle_notebook
from benchlib.suites.runner import open_session, run_suite


def _params(params_for):
    return params_for({"ttft": 0.001, "itl": 0.0005, "tokens": 4}, run={"repeats": 3, "warmups": 1},
                      tasks=["basic_qa", "summarization"])


def _cut_at(text: str, marker: str) -> int:
    """Byte offset inside the last row at a marker ('status', 'prompt', ...)."""
    last_row_start = text.rstrip("\n").rfind("\n", 0, text.rstrip("\n").rfind("(ref")) + 1
    return len(text[:text.index(marker, last_row_start)].encode("utf-8"))


@pytest.mark.parametrize("where", ["before status", "inside the quoted prompt", "before response_text",
                                   "inside an open quote", "before the newline"])
def test_a_cut_last_row_is_moved_aside_and_its_request_sent_again(params_for, outputs, where, caplog):
    params = _params(params_for)
    first = run_suite(params, "text", progress=False)
    path = first.out_dir / "requests.csv"
    text = path.read_text(encoding="utf-8")
    total = len(first.requests)
    last_key = first.requests["request_key"].iloc[-1]
    cut = {"before status": lambda: _cut_at(text, ",ok,"),
           "inside the quoted prompt": lambda: _cut_at(text, "(ref") + 8,
           "before response_text": lambda: _cut_at(text, ",stop,"),
           "inside an open quote": lambda: _cut_at(text, '"(ref') + 3,
           "before the newline": lambda: len(text.encode("utf-8")) - 1}[where]()
    data = path.read_bytes()
    path.write_bytes(data[:cut])
    assert last_key not in set(read_requests(path)["request_key"])  # cut: not done, so its request is pending
    with caplog.at_level(logging.WARNING, logger="benchlib"):
        second = run_suite(params, "text", progress=False)
    assert "the last row was cut" in caplog.text and "will be sent again" in caplog.text
    torn = list(second.out_dir.glob("requests.csv.torn-*"))
    assert len(torn) == 1 and torn[0].read_bytes() == data[complete_prefix(data[:cut]):cut]
    again = read_requests(path)
    assert again.attrs["dropped_rows"] == 0  # the file is whole again: nothing left out
    assert len(again) == total and again["request_key"].is_unique and last_key in set(again["request_key"])
    assert again.loc[again["request_key"] == last_key, "status"].iloc[0] == "ok"  # sent again, whole


def test_appends_start_on_a_fresh_line(tmp_path):
    log = RequestLog(tmp_path / "requests.csv")
    log.append(RequestRecord(run_id="r", request_key="a"))
    with log.path.open("ab") as handle:
        handle.write(b'r,h,m,openai,x,text,text,t,v,0,1,False,b,"(ref 1')  # a fragment without its newline
    assert log.recover().startswith(f"{log.path}: the last row was cut")
    log.append(RequestRecord(run_id="r", request_key="c"))
    assert read_requests(log.path)["request_key"].tolist() == ["a", "c"]
    # even without recover(), a new row never glues onto a fragment
    with log.path.open("ab") as handle:
        handle.write(b"partial")
    log.append(RequestRecord(run_id="r", request_key="d"))
    frame = read_requests(log.path)
    assert "d" in set(frame["request_key"]) and frame.attrs["dropped_rows"] == 1


def test_a_second_run_of_the_same_folder_refuses_naming_the_holder(params_for, outputs, tmp_path):
    params = _params(params_for)
    with open_session(params, "text") as session:
        folder = session.out_dir
        with pytest.raises(RunLocked, match=r"is being written by another run \(PID \d+, since "):
            run_suite(params, "text", progress=False)
        assert lock_path(folder).is_file()
    with run_lock(folder):  # released when the first session ended
        pass
    done = run_suite(params, "text", progress=False)
    assert done.requests["request_key"].is_unique


def test_a_failed_atomic_write_leaves_no_temp_file_and_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "summary.csv"
    target.write_text("old,whole\n")

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rows.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left on device"):
        rows.write_atomic(target, "new,text\n")
    assert target.read_text() == "old,whole\n"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.csv"]  # no .summary.csv.* temp file left behind


def _notebook_text(marker: str) -> str:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"print({marker!r})")])
    return nbformat.writes(notebook)


def test_an_executed_notebook_appears_only_whole_with_its_manifest(tmp_path):
    partial, output, manifest = tmp_path / ".text.partial.ipynb", tmp_path / "text.ipynb", tmp_path / "manifest.json"
    partial.write_text(_notebook_text("run 2"))
    manifest.write_text(json.dumps({"run_id": "abc"}))
    assert settle_notebook(partial, output, tmp_path)
    written = json.loads(output.read_text())
    assert written["metadata"]["frontier_bench"] == {"run_id": "abc"}
    assert "run 2" in "".join(written["cells"][0]["source"])
    assert not partial.exists()


@pytest.mark.parametrize("how", ["torn by a full disk during papermill's save", "full disk while settling"])
def test_a_notebook_that_cannot_be_written_whole_is_one_warning_and_the_old_one_stays(tmp_path, monkeypatch,
                                                                                      capsys, how):
    partial, output = tmp_path / ".text.partial.ipynb", tmp_path / "text.ipynb"
    output.write_text(_notebook_text("run 1"))
    whole = _notebook_text("run 2")
    if how.startswith("torn"):
        partial.write_text(whole[: len(whole) // 2])
    else:
        partial.write_text(whole)
        monkeypatch.setattr(rows.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(28, "No space left")))
    assert not settle_notebook(partial, output)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: the executed notebook") and "requests.csv" in err[0]
    assert "run 1" in output.read_text()  # the earlier whole notebook, untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text.ipynb"]  # no partial, no temp file
