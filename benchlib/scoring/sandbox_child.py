"""The sandbox's child side (benchlib.scoring.sandbox runs this file's text with `python -I -c`): the wire format
between the judge and the answer, the answer's bootstrap (a reaper and a worker), and the judge.

    worker   runs the model's code: program mode reports whether the program ran to its end (the program's own
             word); serve mode answers the judge's calls of the functions the code defined
    reaper   the worker's parent, never running model code: in the sandbox's namespaces it is the pid namespace's
             init (its exit takes every process of the namespace with it); it sets up the filesystem view, forks
             the worker and reports how the worker ended on a pipe the worker closed before the model's first line
    judge    runs the trusted tests (HumanEval's `check`, a task's assert lines) in a process of its own; the
             functions under test are stand-ins that call the worker over two pipes, values crossing as plain data
             (None, bool, int, float, str, bytes, complex, list, tuple, set, frozenset, dict), so nothing the
             model's code defines ever runs in the judge, and the verdict is written on a pipe only the judge has

Standard library only: it runs in a bare `python -I`. Imported by the parent for the wire format and the Landlock
probe.
"""

from __future__ import annotations

import _signal
import builtins
import errno
import json
import os
import posix
import resource
import signal
import stat
import struct
import sys

try:  # the reaper's and the judge's own use (mounts, capabilities, prctl); refused to the model's code
    import ctypes
except ImportError:  # a Python without libffi: the sandbox records that it kept its privileges
    ctypes = None

FRAME_LIMIT = 4 * 1024 * 1024  # one message between judge and worker
DEPTH_LIMIT = 100  # nesting of one value
CONTAINERS = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


class WireError(ValueError):
    """A value or message that cannot cross between the worker and the judge."""


