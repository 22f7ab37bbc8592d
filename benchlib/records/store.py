"""The results store: the outputs root may be a local folder or an fsspec URL (s3://, gs://, az://, sftp://,
file://, memory:// in tests).

Object stores cannot append, so rows are always appended and fsynced to a local folder first (the staging copy,
`~/.cache/frontier-bench/store/<hash of the URL>/`, same layout as outputs/). A `Mirror` pushes a suite folder to
the store every `every_s` seconds while it runs and once more when it ends (success, error or Ctrl-C); `pull`
brings back what the store holds before a run starts, so a run resumed on another machine continues from it;
`materialize` gives the paper a local copy of a whole store. Hosts that share no store exchange bundles:
`bundle` writes one host's results as a .tar.gz, `import_bundle` merges one (a run already here is skipped and
reported; a different run in the same folder is refused, nothing written).

Pull rule, per file: absent here → copied; an append-only log (`*.csv`, `*.jsonl`) the store holds a longer
version of whose start is our copy → the store's; two logs that diverge → `StoreConflict` (nothing is
overwritten); any other file that exists here stays (the local copy is the newer, it is what gets pushed).

Credentials come only from the environment or the store library's own configuration (e.g. AWS_* variables,
~/.aws, `FSSPEC_S3_ENDPOINT_URL`); a URL carrying a password or a key is refused before anything is written.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import tarfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import fsspec
from fsspec.core import url_to_fs

from benchlib.config.paths import cache_dir
from benchlib.records.rows import write_atomic
from benchlib.records.secrets import redact_url

ENV = "FRONTIER_BENCH_STORE"
LOGS = (".csv", ".jsonl")
SECRET_QUERY = ("key", "secret", "token", "password", "signature", "sig", "credential")


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
    """Refuse a URL that carries a secret (a password in user:pass@, a key in the query)."""
    parts = urlsplit(url)
    if parts.password is not None:
        raise StoreError(f"store URL {redact_url(url)} carries a password: give credentials through the environment "
                         f"or the store library's configuration instead")
    for key, _ in parse_qsl(parts.query):
        if any(word in key.lower() for word in SECRET_QUERY):
            raise StoreError(f"store URL {redact_url(url)} carries '{key}' in its query: give credentials through the "
                             f"environment or the store library's configuration instead")


def join(url: str, *parts: str) -> str:
    return "/".join([url.rstrip("/"), *(p.strip("/") for p in parts if p)])


def staging_dir(url: str) -> Path:
    """The local folder runs bound for `url` are appended to (one per store URL)."""
    return cache_dir() / "store" / hashlib.sha256(url.encode()).hexdigest()[:16]


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
    """Bring what the store holds under `url` into `local` (the pull rule above); the files copied."""
    fs, base = filesystem(url)
    local = Path(local)
    copied = []
    for rel, size in sorted(_remote_files(fs, base).items()):
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
        fs.pipe_file(remote, path.read_bytes())
        sent[rel] = mark
        pushed.append(rel)
    return pushed


def archive(url: str, stamp: str) -> str | None:
    """Move the store's folder `url` aside as '<name>.archived-<stamp>' (what --fresh does to a local run)."""
    fs, base = filesystem(url)
    files = _remote_files(fs, base)
    if not files:
        return None
    base = base.rstrip("/")
    target = f"{base}.archived-{stamp}"
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
    return sorted(p for p in base.rglob("*") if p.is_file() and ".archived-" not in p.as_posix()
                  and not p.name.startswith("."))


def bundle(root: Path, host: str, target: Path) -> int:
    """Write outputs/<host>/ (archived suite folders and hidden files — locks, temp and partial files — left out)
    as one .tar.gz; the number of files in it."""
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
    try:
        return json.loads(data or b"{}").get("run_id")
    except ValueError:
        return None


def import_bundle(source: Path, root: Path) -> tuple[list[str], list[str]]:
    """Merge a bundle into root: (suite folders added, suite folders already here with the same run id).

    Every member is checked before anything is written: a path leaving the root, a link or a device is refused;
    a suite folder here that holds another run (other run id) raises StoreConflict and nothing is written.
    """
    root = Path(root)
    with tarfile.open(source, "r:*") as archive:
        members = archive.getmembers()
        groups: dict[tuple[str, ...], list[tarfile.TarInfo]] = {}
        for member in members:
            parts = Path(member.name).parts
            if member.isdir():
                continue
            if not member.isfile() or Path(member.name).is_absolute() or ".." in parts or len(parts) < 2:
                raise StoreError(f"{source}: refusing member {member.name!r} (not a plain file inside one host's "
                                 f"folder)")
            groups.setdefault(tuple(parts[:3]) if len(parts) > 3 else tuple(parts[:-1]), []).append(member)
        added, present, plan = [], [], []
        for group, items in sorted(groups.items()):
            folder = root.joinpath(*group)
            label = "/".join(group)
            marker = next((m for m in items if m.name.endswith("/run.json") and len(Path(m.name).parts) == 4), None)
            if marker is not None and (folder / "run.json").is_file():
                ours, theirs = _run_id((folder / "run.json").read_bytes()), _run_id(archive.extractfile(marker).read())
                if ours != theirs:
                    raise StoreConflict(f"{label} here holds run {ours}, the bundle's holds run {theirs}: move one "
                                        f"aside (or import into another outputs root) and retry")
                present.append(label)
                continue
            plan.append((group, items))
            if marker is not None:
                added.append(label)
        for group, items in plan:
            for member in items:
                target = root / member.name
                if target.is_file() and len(group) < 3:
                    continue  # a host-level file (ladder.json) already here is kept
                write_atomic(target, archive.extractfile(member).read())
    return added, present
