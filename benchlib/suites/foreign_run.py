"""Another tool's results (benchlib.measure.foreign) written as one of our run folders, so the paper, the frontier,
`compare` and the explorer read them like ours.

The deployment is the params file's, marked: its server.variant gains `measured-by-<tool>`, so the folder is
outputs/<host>/<model>+measured-by-<tool>/<tool>/ and every view names it "… · measured-by-<tool> · host", beside
(never merged into) the same deployment measured by us. The folder holds requests.csv (the tool's requests as our
rows), summary.csv (benchlib.analysis.summary over them; an import of aggregates only gets one row of the tool's
own figures, its note saying what it cannot give), manifest.json (the params, the tool, its version, command line
and aggregates, the source files with their SHA-256) and run.json (the run id: a hash of the tool, the files and
the params, so importing the same files again changes nothing).

Nothing is half-written: the folder is built aside (.<tool>.importing-<pid>) and renamed into place; a folder that
holds another import is refused unless `fresh`, which archives it beside (<tool>.archived-<time>) first."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from benchlib.analysis import summary as analysis
from benchlib.config.params import BenchParams, code_version, load_params
from benchlib.measure import foreign
from benchlib.measure.provenance import git_commit, to_json
from benchlib.records.rows import RequestLog, write_atomic, write_csv_atomic
from benchlib.records.secrets import redact
from benchlib.suites.run_folder import RunConflict, results_root, run_lock


@dataclass
class Imported:
    out_dir: Path
    run_id: str
    run: foreign.ForeignRun
    summary: pd.DataFrame
    already: bool = False  # the same files were imported into this folder before: nothing was written


def marked(params: BenchParams, tool: str) -> BenchParams:
    """The params with server.variant marking the tool that measured the deployment."""
    mark = f"measured-by-{tool}"
    variant = f"{params.server.variant}+{mark}" if params.server.variant else mark
    return params.model_copy(update={"server": params.server.model_copy(update={"variant": variant})})


def _run_id(tool: str, files: list[Path], params: BenchParams) -> str:
    digest = hashlib.sha256(tool.encode() + b"\0" + json.dumps(params.identity_parts(), sort_keys=True).encode())
    for path in sorted(files):
        digest.update(b"\0" + path.read_bytes())
    return f"{tool}-{digest.hexdigest()[:12]}"


def _aggregate_row(run: foreign.ForeignRun, suite: str) -> dict[str, Any]:
    """summary.csv's one row for an import of aggregates only: the tool's figures under our column names."""
    row: dict[str, Any] = {"suite": suite, "modality": "text", "task": suite,
                           **{c: float("nan") for c in analysis.SUMMARY_COLUMNS},
                           **{c: 0 for c in analysis.COUNT_COLUMNS}, "valid": True, "failures": "",
                           "checker": "", "percentile_note": ""}
    ok, failed = run.totals or (0, 0)
    row.update({"n_requests": ok + failed, "n_ok": ok, "n_failed": failed,
                "error_rate": failed / (ok + failed) if ok + failed else float("nan")})
    for metric, figures in run.figures.items():
        for stat, value in figures.items():
            row[f"{metric}_{stat}"] = value
    row["note"] = (f"aggregates from {run.tool} {run.version or '(version unknown)'} as it computed them; "
                   f"not available: {'; '.join(run.cannot_give)}")
    return row


def _fill(run: foreign.ForeignRun, params: BenchParams, run_id: str) -> None:
    """Our identity columns on every row (the deployment is the params file's)."""
    for record in run.records:
        record.run_id, record.host, record.model = run_id, params.host.name, params.server.model
        record.server_kind, record.server_software = params.server.kind, params.server.software or params.server.kind
        record.variant = record.variant or ""


def _manifest(run: foreign.ForeignRun, params: BenchParams, run_id: str, suite: str, source: str) -> dict[str, Any]:
    """The import's provenance; values under secret-like keys (an API key in the tool's recorded config) are ***."""
    return redact({
        "run_id": run_id, "suite": suite, "params_file": params.source,
        "started_unix": run.started_unix, "finished_unix": run.finished_unix, "imported_unix": time.time(),
        "git_commit": git_commit(), "code_version": code_version(), "identity": params.identity_parts(),
        "params": params.sections(), "api_key_env": params.server.api_key_env,
        "measured_by": {"tool": run.tool, "version": run.version, "command": run.command, "model": run.model,
                        "source": source,
                        "files": [{"path": str(p), "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
                                  for p in run.files]},
        "aggregates": run.aggregates, "cannot_give": run.cannot_give,
    })


def import_results(tool: str, path: str | Path, params_file: str | Path, fresh: bool = False,
                   root: Path | None = None) -> Imported:
    """Read `tool`'s results at `path` and write them as the params file's deployment, measured by that tool
    (ForeignError, ParamsError, RunConflict: one line, nothing written)."""
    base = load_params(params_file)
    run = foreign.read(tool, path)
    params = marked(base, tool)
    suite = tool
    local = root if root is not None else results_root(params)[0]
    out_dir = params.suite_dir(suite, local)
    run_id = _run_id(tool, run.files, base)
    with run_lock(out_dir):
        marker = out_dir / "run.json"
        if marker.is_file():
            try:
                existing = json.loads(marker.read_text(encoding="utf-8")).get("run_id")
            except (OSError, ValueError, AttributeError):
                existing = None
            if existing == run_id and not fresh:
                summary = pd.read_csv(out_dir / "summary.csv") if (out_dir / "summary.csv").is_file() \
                    else pd.DataFrame()
                return Imported(out_dir, run_id, run, summary, already=True)
            if not fresh:
                raise RunConflict(f"{out_dir} holds another import (run {existing or 'unknown'}); rerun with --fresh "
                                  f"to archive it and import these files")
        _fill(run, params, run_id)
        aside = out_dir.parent / f".{out_dir.name}.importing-{os.getpid()}"
        shutil.rmtree(aside, ignore_errors=True)
        aside.mkdir(parents=True)
        try:
            if run.records:
                RequestLog(aside / "requests.csv").append_many(run.records)
                rows = RequestLog(aside / "requests.csv").read()
                summary = analysis.summarize_requests(rows, max_error_rate=params.run.max_error_rate)
            else:
                summary = pd.DataFrame([_aggregate_row(run, suite)])
            write_csv_atomic(aside / "summary.csv", summary)
            write_atomic(aside / "manifest.json", to_json(_manifest(run, params, run_id, suite, str(path)), params))
            write_atomic(aside / "run.json", json.dumps({"run_id": run_id, "salt": "", "params_file": params.source,
                                                         "identity": params.identity_parts(), "imported_from": tool,
                                                         "created_unix": time.time()}, indent=2))
            if out_dir.exists():
                shutil.move(str(out_dir), str(out_dir.with_name(f"{out_dir.name}.archived-"
                                                                f"{time.strftime('%Y%m%d-%H%M%S')}")))
            os.replace(aside, out_dir)
        except BaseException:
            shutil.rmtree(aside, ignore_errors=True)
            raise
    return Imported(out_dir, run_id, run, summary)