def send(fd: int, message: dict) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    if len(data) > FRAME_LIMIT:
        raise WireError(f"a message of {len(data)} bytes, over the {FRAME_LIMIT}-byte limit")
    data = struct.pack(">I", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def _read(fd: int, size: int) -> bytes:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError("the other side ended")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def receive(fd: int) -> dict:
    (size,) = struct.unpack(">I", _read(fd, 4))
    if size > FRAME_LIMIT:
        raise WireError(f"a message of {size} bytes, over the {FRAME_LIMIT}-byte limit")
    try:
        message = json.loads(_read(fd, size))
    except (ValueError, RecursionError) as exc:
        raise WireError(f"an unreadable message ({type(exc).__name__})") from None
    if not isinstance(message, dict):
        raise WireError("a message that is not an object")
    return message


def encode(value, depth: int = 0):
    """Plain data as JSON: scalars as themselves, containers as [tag, items...]. Types are read with type(), which
    a value cannot fake; subclasses of the plain types cross as the plain value."""
    if depth > DEPTH_LIMIT:
        raise WireError(f"a value nested deeper than {DEPTH_LIMIT}")
    kind = type(value)
    if value is None or kind is bool:
        return value
    if issubclass(kind, bool):
        return bool.__bool__(value)
    if issubclass(kind, int):
        return int.__int__(value)
    if issubclass(kind, float):
        return float.__float__(value)
    if issubclass(kind, str):
        return str.__str__(value)
    if issubclass(kind, (bytes, bytearray)):
        return ["bytes", bytes(value).hex()]
    if issubclass(kind, complex):
        return ["complex", complex.__complex__(value).real, complex.__complex__(value).imag]
    if issubclass(kind, dict):
        out = ["dict"]
        for key, item in dict.items(value):
            out += [encode(key, depth + 1), encode(item, depth + 1)]
        return out
    for tag, base in CONTAINERS.items():
        if issubclass(kind, base):
            return [tag, *(encode(item, depth + 1) for item in base.__iter__(value))]
    raise WireError(f"a {kind.__name__} cannot cross the sandbox (plain data only: None, bool, int, float, str, "
                    "bytes, complex, list, tuple, set, frozenset, dict)")


def decode(data, depth: int = 0):
    if depth > DEPTH_LIMIT:
        raise WireError(f"a value nested deeper than {DEPTH_LIMIT}")
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if not isinstance(data, list) or not data or not isinstance(data[0], str):
        raise WireError("a malformed value")
    tag, items = data[0], data[1:]
    try:
        if tag == "bytes" and len(items) == 1:
            return bytes.fromhex(items[0])
        if tag == "complex" and len(items) == 2:
            return complex(float(items[0]), float(items[1]))
        if tag == "dict" and len(items) % 2 == 0:
            return {decode(items[i], depth + 1): decode(items[i + 1], depth + 1) for i in range(0, len(items), 2)}
        if tag in CONTAINERS:
            return CONTAINERS[tag](decode(item, depth + 1) for item in items)
    except (TypeError, ValueError) as exc:  # an unhashable key, a bad hex string
        raise WireError(f"a malformed value ({exc})") from None
    raise WireError(f"a malformed value (tag {tag!r})")


def where(exc: BaseException, path: str, text: str = "") -> dict:
    """The exception's type, message and the line of `path` (a file, or a name for `text`) that raised it."""
    frames, tb = [], exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            frames.append(tb.tb_lineno)
        tb = tb.tb_next
    if isinstance(exc, SyntaxError) and exc.filename == path:
        line, source = exc.lineno, (exc.text or "").strip()
    elif frames:
        line = frames[-1]
        lines = text.splitlines() if text else _file_lines(path)
        source = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    else:
        line, source = None, ""
    return {"error": type(exc).__name__, "message": str(exc)[:200], "line": line, "source": source[:200]}


def _file_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().splitlines()
    except (OSError, ValueError):
        return []


# ---- the worker's side ------------------------------------------------------------------------------------------
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 4, 24, 38, 36
SYS_MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE = 442, -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MNT_DETACH = 0x1, 0x2, 0x2, 0x4, \
    0x1000, 0x4000, 0x2
# Landlock (linux/landlock.h): the system calls, and the rights by the ABI that brought them
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION, LANDLOCK_RULE_PATH_BENEATH = 1, 1
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 0x1, 0x2, 0x4, 0x8
FS_ABI1, FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = (1 << 13) - 1, 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 0x1, 0x2  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 0x1, 0x2  # ABI 6
# Out of the worker's sight under Landlock (besides the hidden home folders): every process's /proc entries,
# other programs' temporary files and sockets, devices; the few device and /proc files code may read are granted
UNSEEN = ("/proc", "/tmp", "/var/tmp", "/dev", "/run", "/var/run")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
HOST_FILES = ("/proc/cpuinfo", "/proc/meminfo")  # the machine's, no process's (BLAS libraries read them)
BLOCKED_MODULES = ("ctypes", "_ctypes", "subprocess", "_posixsubprocess", "multiprocessing", "_multiprocessing")
PROCESS_EVENTS = {"os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system", "subprocess.Popen",
                  "pty.spawn", "os.startfile"}
SIGNAL_EVENTS = {"os.kill", "os.killpg", "signal.pthread_kill"}
NETWORK_EVENTS = {"socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname",
                  "socket.gethostbyaddr", "socket.getnameinfo", "socket.sendto", "socket.sendmsg"}
# event -> the positions of the paths it changes
WRITE_EVENTS = {"os.mkdir": (0,), "os.remove": (0,), "os.rmdir": (0,), "os.rename": (0, 1), "os.link": (1,),
                "os.symlink": (1,), "os.truncate": (0,), "os.chmod": (0,), "os.chown": (0,), "os.utime": (0,),
                "os.setxattr": (0,), "os.removexattr": (0,), "shutil.rmtree": (0,), "os.mkfifo": (0,),
                "os.mknod": (0,)}


def _isolate(config: dict, notes: list[str], libc) -> str:
    """In the sandbox's namespaces (the reaper is root there, nowhere else): no nested user namespace; a private,
    size-capped tmpfs on /tmp as the scratch folder; the benchmark user's home folders hidden under empty ones but
    for the interpreter's own files; then the whole view read-only and without set-uid except the scratch folder.
    Returns the scratch folder; what could not be done goes into `notes`."""
    scratch = config["scratch"]
    if not config["namespaces"]:
        return scratch
    try:
        with open("/proc/sys/user/max_user_namespaces", "w") as handle:
            handle.write("0")
    except OSError as exc:
        notes.append(f"nested user namespaces possible ({exc.strerror})")
    options = f"size={config['limits']['scratch_mb']}m,nr_inodes=4096,mode=0700".encode()
    if libc.mount(b"tmpfs", b"/tmp", b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV), options) == 0:
        scratch = "/tmp"
        _hide(config["hide"], libc, notes)
    else:
        notes.append(f"scratch folder without a total size cap (mount tmpfs: {os.strerror(ctypes.get_errno())})")
        if libc.mount(scratch.encode(), scratch.encode(), None, ctypes.c_ulong(MS_BIND), None) != 0:
            notes.append("filesystem writable outside the scratch folder (no mount of its own)")
            return scratch
    if _mount_attr(libc, "/", AT_RECURSIVE, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0) != 0:
        notes.append(f"filesystem writable outside the scratch folder (mount_setattr: "
                     f"{os.strerror(ctypes.get_errno())})")
    elif _mount_attr(libc, scratch, 0, 0, MOUNT_ATTR_RDONLY) != 0:
        notes.append(f"scratch folder read-only (mount_setattr: {os.strerror(ctypes.get_errno())})")
    return scratch


