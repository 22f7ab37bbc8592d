"""`import-results` and `export` against hostile files: a FIFO, a link to /dev/zero, a file above the size cap, JSON
nested past the parser, stamps of 1e308, values no request can have, a killed import's leftovers. Each is one
line on stderr (exit 2), no traceback, nothing written — never a hang, a memory blow-up or a report called
validated that holds a negative latency."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from benchlib import cli
from benchlib.analysis import compare
from benchlib.config.paths import PROJECT_ROOT
from benchlib.interchange import import_run, llmd_export
from benchlib.records import outside
from tests.fakes.synthetic_run import SYN_HOST, SYN_MODEL, write_synthetic_run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PARAMS = ("host:\n  name: bench-box\n  hardware: a fake server on this machine\nserver:\n  kind: openai\n"
          "  software: fake\n  base_url: http://127.0.0.1:18431\n  model: fake-model\n")


@pytest.fixture
def params_file(tmp_path):
    path = tmp_path / "deployment.yaml"
    path.write_text(PARAMS)
    return path


def one_line_refusal(capsys, argv: list[str]) -> str:
    code = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and "\n" not in err and "Traceback" not in err, (code, err)
    return err


def nothing_written(outputs: Path) -> None:
    assert not list(outputs.rglob("requests.csv")) and not list(outputs.rglob("manifest.json"))
    assert not list(outputs.rglob(".*importing*"))


def vllm(tmp_path: Path, edit) -> Path:
    data = json.loads((FIXTURES / "vllm-bench" / "result.json").read_text())
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


# ---- item 4: files that hung, filled memory or traced back ---------------------------------------------------------
@pytest.mark.parametrize("tool,name", [("vllm-bench", "result.json"), ("guidellm", "benchmarks.json"),
                                       ("aiperf", "profile_export.jsonl")])
def test_a_fifo_is_refused_at_once_not_waited_on(outputs, params_file, tmp_path, capsys, tool, name):
    folder = tmp_path / "fifo"
    folder.mkdir()
    if tool == "aiperf":
        shutil.copy(FIXTURES / "aiperf" / "profile_export_aiperf.json", folder)
    fifo = folder / name
    os.mkfifo(fifo)

    def release() -> None:  # the head waited for a writer for ever: a late one ends the wait, the test then fails
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return
        os.write(fd, b"{}")
        os.close(fd)

    watchdog = threading.Timer(20, release)
    watchdog.start()
    try:
        err = one_line_refusal(capsys, ["import-results", "--from", tool, str(folder if tool == "aiperf" else fifo),
                                        "--params", str(params_file)])
    finally:
        watchdog.cancel()
    assert f"{fifo}: a FIFO, not a regular file" in err
    nothing_written(outputs)


CHILD = """
import json, sys
from benchlib import cli
codes = {tool: cli.main(["import-results", "--from", tool, path, "--params", sys.argv[1]])
         for tool, path in json.loads(sys.argv[2]).items()}
