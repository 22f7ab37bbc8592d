"""How a suite notebook is executed: papermill runs notebooks/<suite>.ipynb with a deployment's params, the
executed notebook lands whole in the suite's folder (or not at all), and a failing suite is reported with its
reason while the next one still runs.

Notebook machinery (papermill, nbformat, zmq, jupyter_client and the kernel manager of suites/kernel.py) is
imported where notebooks run: nbformat alone takes ~1.6 s to import, which `frontier-bench validate` should not pay.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import pandas as pd

from benchlib.analysis.failures import FailureReport, failure_report
from benchlib.config.formatting import fit
from benchlib.config.params import BenchParams
from benchlib.config.paths import NOTEBOOKS_DIR, PROJECT_ROOT
from benchlib.measure.servers import preflight
from benchlib.records import store
from benchlib.records.rows import RequestLog, read_requests, write_atomic
from benchlib.records.run_folder import RunConflict, RunFolder, check_unlocked, prepare_out_dir, run_lock

# papermill's kernel manager, named for traitlets to import when a notebook runs (suites/kernel.py says why it is ours)
KERNEL_MANAGER = "benchlib.suites.kernel.KernelManager"


def shown_path(path: str | Path) -> str:
    """A path as the terminal shows it: relative to the project where it is inside it."""
    try:
        return str(Path(path).resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)


def execute_notebook(notebook: Path, output: Path, parameters: dict, progress: bool = True,
                     run_folder: Path | None = None) -> None:
    """Execute through papermill. Papermill saves after every cell into a hidden `.NAME.partial.ipynb` beside
    `output`; the notebook appears under `output` only whole (validated, with the manifest of `run_folder` in its
    metadata when one is given, written atomically), whether the run succeeded, failed or was
    interrupted. A full disk cannot leave a truncated notebook where the CLI points."""
    import papermill  # see the module docstring
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.stem}.partial{output.suffix}")
    try:
        papermill.execute_notebook(str(notebook), str(partial), parameters=parameters, kernel_name="python3",
                                   cwd=str(PROJECT_ROOT), progress_bar=progress,
                                   request_save_on_cell_execute=True, kernel_manager_class=KERNEL_MANAGER)
    finally:
        settle_notebook(partial, output, run_folder)


def settle_notebook(partial: Path, output: Path, run_folder: Path | None = None) -> bool:
    """Move papermill's partial notebook to `output` if it is a whole notebook (manifest attached); never
    raises: a torn or unwritable notebook is one warning line, the old `output` (if any) stays as it was,
    and the partial file is removed. Returns whether `output` was written."""
    import nbformat  # see the module docstring
    if not partial.is_file():
        return False
    try:
        notebook = nbformat.read(str(partial), as_version=4)
        run = RunFolder(run_folder) if run_folder is not None else None
        if run is not None and run.manifest_path.is_file():  # provenance travels with the notebook
            notebook.metadata["frontier_bench"] = run.read_manifest()
        write_atomic(output, nbformat.writes(notebook))
        return True
    except (OSError, ValueError) as exc:  # nbformat's NotJSONError and json's errors are ValueErrors
        reason = str(exc).strip().splitlines()
        print(f"warning: the executed notebook {shown_path(str(output))} could not be written whole "
              f"({type(exc).__name__}: {reason[0][:160] if reason else ''}); finished requests are kept "
              "in requests.csv", file=sys.stderr, flush=True)
        return False
    finally:
        partial.unlink(missing_ok=True)


class _Collect(logging.Handler):
    """Keeps benchlib's warnings while attached (instead of the notebook kernel's log, the terminal shows them)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def log_warnings(suite_dir: Path) -> list[str]:
    """What a suite's requests.csv warns about before it runs — a torn last row moved aside (its request sent
    again), rows that cannot be read — as lines for the terminal: the notebook's kernel would log them only into
    the executed notebook."""
    path = RunFolder(suite_dir).requests_path
    if not path.is_file():
        return []
    logger, collect = logging.getLogger("benchlib"), _Collect()
    logger.addHandler(collect)
    try:
        with run_lock(suite_dir):
            RequestLog(path).recover()
        read_requests(path)
    finally:
        logger.removeHandler(collect)
    return collect.lines


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """A file's identity and state: a notebook written whole (a rename over the old one) changes it."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def suite_failures(suite_dir: Path, suite: str, params: BenchParams) -> FailureReport:
    """The suite's failed requests against run.max_error_rate (analysis.failures), from its requests.csv."""
    folder = RunFolder(suite_dir)
    requests = folder.requests() if folder.has_requests() else pd.DataFrame(columns=["status"])
    manifest = folder.manifest
    run_id = manifest.get("run_id")
    if run_id and "run_id" in requests:
        requests = requests[requests["run_id"] == run_id]
    sets = (manifest.get("graded") or {}).get("sets") or {}
    return failure_report(requests, suite, params.run.max_error_rate, sets)


