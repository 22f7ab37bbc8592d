"""`import-results` without --from: the tool is found from the file (benchlib.interchange.readers.detect), and a
file no reader claims is refused in one line that says how to name the tool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchlib import cli
from benchlib.interchange import readers
from benchlib.interchange.foreign import ForeignError
from tests.interchange.test_run import PARAMS, SOURCES


@pytest.mark.parametrize("tool", sorted(SOURCES))
def test_each_tools_file_is_read_as_that_tool(tool):
    assert readers.detect(SOURCES[tool]) == tool
    assert readers.read(None, SOURCES[tool]).tool == tool


def test_aiperf_is_found_from_either_of_its_files_too():
    for name in ("profile_export.jsonl", "profile_export_aiperf.json"):
        assert readers.detect(SOURCES["aiperf"] / name) == "aiperf"


def test_guidellm_is_found_from_the_folder_holding_its_file():
    assert readers.detect(SOURCES["guidellm"].parent) == "guidellm"


@pytest.mark.parametrize("content", [{"hello": 1}, [1, 2, 3], "not json at all"])
def test_a_file_no_reader_claims_is_refused_naming_the_tools_and_the_flag(tmp_path, content):
    path = tmp_path / "results.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(ForeignError) as err:
        readers.detect(path)
    message = str(err.value)
    assert "\n" not in message and "--from" in message and all(tool in message for tool in readers.TOOLS)


def test_a_missing_path_is_refused_in_one_line(tmp_path):
    with pytest.raises(ForeignError, match="no such file"):
        readers.detect(tmp_path / "nowhere.json")


def test_import_results_without_from_imports_each_tools_run_and_says_how_it_read_it(outputs, tmp_path, capsys):
    params = tmp_path / "deployment.yaml"
    params.write_text(PARAMS)
    for tool, source in SOURCES.items():
        assert cli.main(["import-results", str(source), "--params", str(params)]) == 0
        out = capsys.readouterr().out
        assert f"read as {tool}'s files" in out and f"_measured-by-{tool}/{tool}/" in out


def test_import_results_refuses_what_it_cannot_place_and_writes_nothing(outputs, tmp_path, capsys):
    params = tmp_path / "deployment.yaml"
    params.write_text(PARAMS)
    stray = tmp_path / "notes.json"
    stray.write_text('{"duration": 1}')
    assert cli.main(["import-results", str(stray), "--params", str(params)]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--from" in err
    assert not any(Path(outputs).rglob("requests.csv"))
