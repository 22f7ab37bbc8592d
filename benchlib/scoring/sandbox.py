"""Running a model's code against its tests: processes of their own with limits, never the benchmark's own.

Two runs (the child side is benchlib.scoring.sandbox_child):

    run_tests(code, tests, calls)   the verdict of graded code. The answer runs in a sandboxed worker; the trusted
                                    tests run in a separate judge process where each name in `calls` is a stand-in
                                    that calls the worker's function over a pipe, values crossing as plain data. The
                                    pass is the judge's, written on a pipe the worker never holds: an answer that
                                    writes a "passed" report anywhere, leaves with os._exit(0), or returns an object
                                    whose == is always True (it crosses as data or not at all) does not pass.
                                    Arguments and results cross by value (a function that changes its
                                    arguments in place is seen only through what it returns).
    run_python(program)             one program in the sandbox; passed = it ran to its end without an exception,
                                    which is the program's own word: for programs whose end is all that is asked.

The worker's sandbox, in the order it is set up (`isolation()` probes once per process which layers this machine
allows; every run's Execution.isolation says which were in force, and what was missing):

    throwaway uid     run as root, the sandbox runs as nobody (65534): no file of root's is writable, no process
                      of root's readable (/proc/<pid>/environ) or signalled, RLIMIT_NPROC binds
    namespaces        `unshare` (util-linux) gives it a user, pid, mount, network, IPC and UTS namespace of its own:
                      a fresh /proc showing only its own processes, no network interface but loopback, and a
                      reaper as the pid namespace's init — when the reaper dies, the kernel kills every process
                      in the namespace, so nothing (a setsid'd grandchild included) outlives the run
    filesystem        inside them, a private tmpfs capped at SCRATCH_MB (total, plus RLIMIT_FSIZE per file) on /tmp
                      as the scratch folder, which vanishes with the namespace; the benchmark user's home and /root
                      (HIDDEN) seen empty but for the interpreter's own files; everything else read-only and without
                      set-uid (mount_setattr); nested user namespaces switched off
    Landlock          without namespaces, the kernel's Landlock (no privilege needed) in their place: reads only
                      outside /proc, /tmp, /run, /dev and the hidden home folders (the interpreter's files granted),
                      writes only in the scratch folder, no TCP (ABI 4), no signal or abstract socket outside (ABI 6),
                      and no ptrace access — /proc/<pid>/fd, environ, mem — to any process outside, whatever the uid
    no capabilities   the worker drops every capability and may gain none (no_new_privs) before the model's code;
                      it and its reaper are not dumpable (neither reaches the other's descriptors)
    limits            CPU seconds (SIGXCPU), address space (MemoryError), file size, no core dumps, no new processes
    refusals          an audit hook (Python code cannot remove one) refusing process creation, signals, sockets,
                      ctypes, imports of subprocess/multiprocessing/ctypes, other processes' /proc entries and
                      writes outside the scratch folder — a clear reason where the OS would give a bare errno
    environment       explicit: LANG, HOME and TMPDIR only; nothing of the benchmark's

The parent kills everything at the wall-clock limit — the reaper (so the namespace), the processes under it, the
judge — and never waits on a pipe past that limit.

A boundary against: code that reads the benchmark's environment, writes outside its scratch folder, fills the
disk, signals or traces other processes, forges its verdict, outlives its limit or opens a network connection — by
any means, native code through ctypes included, where the namespaces are in force.
Not a boundary against: kernel exploits (no seccomp filter: the worker can make any system call), reading what the
read-only view shows (world-readable files; files of the benchmark's uid outside the hidden home folders, e.g. the
repository; as root mapped to root, /etc/shadow and the like), CPU and memory of the machine beyond the limits above
(no cgroup), or an answer that finds the tests' answers by other means (the dataset is readable).
Without namespaces (a container that forbids unshare, a distribution that restricts unprivileged user namespaces)
the throwaway uid and Landlock stand in, and every run's Execution.missing (the graded checkers' detail) says what
is then missing; where neither exists the audit hook alone is no boundary (PEP 578), so the code is not run
(Execution.error UNSANDBOXED) and the graded checkers do not score it. docs/sandbox.md has each start's boundary.
"""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import psutil

from benchlib.scoring.sandbox_child import landlock_abi

# Defaults, overridable per task through checker_args (timeout_s, cpu_s, memory_mb).
TIMEOUT_S = 5.0
CPU_S = 5
MEMORY_MB = 1024
FILE_MB = 16  # one file
SCRATCH_MB = 32  # the scratch folder in total (its tmpfs)
NOBODY = 65534
UNSANDBOXED = "unsandboxed"  # Execution.error of code the sandbox did not run: nothing on this machine bounds it
REPORT_BYTES = 64 * 1024
CHILD = (Path(__file__).with_name("sandbox_child.py")).read_text(encoding="utf-8")
UNSHARE = ("--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--net",
           "--ipc", "--uts", "--")

