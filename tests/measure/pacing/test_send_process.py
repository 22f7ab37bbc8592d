"""The sending process (send_process): a process of its own that writes handed-over requests on the client's sockets
at their instants. Checked on socket pairs, whose far end shows what was written and when it could be read, by
causality and by what arrived, never by a time bound."""

from __future__ import annotations

import errno
import os
import select
import signal
import socket
import threading
import time

import pytest

from benchlib.measure.pacing import send_process
from benchlib.measure.selfcheck import client_health


@pytest.fixture
def sender():
    proc = send_process.SendingProcess()
    assert proc.wait_started(), proc.failure
    yield proc
    proc.close()


class Reports:
    """The reports of one or more writes, as the reader thread delivers them."""

    def __init__(self) -> None:
        self.got: dict[str, tuple[int, int, int]] = {}
        self.cond = threading.Condition()

    def for_(self, name: str):
        def done(stamp: int, sent: int, failure: int) -> None:
            with self.cond:
                self.got[name] = (stamp, sent, failure)
                self.cond.notify_all()
        return done

    def wait(self, *names: str, timeout_s: float = 10) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: all(n in self.got for n in names), timeout_s), self.got


def pair() -> tuple[socket.socket, socket.socket]:
    ours, far = socket.socketpair()
    ours.setblocking(False)  # as the loop's sockets are: the child's one write must not block
    return ours, far


def test_each_write_is_made_at_its_instant_by_another_process_and_reported_with_its_stamp(sender):
    reports, sockets = Reports(), []
    start = time.perf_counter_ns() + 30_000_000
    dues = {f"w{i}": start + i * 7_000_000 for i in range(5)}
    for name, due in reversed(dues.items()):  # handed over out of order: written in the order of their instants
        ours, far = pair()
        sockets.append((name, ours, far))
        assert sender.send_at(ours, f"request {name}".encode(), due, reports.for_(name)) > 0
    reports.wait(*dues)
    for name, ours, far in sockets:
        stamp, sent, failure = reports.got[name]
        assert failure == 0 and sent == len(f"request {name}")
        assert stamp >= dues[name], "written before its instant"
        assert far.recv(100) == f"request {name}".encode()
        ours.close(), far.close()
    assert sorted(dues, key=lambda n: reports.got[n][0]) == list(dues), "not in the order of the instants"
    assert sender.proc.pid != os.getpid()


def test_the_process_runs_at_realtime_priority_where_permitted_and_says_what_it_got(sender):
    policy = os.sched_getscheduler(sender.proc.pid) & ~os.SCHED_RESET_ON_FORK
    if sender.scheduling == send_process.REALTIME:
        assert policy == os.SCHED_FIFO
    else:  # an unprivileged user: the reason is recorded, the writes go on at normal priority
        assert sender.scheduling.startswith("normal (") and policy == os.SCHED_OTHER


def test_a_write_handed_over_after_its_instant_goes_at_once(sender):
    reports, (ours, far) = Reports(), pair()
    due = time.perf_counter_ns() - 5_000_000
    sender.send_at(ours, b"late", due, reports.for_("late"))
    reports.wait("late")
    assert far.recv(10) == b"late" and reports.got["late"][2] == 0
    assert reports.got["late"][0] - due >= 5_000_000, "its lateness is in the stamp"


def test_a_cancelled_write_is_never_made_and_says_so(sender):
    reports, (ours, far) = Reports(), pair()
    due = time.perf_counter_ns() + 200_000_000
    ident = sender.send_at(ours, b"never", due, reports.for_("x"))
    sender.cancel(ident)
    reports.wait("x")
    assert reports.got["x"][2] == errno.ECANCELED
    ours.close()  # the child closed its own descriptor: with ours gone, the far end sees the connection end
    far.settimeout(5)
    assert far.recv(10) == b"", "bytes of a cancelled write reached the far end"