def _mount_attr(libc, path: str, flags: int, add: int, clear: int) -> int:
    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                    ("userns_fd", ctypes.c_uint64)]

    attr = MountAttr(add, clear, 0, 0)
    return libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), path.encode(), ctypes.c_uint(flags),
                        ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)))


def _hide(folders: list[str], libc, notes: list[str]) -> None:
    """Each folder (the benchmark user's home: ~/.netrc, tokens in ~/.cache) under an empty tmpfs, with the
    interpreter's own prefixes bound back in at their paths (staged under the scratch tmpfs meanwhile)."""
    keep = sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)})
    for folder in folders:
        inside = [k for k in keep if k.startswith(folder.rstrip("/") + "/")]
        if not os.path.isdir(folder) or folder in keep or folder == "/":
            continue
        staged = []
        for index, path in enumerate(inside):
            stage = f"/tmp/.keep-{index}"
            os.mkdir(stage)
            if libc.mount(path.encode(), stage.encode(), None, ctypes.c_ulong(MS_BIND | MS_REC), None) != 0:
                notes.append(f"{folder} visible (bind {path}: {os.strerror(ctypes.get_errno())})")
                break
            staged.append((path, stage))
        else:
            if libc.mount(b"tmpfs", folder.encode(), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV),
                          b"size=1m,nr_inodes=256,mode=0755") != 0:
                notes.append(f"{folder} visible (mount tmpfs: {os.strerror(ctypes.get_errno())})")
            else:
                for path, stage in staged:
                    os.makedirs(path, exist_ok=True)
                    if libc.mount(stage.encode(), path.encode(), None, ctypes.c_ulong(MS_BIND | MS_REC), None) != 0:
                        notes.append(f"{path} hidden (bind back: {os.strerror(ctypes.get_errno())})")
        for _, stage in staged:
            libc.umount2(stage.encode(), MNT_DETACH)
        for index in range(len(inside)):
            try:
                os.rmdir(f"/tmp/.keep-{index}")
            except OSError:
                pass


def _drop_privileges(libc) -> None:
    """The worker keeps no capability (so it cannot undo the read-only view, mount, or read a non-dumpable
    process's /proc entries — the reaper's, the judge's — as a root worker without namespaces could) and can gain
    none (no new privileges). Where it has none to drop (a plain user) the calls change nothing."""
    last = 63
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last = int(handle.read())
    except (OSError, ValueError):
        pass
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    libc.capset(header, (ctypes.c_uint32 * 6)())
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def landlock_abi() -> tuple[int, str]:
    """(the kernel's Landlock ABI version, ''), or (0, why not)."""
    if ctypes is None:
        return 0, "no ctypes"
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                       ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    if abi > 0:
        return abi, ""
    number = ctypes.get_errno()
    return 0, {errno.ENOSYS: "the kernel has no Landlock",
               errno.EOPNOTSUPP: "Landlock is off (not in the kernel's lsm= list)"}.get(
        number, f"landlock_create_ruleset: {os.strerror(number)}")


