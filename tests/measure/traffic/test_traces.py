"""Mooncake-format traces: the shipped synthetic trace reads as the format says, offsets scale, a malformed line is
one error naming its line, and the prefix-reuse bound counts only leading blocks seen before."""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading

import pytest

from benchlib.config.paths import TESTDATA_DIR
from benchlib.measure.traffic import traces
from benchlib.measure.traffic.traces import TraceError, TraceRequest

SYNTHETIC = TESTDATA_DIR / "traces" / "synthetic_mooncake.jsonl"


def write(path, lines):
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_the_shipped_trace_is_mooncake_format_with_shared_prefixes():
    requests = traces.read_trace(SYNTHETIC)
    assert len(requests) == 40
    stamps = [r.timestamp_ms for r in requests]
    assert stamps == sorted(stamps) and stamps[0] == 0
    for r in requests:  # one hash id per 512-token block, the last one partial
        assert len(r.hash_ids) == math.ceil(r.input_length / traces.BLOCK_TOKENS), r
    firsts = [r.hash_ids[0] for r in requests]
    assert max(firsts.count(h) for h in set(firsts)) >= 5  # a system prompt many requests start with
    assert 0.3 < traces.reuse_share(requests) < 1.0
    assert traces.read_trace(SYNTHETIC, max_requests=5) == requests[:5]


def test_offsets_are_trace_milliseconds_times_the_scale(tmp_path):
    path = write(tmp_path / "t.jsonl", [
        {"timestamp": 1000, "input_length": 10, "output_length": 2, "hash_ids": [0]},
        {"timestamp": 1500, "input_length": 10, "output_length": 2, "hash_ids": [0]},
        "",  # blank lines are skipped, line numbers stay the file's
        {"timestamp": 1250, "input_length": 10, "output_length": 2, "hash_ids": [1]},
    ])
    requests = traces.read_trace(path)
    assert [r.line for r in requests] == [1, 4, 2]  # sorted by timestamp, identity = line number
    assert traces.send_offsets(requests) == [0.0, 0.25, 0.5]
    assert traces.send_offsets(requests, 0.5) == [0.0, 0.125, 0.25]  # twice as fast
    assert traces.send_offsets(requests, 2.0) == [0.0, 0.5, 1.0]
    with pytest.raises(ValueError, match="time_scale must be > 0"):
        traces.send_offsets(requests, 0)


