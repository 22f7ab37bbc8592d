"""Another tool's results (benchlib.interchange.readers) written as one of our run folders, so the paper, the frontier,
`compare` and the explorer read them like ours.

The deployment is the params file's, marked: its server.variant gains `measured-by-<tool>`, so the folder is
outputs/<host>/<model>_measured-by-<tool>/<tool>/ and every view names it "… · measured-by-<tool> · host", beside
(never merged into) the same deployment measured by us. The folder holds requests.csv (the tool's requests as our
rows), summary.csv (benchlib.analysis.task_stats over them; an import of aggregates only gets one row of the tool's
own figures, its note saying what it cannot give), manifest.json (the params, the tool, its version, command line
and aggregates, the source files with their SHA-256) and run.json (the run id: a hash of the tool, the files and
the params, so importing the same files again changes nothing).

Files that name another model than the deployment is known by (`mismatch`) are refused in one line, unless the
caller files them anyway (`--model-mismatch-ok`), which the manifest keeps (measured_by.model_mismatch).

Nothing is half-written: the folder is built aside (.<tool>.importing-<pid>) and renamed into place; a folder that
holds another import is refused unless `fresh`, which archives it beside (<tool>.archived-<time>) first. An aside
folder an import killed before its end left behind (its process is gone) is removed by the next import there.

Memory: the tool's records are streamed into requests.csv BATCH at a time (benchlib.interchange.readers), and the
source files are hashed in chunks, so the import holds a batch of whole records, not the run; beside them it keeps,
column by column, only what the summary reads (every column but the texts and the tool's own fields: SUMMARY_SKIPS),
typed as read_requests types them — no read-back of the file. An import of more than MAX_RECORDS requests is
refused before it is written. Those columns are held to the one plausibility rule (benchlib.records.plausible): a
value no request can have (a TTFT of −5 s) is a malformed record, one line, and nothing is written."""

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

from benchlib.analysis import task_stats
from benchlib.config.params import BenchParams, code_version, load_params
from benchlib.interchange import readers
from benchlib.measure.provenance import git_commit, to_json
from benchlib.measure.servers import preflight
from benchlib.records import plausible, store
from benchlib.records.rows import COLUMNS, REQUEST_KINDS, RequestLog, write_atomic, write_csv_atomic
from benchlib.records.run_folder import (
    MANIFEST_JSON,
    REQUESTS_CSV,
    RUN_JSON,
    SUMMARY_CSV,
    RunConflict,
    RunFolder,
    archived_path,
    run_lock,
)
from benchlib.records.schema import coerce
from benchlib.records.secrets import redact

BATCH = 2_000  # rows held and written at a time (~2-3 MB of records)
MAX_RECORDS = 1_000_000  # requests one import may hold: the summary statistics are bounded for that many
HASH_CHUNK = 1 << 20
ASIDE = ".importing-"  # the aside folder's mark: .<tool>.importing-<pid>
# requests.csv columns the summary never reads, and the bulk of an imported row (answers, the tool's own fields)
SUMMARY_SKIPS = ("extra", "response_text", "reasoning_text", "prompt", "tool_calls", "check_detail", "answer_read",
                 "error_message")
SUMMARY_COLUMNS = [name for name in COLUMNS if name not in SUMMARY_SKIPS]


class ModelMismatch(readers.ForeignError):
    """The tool's files name a model the params' deployment does not serve."""


@dataclass
class Imported:
    out_dir: Path
    run_id: str
    run: readers.ForeignRun
    summary: pd.DataFrame
    already: bool = False  # the same files were imported into this folder before: nothing was written
    rows: int = 0  # request rows written (0: the tool's aggregates only, or nothing written)
    model_mismatch: bool = False  # filed under the params' model although the tool's files name another


def marked(params: BenchParams, tool: str) -> BenchParams:
    """The params with server.variant marking the tool that measured the deployment."""
    mark = f"measured-by-{tool}"
    variant = f"{params.server.variant}+{mark}" if params.server.variant else mark
    return params.model_copy(update={"server": params.server.model_copy(update={"variant": variant})})


def _feed(digest: Any, path: Path) -> Any:
    """The file's bytes into `digest`, a chunk at a time (the reader has already refused what is no regular file
    or above its cap)."""
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(HASH_CHUNK), b""):
            digest.update(chunk)
    return digest