def _seen(hidden: set[str], folder: str = "/"):
    """The paths under `folder` the worker may read: every entry, except the hidden ones and, for an entry that
    holds a hidden one, its own entries the same way (paths resolved: a rule holds the file, not the name)."""
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        return
    for entry in entries:
        path = os.path.realpath(os.path.join(folder, entry))
        if path in hidden or path == "/":
            continue
        if any(h.startswith(path + "/") for h in hidden):
            if os.path.isdir(path):
                yield from _seen(hidden, path)
        else:
            yield path


def _landlock(libc, abi: int, scratch: str, hide: list[str]) -> str:
    """Restricts this process and every process it starts (Landlock, which needs no privilege) to reading what
    `_seen` lists, the interpreter's own files, a few devices and host files, and to writing only the scratch
    folder; no TCP (ABI 4), no signal or abstract Unix socket outside (ABI 6). Landlock also keeps it from
    ptrace access to any process outside — /proc/<pid>/fd, environ, mem — whatever the uid. '' when in force,
    else why not."""
    handled = FS_ABI1 | (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0) | \
        (FS_IOCTL_DEV if abi >= 5 else 0)
    file_rights = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | (FS_TRUNCATE if abi >= 3 else 0) | \
        (FS_IOCTL_DEV if abi >= 5 else 0)
    attr = (ctypes.c_uint64 * 3)(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                                 SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    ruleset = libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        return f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"
    read = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
    hidden = {os.path.realpath(p) for p in (*UNSEEN, *hide)}
    interpreter = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    interpreter.discard("/")  # an interpreter installed at the root: `_seen` grants what it may read
    grants = [(path, read) for path in (*_seen(hidden), *sorted(interpreter), *HOST_FILES)]
    grants += [(path, FS_READ_FILE | (FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0) if path == "/dev/null"
                                      else 0)) for path in DEVICES]
    grants.append((scratch, handled))
    try:
        for path, rights in grants:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not on this machine
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    rights &= file_rights
                rule = PathBeneath(rights, fd)
                if libc.syscall(ctypes.c_long(SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                                ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0)):
                    if path == scratch:
                        return f"landlock_add_rule {path}: {os.strerror(ctypes.get_errno())}"
            finally:
                os.close(fd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) or libc.syscall(
                ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)):
            return f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return ""


def _set_limits(limits: dict) -> None:
    mb = 1024 * 1024
    for name, soft, hard in (("RLIMIT_CPU", limits["cpu_s"], limits["cpu_s"] + 1),  # SIGXCPU, SIGKILL 1 s later
                             ("RLIMIT_AS", limits["memory_mb"] * mb, limits["memory_mb"] * mb),
                             ("RLIMIT_FSIZE", limits["file_mb"] * mb, limits["file_mb"] * mb),
                             ("RLIMIT_CORE", 0, 0), ("RLIMIT_NPROC", 0, 0)):
        try:
            resource.setrlimit(getattr(resource, name), (soft, hard))
        except (ValueError, OSError):
            pass


