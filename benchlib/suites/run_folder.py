"""A suite's run folder and its lifecycle: outputs/<host>/<model>[+<variant>]/<suite>/ holds one run (run.json:
its id, the salt that makes its prompts unique, what the id covers); a run of other params, task files or code
refuses to mix into it (RunConflict, or --fresh archives it beside); one process at a time writes it (an OS
lock, released by the kernel whatever ends the process); with a results store, what the store holds is pulled
first so a run begun on another host resumes here.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

from benchlib.config.params import BenchParams
from benchlib.config.paths import outputs_root
from benchlib.records import store
from benchlib.records.rows import write_atomic


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


def results_root(params: BenchParams) -> tuple[Path, str]:
    """(local root the suite folders are appended to, store URL or ''): outputs/, or with a results store
    (`run.store` / $FRONTIER_BENCH_STORE) the store's local staging folder (benchlib.records.store)."""
    url = store.configured(params.run.store)
    return (store.staging_dir(url) if url else outputs_root()), url


def sync_from_store(params: BenchParams, suite: str, fresh: bool, url: str, root: Path) -> str:
    """Before a suite starts: the URL of its folder in the store ('' without one), with what the store holds
    pulled into the local folder so a run begun elsewhere resumes here — or, with fresh, the store's copy
    archived beside it as the local one is."""
    if not url:
        return ""
    remote = store.join(url, *params.suite_dir(suite, Path()).parts)
    if fresh:
        store.archive(remote, time.strftime("%Y%m%d-%H%M%S"))
    else:
        store.pull(remote, params.suite_dir(suite, root))
    return remote


def prepare_out_dir(params: BenchParams, suite: str, fresh: bool, root: Path | None) -> tuple[Path, str, str]:
    out_dir = params.suite_dir(suite, root)
    run_id = params.identity()
    marker = out_dir / "run.json"
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
        archived = out_dir.with_name(f"{out_dir.name}.archived-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.move(str(out_dir), str(archived))
    elif fresh and out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    salt = secrets.token_hex(4)  # a fresh run never reuses the prompts a server may still have cached
    write_atomic(marker, json.dumps({"run_id": run_id, "salt": salt, "params_file": params.source,
                                     "identity": params.identity_parts(), "created_unix": time.time()}, indent=2))
    return out_dir, run_id, salt