def _run_id(tool: str, files: list[Path], params: BenchParams) -> str:
    digest = hashlib.sha256(tool.encode() + b"\0" + json.dumps(params.identity_parts(), sort_keys=True).encode())
    for path in sorted(files):
        digest.update(b"\0")
        _feed(digest, path)
    return f"{tool}-{digest.hexdigest()[:12]}"


def clear_stale(out_dir: Path) -> list[Path]:
    """Remove the aside folders an import into `out_dir` killed before its rename left behind. Called under the
    folder's lock (run_lock): an import that is still running holds that lock, so every aside found here is a
    dead one's. Returns what went."""
    gone = []
    for aside in out_dir.parent.glob(f".{out_dir.name}{ASIDE}*"):
        shutil.rmtree(aside, ignore_errors=True)
        gone.append(aside)
    return gone


def _names(text: str) -> set[str]:
    """A model's name as a tool may record it, case-insensitive: as given, and where it is a path, its file's name
    with and without .gguf (a tool records the id the server lists: a llama-cpp-python server's is its GGUF's
    path)."""
    text = text.strip().lower()
    base = text.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return {name for name in (text, base, base.removesuffix(".gguf")) if name}


def served_names(params: BenchParams, root: Path) -> tuple[set[str], str]:
    """Every name the params' deployment is known by (server.model, server.model_id, the served GGUF of
    server.embedded, the id the deployment's pre-flight found the server listing) and a short text of the id
    besides server.model, for a message ('' when there is none)."""
    server = params.server
    found = (preflight.read(params.suite_dir("x", root).parent) or {}).get("model_id")
    found = found if isinstance(found, str) else ""
    names: set[str] = set()
    for text in (server.model, server.model_id, server.embedded.model_path, server.embedded.model_package, found):
        names |= _names(text or "")
    shown = f"server.model_id {server.model_id!r}" if server.model_id else \
        f"its pre-flight found {found!r}" if found and found != server.model else ""
    return names, shown


def mismatch(run: readers.ForeignRun, params: BenchParams, root: Path, source: str) -> str:
    """One line saying the tool's files name a model the params' deployment is not known by; '' where they name
    the same one, or none."""
    names, shown = served_names(params, root)
    if not run.model or _names(run.model) & names:
        return ""
    model = params.server.model
    return (f"{Path(source).name}: {run.tool} measured {run.model!r}, {params.source} names {model!r}"
            f"{f' ({shown})' if shown else ''}; give the params of the deployment it measured, or "
            f"--model-mismatch-ok to file it under {model!r} anyway")