def test_only_the_first_ahead_bytes_are_handed_over_and_a_partial_write_says_how_much_it_took(sender):
    reports, (ours, far) = Reports(), pair()
    payload = bytes(range(256)) * (send_process.AHEAD_BYTES // 256 * 2)
    sender.send_at(ours, payload, time.perf_counter_ns(), reports.for_("big"))
    reports.wait("big")
    stamp, sent, failure = reports.got["big"]
    assert failure == 0 and 0 < sent <= send_process.AHEAD_BYTES
    received = b""
    while len(received) < sent:
        received += far.recv(1 << 20)
    assert received == payload[:sent]


def test_a_write_on_a_closed_peer_reports_the_error():
    proc = send_process.SendingProcess()
    assert proc.wait_started()
    reports, (ours, far) = Reports(), pair()
    far.close()
    try:
        proc.send_at(ours, b"x" * 100_000, time.perf_counter_ns(), reports.for_("x"))
        reports.wait("x")
        assert reports.got["x"][2] in (errno.EPIPE, errno.ECONNRESET)
    finally:
        proc.close()


def test_when_the_process_dies_its_pending_writes_are_told_and_a_new_one_is_started_next_time(monkeypatch):
    monkeypatch.setattr(send_process, "_shared", None)
    first = send_process.shared()
    assert first.wait_started()
    reports, (ours, far) = Reports(), pair()
    assert first.send_at(ours, b"never", time.perf_counter_ns() + 10_000_000_000, reports.for_("x"))
    first.proc.kill()
    reports.wait("x")
    assert reports.got["x"][2] == errno.ECONNABORTED
    assert not first.alive and first.failure
    assert first.send_at(ours, b"no", time.perf_counter_ns(), reports.for_("y")) == 0, "handed to a dead process"
    assert send_process.shared(start=False) is None, "a dead process is not offered"
    second = send_process.shared()
    assert second is not first and second.wait_started()
    second.close()
    select.select([far], [], [], 0.05)
    far.setblocking(False)
    with pytest.raises(BlockingIOError):
        far.recv(10)


def test_where_no_sending_process_can_be_started_none_is_offered_and_the_reason_is_kept(monkeypatch):
    def refuse(*args: object) -> None:
        raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")

    monkeypatch.setattr(send_process, "_shared", None)
    monkeypatch.setattr(send_process, "unavailable", "")
    monkeypatch.setattr(send_process.socket, "socketpair", refuse)
    assert send_process.shared() is None
    assert "Address family not supported" in send_process.unavailable
    assert send_process.shared() is None, "tried again on every call"


def test_the_childs_cpu_time_is_read_and_grows_with_its_work(sender):
    before = sender.cpu_s()
    reports, sockets = Reports(), []
    for i in range(300):
        ours, far = pair()
        sockets.append((ours, far))
        sender.send_at(ours, b"x" * 1000, time.perf_counter_ns(), reports.for_(f"w{i}"))
    reports.wait(*(f"w{i}" for i in range(300)))
    assert sender.cpu_s() > before > 0
    for ours, far in sockets:
        ours.close(), far.close()


def test_a_levels_client_cpu_counts_the_sending_process_that_wrote_for_it(monkeypatch):
    class Child:
        def cpu_s(self) -> float:
            return 5.0

    own = time.process_time()
    monkeypatch.setattr(send_process, "shared", lambda start=True: Child())
    assert client_health.client_cpu_s() >= own + 5.0
    monkeypatch.setattr(send_process, "shared", lambda start=True: None)
    assert own <= client_health.client_cpu_s() < own + 5.0


def test_ctrl_c_is_left_to_the_parent_the_child_ends_when_the_parent_closes_its_end(sender):
    os.kill(sender.proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends the whole foreground group
    reports, (ours, far) = Reports(), pair()
    sender.send_at(ours, b"still here", time.perf_counter_ns(), reports.for_("after"))
    reports.wait("after")
    assert far.recv(20) == b"still here" and sender.proc.poll() is None
    sender.close()
    assert sender.proc.returncode == 0, "the child did not end by itself when its control socket closed"
