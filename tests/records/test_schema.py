"""One typed schema for requests.csv and the window files: booleans and numbers come back typed, old files
(Python's True/False, lower-case literals) still load, exact nanosecond stamps, and a torn row is counted
and warned about, never dropped silently."""

from __future__ import annotations

import logging

import pandas as pd

from benchlib.measure.telemetry import read_windows
from benchlib.records.rows import REQUEST_KINDS, RequestLog, RequestRecord, read_requests
from benchlib.records.schema import flag, integer, number, optional_flag, read_csv


def test_coercions_accept_every_literal_old_files_hold():
    assert [flag(v) for v in (True, "True", "true", "1", "1.0", "yes")] == [True] * 6
    assert [flag(v) for v in (False, "False", "false", "0", "", None, float("nan"), "n/a")] == [False] * 8
    assert optional_flag("") is pd.NA and optional_flag(None) is pd.NA and optional_flag("False") is False
    assert number("2.5") == 2.5 and number(None) != number(None) and number(True) != number(True)
    big = 9_007_199_254_740_993  # 2**53 + 1: a float would round it
    assert integer(str(big)) == big and integer("") is pd.NA


def test_requests_come_back_typed(tmp_path):
    path = tmp_path / "requests.csv"
    log = RequestLog(path)
    log.append(RequestRecord(run_id="r", request_key="s/t/v/r0/c1", is_warmup=True, passed=None, start_ns=2**53 + 1,
                             prompt_tokens=None, itl_s=[0.1, 0.2], tool_calls=[{"name": "f", "arguments": {}}]))
    log.append(RequestRecord(run_id="r", request_key="s/t/v/r1/c1", passed=False, prompt_tokens=12, status="failed"))
    frame = read_requests(path)
    assert frame["is_warmup"].dtype == bool and frame["is_warmup"].tolist() == [True, False]
    assert frame["passed"].dtype == "boolean" and frame["passed"].isna().tolist() == [True, False]
    assert frame["start_ns"].iloc[0] == 2**53 + 1  # exact
    assert frame["prompt_tokens"].dtype == float and pd.isna(frame["prompt_tokens"].iloc[0])
    assert frame["itl_s"].iloc[0] == [0.1, 0.2] and frame["tool_calls"].iloc[0][0]["name"] == "f"
    assert set(REQUEST_KINDS) <= set(frame.columns)


def test_an_old_file_with_python_literals_loads(tmp_path):
    path = tmp_path / "requests.csv"
    pd.DataFrame([{"run_id": "r", "request_key": "k", "status": "ok", "is_warmup": "False", "passed": "True",
                   "truncated": "True", "decode_tps": "12.5"}]).to_csv(path, index=False)
    row = read_requests(path).iloc[0]
    assert row["is_warmup"] is False or row["is_warmup"] == False  # noqa: E712 — numpy bool
    assert bool(row["passed"]) and bool(row["truncated"]) and row["decode_tps"] == 12.5
    assert row["response_text"] == ""  # a column the old file lacks is added empty


def test_a_torn_row_is_counted_and_warned_about(tmp_path, caplog):
    path = tmp_path / "requests.csv"
    log = RequestLog(path)
    for i in range(3):
        log.append(RequestRecord(run_id="r", request_key=f"k{i}", response_text="a, \"quoted\"\nanswer"))
    data = path.read_bytes()
    path.write_bytes(data[:-25])  # the last row cut inside its text
    with caplog.at_level(logging.WARNING, logger="benchlib"):
        frame = read_requests(path)
    assert frame["request_key"].tolist() == ["k0", "k1"]
    assert frame.attrs["dropped_rows"] == 1
    assert "1 row(s) could not be read" in caplog.text


def test_windows_typed_and_undeclared_columns_inferred(tmp_path):
    path = tmp_path / "windows.csv"
    pd.DataFrame([{"window": "basic_qa", "kind": "task", "t_start_ns": "1000000000000000001", "t_end_ns": "2",
                   "counter_reset": "true", "energy_j": "", "tokens_per_joule": "3.5", "efficiency_reason": "x"}]
                 ).to_csv(path, index=False)
    frame = read_windows(path)
    assert frame["t_start_ns"].iloc[0] == 1_000_000_000_000_000_001 and bool(frame["counter_reset"].iloc[0])
    assert pd.isna(frame["energy_j"].iloc[0]) and frame["tokens_per_joule"].iloc[0] == 3.5
    assert frame["efficiency_reason"].iloc[0] == "x"
    assert read_csv(tmp_path / "missing.csv", {"a": "int"}).columns.tolist() == ["a"]


def test_rows_of_any_length_read_back_and_a_bad_row_costs_only_itself(tmp_path, caplog):
    """An answer over 128 KB, an itl_s list of 6,000 deltas and a 1 MB prompt read back exactly, and so does every
    row after them; a malformed row in the middle is left out alone, counted and named by its line."""
    path = tmp_path / "requests.csv"
    log = RequestLog(path)
    answer, prompt, itl = "a, \"b\"\n" * 30_000, "p" * 1_000_000, [0.0123456789 + i * 1e-9 for i in range(6_000)]
    log.append(RequestRecord(run_id="r", request_key="k0"))
    log.append(RequestRecord(run_id="r", request_key="k1", response_text=answer, prompt=prompt, itl_s=itl))
    for i in range(2, 5):
        log.append(RequestRecord(run_id="r", request_key=f"k{i}"))
    frame = read_requests(path)
    assert frame["request_key"].tolist() == ["k0", "k1", "k2", "k3", "k4"] and frame.attrs["dropped_rows"] == 0
    long_row = frame.iloc[1]
    assert long_row["response_text"] == answer and long_row["prompt"] == prompt and long_row["itl_s"] == itl
    assert log.done_keys("r") == {"k0", "k1", "k2", "k3", "k4"}  # a resume sends none of them again
    data = path.read_bytes()
    at = data.index(b"r,,,", data.index(b"k2"))  # the start of row k3
    line = data.count(b"\n", 0, at) + 1
    path.write_bytes(data[:at] + b'r,h,"broken\n' + data[at:])  # a malformed row before k3 (an open quote)
    with caplog.at_level(logging.WARNING, logger="benchlib"):
        frame = read_requests(path)
    assert frame["request_key"].tolist() == ["k0", "k1", "k2", "k3", "k4"] and frame.attrs["dropped_rows"] == 1
    assert f"1 row(s) could not be read (torn or malformed) and were left out: line {line} (" in caplog.text
    assert log.recover() == "" and read_requests(path)["request_key"].tolist()[-1] == "k4"  # no "torn tail" moved