def _refusals(scratch: str):
    """An audit hook (one that Python code cannot remove) refusing, with a reason, what the model's code has no
    business doing: a clear message where the OS boundary would give a bare errno, and the only barrier where the
    namespaces are unavailable."""
    own = f"/proc/{os.getpid()}"
    realpath, fspath = os.path.realpath, os.fspath

    def inside(path) -> bool:
        try:
            resolved = realpath(fspath(path))
        except (TypeError, ValueError, OSError):
            return True  # an fd: opened before, under these same rules
        if isinstance(resolved, bytes):
            resolved = resolved.decode("utf-8", "surrogateescape")
        return resolved == scratch or resolved.startswith(scratch + "/") or resolved == "/dev/null"

    def proc_refused(path) -> bool:
        try:
            resolved = realpath(fspath(path))
        except (TypeError, ValueError, OSError):
            return False
        if isinstance(resolved, bytes):
            resolved = resolved.decode("utf-8", "surrogateescape")
        if resolved == "/proc":  # listing it finds the other processes; a descriptor of it reaches them (dir_fd)
            return True
        if not resolved.startswith("/proc/"):
            return False
        first = resolved.split("/")[2]
        return (first.isdigit() and resolved != own and not resolved.startswith(own + "/")) or \
            resolved == own + "/mem"

    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def hook(event: str, args: tuple) -> None:
        if event in PROCESS_EVENTS:
            raise PermissionError("sandbox: process creation refused")
        if event in SIGNAL_EVENTS:
            raise PermissionError("sandbox: signals refused")
        if event in NETWORK_EVENTS:
            raise PermissionError("sandbox: network access refused")
        if event.startswith("ctypes."):
            raise PermissionError("sandbox: ctypes refused")
        if event == "import" and args and str(args[0]).split(".")[0] in BLOCKED_MODULES:
            raise PermissionError(f"sandbox: import of {args[0]} refused")
        if event == "open" and args and not isinstance(args[0], int):
            if proc_refused(args[0]):
                raise PermissionError("sandbox: other processes' /proc entries refused")
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            if flags & writing and not inside(args[0]):
                raise PermissionError("sandbox: writing outside the scratch folder refused")
        if event in ("os.listdir", "os.scandir") and args and not isinstance(args[0], int) and proc_refused(args[0]):
            raise PermissionError("sandbox: other processes' /proc entries refused")
        if event in WRITE_EVENTS:
            for index in WRITE_EVENTS[event]:
                if index < len(args) and not isinstance(args[index], int) and not inside(args[index]):
                    raise PermissionError("sandbox: changing files outside the scratch folder refused")

    return hook


def _refuse_pidfds() -> None:
    """pidfd_open and pidfd_send_signal raise no audit event: the worker's modules get stand-ins that refuse. A
    Python-level refusal (a fresh copy of the module can be had); where Landlock has ABI 6 the kernel refuses too."""
    def refused(*_args, **_kwargs):
        raise PermissionError("sandbox: signals refused")

    for module, name in ((os, "pidfd_open"), (posix, "pidfd_open"), (signal, "pidfd_send_signal"),
                         (_signal, "pidfd_send_signal")):
        if hasattr(module, name):
            setattr(module, name, refused)


