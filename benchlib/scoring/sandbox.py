"""Running a model's code against its tests: a separate process with limits, never the benchmark's own.

Each program runs in a fresh `python -I` child (isolated: no user site, no PYTHON* variables), in its own session
(process group) and a scratch directory that is deleted afterwards, with stdin closed and a minimal environment.
Before the program's first line the child's bootstrap sets, in this order:

    resource limits   CPU seconds (RLIMIT_CPU: SIGXCPU past it), address space (RLIMIT_AS: a large allocation
                      raises MemoryError), file size (RLIMIT_FSIZE), no core dumps, no new processes (RLIMIT_NPROC 0:
                      binding for an unprivileged user; root ignores it, hence the next rule)
    no new processes  os.fork/forkpty/system/popen/spawn*/exec*/posix_spawn*/kill/killpg raise PermissionError;
                      ctypes, subprocess and multiprocessing cannot be imported (a way around the rule above)
    no network        a new, empty network namespace (unshare(CLONE_NEWNET), with a user namespace when not root)
                      where the kernel allows it — the result says which — and in any case socket creation, name
                      look-ups and connections raise PermissionError

The parent kills the whole process group at the wall-clock limit (and after every run, so nothing outlives it).
A run passes only when the bootstrap reaches its end and writes the run's nonce to the result pipe: a program that
exits early (sys.exit, os._exit) before its tests ran does not pass. The result says why a run failed: the
exception and the program line that raised it, "timed out", "CPU limit", "killed by signal …".

These rules stop a careless or looping answer (an infinite loop, a 10 GB list, a fork loop, a download) from
harming the run or being obeyed; they are not a security boundary against code written to escape them.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# Defaults, overridable per task through checker_args (timeout_s, cpu_s, memory_mb).
TIMEOUT_S = 5.0
CPU_S = 5
MEMORY_MB = 1024
FILE_MB = 16
NONCE_BYTES = 16

# Runs in the child before the program; argv: program path, result fd, limits (JSON). The nonce comes on stdin,
# which is then closed: the program never sees it.
BOOTSTRAP = r'''
import json, os, resource, sys, traceback
path, result_fd, limits = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
nonce = sys.stdin.readline().strip()
sys.stdin.close()
try:
    os.close(0)
except OSError:
    pass

def report(**fields):
    os.write(result_fd, json.dumps({"nonce": nonce, **fields}).encode())
    os.close(result_fd)

mb = 1024 * 1024
for name, soft, hard in (("RLIMIT_CPU", limits["cpu_s"], limits["cpu_s"] + 1),  # SIGXCPU first, SIGKILL 1 s later
                         ("RLIMIT_AS", limits["memory_mb"] * mb, limits["memory_mb"] * mb),
                         ("RLIMIT_FSIZE", limits["file_mb"] * mb, limits["file_mb"] * mb),
                         ("RLIMIT_CORE", 0, 0), ("RLIMIT_NPROC", 0, 0)):
    try:
        resource.setrlimit(getattr(resource, name), (soft, hard))
    except (ValueError, OSError):
        pass

network = "socket calls refused"
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    NEWNET, NEWUSER = 0x40000000, 0x10000000
    if libc.unshare(NEWNET) == 0 or libc.unshare(NEWUSER | NEWNET) == 0:
        network = "empty network namespace; socket calls refused"
except Exception:
    pass

def refused(what):
    def refuse(*args, **kwargs):
        raise PermissionError(f"sandbox: {what} refused")
    return refuse

import socket, _socket

def refused_type(base):  # still a class, so modules that subclass socket.socket (ssl) import as usual
    class Refused(base):
        def __new__(cls, *args, **kwargs):
            raise PermissionError("sandbox: network access refused")
    return Refused

socket.socket, _socket.socket = refused_type(socket.socket), refused_type(_socket.socket)
socket.SocketType = _socket.SocketType = socket.socket
for name in ("socketpair", "fromfd", "create_connection", "create_server", "getaddrinfo", "gethostbyname",
             "gethostbyname_ex", "gethostbyaddr"):
    for module in (socket, _socket):
        if hasattr(module, name):
            setattr(module, name, refused("network access"))
for name in ("fork", "forkpty", "vfork", "system", "popen", "posix_spawn", "posix_spawnp", "kill", "killpg",
             "execv", "execve", "execl", "execle", "execlp", "execlpe", "execvp", "execvpe",
             "spawnv", "spawnve", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnvp", "spawnvpe"):
    if hasattr(os, name):
        setattr(os, name, refused("process creation"))
for name in ("ctypes", "_ctypes", "subprocess", "_posixsubprocess", "multiprocessing", "_multiprocessing"):
    sys.modules[name] = None  # import raises ImportError

sys.argv = [path]
try:
    with open(path, encoding="utf-8") as handle:
        code = compile(handle.read(), path, "exec")
    exec(code, {"__name__": "__main__", "__file__": path})
except BaseException as exc:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    where = frames[-1] if frames else None
    if isinstance(exc, SyntaxError):
        line, source = exc.lineno, (exc.text or "").strip()
    else:
        line, source = (where.lineno, (where.line or "").strip()) if where else (None, "")
    report(ok=False, error=type(exc).__name__, message=str(exc)[:200], line=line, source=source[:200],
           network=network)
    os._exit(1)
report(ok=True, network=network)
os._exit(0)
'''


@dataclass(frozen=True)
class Execution:
    """What one sandboxed run did: passed, and otherwise why not (one line), with the limits' outcome."""

    passed: bool
    reason: str = ""
    error: str = ""  # the exception's type name, "timeout", "cpu_limit", "signal", "no_result"
    line: int | None = None  # the program line that raised, where known
    seconds: float = 0.0
    network: str = ""  # which network barrier was in force

    @property
    def detail(self) -> str:
        return "passed" if self.passed else self.reason


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_reason(code: int, limits: dict) -> tuple[str, str]:
    number = -code
    if number == signal.SIGXCPU:
        return "cpu_limit", f"CPU time limit ({limits['cpu_s']} s) exceeded"
    if number == signal.SIGXFSZ:
        return "file_limit", f"file size limit ({limits['file_mb']} MB) exceeded"
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = str(number)
    return "signal", f"killed by {name}"