def _aggregate_row(run: readers.ForeignRun, suite: str) -> dict[str, Any]:
    """summary.csv's one row for an import of aggregates only: the tool's figures under our column names."""
    row: dict[str, Any] = {"suite": suite, "modality": "text", "task": suite,
                           **{c: float("nan") for c in task_stats.SUMMARY_COLUMNS},
                           **{c: 0 for c in task_stats.COUNT_COLUMNS}, "valid": True, "failures": "",
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


def _write_rows(run: readers.ForeignRun, params: BenchParams, run_id: str, path: Path) -> pd.DataFrame:
    """The tool's rows streamed into requests.csv, BATCH at a time, each with our identity columns (the deployment
    is the params file's); returned as the summary reads them (SUMMARY_COLUMNS, typed as read_requests types them).
    ForeignError past MAX_RECORDS."""
    log, batch, count = RequestLog(path), [], 0
    kept: dict[str, list[Any]] = {name: [] for name in SUMMARY_COLUMNS}

    def flush() -> None:
        log.append_many(batch)  # replaces text UTF-8 cannot encode first, as the rows read back would have it
        for record in batch:
            for name, values in kept.items():
                values.append(getattr(record, name))
        batch.clear()

    for record in run.rows():
        record.run_id, record.host, record.model = run_id, params.host.name, params.server.model
        record.server_kind, record.server_software = params.server.kind, params.server.software or params.server.kind
        record.variant = record.variant or ""
        batch.append(record)
        count += 1
        if count > MAX_RECORDS:
            raise readers.ForeignError(f"{run.files[0] if run.files else run.tool}: more than {MAX_RECORDS:,} "
                                       f"requests, above what one import holds; split the run")
        if len(batch) >= BATCH:
            flush()
    flush()
    return coerce(pd.DataFrame(kept), {name: REQUEST_KINDS[name] for name in SUMMARY_COLUMNS})


def _manifest(run: readers.ForeignRun, params: BenchParams, run_id: str, suite: str, source: str,
              model_mismatch: bool) -> dict[str, Any]:
    """The import's provenance; values under secret-like keys (an API key in the tool's recorded config) are ***.
    measured_by.model_mismatch: the tool named another model than the deployment's and it was filed anyway."""
    return redact({
        "run_id": run_id, "suite": suite, "params_file": params.source,
        "started_unix": run.started_unix, "finished_unix": run.finished_unix, "imported_unix": time.time(),
        "git_commit": git_commit(), "code_version": code_version(), "identity": params.identity_parts(),
        "params": params.sections(), "api_key_env": params.server.api_key_env,
        "measured_by": {"tool": run.tool, "version": run.version, "command": run.command, "model": run.model,
                        "model_mismatch": model_mismatch, "source": source,
                        "files": [{"path": str(p), "sha256": _feed(hashlib.sha256(), p).hexdigest()}
                                  for p in run.files]},
        "aggregates": run.aggregates, "cannot_give": run.cannot_give,
    })


def import_results(tool: str | None, path: str | Path, params_file: str | Path, fresh: bool = False,
                   root: Path | None = None, model_mismatch_ok: bool = False) -> Imported:
    """Read `tool`'s results at `path` (None: the tool readers.detect finds) and write them as the params file's
    deployment, measured by that tool (ForeignError, ParamsError, RunConflict: one line, nothing written). Files
    that name another model than the deployment's are ModelMismatch unless `model_mismatch_ok`, which files them
    anyway and says so in the manifest (measured_by.model_mismatch)."""
    base = load_params(params_file)
    tool = tool or readers.detect(path)
    run = readers.read(tool, path)
    params = marked(base, tool)
    suite = tool
    local = root if root is not None else store.results_root(params)[0]
    differs = mismatch(run, base, local, str(path))
    if differs and not model_mismatch_ok:
        raise ModelMismatch(differs)
    out_dir = params.suite_dir(suite, local)
    run_id = _run_id(tool, run.files, base)
    with run_lock(out_dir):
        clear_stale(out_dir)
        folder = RunFolder(out_dir)
        if folder.marker_path.is_file():
            existing = folder.run_id
            if existing == run_id and not fresh:
                summary = pd.read_csv(folder.summary_path) if folder.has_summary() else pd.DataFrame()
                return Imported(out_dir, run_id, run, summary, already=True, model_mismatch=bool(differs))
            if not fresh:
                raise RunConflict(f"{out_dir} holds another import (run {existing or 'unknown'}); rerun with --fresh "
                                  f"to archive it and import these files")
        aside = out_dir.parent / f".{out_dir.name}{ASIDE}{os.getpid()}"
        shutil.rmtree(aside, ignore_errors=True)
        aside.mkdir(parents=True)
        try:
            rows = _write_rows(run, params, run_id, aside / REQUESTS_CSV) if run.per_request else pd.DataFrame()
            count = len(rows)
            if count:
                plausible.check_rows(rows, str(path), readers.ForeignError)
                summary = task_stats.summarize_requests(rows, max_error_rate=params.run.max_error_rate)
            else:
                summary = pd.DataFrame([_aggregate_row(run, suite)])
            del rows
            write_csv_atomic(aside / SUMMARY_CSV, summary)
            manifest = _manifest(run, params, run_id, suite, str(path), bool(differs))
            write_atomic(aside / MANIFEST_JSON, to_json(manifest, params))
            write_atomic(aside / RUN_JSON, json.dumps({"run_id": run_id, "salt": "", "params_file": params.source,
                                                         "identity": params.identity_parts(), "imported_from": tool,
                                                         "created_unix": time.time()}, indent=2))
            if out_dir.exists():
                shutil.move(str(out_dir), str(archived_path(out_dir, time.strftime('%Y%m%d-%H%M%S'))))
            os.replace(aside, out_dir)
        except BaseException:
            shutil.rmtree(aside, ignore_errors=True)
            raise
    return Imported(out_dir, run_id, run, summary, rows=count, model_mismatch=bool(differs))
