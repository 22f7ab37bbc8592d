"""The run folder's one reader and the one walk of an outputs tree (benchlib.records.run_folder): a missing or broken
manifest reads as none where a reader can go on, and is an error where it cannot; folders --fresh moved aside are
never taken for results."""

from __future__ import annotations

import json

import pytest

from benchlib.records.rows import COLUMNS
from benchlib.records.run_folder import (
    MANIFEST_JSON,
    REQUESTS_CSV,
    RUN_JSON,
    RunFolder,
    archived_path,
    is_archived,
    prepare_out_dir,
    suite_folders,
)
from tests.helpers import make_params


def _suite(root, host="h", model="m", suite="text"):
    path = root / host / model / suite
    path.mkdir(parents=True)
    return path


def test_a_folder_without_a_manifest_reads_as_none_and_strictly_as_an_error(tmp_path):
    folder = RunFolder(tmp_path)
    assert folder.manifest == {} and folder.params == {} and folder.run_id is None
    with pytest.raises(OSError):
        folder.read_manifest()


@pytest.mark.parametrize("text", ['{"run_id": "abc", "par', "[1, 2]", ""], ids=["torn", "a list", "empty"])
def test_a_broken_manifest_reads_as_none_and_strictly_as_an_error(tmp_path, text):
    (tmp_path / MANIFEST_JSON).write_text(text)
    (tmp_path / RUN_JSON).write_text(text)
    folder = RunFolder(tmp_path)
    assert folder.manifest == {} and folder.marker == {} and folder.params == {} and folder.run_id is None
    with pytest.raises(ValueError):
        folder.read_manifest()


def test_the_manifest_is_parsed_once_and_names_the_params_and_the_run(tmp_path):
    (tmp_path / MANIFEST_JSON).write_text(json.dumps({"run_id": "r1", "params": {"host": {"name": "h"}}}))
    (tmp_path / RUN_JSON).write_text(json.dumps({"run_id": "r1", "salt": "s"}))
    folder = RunFolder(tmp_path)
    assert folder.params == {"host": {"name": "h"}} and folder.run_id == "r1"
    (tmp_path / MANIFEST_JSON).write_text(json.dumps({"run_id": "r2"}))
    assert folder.manifest["run_id"] == "r1"  # the instance keeps what it read
    assert RunFolder(tmp_path).manifest["run_id"] == "r2" and folder.read_manifest()["run_id"] == "r2"


def test_the_rows_are_read_typed_and_a_missing_file_is_an_empty_frame(tmp_path):
    folder = RunFolder(tmp_path)
    assert not folder.has_requests() and folder.requests().empty and "status" in folder.requests()
    assert folder.summary().empty and folder.windows().empty
    row = {name: "" for name in COLUMNS} | {"request_key": "k1", "status": "ok", "run_id": "r1", "is_warmup": "False"}
    (tmp_path / REQUESTS_CSV).write_text(",".join(row) + "\n" + ",".join(row.values()) + "\n")
    rows = folder.requests()
    assert folder.has_requests() and list(rows["request_key"]) == ["k1"] and not rows["is_warmup"].iloc[0]
    assert rows["is_warmup"].dtype == bool


def test_the_walk_finds_suite_folders_and_skips_archived_ones(tmp_path):
    text, load = _suite(tmp_path, suite="text"), _suite(tmp_path, host="g", suite="load")
    old = archived_path(text, "20240101-000000")
    old.mkdir()
    (tmp_path / "h" / "m" / "notes.txt").write_text("a file at suite depth is no suite folder")
    (tmp_path / "h" / "plan.json").write_text("{}")
    found, skipped = suite_folders(tmp_path)
    assert found == [load, text]
    assert skipped == ["h/m/text.archived-20240101-000000"] and is_archived(old) and not is_archived(text)
    assert suite_folders(tmp_path / "missing") == ([], [])


def test_a_fresh_run_archives_the_folder_where_the_walk_skips_it(tmp_path):
    root = tmp_path / "outputs"
    params = make_params("http://127.0.0.1:9/v1")
    out_dir, first, _ = prepare_out_dir(params, "text", False, root)
    assert RunFolder(out_dir).run_id == first
    (out_dir / RUN_JSON).write_text(json.dumps({"run_id": "an older run"}))
    prepare_out_dir(params, "text", True, root)
    found, skipped = suite_folders(root)
    assert found == [out_dir] and len(skipped) == 1 and skipped[0].startswith(f"{out_dir.relative_to(root)}.archived-")