def run_python(program: str, *, timeout_s: float = TIMEOUT_S, cpu_s: int = CPU_S,
               memory_mb: int = MEMORY_MB) -> Execution:
    """Run `program` (Python source) in a sandboxed child; passed when it ran to its end without an exception."""
    limits = {"cpu_s": max(1, int(cpu_s)), "memory_mb": int(memory_mb), "file_mb": FILE_MB}
    nonce = secrets.token_hex(NONCE_BYTES)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fb-sandbox-") as scratch:
        path = Path(scratch) / "program.py"
        path.write_text(program, encoding="utf-8")
        read_end, write_end = os.pipe()
        env = {"PATH": "/usr/bin:/bin", "HOME": scratch, "TMPDIR": scratch, "LANG": "C.UTF-8"}
        try:
            child = subprocess.Popen(
                [sys.executable, "-I", "-c", BOOTSTRAP, str(path), str(write_end), json.dumps(limits)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=scratch, env=env,
                pass_fds=(write_end,), start_new_session=True)
        finally:
            os.close(write_end)
        try:
            child.stdin.write(f"{nonce}\n".encode())
            child.stdin.close()
        except OSError:
            pass
        timed_out = False
        try:
            child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        _kill_group(child.pid)  # whatever it started goes with it, finished or not
        child.wait()
        with os.fdopen(read_end, "rb") as pipe:
            raw = pipe.read(64 * 1024)
    seconds = time.monotonic() - started
    try:
        result = json.loads(raw.decode("utf-8", "replace")) if raw else {}
    except ValueError:
        result = {}
    if result.get("nonce") != nonce:
        result = {}
    network = str(result.get("network", ""))
    if timed_out:
        return Execution(False, f"timed out after {timeout_s:g} s (wall clock)", "timeout", None, seconds, network)
    if result.get("ok") and child.returncode == 0:
        return Execution(True, "", "", None, seconds, network)
    if result:
        where = f" at line {result['line']}: {result['source']}" if result.get("line") else ""
        message = f": {result['message']}" if result.get("message") else ""
        return Execution(False, f"{result['error']}{message}{where}", str(result["error"]), result.get("line"),
                         seconds, network)
    if child.returncode < 0:
        error, reason = _signal_reason(child.returncode, limits)
        return Execution(False, reason, error, None, seconds, network)
    return Execution(False, f"exited with code {child.returncode} before its tests finished", "no_result", None,
                     seconds, network)