def take_preflight(params: BenchParams, notebooks: list[str], root: Path) -> BenchParams:
    """A user's server is asked first (measure.servers.preflight): its findings printed and kept in the deployment's
    folder; the params the suites run with come back. An embedded server has none (a stale record is removed)."""
    folder = params.suite_dir("x", root).parent
    if params.server.kind == "embedded" and not params.server.base_url:
        (folder / preflight.PREFLIGHT_JSON).unlink(missing_ok=True)
        return params
    checked = preflight.check(params, notebooks)
    for line in checked.lines():
        print(line, flush=True)
    preflight.save(checked, folder)
    return preflight.apply(params, checked)


def run_notebooks(params: BenchParams, params_path: str, notebooks: list[str], fresh: bool,
                  progress: bool = True) -> tuple[dict[str, str], list[Path]]:
    """The pre-flight of a user's server, then each suite notebook; a failing notebook is reported and the next one
    still runs, a suite whose failed share is above run.max_error_rate is failed too (not the load suite: its
    levels above what the server takes are what a sweep measures). Returns {failed suite: its
    one-line reason} and the suite folders."""
    failed: dict[str, str] = {}
    suite_dirs: list[Path] = []
    root, url = store.results_root(params)
    try:
        params = take_preflight(params, notebooks, root)
    except preflight.PreflightError as exc:
        print("\n".join(fit(f"✗ pre-flight: {exc}")), flush=True)
        return {"pre-flight": str(exc)}, suite_dirs
    for suite in notebooks:
        suite_dir = params.suite_dir(suite, root)
        try:  # refuse (or archive, with --fresh) before papermill writes anything into the folder
            check_unlocked(suite_dir)
            remote = store.sync_from_store(params, suite, fresh, url, root)  # a run begun on another host resumes here
            prepare_out_dir(params, suite, fresh, root)
        except (RunConflict, store.StoreError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed[suite] = str(exc)
            continue
        executed = suite_dir / f"{suite}.ipynb"
        for line in log_warnings(suite_dir):
            print(f"warning: {line}", file=sys.stderr, flush=True)
        started, before = time.monotonic(), _stamp(executed)
        print(f"▶ {suite}: executing notebooks/{suite}.ipynb into {shown_path(str(suite_dir))}/", flush=True)
        parameters = {**params.sections(), "params_file": params_path, "fresh": False}
        try:
            execute_notebook(NOTEBOOKS_DIR / f"{suite}.ipynb", executed, parameters, progress,
                             run_folder=suite_dir)
        except KeyboardInterrupt:
            print(f"\ninterrupted during {suite}; finished requests are kept, rerun to resume", file=sys.stderr)
            raise
        except Exception as exc:  # noqa: BLE001 — papermill reports the failing cell; keep going
            lines = str(exc).strip().splitlines()
            failed[suite] = lines[-1] if lines else type(exc).__name__
            where = f"see {shown_path(str(executed))}" if _stamp(executed) not in (None, before) else \
                f"no executed notebook was written; finished requests are in {shown_path(str(suite_dir))}/requests.csv"
            print(f"✗ {suite} failed after {time.monotonic() - started:.0f} s: {failed[suite]}\n  {where}", flush=True)
        else:
            if _stamp(executed) in (None, before):  # measured, but the notebook could not be written (a full disk)
                failed[suite] = "its executed notebook could not be written"
                print(f"✗ {suite} measured in {time.monotonic() - started:.0f} s, but {failed[suite]} (see the warning "
                      f"above); results are in {shown_path(str(suite_dir))}/", flush=True)
            elif suite != "load" and (report := suite_failures(suite_dir, suite, params)).over:
                failed[suite] = report.reason()
                print(f"✗ {suite} measured in {time.monotonic() - started:.0f} s, but\n    "
                      + "\n    ".join(report.lines()), flush=True)
            else:
                print(f"✓ {suite} done in {time.monotonic() - started:.0f} s", flush=True)
        finally:
            if remote:  # the executed notebook is written after the suite's own last mirror
                store.push(suite_dir, remote)
        suite_dirs.append(suite_dir)
    return failed, suite_dirs
