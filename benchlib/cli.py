"""Command line: `frontier-bench run PARAMS` executes the suite notebooks through papermill.

Exit codes: 0 = results written; 1 = a notebook failed or no request succeeded; 2 = bad input
(params file, notebook name), reported in one line without a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pandas as pd

from benchlib.suites import ladder
from benchlib.records import store
from benchlib.measure.servers.llama_cpp import EmbeddedServerError
from benchlib.config.params import NOTEBOOK_ORDER, BenchParams, ParamsError, load_params
from benchlib.config.paths import NOTEBOOKS_DIR, PAPER_DIR, PAPER_OUT_DIR, PROJECT_ROOT, ladder_file, outputs_root, run_dir
from benchlib.measure.servers.quantize import QuantizeError
from benchlib.records.rows import write_atomic
from benchlib.views.suite_report import console_table
from benchlib.suites.runner import RunConflict, check_unlocked, prepare_out_dir, results_root, sync_from_store
from benchlib.records.schema import read_csv


def _fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def _display(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)


def _kernel_manager_class():
    """Kernel manager that encrypts kernel traffic (CurveZMQ) where pyzmq supports it: the kernel then has
    nothing to warn about, and the terminal shows only the run's own output."""
    # Notebook machinery is imported where notebooks run: nbformat alone takes ~1.6 s to import, which
    # `frontier-bench validate` should not pay.
    import zmq
    from jupyter_client.manager import AsyncKernelManager
    if not zmq.has("curve") or "transport_encryption" not in AsyncKernelManager.class_trait_names():
        return AsyncKernelManager

    class EncryptedKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.transport_encryption = "required"

    return EncryptedKernelManager


def execute_notebook(notebook: Path, output: Path, parameters: dict, progress: bool = True,
                     manifest: Path | None = None) -> None:
    """Execute through papermill. Papermill saves after every cell into a hidden `.NAME.partial.ipynb` beside
    `output`; the notebook appears under `output` only whole (validated, with the run's manifest in its
    metadata when `manifest` is given, written atomically), whether the run succeeded, failed or was
    interrupted. A full disk cannot leave a truncated notebook where the CLI points."""
    import papermill  # see _kernel_manager_class
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.stem}.partial{output.suffix}")
    try:
        papermill.execute_notebook(str(notebook), str(partial), parameters=parameters, kernel_name="python3",
                                   cwd=str(PROJECT_ROOT), progress_bar=progress,
                                   request_save_on_cell_execute=True, kernel_manager_class=_kernel_manager_class())
    finally:
        settle_notebook(partial, output, manifest)


def settle_notebook(partial: Path, output: Path, manifest: Path | None = None) -> bool:
    """Move papermill's partial notebook to `output` if it is a whole notebook (manifest attached); never
    raises: a torn or unwritable notebook is one warning line, the old `output` (if any) stays as it was,
    and the partial file is removed. Returns whether `output` was written."""
    import nbformat  # see _kernel_manager_class
    if not partial.is_file():
        return False
    try:
        notebook = nbformat.read(str(partial), as_version=4)
        if manifest is not None and manifest.is_file():  # provenance travels with the notebook
            notebook.metadata["frontier_bench"] = json.loads(manifest.read_text(encoding="utf-8"))
        write_atomic(output, nbformat.writes(notebook))
        return True
    except (OSError, ValueError) as exc:  # nbformat's NotJSONError and json's errors are ValueErrors
        reason = str(exc).strip().splitlines()
        print(f"warning: the executed notebook {_display(str(output))} could not be written whole "
              f"({type(exc).__name__}: {reason[0][:160] if reason else ''}); finished requests are kept "
              "in requests.csv", file=sys.stderr, flush=True)
        return False
    finally:
        partial.unlink(missing_ok=True)


