"""The sending process: writes the prepared requests of an open-loop level at their due instants, from a process of
its own, so no lock of the client's interpreter stands between an instant and the wire.

Why a process: the pacing thread (event_loop.paced) wakes at its instant at real-time priority, but to write it must
take the GIL, which the loop thread holds while it parses responses; on a busy box the kernel preempts the loop
thread while it holds it, and the pacer then waits for that thread's next time slice, milliseconds at times
(bench/results/2026-11-28-sending-process.md). This process has its own interpreter and does nothing else: it sleeps
until the next instant (select's timeout, in microseconds, with no timer slack at real-time priority), writes, and
sleeps again.

The wire: the loop prepares each request on a pooled plain-HTTP connection and hands the connection's socket to this
process with the request's bytes and due instant (`SendingProcess.send_at`; the socket travels as SCM_RIGHTS over a
SOCK_SEQPACKET pair, so this process holds a second descriptor of the same kernel socket). At the instant it stamps
perf_counter_ns (CLOCK_MONOTONIC, the one clock of every process on the host), makes one non-blocking write, closes
its descriptor and reports the stamp and the bytes taken; the loop writes any rest and reads the response on its own
descriptor as ever. A write the loop takes back (`cancel`: the connection was dropped first) is closed unwritten.

This file is also the child's program, run by path with `python -I -S` (`python send_process.py FD`): at import it
needs nothing beyond the standard library.
"""

from __future__ import annotations

import array
import errno
import gc
import heapq
import itertools
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Callable

# parent → child: kind (b"s" send, b"c" cancel), request id, due instant (perf_counter_ns); a send's bytes follow
# and its socket rides along as SCM_RIGHTS
ORDER = struct.Struct("<cQq")
# child → parent: request id, wire stamp (perf_counter_ns), bytes the write took, errno (0: written)
REPORT = struct.Struct("<Qqqi")
READY = b"R"  # the child's first message: READY + the scheduling it runs under
# The most of a request handed over with it: one non-blocking write takes at most a socket's send buffer anyway, and
# the loop writes the rest once the report is in. Well under SOCK_SEQPACKET's message size (the send buffer).
AHEAD_BYTES = 64 * 1024
BUFFER_BYTES = 4 * 1024 * 1024  # each end's socket buffer: a few thousand orders or reports in flight
START_TIMEOUT_S = 10.0  # how long the first user waits for the child's READY before sending from the pacing thread
REALTIME = "realtime (SCHED_FIFO 1)"


def realtime() -> str:
    """Give the calling thread REALTIME if the OS lets it (root, CAP_SYS_NICE or an RLIMIT_RTPRIO of at least 1);
    returns what the thread runs under, with the reason where it stays at normal priority."""
    if not hasattr(os, "sched_setscheduler"):
        return "normal (this OS has no SCHED_FIFO)"
    try:  # pid 0: this thread; RESET_ON_FORK: nothing it might start inherits the priority
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(1))
    except OSError as exc:
        return f"normal (SCHED_FIFO not permitted: {exc.strerror or exc})"
    return REALTIME


def _big_buffers(sock: socket.socket) -> None:
    for option, forced in ((socket.SO_SNDBUF, 32), (socket.SO_RCVBUF, 33)):  # SO_*BUFFORCE: past wmem_max as root
        for name in (forced, option):
            try:
                sock.setsockopt(socket.SOL_SOCKET, name, BUFFER_BYTES)
                break
            except OSError:
                continue