# Folders the worker sees empty (but for the interpreter's own files): the benchmark user's home, root's.
HIDDEN = sorted({h for h in (os.path.expanduser("~"), "/root") if h.startswith("/") and h != "/"})
log = logging.getLogger(__name__)
_warned: set[str] = set()


@dataclass(frozen=True)
class Execution:
    """What one sandboxed run did: passed, and otherwise why not (one line), with the limits' outcome."""

    passed: bool
    reason: str = ""
    error: str = ""  # the exception's type name, "timeout", "cpu_limit", "signal", "no_result"
    line: int | None = None  # the line that raised (of the answer, or of the tests), where known
    seconds: float = 0.0
    network: str = ""  # which network barrier was in force
    isolation: str = ""  # which layers were in force
    missing: str = ""  # which were not, and why ("" when all were)

    @property
    def detail(self) -> str:
        return "passed" if self.passed else self.reason


@dataclass(frozen=True)
class Isolation:
    """How this machine lets the sandbox start (probed once)."""

    prefix: tuple[str, ...]  # the unshare command line, or ()
    user: int | None  # the throwaway uid, or None (same uid)
    in_force: str
    missing: str
    landlock: int = 0  # the Landlock ABI the worker is restricted with (no namespaces only), 0: none

    @property
    def namespaces(self) -> bool:
        return bool(self.prefix)

    @property
    def bounded(self) -> bool:
        """Whether the OS bounds the code (namespaces, the throwaway uid or Landlock); else the code is not run."""
        return self.namespaces or self.user is not None or self.landlock > 0


def _env(scratch: str) -> dict[str, str]:
    return {"LANG": "C.UTF-8", "HOME": scratch, "TMPDIR": scratch}


def _starts(prefix: tuple[str, ...], user: int | None) -> str:
    """'' when a bare `python -I` starts this way, else why not (one line)."""
    try:
        done = subprocess.run([*prefix, sys.executable, "-I", "-c", "pass"], capture_output=True, timeout=30,
                              env=_env("/"), cwd="/", user=user, group=user, extra_groups=[] if user else None)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if done.returncode == 0:
        return ""
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1][:200] if lines else f"exit code {done.returncode}"


@lru_cache(maxsize=1)
def isolation() -> Isolation:
    """The strongest start this machine allows: namespaces and the throwaway uid, either, Landlock, or none."""
    return _probe(shutil.which("unshare"), NOBODY if os.geteuid() == 0 else None, landlock_abi())


def _probe(unshare: str | None, user: int | None, landlock: tuple[int, str]) -> Isolation:
    """The strongest start given the unshare command (or None), the throwaway uid (or None: not root) and the
    kernel's Landlock ABI (0 with why not). Tests force the degraded starts through it."""
    prefix = (unshare, *UNSHARE) if unshare else ()
    why_not_ns = "" if unshare else "no unshare command (util-linux)"
    why_not_user = "" if user is not None else "not root"
    if prefix and user is not None:
        why_not_user = _starts(prefix, user)
        if not why_not_user:
            return Isolation(prefix, user, "namespaces (user, pid, mount, net) as nobody", "")
    if prefix:
        why_not_ns = _starts(prefix, None)
        if not why_not_ns:
            missing = (f"runs as root without capabilities, not nobody: files only root may read are readable "
                       f"outside the hidden home folders (as nobody: {why_not_user})") if user is not None else ""
            return Isolation(prefix, None, "namespaces (user, pid, mount, net)", missing)
    abi, why_not_landlock = landlock

    def unbarred(whose: str) -> str:  # what Landlock leaves to the audit hook (no private tmpfs without namespaces)
        signals = f"; signals to {whose} processes refused by the audit hook only (Landlock ABI {abi} < 6)" \
            if abi < 6 else ""
        return "scratch folder without a total size cap (RLIMIT_FSIZE per file only); UDP and Unix sockets " \
               f"refused by the audit hook only{signals}"

    if user is not None:
        why_not_user = _starts((), user)
        if not why_not_user and abi:
            return Isolation((), user, f"nobody and Landlock (ABI {abi}), no namespaces",
                             f"no namespaces ({why_not_ns}): {unbarred('other nobody')}", abi)
        if not why_not_user:
            return Isolation((), user, "nobody, no namespaces", f"no namespaces ({why_not_ns}), no Landlock "
                             f"({why_not_landlock}): /proc of other nobody processes readable, filesystem limited "
                             "by permissions only")
    reasons = f"no namespaces ({why_not_ns}); no throwaway uid ({why_not_user})"
    if abi:
        return Isolation((), None, f"Landlock (ABI {abi}), same uid, no namespaces",
                         f"{reasons}: {unbarred('same-uid')}", abi)
    return Isolation((), None, "none", f"{reasons}; no Landlock ({why_not_landlock}): nothing bounds the code, "
                     "so it is not run and the answers are not scored")