print(json.dumps(codes))
"""


def test_a_link_to_dev_zero_is_refused_without_reading_it(tmp_path, params_file):
    """In a child held to 2 GiB of address space: the head read /dev/zero until memory ran out."""
    links = {}
    for tool, name in (("vllm-bench", "result.json"), ("guidellm", "benchmarks.json"), ("aiperf", "aiperf")):
        if tool == "aiperf":
            (tmp_path / name).mkdir()
            shutil.copy(FIXTURES / "aiperf" / "profile_export.jsonl", tmp_path / name)
            (tmp_path / name / "profile_export_aiperf.json").symlink_to("/dev/zero")
        else:
            (tmp_path / name).symlink_to("/dev/zero")
        links[tool] = str(tmp_path / name)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "FRONTIER_BENCH_OUTPUTS": str(tmp_path / "outputs")}
    done = subprocess.run([sys.executable, "-c", CHILD, str(params_file), json.dumps(links)], capture_output=True,
                          text=True, timeout=300, preexec_fn=limit, env=env, cwd=PROJECT_ROOT)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-1500:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {tool: 2 for tool in links}
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 3 and all("a device, not a regular file" in line for line in lines), done.stderr


def test_a_file_above_the_size_cap_is_refused_by_its_size(outputs, params_file, capsys, monkeypatch):
    monkeypatch.setattr(outside, "MAX_DOCUMENT_BYTES", 4096)
    source = FIXTURES / "vllm-bench" / "result.json"
    err = one_line_refusal(capsys, ["import-results", "--from", "vllm-bench", str(source), "--params",
                                    str(params_file)])
    assert f"{source}: 12 KiB, above the 4 KiB a file read whole may have" in err
    nothing_written(outputs)


@pytest.mark.parametrize("make,says", [
    (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "nested deeper than the JSON parser goes"),
    (lambda p: p.write_text('{"duration": ' + "9" * 5000 + "}"), "Exceeds the limit"),
    (lambda p: p.write_text('{"completed": 1, "completed": 2}'), 'the key "completed" twice'),
], ids=["nested", "long-integer", "duplicate-key"])
def test_json_the_parser_cannot_take_is_one_line(outputs, params_file, tmp_path, capsys, make, says):
    source = tmp_path / "result.json"
    make(source)
    err = one_line_refusal(capsys, ["import-results", "--from", "vllm-bench", str(source), "--params",
                                    str(params_file)])
    assert f"{source}: " in err and says in err
    nothing_written(outputs)


def _aiperf_start(tmp_path: Path, stamp: int) -> Path:
    folder = tmp_path / "aiperf"
    folder.mkdir()
    shutil.copy(FIXTURES / "aiperf" / "profile_export_aiperf.json", folder)
    lines = (FIXTURES / "aiperf" / "profile_export.jsonl").read_text().splitlines()
    record = json.loads(lines[6])
    record["metadata"]["request_start_ns"] = stamp
    lines[6] = json.dumps(record)
    (folder / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def _guidellm_start(tmp_path: Path, stamp: float) -> Path:
    data = json.loads((FIXTURES / "guidellm" / "benchmarks.json").read_text())
    data["benchmarks"][0]["requests"]["successful"][2]["info"]["timings"]["request_start"] = stamp
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("tool,make,says", [
    ("vllm-bench", lambda tmp: vllm(tmp, lambda d: d["start_times"].__setitem__(2, 1e308)),
     "request 2 start_times: 1e+308 is no start time"),
    ("guidellm", lambda tmp: _guidellm_start(tmp, 1e308), "successful request 2 request_start: 1e+308 is no start"),
    ("aiperf", lambda tmp: _aiperf_start(tmp, 10**400), "record 7 request_start_ns: 100000000000000000000000000000… "
                                                        "(401 characters) is not a nanosecond stamp"),
    ("vllm-bench", lambda tmp: vllm(tmp, lambda d: d["ttfts"].__setitem__(1, 10**400)),
     "request 1 ttfts: 100000000000000000000000000000… (401 characters) is not a number"),
], ids=["vllm-start", "guidellm-start", "aiperf-start-ns", "vllm-huge-int"])
def test_stamps_and_numbers_past_a_float_are_one_line(outputs, params_file, tmp_path, capsys, tool, make, says):
    source = make(tmp_path)
    err = one_line_refusal(capsys, ["import-results", "--from", tool, str(source), "--params", str(params_file)])
    assert says in err, err
    nothing_written(outputs)


# ---- item 5: values no request can have ---------------------------------------------------------------------------
@pytest.mark.parametrize("edit,says", [
    (lambda d: d["ttfts"].__setitem__(4, -5.0), "ttft_s -5 (request vllm-bench/"),
    (lambda d: d["itls"][6].__setitem__(3, -0.25), "itl_s -0.25 (request vllm-bench/"),
    (lambda d: d["latencies"].__setitem__(7, 2e6), "e2e_s 2e+06 (request vllm-bench/"),
    (lambda d: d.update(mean_ttft_ms=-5000.0), "the tool's mean: ttft_s -5 is no request's"),
], ids=["negative-ttft", "negative-gap", "e2e-past-the-ceiling", "negative-aggregate"])
def test_an_import_refuses_what_compare_refuses(outputs, params_file, tmp_path, capsys, edit, says):
    """The one plausibility rule: imports took a TTFT of −5 s and export called the report validated."""
    source = vllm(tmp_path, edit)
    err = one_line_refusal(capsys, ["import-results", "--from", "vllm-bench", str(source), "--params",
                                    str(params_file)])
    assert f"{source}: " in err and says in err and "no request's" in err
    nothing_written(outputs)


@pytest.mark.parametrize("column,value,says", [
    ("ttft_s", -5.0, "ttft_s -5 (request"),
    ("started_at_unix", 1e300, "started_at_unix 1e+300 (request"),
], ids=["negative-ttft", "start-1e300"])
def test_export_and_compare_refuse_the_same_rows_with_one_line(tmp_path, capsys, column, value, says):
    """Export wrote a negative TTFT into a report it called validated, and traced back on a start of 1e300."""
    root = write_synthetic_run(tmp_path / "outputs", with_media=False)
    folder = root / SYN_HOST / SYN_MODEL / "text"
    rows = pd.read_csv(folder / "requests.csv")
    ok = rows.index[(rows["status"] == "ok") & ~rows["is_warmup"].astype(bool)][0]
    rows.loc[ok, column] = value
    rows.to_csv(folder / "requests.csv", index=False)
    err = one_line_refusal(capsys, ["export", "--format", "llm-d-report", str(folder)])
    assert f"{folder / 'requests.csv'}: {says}" in err
    assert not (folder / llmd_export.REPORT_NAME).exists()
    with pytest.raises(compare.CompareError, match=says.replace("(", r"\(").replace("+", r"\+")):
        compare.read_root(str(root))


# ---- item 7: a killed import's leftovers --------------------------------------------------------------------------
def test_a_killed_imports_hidden_folder_is_cleared_by_the_next_import(outputs, params_file, capsys):
    source = FIXTURES / "vllm-bench" / "result.json"
    assert cli.main(["import-results", "--from", "vllm-bench", str(source), "--params", str(params_file)]) == 0
    folder = next(outputs.glob("bench-box/*/vllm-bench"))
    # what an import SIGKILLed between its first rows and its rename leaves: its aside folder, half-filled
    stale = folder.parent / f".{folder.name}.importing-{2**22 + 12345}"
    stale.mkdir()
    (stale / "requests.csv").write_text("run_id,request_key\nx,y\n")
    assert cli.main(["import-results", "--from", "vllm-bench", str(source), "--params", str(params_file)]) == 0
    assert "already imported" in capsys.readouterr().out
    assert not stale.exists() and not list(folder.parent.glob(".*importing*"))
    assert import_run.clear_stale(folder) == []