# ---- the child ---------------------------------------------------------------------------------------------------
def child(control_fd: int) -> None:
    """The sending process's loop: take orders, write each at its instant, report. Ends when the parent's end of the
    control socket closes (the parent exited or stopped it)."""
    gc.disable()  # it makes no cycles; a collection would be a pause at some instant
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes the socket, we end
    control = socket.socket(fileno=control_fd)  # blocking: a report waits for room (the parent reads them all)
    scheduling = realtime()
    control.sendall(READY + scheduling.encode())
    agenda: list[tuple[int, int]] = []  # (due, id), earliest first
    held: dict[int, tuple[int, bytes]] = {}  # id → (descriptor, bytes)
    fd_size = array.array("i").itemsize

    def take_orders() -> bool:
        """Every order waiting; False when the parent is gone."""
        while True:
            try:
                message, ancillary, _, _ = control.recvmsg(AHEAD_BYTES + ORDER.size, socket.CMSG_SPACE(fd_size),
                                                           socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return True
            if not message:
                return False
            kind, ident, due_ns = ORDER.unpack_from(message)
            fds = array.array("i")
            for level, kind_of, data in ancillary:
                if level == socket.SOL_SOCKET and kind_of == socket.SCM_RIGHTS:
                    fds.frombytes(data[:len(data) - len(data) % fd_size])
            if kind == b"s" and len(fds) == 1:
                held[ident] = (fds[0], message[ORDER.size:])
                heapq.heappush(agenda, (due_ns, ident))
                continue
            for fd in fds:  # a malformed order's descriptors are not kept
                os.close(fd)
            if kind == b"c" and ident in held:
                fd, _ = held.pop(ident)
                os.close(fd)
                control.send(REPORT.pack(ident, 0, 0, errno.ECANCELED))

    while True:
        reports = []
        while agenda and agenda[0][0] <= time.perf_counter_ns():
            _, ident = heapq.heappop(agenda)
            if ident not in held:  # cancelled
                continue
            fd, payload = held.pop(ident)
            stamp, sent, failure = time.perf_counter_ns(), 0, 0
            try:
                sent = os.write(fd, payload)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as exc:
                failure = exc.errno or errno.EIO
            os.close(fd)
            reports.append(REPORT.pack(ident, stamp, sent, failure))
        try:
            for report in reports:
                control.send(report)
            wait = (agenda[0][0] - time.perf_counter_ns()) / 1e9 if agenda else None
            if wait is not None and wait <= 0:
                continue
            readable, _, _ = select.select([control], [], [], wait)
            if readable and not take_orders():
                return
        except OSError:  # the parent is gone
            return


# ---- the parent's handle ------------------------------------------------------------------------------------------
Done = Callable[[int, int, int], None]  # (stamp_ns, bytes taken, errno): called in the handle's reader thread


class SendingProcess:
    """The parent's end: starts the child, hands it writes, and hears its reports in a reader thread of its own (the
    reports are not timing-critical: the stamp is in them). One per client process (`shared`)."""

    def __init__(self) -> None:
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for end in (self.control, theirs):
            _big_buffers(end)
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__), str(theirs.fileno())],
                                     pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
        theirs.close()
        self.ids = itertools.count(1)
        self.waiting: dict[int, Done] = {}
        self.lock = threading.Lock()
        self.started = threading.Event()
        self.scheduling = ""  # what the child runs under, once it said so
        self.failure = ""  # why it is not (or no longer) there
        threading.Thread(target=self._read, name="benchlib-send-reports", daemon=True).start()

    @property
    def alive(self) -> bool:
        return self.started.is_set() and not self.failure

    def wait_started(self, timeout_s: float = START_TIMEOUT_S) -> bool:
        """Whether the child is up (waits for its READY up to `timeout_s`)."""
        return self.started.wait(timeout_s) and not self.failure

    def send_at(self, sock: socket.socket, payload: bytes, due_ns: int, done: Done) -> int:
        """Hand `payload` (at most AHEAD_BYTES of it) to the child, to be written on `sock` at due_ns (at once if
        that has passed); `done` hears the outcome. Returns the order's id (for `cancel`), or 0 if it could not be
        handed over (the child is gone or its queue full): the caller writes it another way."""
        if not self.alive:
            return 0
        ident = next(self.ids)
        with self.lock:
            self.waiting[ident] = done
        try:
            self.control.sendmsg([ORDER.pack(b"s", ident, due_ns), payload[:AHEAD_BYTES]],
                                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [sock.fileno()]))],
                                 socket.MSG_DONTWAIT)
        except OSError:
            with self.lock:
                self.waiting.pop(ident, None)
            return 0
        return ident

    def cpu_s(self) -> float:
        """The CPU time the child (one thread) has used so far: Linux's /proc/PID/schedstat, in nanoseconds, else
        /proc/PID/stat's user + system ticks; 0.0 where neither can be read."""
        try:
            with open(f"/proc/{self.proc.pid}/schedstat") as stat:
                return int(stat.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            pass
        try:
            with open(f"/proc/{self.proc.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15
        except (OSError, ValueError, IndexError):
            return 0.0

    def cancel(self, ident: int) -> None:
        """Take back a write not yet made (its report then says ECANCELED; one already made reports as made)."""
        try:
            self.control.send(ORDER.pack(b"c", ident, 0), socket.MSG_DONTWAIT)
        except OSError:
            pass

    def _read(self) -> None:
        try:
            first = self.control.recv(256)
            if not first.startswith(READY):
                raise ConnectionError("the sending process did not start")
            self.scheduling = first[len(READY):].decode()
            self.started.set()
            while True:
                report = self.control.recv(REPORT.size)
                if not report:
                    raise ConnectionError("the sending process exited")
                ident, stamp, sent, failure = REPORT.unpack(report)
                with self.lock:
                    done = self.waiting.pop(ident, None)
                if done is not None:
                    done(stamp, sent, failure)
        except OSError as exc:
            self.failure = str(exc) or type(exc).__name__
        finally:
            self.started.set()
            with self.lock:
                left, self.waiting = self.waiting, {}
            for done in left.values():  # never made: their callers hear why
                done(0, 0, errno.ECONNABORTED)

    def close(self) -> None:
        self.failure = self.failure or "closed"
        try:
            self.control.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.control.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_shared: SendingProcess | None = None
_shared_pid = 0
_shared_lock = threading.Lock()
unavailable = ""  # why no sending process can be started here (an OS without SOCK_SEQPACKET pairs, say)


def shared(start: bool = True) -> SendingProcess | None:
    """This process's sending process: started on the first call (a forked child starts its own), None if `start`
    is False and none runs, or where none can be started (`unavailable` says why; the pacing thread then writes).
    Lives until the process exits (the child ends when the control socket closes)."""
    global _shared, _shared_pid, unavailable
    with _shared_lock:
        if _shared is not None and _shared_pid == os.getpid() and not _shared.failure:
            return _shared
        if not start or unavailable:
            return None
        try:
            _shared, _shared_pid = SendingProcess(), os.getpid()
        except (OSError, AttributeError) as exc:  # AttributeError: no AF_UNIX or SOCK_SEQPACKET on this OS
            unavailable = str(exc) or type(exc).__name__
            return None
        return _shared


if __name__ == "__main__":
    child(int(sys.argv[1]))