def _kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL the process, every process under it (the reaper first: the pid namespace goes with it) and its
    group."""
    try:
        under = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        under = []
    for pid in [p.pid for p in under] + [process.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _collect(fds: dict[str, int], deadline: float, enough=lambda got: False) -> tuple[dict[str, bytes], bool]:
    """Read the pipes until each ends, `enough(got)` says so, or the deadline (True: it passed). Never blocks past
    the deadline, whoever holds a pipe's other end."""
    got = {name: b"" for name in fds}
    open_fds = {fd: name for name, fd in fds.items()}
    while open_fds and not enough(got):
        left = deadline - time.monotonic()
        if left <= 0:
            return got, True
        ready, _, _ = select.select(list(open_fds), [], [], left)
        for fd in ready:
            chunk = os.read(fd, REPORT_BYTES)
            name = open_fds[fd]
            if not chunk or len(got[name]) >= REPORT_BYTES:
                del open_fds[fd]
            else:
                got[name] += chunk
    return got, False


def _messages(raw: bytes) -> dict:
    """The reaper's length-prefixed messages, merged (notes, then the worker's status)."""
    merged, at = {}, 0
    while at + 4 <= len(raw):
        size = int.from_bytes(raw[at:at + 4], "big")
        try:
            merged.update(json.loads(raw[at + 4:at + 4 + size]))
        except ValueError:
            break
        at += 4 + size
    return merged


def _json(raw: bytes) -> dict:
    try:
        value = json.loads(raw.decode("utf-8", "replace")) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _ended(status, limits: dict) -> tuple[str, str]:
    """(error, reason) for how the worker ended, by its exit status (negative: a signal)."""
    if not isinstance(status, int):
        return "no_result", "ended without a result"
    if status >= 0:
        return "no_result", f"exited with code {status} before its tests finished"
    number = -status
    if number == signal.SIGXCPU:
        return "cpu_limit", f"CPU time limit ({limits['cpu_s']} s) exceeded"
    if number == signal.SIGXFSZ:
        return "file_limit", f"file size limit ({limits['file_mb']} MB) exceeded"
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = str(number)
    return "signal", f"killed by {name}"


def _failure(result: dict) -> tuple[str, str, int | None]:
    where = f" at line {result['line']}: {result['source']}" if result.get("line") else ""
    message = f": {result['message']}" if result.get("message") else ""
    return str(result.get("error")), f"{result.get('error')}{message}{where}", result.get("line")


def _spawn(argv: list[str], config: dict, pass_fds: tuple[int, ...], user: int | None,
           cwd: str) -> subprocess.Popen:
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               cwd=cwd, env=_env(config.get("scratch", cwd)), pass_fds=pass_fds,
                               start_new_session=True, user=user, group=user,
                               extra_groups=[] if user is not None else None)
    try:
        process.stdin.write(json.dumps(config).encode("utf-8"))
        process.stdin.close()
    except OSError:  # it did not start; the deadline and its status say so
        pass
    return process


