"""The results store: the outputs root may be a local folder or an fsspec URL (s3://, gs://, az://, sftp://,
file://, memory:// in tests).

Object stores cannot append, so rows are always appended and fsynced to a local folder first (the staging copy,
`~/.cache/frontier-bench/store/<hash of the URL>/`, same layout as outputs/). A `Mirror` pushes a suite folder to
the store every `every_s` seconds while it runs and once more when it ends (success, error or Ctrl-C); `pull`
brings back what the store holds before a run starts, so a run resumed on another machine continues from it;
`materialize` gives the paper a local copy of a whole store; `results_root` says where a run's suite folders go
with the params' store, and `sync_from_store` pulls (or, with --fresh, archives) a suite's folder before it starts. A push never leaves a cut file in the store: one put
where puts are all or nothing, else a hidden copy renamed over the file. Hosts that share no store exchange
bundles: `bundle` writes one host's results as a .tar.gz, `import_bundle` merges one (checked and extracted aside
first, streamed and size-capped; a run already here is counted once and completed where it lacks files; a
different run in the same folder is refused and a folder without its run.json skipped, nothing of either written).

Pull rule, per file: absent here → copied; an append-only log (`*.csv`, `*.jsonl`) the store holds a longer
version of whose start is our copy → the store's; two logs that diverge → `StoreConflict` (nothing is
overwritten); any other file that exists here stays (the local copy is the newer, it is what gets pushed).

Credentials come only from the environment or the store library's own configuration (e.g. AWS_* variables,
~/.aws, `FSSPEC_S3_ENDPOINT_URL`); a URL carrying a password or a key is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import inspect
import json
import os
import secrets
import shutil
import tarfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import fsspec
from fsspec.core import url_to_fs

from benchlib.config.params import BenchParams
from benchlib.config.paths import cache_dir, outputs_root
from benchlib.config.sections import url_secret
from benchlib.records.rows import write_atomic
from benchlib.records.run_folder import ARCHIVED, RUN_JSON, is_archived
from benchlib.records.secrets import redact_url

ENV = "FRONTIER_BENCH_STORE"
LOGS = (".csv", ".jsonl")
# Stores where one put is all or nothing (an object appears whole or not at all); elsewhere a push writes aside
# and renames, so a kill never leaves a cut file where a resume reads it.
ATOMIC_PUT = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "memory"}
# Import caps (uncompressed, from the members' headers): a results file past these is no run's, and a 1.5 MB
# bundle may hold 1.5 GB of zeros.
MAX_MEMBER_BYTES = 1 << 30
MAX_BUNDLE_BYTES = 8 << 30
MAX_MEMBERS = 100_000
FREE_MARGIN = 256 << 20  # what an import leaves free on the disk at least
CHUNK = 1 << 20
STAGING = ".import-"  # root/.import-<pid>-<random>/: a bundle extracted aside


class StoreError(RuntimeError):
    """The store cannot be used (bad URL, missing driver, unreachable); the message is one line."""


class StoreConflict(StoreError):
    """The store and this machine hold diverging copies of the same log."""


def is_url(root: str | os.PathLike | None) -> bool:
    """True for 'scheme://…' (file:// included); False for a plain path or nothing."""
    return bool(root) and "://" in str(root) and bool(urlsplit(str(root)).scheme)


def configured(url: str = "") -> str:
    """The store URL of a run: params' `run.store`, else $FRONTIER_BENCH_STORE, else '' (outputs/ only)."""
    url = (url or os.environ.get(ENV, "")).strip().rstrip("/")
    if url:
        check_url(url)
    return url


def check_url(url: str) -> None:
    """Refuse a URL that carries a secret (config.sections.url_secret: a password in user:pass@, a key in the
    query)."""
    secret = url_secret(url)
    if secret:
        raise StoreError(f"store URL {redact_url(url)} carries {secret}: give credentials through the environment "
                         f"or the store library's configuration instead")


def join(url: str, *parts: str) -> str:
    return "/".join([url.rstrip("/"), *(p.strip("/") for p in parts if p)])


def staging_dir(url: str) -> Path:
    """The local folder runs bound for `url` are appended to (one per store URL)."""
    return cache_dir() / "store" / hashlib.sha256(url.encode()).hexdigest()[:16]


def results_root(params: BenchParams) -> tuple[Path, str]:
    """(local root the suite folders are appended to, store URL or ''): outputs/, or with a results store
    (`run.store` / $FRONTIER_BENCH_STORE) the store's local staging folder (staging_dir)."""
    url = configured(params.run.store)
    return (staging_dir(url) if url else outputs_root()), url


def sync_from_store(params: BenchParams, suite: str, fresh: bool, url: str, root: Path) -> str:
    """Before a suite starts: the URL of its folder in the store ('' without one), with what the store holds
    pulled into the local folder so a run begun elsewhere resumes here — or, with fresh, the store's copy
    archived beside it as the local one is."""
    if not url:
        return ""
    remote = join(url, *params.suite_dir(suite, Path()).parts)
    if fresh:
        archive(remote, time.strftime("%Y%m%d-%H%M%S"))
    else:
        pull(remote, params.suite_dir(suite, root))
    return remote


def filesystem(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """(file system, path inside it) for a store URL; a missing driver is a one-line error."""
    try:
        return url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise StoreError(f"store {redact_url(url)}: {str(exc).splitlines()[0]}") from None


def _remote_files(fs: fsspec.AbstractFileSystem, base: str) -> dict[str, int]:
    """relative path -> size of every file under base ({} when base does not exist)."""
    fs.invalidate_cache()  # another process or host may have written since this instance last listed
    try:
        found = fs.find(base, detail=True)
    except FileNotFoundError:
        return {}
    base = base.rstrip("/")
    out = {}
    for path, info in found.items():
        if info.get("type", "file") != "file":
            continue
        rel = path[len(base):].lstrip("/") if path.startswith(base) else Path(path).name
        out[rel] = int(info.get("size") or 0)
    return out


def pull(url: str, local: Path) -> list[str]:
    """Bring what the store holds under `url` into `local` (the pull rule above); the files copied. Hidden files
    (a push cut short leaves its aside copy) are not results. A run.json this copy lacks and the store holds
    empty or cut is a one-line StoreError before anything is copied: a run without its identity cannot resume."""
    fs, base = filesystem(url)
    local = Path(local)
    copied = []
    files = {rel: size for rel, size in _remote_files(fs, base).items()
             if not any(part.startswith(".") for part in rel.split("/"))}
    if RUN_JSON in files and not (local / RUN_JSON).is_file():
        marker = fs.cat_file(f"{base.rstrip('/')}/{RUN_JSON}")
        if _run_id(marker) is None:
            raise StoreError(f"{redact_url(url)}/run.json is empty or not a run's identity ({len(marker)} bytes: a "
                             f"push cut short?); nothing pulled: put back a whole run.json from the host that ran "
                             f"it, or start over with --fresh")
    for rel, size in sorted(files.items()):
        target = local / rel
        remote = f"{base.rstrip('/')}/{rel}"
        if target.is_file():
            if not rel.endswith(LOGS) or target.stat().st_size == size:
                continue
            theirs, ours = fs.cat_file(remote), target.read_bytes()
            if ours.startswith(theirs):
                continue  # rows here the store has not seen yet
            if not theirs.startswith(ours):
                raise StoreConflict(f"{redact_url(url)}/{rel} and {target} diverge (neither starts with the other): "
                                    f"keep one and move the other aside before resuming")
            write_atomic(target, theirs)
        else:
            write_atomic(target, fs.cat_file(remote))
        copied.append(rel)
    return copied


def push(local: Path, url: str, sent: dict[str, tuple[int, int]] | None = None) -> list[str]:
    """Copy every file under `local` that changed since `sent` (path -> (size, mtime_ns)) to the store; hidden
    files (write_atomic's temp files) are not results."""
    fs, base = filesystem(url)
    sent = {} if sent is None else sent
    pushed = []
    for path in sorted(p for p in Path(local).rglob("*") if p.is_file() and not p.name.startswith(".")):
        rel = path.relative_to(local).as_posix()
        stat = path.stat()
        mark = (stat.st_size, stat.st_mtime_ns)
        if sent.get(rel) == mark:
            continue
        remote = f"{base.rstrip('/')}/{rel}"
        fs.makedirs(remote.rsplit("/", 1)[0], exist_ok=True)
        _put_remote(fs, remote, path.read_bytes())
        sent[rel] = mark
        pushed.append(rel)
    return pushed


def _put_remote(fs: fsspec.AbstractFileSystem, remote: str, data: bytes) -> None:
    """Write one file to the store so that a kill never leaves it cut: one put where the store's puts are all or
    nothing (ATOMIC_PUT), else a hidden copy beside it renamed over it (a rename replaces a file in one step on a
    local disk and over SFTP's posix-rename)."""
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    if protocols & ATOMIC_PUT:
        fs.pipe_file(remote, data)
        return
    folder, name = remote.rsplit("/", 1)
    aside = f"{folder}/.{name}.partial-{os.getpid()}"
    fs.pipe_file(aside, data)
    try:
        fs.mv(aside, remote)
    except BaseException:
        with contextlib.suppress(Exception):
            fs.rm(aside)
        raise


def archive(url: str, stamp: str) -> str | None:
    """Move the store's folder `url` aside as '<name>.archived-<stamp>' (what --fresh does to a local run)."""
    fs, base = filesystem(url)
    files = _remote_files(fs, base)
    if not files:
        return None
    base = base.rstrip("/")
    target = f"{base}{ARCHIVED}{stamp}"
    if "recursive" in inspect.signature(fs.mv).parameters:
        # fsspec's generic move copies every path its listing holds, folders included, which an object store
        # cannot copy (S3: NoSuchKey): the files themselves are copied (server-side where the store can), then
        # removed
        sources = [f"{base}/{rel}" for rel in files]
        for parent in sorted({f"{target}/{rel}".rsplit("/", 1)[0] for rel in files}):
            fs.makedirs(parent, exist_ok=True)
        fs.copy(sources, [f"{target}/{rel}" for rel in files])
        fs.rm(sources)
    else:  # a driver with its own rename (sftp://: paramiko's posix_rename moves the whole folder in one call)
        fs.mv(base, target)
    return target


def materialize(url: str) -> Path:
    """A local copy of everything the store holds (for the paper): its staging folder, brought up to date."""
    local = staging_dir(url)
    pull(url, local)
    return local


class Mirror:
    """Pushes a suite folder to the store every `every_s` seconds while it runs, and once more at exit.

    A failed periodic push is kept (`errors`) and retried at the next tick; the final push raises, so a run
    whose results did not reach the store does not end as if they had (its local copy is complete).
    """

    def __init__(self, local: Path, url: str, every_s: float = 30.0):
        self.local, self.url, self.every_s = Path(local), url, every_s
        self.sent: dict[str, tuple[int, int]] = {}
        self.errors: list[str] = []
        self.pushes = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def push_now(self) -> list[str]:
        with self._lock:
            pushed = push(self.local, self.url, self.sent)
            self.pushes += 1
            return pushed

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.push_now()
            except Exception as exc:  # noqa: BLE001 — a store hiccup must not stop the measurement
                self.errors.append(f"{time.strftime('%H:%M:%S')} {type(exc).__name__}: {str(exc)[:200]}")

    def __enter__(self) -> "Mirror":
        if self.every_s > 0:
            self._thread = threading.Thread(target=self._run, name="store-mirror", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.push_now()


# ---- bundles: one host's results as one archive, for hosts that share no store --------------------------------

def _bundle_members(root: Path, host: str) -> list[Path]:
    base = Path(root) / host
    return sorted(p for p in base.rglob("*") if p.is_file() and not is_archived(p)
                  and not any(part.startswith(".") for part in p.relative_to(base).parts))


def bundle(root: Path, host: str, target: Path) -> int:
    """Write outputs/<host>/ (archived suite folders and hidden files and folders — locks, temp and partial files,
    .ipynb_checkpoints — left out) as one .tar.gz; the number of files in it."""
    members = _bundle_members(root, host)
    if not members:
        raise StoreError(f"no results for host {host!r} under {root}")
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with tarfile.open(partial, "w:gz") as archive:
        for path in members:
            archive.add(path, arcname=path.relative_to(root).as_posix(), recursive=False)
    os.replace(partial, target)
    return len(members)


def _run_id(data: bytes | None) -> str | None:
    """The run id a run.json holds; None when it is empty, cut or not a run's identity."""
    try:
        value = json.loads(data or b"")
    except ValueError:
        return None
    run_id = value.get("run_id") if isinstance(value, dict) else None
    return run_id if isinstance(run_id, str) and run_id else None


@dataclass
class Imported:
    """What import_bundle did, per suite folder ("host/model/suite")."""

    added: list[str] = field(default_factory=list)  # new here, moved in whole
    present: list[str] = field(default_factory=list)  # the same run was here with every file: counted once
    completed: list[str] = field(default_factory=list)  # the same run was here without some files: they were added
    skipped: list[str] = field(default_factory=list)  # "folder: why": nothing of it written


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _staging(root: Path) -> Path:
    """A fresh hidden folder in root that a bundle is extracted into before anything moves into place; those a
    killed import left (their process gone) are removed first."""
    root.mkdir(parents=True, exist_ok=True)
    for old in root.glob(f"{STAGING}*"):
        pid = old.name[len(STAGING):].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    staging = root / f"{STAGING}{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir()
    return staging


Members = list[tuple[tarfile.TarInfo, tuple[str, ...]]]


def _checked_members(archive: tarfile.TarFile, source: Path) -> tuple[Members, dict[tuple[str, ...], bytes]]:
    """Every file member with its path parts, in archive order, after the checks that need no extraction (plain
    files inside one host's folder, no path leaving the root, the size caps, from the headers; hidden names are
    left out); and each suite folder's run.json, read as it passes (a compressed stream is best read once,
    forward)."""
    members, markers, total = [], {}, 0
    for count, member in enumerate(archive, 1):
        if count > MAX_MEMBERS:
            raise StoreError(f"{source}: more than {MAX_MEMBERS} members, not one host's results; nothing written")
        if member.isdir():
            continue
        parts = PurePosixPath(member.name).parts
        if any(p.startswith(".") and p != ".." for p in parts):
            continue  # hidden: a lock, a temp file, .ipynb_checkpoints — no results (bundle leaves them out)
        if not member.isfile() or member.name.startswith("/") or ".." in parts or len(parts) < 2:
            raise StoreError(f"{source}: refusing member {member.name!r} (not a plain file inside one host's "
                             f"folder); nothing written")
        total += member.size
        if member.size > MAX_MEMBER_BYTES or total > MAX_BUNDLE_BYTES:
            what = f"{member.name} is {member.size:,} bytes" if member.size > MAX_MEMBER_BYTES else \
                f"its files come to more than {MAX_BUNDLE_BYTES:,} bytes"
            raise StoreError(f"{source}: {what} uncompressed (at most {MAX_MEMBER_BYTES:,} a file, "
                             f"{MAX_BUNDLE_BYTES:,} in all); nothing written")
        members.append((member, parts))
        if len(parts) == 4 and parts[3] == RUN_JSON and member.size <= 1 << 20:
            markers[parts[:3]] = archive.extractfile(member).read()
    return members, markers


def _free_bytes(path: Path) -> int:
    """Free bytes on the file system that holds path (or would: its nearest existing folder)."""
    for folder in [path, *path.parents]:
        if folder.is_dir():
            return shutil.disk_usage(folder).free
    return 0


def _group(parts: tuple[str, ...]) -> tuple[str, ...]:
    """The folder a member belongs to: its suite folder (host/model/suite), else the host's or model's own."""
    return parts[:3] if len(parts) > 3 else parts[:-1]


def _plan(members: Members, markers: dict[tuple[str, ...], bytes], root: Path,
          done: Imported) -> dict[tuple[str, ...], str]:
    """How each folder is imported: "new" (moved in whole), "merge" (the same run is here: only what this copy
    lacks) or "files" (a host's or model's own files: those not here). A suite folder whose run.json the bundle
    lacks is skipped (done.skipped); another run here raises StoreConflict. Nothing is written."""
    modes: dict[tuple[str, ...], str] = {}
    for group in sorted({_group(parts) for _, parts in members}):
        label, folder = "/".join(group), root.joinpath(*group)
        _no_file_in_the_way(root, folder)
        if len(group) < 3:
            modes[group] = "files"
            continue
        theirs = _run_id(markers.get(group))
        if theirs is None:
            why = "an unreadable run.json" if group in markers else "no run.json"
            done.skipped.append(f"{label}: the bundle holds {why} for it (the run's identity); nothing of it written")
            continue
        if (folder / RUN_JSON).is_file():
            ours = _run_id((folder / RUN_JSON).read_bytes())
            if ours != theirs:
                held = f"run {ours}" if ours else "an unreadable run.json"
                raise StoreConflict(f"{label} here holds {held}, the bundle's holds run {theirs}: move one aside (or "
                                    f"import into another outputs root) and retry; nothing written")
            modes[group] = "merge"
        elif folder.is_dir() and any(not p.name.startswith(".") for p in folder.iterdir()):
            raise StoreConflict(f"{label} here holds files but no run.json (no run identity): move it aside and "
                                f"retry; nothing written")
        else:
            modes[group] = "new"
    return modes


def _no_file_in_the_way(root: Path, path: Path) -> None:
    """StoreConflict where something here that is not a folder stands where the bundle needs one."""
    for folder in [path, *path.parents]:
        if folder == root or root not in folder.parents:
            return
        if folder.exists() and not folder.is_dir():
            raise StoreConflict(f"{folder.relative_to(root).as_posix()} here is not a folder, and the bundle has one "
                                f"there: move it aside and retry; nothing written")


def _extract(archive: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    """One member to a file, streamed in chunks (never whole in memory) and fsynced."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with archive.extractfile(member) as data, target.open("wb") as out:
        while chunk := data.read(CHUNK):
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())


def _starts_with(longer: Path, prefix: Path) -> bool:
    """Whether a file's bytes begin with another file's, compared in chunks."""
    if longer.stat().st_size < prefix.stat().st_size:
        return False
    with longer.open("rb") as a, prefix.open("rb") as b:
        while chunk := b.read(CHUNK):
            if a.read(len(chunk)) != chunk:
                return False
    return True


def _moves(staging: Path, root: Path, files: list[tuple[str, ...]], mode: str) -> list[tuple[Path, Path]]:
    """(staged file, its place) for what a "merge" or "files" folder takes of its files: a file not here; in a
    merge also an append-only log the bundle holds a longer version of whose start is ours (the pull rule).
    Diverging logs raise StoreConflict; any other file here stays."""
    moves = []
    for parts in sorted(set(files)):
        path, here, rel = staging.joinpath(*parts), root.joinpath(*parts), PurePosixPath(*parts)
        _no_file_in_the_way(root, here.parent)
        if here.exists() and not here.is_file():
            raise StoreConflict(f"{rel} here is not a file, and the bundle has one there: move it aside and retry; "
                                f"nothing written")
        if not here.exists():
            moves.append((path, here))
        elif mode == "merge" and rel.name.endswith(LOGS) and not _starts_with(here, path):
            if not _starts_with(path, here):
                raise StoreConflict(f"{rel} here and in the bundle diverge (neither starts with the other): keep "
                                    f"one and move the other aside; nothing written")
            moves.append((path, here))
    moves.sort(key=lambda move: move[1].name != RUN_JSON)  # the identity first: a kill leaves a folder to complete
    return moves


def _put(staged: Path, target: Path) -> None:
    """Move a staged file into place in one rename (a copy beside it, then a rename, across file systems)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(staged, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        aside = target.with_name(f".{target.name}.import-{os.getpid()}")
        try:
            shutil.copyfile(staged, aside)
            os.replace(aside, target)
        finally:
            aside.unlink(missing_ok=True)


def import_bundle(source: Path, root: Path) -> Imported:
    """Merge a bundle into root.

    Every member is checked, and every file extracted aside (a hidden folder in root, streamed, within
    MAX_MEMBER_BYTES a file and MAX_BUNDLE_BYTES in all), before anything moves into place: a path leaving the
    root, a link or a device, a file past the caps, a file that is no bundle, or another run in a folder here
    (StoreConflict) writes nothing. Then a suite folder new here moves in whole, in one rename; where the same
    run is here, what this copy lacks is added (a killed import completes), and nothing here is overwritten but
    an append-only log the bundle holds more rows of. A suite folder whose run.json the bundle lacks is skipped:
    an archive without a run's identity never replaces a finished file here.
    """
    root, done = Path(root), Imported()
    try:
        with tarfile.open(source, "r:*") as archive:
            members, markers = _checked_members(archive, source)
            modes = _plan(members, markers, root, done)
            files: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
            for _, parts in members:
                files.setdefault(_group(parts), []).append(parts)
            needed, free = sum(m.size for m, parts in members if _group(parts) in modes), _free_bytes(root)
            if needed + FREE_MARGIN > free:
                raise StoreError(f"{source}: its files need {needed:,} bytes uncompressed and {root} has {free:,} "
                                 f"free; nothing written")
            staging = _staging(root)
            try:
                for member, parts in members:  # in archive order: a compressed stream is read once, forward
                    if _group(parts) in modes:
                        _extract(archive, member, staging.joinpath(*parts))
                plans = {group: _moves(staging, root, files[group], mode)
                         for group, mode in modes.items() if mode != "new"}
                for group, mode in modes.items():
                    label, folder = "/".join(group), root.joinpath(*group)
                    if mode == "new":
                        folder.parent.mkdir(parents=True, exist_ok=True)
                        try:
                            os.rename(staging.joinpath(*group), folder)
                        except OSError:  # another file system, or a folder holding only hidden files: file by file
                            for staged, target in _moves(staging, root, files[group], "files"):
                                _put(staged, target)
                        done.added.append(label)
                        continue
                    for staged, target in plans[group]:
                        _put(staged, target)
                    if mode == "merge":
                        (done.completed if plans[group] else done.present).append(label)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(":")
        raise StoreError(f"{source}: not a readable bundle ({reason}); nothing written. A bundle is the .tar.gz "
                         f"`frontier-bench bundle` writes") from None
    return done
