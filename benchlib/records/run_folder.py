"""A suite's run folder, its one owner: outputs/<host>/<model>[+<variant>]/<suite>/ and the names of its files,
the one walk of an outputs tree (which suite folders it holds, the archived ones skipped), the one reader of a
folder (RunFolder: its manifest parsed once, its run id, its rows), and its lifecycle: the folder holds one run
(run.json: its id, the salt that makes its prompts unique, what the id covers); a run of other params, task files or
code refuses to mix into it (RunConflict, or --fresh archives it beside); one process at a time writes it (an OS
lock, released by the kernel whatever ends the process). Where the folders go with a results store, and what is
pulled from it first, is benchlib.records.store's (results_root, sync_from_store).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import time
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from benchlib.config.params import BenchParams
from benchlib.records.rows import read_requests, write_atomic
from benchlib.records.schema import read_csv

RUN_JSON = "run.json"  # the run's identity, written first (prepare_out_dir)
MANIFEST_JSON = "manifest.json"  # provenance: params (no secrets), versions, server, git commit
REQUESTS_CSV = "requests.csv"  # one row per request, appended as each finishes (records.rows)
SUMMARY_CSV = "summary.csv"  # per-task statistics
WINDOWS_CSV = "windows.csv"  # each task's time window, its power and energy
SERVER_LOG = "server.log"  # an embedded server's output
ARCHIVED = ".archived-"  # <suite>.archived-<stamp>: a run --fresh moved aside, never read as a result


def archived_path(out_dir: Path, stamp: str) -> Path:
    """Where --fresh moves a run folder aside: beside it, named so no reader takes it for a result."""
    return out_dir.with_name(f"{out_dir.name}{ARCHIVED}{stamp}")


def is_archived(path: Path | str) -> bool:
    """Whether a path lies in (or is) a folder moved aside by --fresh."""
    return ARCHIVED in Path(path).as_posix()


def suite_folders(root: Path | str) -> tuple[list[Path], list[str]]:
    """Every outputs/<host>/<model>/<suite>/ folder under `root`, sorted, whatever it holds, and the archived ones
    skipped (as paths relative to `root`); ([], []) for a missing root."""
    root = Path(root)
    found: list[Path] = []
    skipped: list[str] = []
    if not root.is_dir():
        return found, skipped
    for path in sorted(p for p in root.glob("*/*/*") if p.is_dir()):
        if is_archived(path.name):
            skipped.append(str(path.relative_to(root)))
        else:
            found.append(path)
    return found, skipped


def _json_object(path: Path) -> dict[str, Any]:
    """A JSON file's object; OSError when it cannot be read, ValueError when it holds no JSON object."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


def _json_object_or_none(path: Path) -> dict[str, Any]:
    """A JSON file's object; {} when it is missing or broken."""
    try:
        return _json_object(path)
    except (OSError, ValueError):
        return {}


class RunFolder:
    """One suite folder as its readers see it. The manifest and run.json are each parsed once, on first use; a
    missing or broken one reads as {} (a run cut short has none yet, and a reader still shows its rows)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    @property
    def suite(self) -> str:
        return self.path.name

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST_JSON

    @property
    def marker_path(self) -> Path:
        return self.path / RUN_JSON

    @property
    def requests_path(self) -> Path:
        return self.path / REQUESTS_CSV

    @property
    def summary_path(self) -> Path:
        return self.path / SUMMARY_CSV

    @property
    def windows_path(self) -> Path:
        return self.path / WINDOWS_CSV

    @cached_property
    def manifest(self) -> dict[str, Any]:
        """The manifest; {} when the folder has none or a broken one."""
        return _json_object_or_none(self.manifest_path)

    def read_manifest(self) -> dict[str, Any]:
        """The manifest read now, for a reader that must not take a broken one for none: OSError when it is
        missing or unreadable, ValueError when it holds no JSON object."""
        return _json_object(self.manifest_path)

    @cached_property
    def marker(self) -> dict[str, Any]:
        """run.json: the run's identity (run_id, salt, params_file, identity, created_unix); {} without one."""
        return _json_object_or_none(self.marker_path)

    @property
    def run_id(self) -> str | None:
        """The id of the run the folder holds (run.json's); None when it has none."""
        return self.marker.get("run_id")

    @property
    def params(self) -> dict[str, Any]:
        """The params the run was made from, as its manifest recorded them ({} without one)."""
        return self.manifest.get("params") or {}

    def has_requests(self) -> bool:
        return self.requests_path.is_file()

    def has_summary(self) -> bool:
        return self.summary_path.is_file()

    def requests(self) -> pd.DataFrame:
        """requests.csv typed (records.rows.read_requests); an empty typed frame without one."""
        return read_requests(self.requests_path)

    def summary(self) -> pd.DataFrame:
        """summary.csv typed where declared (records.schema.read_csv); an empty frame without one."""
        return read_csv(self.summary_path, label=str(self.summary_path))

    def windows(self) -> pd.DataFrame:
        """windows.csv typed where declared; an empty frame without one."""
        return read_csv(self.windows_path, label=str(self.windows_path))