def _run(program: str, limits: dict, timeout_s: float, judge: dict | None, refusals: bool) -> Execution:
    way = isolation()
    network = "empty network namespace; socket calls refused" if way.namespaces else \
        "TCP refused by Landlock; socket calls refused" if way.landlock >= 4 else "socket calls refused"
    if not way.bounded:  # the audit hook alone is no boundary (PEP 578): the code is not run
        _warn(way.missing)
        return Execution(False, f"not run: {way.missing}", UNSANDBOXED, None, 0.0, network, way.in_force,
                         way.missing)
    started = time.monotonic()
    deadline = started + timeout_s
    with tempfile.TemporaryDirectory(prefix="fb-sandbox-") as scratch:
        if way.user is not None:
            os.chown(scratch, way.user, way.user)
        notes_r, notes_w = os.pipe()
        if judge is None:
            result_r, result_w = os.pipe()
            worker_fds, parent_fds = (result_w,), {"result": result_r}
        else:
            calls_r, calls_w = os.pipe()
            answers_r, answers_w = os.pipe()
            verdict_r, verdict_w = os.pipe()
            worker_fds, parent_fds = (calls_r, answers_w), {"verdict": verdict_r}
        config = {"program": program, "limits": limits, "scratch": scratch, "namespaces": way.namespaces,
                  "mode": "program" if judge is None else "serve", "notes_fd": notes_w, "worker_fds": worker_fds,
                  "refusals": refusals, "hide": HIDDEN, "landlock": 0 if way.namespaces else way.landlock,
                  "landlock_required": way.user is None}
        processes: list[subprocess.Popen] = []
        try:
            try:
                processes.append(_spawn([*way.prefix, sys.executable, "-I", "-c", CHILD], config,
                                        (notes_w, *worker_fds), way.user, "/" if way.namespaces else scratch))
                if judge is not None:
                    processes.append(_spawn(
                        [sys.executable, "-I", "-S", "-c", CHILD, "judge"],  # -S: trusted tests need no site
                        {**judge, "limits": limits, "answers_fd": answers_r, "calls_fd": calls_w,
                         "verdict_fd": verdict_w}, (answers_r, calls_w, verdict_w), None, scratch))
            finally:  # the children hold these now: a pipe ends when they do
                for fd in (notes_w, *worker_fds, *(() if judge is None else (answers_r, calls_w, verdict_w))):
                    os.close(fd)
            if judge is None:  # the reaper's report ends the run: no other process holds its pipe
                got, timed_out = _collect({"notes": notes_r}, deadline)
                got["result"] = _drain(parent_fds["result"])
            else:
                got, timed_out = _collect({"verdict": parent_fds["verdict"]}, deadline)
                verdict = _json(got["verdict"])
                if verdict.get("ended") or not verdict:  # how the worker ended says why
                    more, _ = _collect({"notes": notes_r}, deadline, lambda g: "status" in _messages(g["notes"]))
                    got["notes"] = more["notes"]
                else:  # the reaper wrote its notes before the worker's first line
                    got["notes"] = _drain(notes_r)
        finally:
            for process in processes:
                _kill_tree(process)
            for fd in (notes_r, *parent_fds.values()):
                os.close(fd)
    seconds = time.monotonic() - started
    reaper = _messages(got["notes"])
    notes = [str(n) for n in reaper.get("notes", [])]
    missing = "; ".join(p for p in (way.missing, *notes) if p)
    _warn(missing)
    context = {"seconds": seconds, "network": network, "isolation": way.in_force, "missing": missing}
    if reaper.get("refused"):  # written before the worker existed: the model's code never ran
        return Execution(False, f"not run: {reaper['refused']}", UNSANDBOXED, None, **context)
    if timed_out:
        return Execution(False, f"timed out after {timeout_s:g} s (wall clock)", "timeout", None, **context)
    status = reaper.get("status")
    result = _json(got["verdict"]) if judge is not None else _json(got["result"])
    if result.get("passed") if judge is not None else (result.get("ok") and status == 0):
        return Execution(True, "", "", None, **context)
    if result.get("error"):
        error, reason, line = _failure(result)
        return Execution(False, reason, error, line, **context)
    error, reason = _ended(status, limits)
    return Execution(False, reason, error, None, **context)


def _warn(missing: str) -> None:
    """Once per process and reason; every Execution carries it."""
    if missing and missing not in _warned:
        _warned.add(missing)
        log.warning("sandbox degraded: %s", missing)


def _drain(fd: int) -> bytes:
    """What is in the pipe now, without waiting for its end (a process the worker left may hold it open)."""
    os.set_blocking(fd, False)
    data = b""
    try:
        while len(data) < REPORT_BYTES:
            chunk = os.read(fd, REPORT_BYTES)
            if not chunk:
                break
            data += chunk
    except BlockingIOError:
        pass
    return data


def _limits(cpu_s: int, memory_mb: int) -> dict:
    return {"cpu_s": max(1, int(cpu_s)), "memory_mb": int(memory_mb), "file_mb": FILE_MB, "scratch_mb": SCRATCH_MB}


def run_python(program: str, *, timeout_s: float = TIMEOUT_S, cpu_s: int = CPU_S, memory_mb: int = MEMORY_MB,
               refusals: bool = True) -> Execution:
    """Run `program` (Python source) in the sandbox; passed when it ran to its end without an exception — the
    program's own word (a verdict on code under test comes from run_tests). refusals=False leaves out the audit
    hook: what the OS boundary alone holds (the tests show it)."""
    return _run(program, _limits(cpu_s, memory_mb), timeout_s, None, refusals)


def run_tests(code: str, tests: str, calls: list[str], *, setup: str = "", timeout_s: float = TIMEOUT_S,
              cpu_s: int = CPU_S, memory_mb: int = MEMORY_MB, refusals: bool = True) -> Execution:
    """Run the answer `code` in the sandbox and the trusted `tests` (after the trusted `setup`) in the judge, where
    each name in `calls` is the answer's function of that name; passed when the tests ran to their end."""
    judge = {"setup": setup, "tests": tests, "calls": list(calls)}
    return _run(code, _limits(cpu_s, memory_mb), timeout_s, judge, refusals)
