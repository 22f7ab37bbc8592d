"""Rows appended in batches (rows.BatchedAppends, the sending loop's appends): rows finishing together go out in
one write + fsync, each caller returns only once its row is on disk (a kill then keeps it), the last request's
batch goes out at once, a failed write reaches every caller of its batch, and a cancelled caller's row is still
written."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from benchlib.records.rows import BatchedAppends, RequestLog, RequestRecord, complete_prefix, read_requests

ROOT = Path(__file__).resolve().parents[2]


def _keys(path: Path) -> list[str]:
    return read_requests(path)["request_key"].tolist() if path.is_file() else []


def test_rows_finishing_together_go_out_in_one_write_and_each_caller_returns_once_its_row_is_on_disk(
        tmp_path, monkeypatch):
    log = RequestLog(tmp_path / "requests.csv")
    writes: list[int] = []
    append_many = log.append_many
    monkeypatch.setattr(log, "append_many", lambda records: (writes.append(len(records)), append_many(records)))
    appends = BatchedAppends(log, every_s=0.05)
    seen: dict[str, list[str]] = {}

    async def one(key: str) -> None:
        await appends.append(RequestRecord(run_id="r", request_key=key))
        seen[key] = _keys(log.path)  # what is on disk when the caller goes on

    async def main() -> None:
        await asyncio.gather(*(one(f"k{i}") for i in range(20)))

    asyncio.run(main())
    assert writes == [20]
    assert sorted(_keys(log.path)) == sorted(f"k{i}" for i in range(20))
    assert all(key in on_disk for key, on_disk in seen.items()) and len(seen) == 20


def test_finish_sends_the_pending_batch_without_waiting_out_its_interval(tmp_path):
    log = RequestLog(tmp_path / "requests.csv")
    appends = BatchedAppends(log, every_s=3600.0)

    async def main() -> None:
        pending = asyncio.ensure_future(appends.append(RequestRecord(run_id="r", request_key="last")))
        await asyncio.sleep(0.01)
        assert not pending.done() and _keys(log.path) == []  # waiting for rows that might join it
        appends.finish()
        await asyncio.wait_for(pending, 30)  # an hour's interval, not waited out
        await asyncio.wait_for(appends.append(RequestRecord(run_id="r", request_key="after")), 30)

    asyncio.run(main())
    assert _keys(log.path) == ["last", "after"]


def test_a_failed_write_reaches_every_caller_of_its_batch_and_the_next_batch_goes_on(tmp_path, monkeypatch):
    log = RequestLog(tmp_path / "requests.csv")
    appends = BatchedAppends(log, every_s=0.01)
    real = log.append_many

    def full(records):
        raise OSError(errno.ENOSPC, "No space left on device")

    async def main() -> list[object]:
        monkeypatch.setattr(log, "append_many", full)
        results = await asyncio.gather(*(appends.append(RequestRecord(run_id="r", request_key=f"k{i}"))
                                         for i in range(3)), return_exceptions=True)
        monkeypatch.setattr(log, "append_many", real)
        await appends.append(RequestRecord(run_id="r", request_key="next"))
        return results

    results = asyncio.run(main())
    assert [type(r) for r in results] == [OSError] * 3 and all(r.errno == errno.ENOSPC for r in results)
    assert _keys(log.path) == ["next"]


def test_a_cancelled_callers_row_is_still_written(tmp_path):
    log = RequestLog(tmp_path / "requests.csv")
    appends = BatchedAppends(log, every_s=0.01)

    async def main() -> None:
        caller = asyncio.ensure_future(appends.append(RequestRecord(run_id="r", request_key="finished")))
        await asyncio.sleep(0)
        caller.cancel()  # e.g. Ctrl-C during a level: the request had finished, its row is kept
        for _ in range(3000):
            if _keys(log.path):
                break
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert _keys(log.path) == ["finished"]


def test_a_kill_keeps_every_row_whose_append_returned(tmp_path):
    """SIGKILL right after an append returned, with the next rows still waiting for their batch: the returned
    row is on disk and the file ends on a whole row (what a crash can lose is the waiting rows only)."""
    path = tmp_path / "requests.csv"
    script = textwrap.dedent(f"""
        import asyncio, os, signal, sys
        from benchlib.records.rows import BatchedAppends, RequestLog, RequestRecord
        async def main():
            appends = BatchedAppends(RequestLog({str(path)!r}), every_s=0.05)
            await asyncio.gather(*(appends.append(RequestRecord(run_id="r", request_key=f"kept{{i}}"))
                                   for i in range(5)))
            waiting = [asyncio.ensure_future(appends.append(RequestRecord(run_id="r", request_key=f"late{{i}}")))
                       for i in range(5)]
            await asyncio.sleep(0)
            os.kill(os.getpid(), signal.SIGKILL)
        asyncio.run(main())
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    data = path.read_bytes()
    assert complete_prefix(data) == len(data)
    keys = _keys(path)
    assert keys[:5] == [f"kept{i}" for i in range(5)]
    assert set(keys[5:]) <= {f"late{i}" for i in range(5)}