def worker_main() -> None:
    """Runs in the sandboxed child: read the config, set up, fork the worker, report how it ended."""
    config = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    os.close(0)
    notes_fd, worker_fds = config["notes_fd"], config["worker_fds"]
    notes: list[str] = []
    libc = None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except (AttributeError, OSError) as exc:  # AttributeError: no ctypes at all
        notes.append(f"no libc access ({exc}): privileges kept")
    scratch = _isolate(config, notes, libc) if libc is not None else config["scratch"]
    os.chdir(scratch)
    path = os.path.join(scratch, "program.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(config["program"])
    if libc is not None and not config["namespaces"]:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans stay under this process, where the parent finds them
    refused = ""
    if config["landlock"]:  # no namespaces: Landlock is the boundary (with the throwaway uid, where there is one)
        why_not = _landlock(libc, config["landlock"], scratch, config["hide"]) if libc is not None else \
            "no libc access"
        if why_not and config["landlock_required"]:
            refused = f"Landlock could not be set up ({why_not}), and nothing else bounds the code"
        elif why_not:
            notes.append(f"no Landlock ({why_not}): /proc of other nobody processes readable, filesystem limited by "
                         "permissions only")
    send(notes_fd, {"notes": notes, "refused": refused})
    if refused:  # the model's code never runs
        os._exit(0)
    if libc is not None:  # before the fork, so the worker starts non-dumpable too: neither reaches the other's fds
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    pid = os.fork()
    if pid == 0:
        os.close(notes_fd)
        _worker(config, path, scratch, libc)
    for fd in worker_fds:
        os.close(fd)
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(number, signal.SIG_IGN)
    while True:
        try:
            ended, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        if ended == pid:
            send(notes_fd, {"status": os.waitstatus_to_exitcode(status)})
            os._exit(0)


def _worker(config: dict, path: str, scratch: str, libc) -> None:
    _exit, limits = os._exit, config["limits"]
    if libc is not None:
        _drop_privileges(libc)
    _set_limits(limits)
    for name in list(sys.modules):
        if name.split(".")[0] in BLOCKED_MODULES:
            del sys.modules[name]
    if config["refusals"]:
        _refuse_pidfds()
        sys.addaudithook(_refusals(scratch))
    sys.argv = [path]
    os.environ.update(HOME=scratch, TMPDIR=scratch)
    namespace = {"__name__": "__main__", "__file__": path}
    program = config["program"]
    if config["mode"] == "program":
        result_fd = config["worker_fds"][0]
        try:
            exec(compile(program, path, "exec"), namespace)
        except BaseException as exc:  # noqa: BLE001 — whatever it raised is the program's failure
            os.write(result_fd, json.dumps({"ok": False, **where(exc, path, program)}).encode())
            _exit(1)
        os.write(result_fd, json.dumps({"ok": True}).encode())
        _exit(0)
    calls, answers = config["worker_fds"]
    try:
        exec(compile(program, path, "exec"), namespace)
    except BaseException as exc:  # noqa: BLE001
        send(answers, {"load_error": where(exc, path, program)})
        _exit(1)
    send(answers, {"ready": True})
    while True:
        try:
            call = receive(calls)
        except (EOFError, WireError, OSError):
            _exit(0)
        function = namespace.get(str(call.get("call")))
        try:
            if not callable(function):
                raise NameError(f"the answer defines no function {call.get('call')!r}")
            value = encode(function(*decode(call.get("args", ["list"])), **decode(call.get("kwargs", ["dict"]))))
        except BaseException as exc:  # noqa: BLE001 — the judge decides what a raised exception means
            answer = {"raised": where(exc, path, program)}
        else:
            answer = {"value": value}
        try:
            send(answers, answer)
        except WireError as exc:
            send(answers, {"raised": {"error": "WireError", "message": str(exc), "line": None, "source": ""}})
        except OSError:
            _exit(0)


# ---- the judge --------------------------------------------------------------------------------------------------
class _Relayed(Exception):
    """What the answer's function raised (its info: type, message, line of the answer)."""


def _stand_in(name: str, calls: int, answers: int):
    def call(*args, **kwargs):
        send(calls, {"call": name, "args": encode(list(args)), "kwargs": encode(kwargs)})
        answer = receive(answers)
        if "raised" in answer:
            info = answer["raised"]
            kind = getattr(builtins, str(info.get("error")), None)
            try:
                exc = kind(info.get("message", "")) if isinstance(kind, type) and issubclass(kind, Exception) \
                    else _Relayed(info.get("message", ""))
            except Exception:  # noqa: BLE001 — a builtin that wants other arguments (UnicodeDecodeError)
                exc = _Relayed(info.get("message", ""))
            exc.relayed = info
            raise exc
        return decode(answer.get("value"))

    call.__name__ = call.__qualname__ = name
    return call


def judge_main() -> None:
    config = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    os.close(0)
    answers, calls, verdict_fd = config["answers_fd"], config["calls_fd"], config["verdict_fd"]
    try:
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no same-uid process reads or writes our /proc entries
    except (AttributeError, OSError):
        pass
    _set_limits({**config["limits"], "file_mb": 1})

    def report(**fields) -> None:
        os.write(verdict_fd, json.dumps(fields).encode())
        os._exit(0)

    namespace: dict = {"__name__": "__main__"}
    try:
        exec(compile(config["setup"], "<setup>", "exec"), namespace)
        ready = receive(answers)
    except EOFError:
        report(passed=False, ended=True)
    except WireError as exc:
        report(passed=False, error="WireError", message=str(exc))
    if "load_error" in ready:
        report(passed=False, **ready["load_error"])
    for name in config["calls"]:
        namespace[name] = _stand_in(name, calls, answers)
    tests = config["tests"]
    try:
        exec(compile(tests, "<tests>", "exec"), namespace)
    except EOFError:
        report(passed=False, ended=True)
    except BaseException as exc:  # noqa: BLE001 — a failed test, or what the answer raised through a stand-in
        relayed = getattr(exc, "relayed", None)
        if isinstance(relayed, dict):
            report(passed=False, **relayed)
        report(passed=False, **where(exc, "<tests>", tests))
    report(passed=True)


if __name__ == "__main__":
    (judge_main if sys.argv[1:] == ["judge"] else worker_main)()