class RunConflict(RuntimeError):
    """The output folder holds a run made from different params; refuse to mix them silently."""


class RunLocked(RunConflict):
    """Another process is writing the same suite folder right now."""


def lock_path(out_dir: Path) -> Path:
    """The suite folder's lock file, beside it (so archiving the folder with --fresh keeps the lock)."""
    return out_dir.parent / f".{out_dir.name}.lock"


def _locked_error(out_dir: Path, fd: int) -> RunLocked:
    holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "a process that left no PID"
    return RunLocked(f"{out_dir} is being written by another run ({holder}); wait for it to finish or stop it")


@contextlib.contextmanager
def run_lock(out_dir: Path) -> Iterator[None]:
    """Hold the suite folder's OS lock (flock) for the whole session: a second run of the same folder refuses
    with one line naming the holder's PID. The kernel releases the lock when the process ends, crash or not."""
    path = lock_path(out_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        error = _locked_error(out_dir, fd)
        os.close(fd)
        raise error from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"PID {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}".encode(), 0)
    try:
        yield
    finally:
        os.close(fd)


def check_unlocked(out_dir: Path) -> None:
    """Raise RunLocked when another process holds the folder's lock (a probe: takes and releases it)."""
    with run_lock(out_dir):
        pass


def _what_changed(existing: dict[str, Any], params: BenchParams) -> str:
    """'different params', 'changed task files', 'other code' — what differs from the run in the folder."""
    old, new = existing.get("identity") or {}, params.identity_parts()
    names = {"params": "different params", "task_set": "changed task files", "code": "other code (benchlib)"}
    changed = [names[k] for k in names if k in old and old[k] != new[k]]
    return " and ".join(changed) if changed else "different params, task files or code"


def prepare_out_dir(params: BenchParams, suite: str, fresh: bool, root: Path | None) -> tuple[Path, str, str]:
    out_dir = params.suite_dir(suite, root)
    run_id = params.identity()
    marker = out_dir / RUN_JSON
    if marker.is_file():
        try:
            existing = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            existing = exc
        if not isinstance(existing, dict) and not fresh:  # its rows may be fine: nothing is overwritten or guessed
            why = str(existing)[:120] if isinstance(existing, Exception) else "not a JSON object"
            raise RunConflict(f"{marker} is unreadable ({why}), so the run "
                              f"its rows belong to is unknown; rerun with --fresh to archive the folder and start over")
        existing = existing if isinstance(existing, dict) else {}
        if existing.get("run_id") == run_id and not fresh:
            return out_dir, run_id, existing.get("salt", run_id)
        if not fresh:
            raise RunConflict(f"{out_dir} holds run {existing.get('run_id')} made from {_what_changed(existing, params)}"
                              f" ({existing.get('params_file') or 'unknown file'}); rerun with --fresh to archive it "
                              f"and start over, or give server.variant (or host.name) another value")
        shutil.move(str(out_dir), str(archived_path(out_dir, time.strftime('%Y%m%d-%H%M%S'))))
    elif fresh and out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    salt = secrets.token_hex(4)  # a fresh run never reuses the prompts a server may still have cached
    write_atomic(marker, json.dumps({"run_id": run_id, "salt": salt, "params_file": params.source,
                                     "identity": params.identity_parts(), "created_unix": time.time()}, indent=2))
    return out_dir, run_id, salt