@pytest.mark.parametrize("bad,why", [
    ('{"timestamp": 5, "input_length": 10', "not JSON"),
    ({"timestamp": 5, "output_length": 3}, "missing input_length"),
    ({"timestamp": -1, "input_length": 10, "output_length": 3}, "timestamp must be milliseconds >= 0"),
    ({"timestamp": 5, "input_length": 0, "output_length": 3}, "input_length must be a whole number >= 1"),
    ({"timestamp": 5, "input_length": 10.5, "output_length": 3}, "input_length must be a whole number"),
    ({"timestamp": 5, "input_length": 10, "output_length": 3, "hash_ids": ["a"]}, "every hash id must be"),
    ({"timestamp": 5, "input_length": 10, "output_length": 3, "hash_ids": 7}, "hash_ids must be a list"),
    ({"timestamp": True, "input_length": 10, "output_length": 3}, "timestamp must be"),
    ([1, 2], "expected an object"),
    # which of two values counts is the parser's guess (Python's keeps the last, others the first): refused
    ('{"timestamp": 5, "input_length": 10, "output_length": 3, "timestamp": 9000}', 'the key "timestamp" twice'),
    ('{"timestamp": 5, "input_length": 10, "output_length": 3, "hash_ids": [{"a": 1, "a": 2}]}', 'key "a" twice'),
])
def test_a_malformed_line_is_one_error_naming_the_line(tmp_path, bad, why):
    good = {"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [0]}
    path = write(tmp_path / "t.jsonl", [good, good, bad, good])
    with pytest.raises(TraceError) as caught:
        traces.read_trace(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:3: ") and why in message and "\n" not in message


GOOD = '{"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [0]}'


@pytest.mark.parametrize("bad,why", [
    ('{"timestamp": 5, "input_length": ' + "9" * 5000 + ', "output_length": 3}', "not a trace record"),
    ('{"timestamp": 5, "input_length": ' + "9" * 4000 + ', "output_length": 3}', "input_length must be"),
    ('{"timestamp": ' + "9" * 4000 + ', "input_length": 10, "output_length": 3}', "timestamp must be"),
    ('{"timestamp": 5, "input_length": 10, "output_length": 3, "hash_ids": ' + "[" * 100_000 + "]" * 100_000 + "}",
     "nested deeper"),
    ("[" * 100_000, "nested deeper"),
    ({"timestamp": 10**15, "input_length": 10, "output_length": 3}, "at most 2592000000 (30 days)"),
    ({"timestamp": 1e300, "input_length": 10, "output_length": 3}, "timestamp must be"),
    ({"timestamp": 5, "input_length": 10**15, "output_length": 3}, "at most 16777216"),
    ({"timestamp": 5, "input_length": 10, "output_length": 10**15}, "output_length must be"),
    ({"timestamp": 5, "input_length": 10, "output_length": 3, "hash_ids": [2**64]}, "every hash id must be"),
    ({"timestamp": 5, "input_length": 2, "output_length": 3, "hash_ids": [0, 1, 2]}, "3 hash ids for input_length 2"),
])
def test_a_line_beyond_what_a_replay_can_do_is_one_error_naming_it(tmp_path, bad, why):
    path = write(tmp_path / "t.jsonl", [GOOD, bad, GOOD])
    with pytest.raises(TraceError) as caught:
        traces.read_trace(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:2: ") and why in message and "\n" not in message and len(message) < 300


def test_bytes_that_are_not_utf8_are_one_error_naming_the_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(GOOD.encode() + b"\n" + GOOD.encode() + b"\n" + b'{"timestamp": 5\xff\xfe}\n')
    with pytest.raises(TraceError, match=rf"^{path}:3: not UTF-8 \(byte 0xff at column 16\)$"):
        traces.read_trace(path)


def test_a_line_without_end_stops_at_the_line_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "t.jsonl"
    path.write_text(GOOD + "\n" + " " * 5000)
    with pytest.raises(TraceError, match=rf"^{path}:2: a line longer than 1000 bytes$"):
        traces.read_trace(path)


def test_a_fifo_trace_is_refused_at_once(tmp_path):
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)

    def release() -> None:  # an open that waits for a writer ends when one comes; the match below then fails
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    watchdog = threading.Timer(20, release)
    watchdog.start()
    try:
        with pytest.raises(TraceError, match=rf"^{fifo}: a FIFO, not a regular file$"):
            traces.read_trace(fifo)
    finally:
        watchdog.cancel()


def test_an_empty_or_missing_trace_says_so(tmp_path):
    with pytest.raises(TraceError, match="no request in the trace"):
        traces.read_trace(write(tmp_path / "empty.jsonl", ["", "  "]))
    with pytest.raises(TraceError, match="cannot read the trace"):
        traces.read_trace(tmp_path / "absent.jsonl")


def test_reuse_share_counts_leading_blocks_an_earlier_request_sent():
    a = TraceRequest(1, 0, 1024, 8, (0, 1))
    b = TraceRequest(2, 10, 1536, 8, (0, 1, 2))  # shares a's two blocks
    c = TraceRequest(3, 20, 1024, 8, (3, 1))  # block 1 again, but behind a new first block: no prefix shared
    assert traces.reuse_share([a, b, c]) == pytest.approx(1024 / (1024 + 1536 + 1024))
    assert traces.reuse_share([a, a]) == pytest.approx(0.5)


def test_whole_blocks_leave_room_for_the_tail_and_scale():
    request = TraceRequest(1, 0, 1300, 8, (0, 1, 2))  # two whole blocks and a partial third
    assert traces.whole_blocks(request, 1300, 512, 16) == (0, 1)
    assert traces.whole_blocks(request, 1024, 512, 16) == (0,)  # the tail needs its own tokens
    assert traces.whole_blocks(request, 2000, 512, 16) == (0, 1, 2)
    assert traces.scaled_tokens(1300, 1 / 16) == 81 and traces.scaled_tokens(3, 0.01) == 1