def run_notebooks(params: BenchParams, params_path: str, notebooks: list[str], fresh: bool,
                  progress: bool = True) -> tuple[list[str], list[Path]]:
    """Execute each suite notebook; a failing notebook is reported and the next one still runs."""
    failed, suite_dirs = [], []
    root, url = results_root(params)
    for suite in notebooks:
        suite_dir = run_dir(params.host.name, params.server.model, suite, root)
        try:  # refuse (or archive, with --fresh) before papermill writes anything into the folder
            check_unlocked(suite_dir)
            remote = sync_from_store(params, suite, fresh, url, root)  # a run begun on another host resumes here
            prepare_out_dir(params, suite, fresh, root)
        except (RunConflict, store.StoreError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed.append(suite)
            continue
        executed = suite_dir / f"{suite}.ipynb"
        started = time.monotonic()
        print(f"▶ {suite}: executing notebooks/{suite}.ipynb → {_display(str(executed))}", flush=True)
        parameters = {**params.sections(), "params_file": params_path, "fresh": False}
        try:
            execute_notebook(NOTEBOOKS_DIR / f"{suite}.ipynb", executed, parameters, progress,
                             manifest=suite_dir / "manifest.json")
        except KeyboardInterrupt:
            print(f"\ninterrupted during {suite}; finished requests are kept, rerun to resume", file=sys.stderr)
            raise
        except Exception as exc:  # noqa: BLE001 — papermill reports the failing cell; keep going
            failed.append(suite)
            reason = str(exc).strip().splitlines()
            print(f"✗ {suite} failed after {time.monotonic() - started:.0f} s: "
                  f"{reason[-1] if reason else type(exc).__name__}\n  see {_display(str(executed))}", flush=True)
        else:
            print(f"✓ {suite} done in {time.monotonic() - started:.0f} s", flush=True)
        finally:
            if remote:  # the executed notebook is written after the suite's own last mirror
                store.push(suite_dir, remote)
        suite_dirs.append(suite_dir)
    return failed, suite_dirs


def print_summary(suite_dirs: list[Path]) -> bool:
    """Per-task table on the terminal; returns whether any request succeeded."""
    frames = []
    for suite_dir in suite_dirs:
        path = suite_dir / "summary.csv"
        if path.is_file():
            frames.append(read_csv(path, label=str(path)).assign(suite=suite_dir.name))
    if not frames:
        return False
    summary = pd.concat(frames, ignore_index=True)
    print("\n" + console_table(summary))
    return bool(summary.get("n_ok", pd.Series(dtype=float)).fillna(0).sum() > 0)


def cmd_run(args: argparse.Namespace) -> int:
    try:
        params = load_params(args.params)
    except ParamsError as exc:
        return _fail(str(exc))
    notebooks = args.only.split(",") if args.only else list(params.run.notebooks)
    unknown = [n for n in notebooks if n not in NOTEBOOK_ORDER or not (NOTEBOOKS_DIR / f"{n}.ipynb").is_file()]
    if unknown:
        return _fail(f"--only: unknown notebook(s) {', '.join(unknown)} (known: {', '.join(NOTEBOOK_ORDER)})")
    started = time.monotonic()
    print(f"Frontier Bench · {params.server.model} on {params.host.name} · params {args.params} · "
          f"run id {params.identity()}", flush=True)
    try:
        failed, suite_dirs = run_notebooks(params, args.params, notebooks, args.fresh, progress=not args.quiet)
    except KeyboardInterrupt:
        return 130
    any_ok = print_summary(suite_dirs)
    root, url = results_root(params)
    model_dir = run_dir(params.host.name, params.server.model, "x", root).parent
    print(f"\nresults: {_display(str(model_dir))}/"
          f"<suite>/ (requests.csv, summary.csv, windows.csv, telemetry.csv, manifest.json, executed notebook)")
    if url:
        print(f"store: {store.redact(url)} (mirrored; the paper reads every host there)")
    if not args.no_paper:
        paper_failed = cmd_paper(argparse.Namespace(quiet=args.quiet, roots=[url] if url else [])) != 0
        if paper_failed:
            failed.append("paper")
    print(f"wall time {time.monotonic() - started:.0f} s")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 0 if any_ok and not failed else 1


def cmd_ladder(args: argparse.Namespace) -> int:
    """The quantization ladder (benchlib.suites.ladder): make the rungs, run each as its own deployment, then the paper."""
    try:
        params = load_params(args.params)
        types = [t for t in args.types.split(",") if t.strip()] if args.types else ladder.DEFAULT_TYPES
        started = time.monotonic()
        print(f"Frontier Bench · quantization ladder of {params.server.model} on {params.host.name}", flush=True)
        rungs = ladder.prepare(params, types, progress=lambda line: print(line, flush=True))
    except (ParamsError, ladder.LadderError, ValueError) as exc:
        return _fail(str(exc))
    except (QuantizeError, EmbeddedServerError) as exc:
        return _fail(str(exc), code=1)
    failed, suite_dirs = [], []
    try:
        for qtype, rung in rungs:
            suites = ladder.suites_for(rung)
            print(f"\n■ {qtype}: {rung.server.model} · {', '.join(suites)}", flush=True)
            rung_failed, dirs = run_notebooks(rung, f"{args.params} (ladder rung {qtype})", suites, args.fresh,
                                              progress=not args.quiet)
            failed += [f"{qtype}/{s}" for s in rung_failed]
            suite_dirs += dirs
    except KeyboardInterrupt:
        return 130
    any_ok = print_summary(suite_dirs)
    record = ladder_file(params.host.name)
    print(f"\nladder: {_display(str(record))} · rung results under {_display(str(record.parent))}/<model>/")
    if not args.no_paper and cmd_paper(argparse.Namespace(quiet=args.quiet)) != 0:
        failed.append("paper")
    print(f"wall time {time.monotonic() - started:.0f} s")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 0 if any_ok and not failed else 1


def cmd_paper(args: argparse.Namespace) -> int:
    notebook = PAPER_DIR / "assemble.ipynb"
    if not notebook.is_file():
        print("paper/assemble.ipynb not present yet; skipping the paper", file=sys.stderr)
        return 0
    output = PAPER_OUT_DIR / "assemble.ipynb"
    roots = list(getattr(args, "roots", None) or []) or [str(outputs_root())]
    for root in roots:
        if store.is_url(root):
            try:
                store.check_url(root)
            except store.StoreError as exc:
                return _fail(str(exc))
    shown = ", ".join(store.redact(r) if store.is_url(r) else r for r in roots)
    print(f"▶ paper: executing paper/assemble.ipynb from {shown} → {_display(str(PAPER_OUT_DIR))}/", flush=True)
    try:
        execute_notebook(notebook, output, {"outputs_dir": roots[0], "more_roots": roots[1:]},
                         progress=not args.quiet)
    except Exception as exc:  # noqa: BLE001
        print(f"✗ paper failed: {str(exc).strip().splitlines()[-1] if str(exc).strip() else exc}", file=sys.stderr)
        return 1
    print(f"✓ paper written to {_display(str(PAPER_OUT_DIR))}/")
    return 0


def explore_copy(root: Path | None = None) -> Path:
    """The explorer's working copy under outputs/ (git-ignored): open and save that one, so the committed
    notebooks/explore.ipynb stays without outputs and unmodified. An existing copy is kept (your edits)."""
    target = (root or outputs_root()) / "explore.ipynb"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(NOTEBOOKS_DIR / "explore.ipynb", target)
    return target


def cmd_explore(args: argparse.Namespace) -> int:
    target = explore_copy()
    print(f"explorer: {_display(str(target))} (a working copy; notebooks/explore.ipynb stays clean)", flush=True)
    if args.no_lab:
        return 0
    return subprocess.call([sys.executable, "-m", "jupyterlab", str(target), f"--notebook-dir={PROJECT_ROOT}"])


def cmd_bundle(args: argparse.Namespace) -> int:
    target = Path(args.output or f"{args.host}-results.tar.gz")
    try:
        count = store.bundle(outputs_root(), args.host, target)
    except store.StoreError as exc:
        return _fail(str(exc))
    print(f"bundle: {target} ({count} files of host {args.host}); "
          f"on the other host: frontier-bench import {target.name}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    try:
        added, present = store.import_bundle(Path(args.bundle), outputs_root())
    except (store.StoreError, OSError, tarfile.TarError) as exc:
        return _fail(f"{args.bundle}: {exc}")
    for label in added:
        print(f"imported {label}")
    for label in present:
        print(f"already here (same run id, counted once): {label}")
    print(f"{len(added)} suite folder(s) imported into {_display(str(outputs_root()))}/")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        params = load_params(args.params)
    except ParamsError as exc:
        return _fail(str(exc))
    print(f"{args.params}: ok · run id {params.identity()} · notebooks {', '.join(params.run.notebooks)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="frontier-bench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute the suite notebooks for a params file, then the paper")
    run.add_argument("params", help="params/<host-model>.yaml")
    run.add_argument("--only", help="comma-separated notebooks (default: run.notebooks of the params file)")
    run.add_argument("--fresh", action="store_true", help="archive existing results of other params and start over")
    run.add_argument("--no-paper", action="store_true", help="skip paper/assemble.ipynb at the end")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.set_defaults(func=cmd_run)
    lad = sub.add_parser("ladder", help="quantization ladder of the embedded model: each rung run as a deployment, "
                                         "then the paper (bandwidth law)")
    lad.add_argument("params", nargs="?", default="params/embedded.yaml", help="embedded params (default: %(default)s)")
    lad.add_argument("--types", help=f"comma-separated rungs (default: {','.join(ladder.DEFAULT_TYPES)})")
    lad.add_argument("--fresh", action="store_true", help="archive existing results of other params and start over")
    lad.add_argument("--no-paper", action="store_true", help="skip paper/assemble.ipynb at the end")
    lad.add_argument("--quiet", action="store_true", help="no progress bars")
    lad.set_defaults(func=cmd_ladder)
    paper = sub.add_parser("paper", help="regenerate paper/out/ from outputs/ (or given roots) and the reference data")
    paper.add_argument("roots", nargs="*", help="results roots: folders or store URLs (default: outputs/)")
    paper.add_argument("--quiet", action="store_true")
    paper.set_defaults(func=cmd_paper)
    explore = sub.add_parser("explore", help="open the request explorer (a working copy under outputs/) in JupyterLab")
    explore.add_argument("--no-lab", action="store_true", help="only write the working copy and print its path")
    explore.set_defaults(func=cmd_explore)
    bund = sub.add_parser("bundle", help="write one host's results (outputs/<host>/) as a single .tar.gz")
    bund.add_argument("host", help="host folder name under outputs/")
    bund.add_argument("-o", "--output", help="archive path (default: <host>-results.tar.gz)")
    bund.set_defaults(func=cmd_bundle)
    imp = sub.add_parser("import", help="merge a bundle written by `frontier-bench bundle` into outputs/")
    imp.add_argument("bundle")
    imp.set_defaults(func=cmd_import)
    validate = sub.add_parser("validate", help="check a params file and exit")
    validate.add_argument("params")
    validate.set_defaults(func=cmd_validate)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.getLogger("papermill").setLevel(logging.WARNING)
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
