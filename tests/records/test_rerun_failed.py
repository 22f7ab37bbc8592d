"""A rerun sends again what failed in a way the server may not repeat (refused, cut, timed out, a 5xx: round four's
N12 — after fixing a dead port the rerun measured nothing without --fresh); a request the server answered, or refused
for good (HTTP 400), stays done. Readers see each request's last attempt; the file keeps every one."""

from __future__ import annotations

from benchlib.records.rows import RequestLog, RequestRecord, read_requests


def _row(key: str, status: str = "ok", kind: str = "", run_id: str = "r1") -> RequestRecord:
    return RequestRecord(run_id=run_id, request_key=key, status=status, error_kind=kind,
                         error_message=kind and f"{kind}: why")


def test_retry_worthy_failures_are_not_done_and_the_last_attempt_is_read(tmp_path):
    log = RequestLog(tmp_path / "requests.csv")
    log.append_many([_row("ok"), _row("refused", "failed", "connection_refused"), _row("cut", "failed", "stream_cut"),
                     _row("503", "failed", "http_503"), _row("400", "failed", "http_400"),
                     _row("ok", "failed", "connection_refused", run_id="r0")])
    assert log.done_keys("r1") == {"ok", "400"} and log.done_keys("r0") == set()
    log.append(_row("refused"))  # the rerun answered it
    frame = read_requests(log.path)
    assert len(frame) == 6 and frame.set_index("request_key").loc["refused", "status"] == "ok"
    assert log.done_keys("r1") == {"ok", "400", "refused"}
    assert sum(1 for _ in open(log.path, encoding="utf-8")) == 8  # header + every attempt kept
