"""docs/columns.md, written from the code that declares each file's columns, so the page cannot drift from the files.

Run `python -m tools.columns_doc` after changing a declaration; tests/project/test_docs.py fails while the committed
page differs from what this writes, or while a declared column has no comment.

Where a column's meaning comes from: its declaration's own comments.
- A dataclass field or a line of a column list: the comment at the end of its line describes what that line declares.
- A comment on a line of its own (inside the declaration) describes the lines right after it that carry no comment
  of their own, up to the first that does, a blank line, or the next comment on a line of its own.
- A column its declaration leaves without a comment takes the meaning another file's declaration gives it.
- A name inside a column list (`+ HEALTH_COLUMNS`) is followed to its own declaration, in this module or the one it
  is imported from; any other expression (a comprehension) is evaluated, and its columns take its comment.
"""

from __future__ import annotations

import ast
import collections
import importlib
import inspect
import io
import sys
import tokenize
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "columns.md"


@dataclass(frozen=True)
class File:
    name: str
    what: str
    sources: tuple[str, ...]  # "module:NAME", NAME a dataclass or a column list


FILES = (
    File("requests.csv", "one row per request, appended and fsynced as it finishes",
         ("benchlib.records.rows:RequestRecord",)),
    File("summary.csv", "one row per task: the request figures with their intervals, the flags, the task's "
         "telemetry window and the server's view of it",
         ("benchlib.analysis.task_stats:GROUP_KEYS", "benchlib.analysis.task_stats:SUMMARY_COLUMNS",
          "benchlib.analysis.crosscheck:COUNT_COLUMNS", "benchlib.analysis.task_stats:WINDOW_COLUMNS",
          "benchlib.analysis.task_stats:DERIVED_COLUMNS",
          "benchlib.analysis.task_stats:SERVER_SUMMARY_COLUMNS", "benchlib.analysis.load_levels:FRONTIER_COLUMNS",
          "benchlib.analysis.serving:SERVING_COLUMNS")),
    File("windows.csv, telemetry_windows.csv", "one row per telemetry window (idle, model loaded, a task, a load "
         "level); windows.csv adds the efficiency columns", ("benchlib.measure.telemetry.files:WINDOW_COLUMNS",
                                                              "benchlib.analysis.task_stats:EFFICIENCY_COLUMNS")),
    File("telemetry.csv", "the sampler's time series, one row per sample (per GPU where there are several)",
         ("benchlib.measure.telemetry.files:TELEMETRY_COLUMNS",)),
    File("server_metrics.csv, server_metrics_windows.csv", "the server's own /metrics per window; "
         "server_metrics.csv adds the client-side cross-checks",
         ("benchlib.measure.servers.prometheus:SERVER_METRICS_COLUMNS", "benchlib.analysis.crosscheck:SERVER_CHECK_COLUMNS")),
    File("sweep_concurrency.csv", "the load suite's concurrency levels, one row per level",
         ("benchlib.analysis.load_levels:CONCURRENCY_COLUMNS", "benchlib.analysis.load_levels:LEVEL_ENERGY_COLUMNS",
          "benchlib.analysis.load_levels:LEVEL_SERVER_COLUMNS", "benchlib.analysis.load_levels:STEADY_COLUMNS",
          "benchlib.analysis.attribution:LEVEL_ATTRIBUTION_COLUMNS")),
    File("sweep_context.csv", "the load suite's context-length levels, one row per level",
         ("benchlib.analysis.load_levels:CONTEXT_COLUMNS", "benchlib.analysis.load_levels:LEVEL_ENERGY_COLUMNS",
          "benchlib.analysis.load_levels:LEVEL_SERVER_COLUMNS",
          "benchlib.analysis.attribution:LEVEL_ATTRIBUTION_COLUMNS")),
    File("sweep_rate.csv", "the rate sweep's levels (sync, throughput, open-loop rates), one row per level",
         ("benchlib.analysis.serving:RATE_COLUMNS", "benchlib.analysis.load_levels:LEVEL_ENERGY_COLUMNS",
          "benchlib.analysis.load_levels:LEVEL_SERVER_COLUMNS", "benchlib.analysis.load_levels:STEADY_COLUMNS",
          "benchlib.analysis.attribution:LEVEL_ATTRIBUTION_COLUMNS")),
    File("sweep_workloads.csv", "the traffic-shaped workloads, one row per workload",
         ("benchlib.suites.load.workloads:WORKLOAD_COLUMNS",)),
    File("workload_turns.csv", "multi-turn TTFT per turn", ("benchlib.suites.load.workloads:TURN_COLUMNS",)),
    File("workload_replay.csv", "a trace replay, one row per trace line",
         ("benchlib.suites.load.workloads:REPLAY_COLUMNS",)),
    File("load_workers.csv", "a level sent from several Ray nodes: one row per level and worker",
         ("benchlib.suites.load.fleet_levels:WORKER_COLUMNS",)),
    File("transcription.csv", "the audio suite's transcriptions: one row per clip (scope clip), then one per task "
         "(scope corpus)", ("benchlib.analysis.transcription:SCOPE_COLUMNS",
                            "benchlib.analysis.transcription:CLIP_COLUMNS",
                            "benchlib.analysis.transcription:CORPUS_COLUMNS")),
    File("quality_plan.csv", "a sized quality plan, one row per look", ("benchlib.analysis.sequential:Look",)),
)


class Undocumented(Exception):
    """Declared columns without a comment."""


def _comments(source: str) -> tuple[dict[int, str], dict[int, str]]:
    """(line → comment ending a line of code, line → comment on a line of its own)."""
    trailing: dict[int, str] = {}
    alone: dict[int, str] = {}
    code_lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            line = tok.start[0]
            (trailing if line in code_lines else alone)[line] = text
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING):
            for line in range(tok.start[0], tok.end[0] + 1):
                code_lines.add(line)
    return trailing, alone


class Module:
    def __init__(self, name: str):
        self.name = name
        self.module = importlib.import_module(name)
        self.source = inspect.getsource(self.module)
        self.lines = self.source.splitlines()
        self.tree = ast.parse(self.source)
        self.trailing, self.alone = _comments(self.source)

    def definition(self, name: str) -> ast.AST | None:
        for node in self.tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return node
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) else []
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return node
        return None

    def imported_from(self, name: str) -> str | None:
        for node in self.tree.body:
            if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
                return node.module
        return None

    def described(self, first: int, last: int) -> dict[int, str]:
        """Line → its description, for the lines first..last of one declaration (the rules in the docstring)."""
        out: dict[int, str] = {}
        shared, reading = "", False
        for line in range(first, last + 1):
            if line in self.alone:  # a comment of several lines is one description
                shared = f"{shared} {self.alone[line]}" if reading else self.alone[line]
                reading = True
                continue
            reading = False
            if not self.lines[line - 1].strip():
                shared = ""
                continue
            out[line] = self.trailing.get(line, shared)
            if line in self.trailing:
                shared = ""
        return out


_MODULES: dict[str, Module] = {}


def module(name: str) -> Module:
    if name not in _MODULES:
        _MODULES[name] = Module(name)
    return _MODULES[name]


def declared(source: str) -> list[tuple[str, str]]:
    """[(column, description)] of one declaration "module:NAME", in order."""
    mod_name, name = source.split(":")
    mod = module(mod_name)
    node = mod.definition(name)
    if node is None:
        origin = mod.imported_from(name)
        if origin is None:
            raise LookupError(f"{source}: no such declaration")
        return declared(f"{origin}:{name}")
    value = getattr(mod.module, name)
    if isinstance(node, ast.ClassDef) and is_dataclass(value):
        notes = mod.described(node.body[0].lineno, node.end_lineno)
        by_field = {}
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                by_field[stmt.target.id] = next((notes[n] for n in range(stmt.lineno, stmt.end_lineno + 1)
                                                 if notes.get(n)), "")
        return [(f.name, by_field.get(f.name, "")) for f in fields(value)]
    expr = node.value
    notes = mod.described(node.lineno, node.end_lineno)
    return _elements(mod, expr, notes)


def _elements(mod: Module, expr: ast.AST, notes: dict[int, str]) -> list[tuple[str, str]]:
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _elements(mod, expr.left, notes) + _elements(mod, expr.right, notes)
    if isinstance(expr, (ast.List, ast.Tuple)):
        return [item for element in expr.elts for item in _elements(mod, element, notes)]
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [(expr.value, notes.get(expr.lineno, ""))]
    if isinstance(expr, ast.Name):
        return declared(f"{mod.name}:{expr.id}")
    # a comprehension or call: its columns, described by the comment on (or above) its first line
    names = eval(compile(ast.Expression(expr), mod.name, "eval"), vars(mod.module))  # noqa: S307 — our own code
    return [(str(n), notes.get(expr.lineno, "")) for n in names]


def columns(file: File) -> list[tuple[str, str]]:
    """Every column of one file, each once (the first declaration that names it wins)."""
    seen: dict[str, str] = {}
    for source in file.sources:
        for name, note in declared(source):
            seen.setdefault(name, note)
    return list(seen.items())


def _rows(cols: list[tuple[str, str]]) -> list[tuple[list[str], str]]:
    """Consecutive columns that share a description become one row."""
    rows: list[tuple[list[str], str]] = []
    for name, note in cols:
        if rows and rows[-1][1] == note:
            rows[-1][0].append(name)
        else:
            rows.append(([name], note))
    return rows


def _cell(names: list[str]) -> str:
    if len(names) > 12:
        return f"`{names[0]}` … `{names[-1]}` ({len(names)} columns)"
    return ", ".join(f"`{n}`" for n in names)


def _escape(note: str) -> str:
    """A description as a Markdown table cell: a pipe would end the cell."""
    return note.replace("|", "\\|")


def described_files() -> list[tuple[File, list[tuple[str, str]]]]:
    """Every file's columns; a column its own declaration leaves without a comment takes the meaning another
    declaration gives the same name (summary.csv's energy_j is the window's), so each meaning is written once."""
    listed = [(f, columns(f)) for f in FILES]
    alone: dict[str, str] = {}  # a meaning given to that one column
    shared: dict[str, str] = {}  # a meaning given to it with others ("prompt and cached tokens, summed")
    for _, cols in listed:
        uses = collections.Counter(note for _, note in cols)
        for name, note in cols:
            if note:
                (alone if uses[note] == 1 else shared).setdefault(name, note)
    known = {**shared, **alone}
    return [(f, [(name, note or known.get(name, "")) for name, note in cols]) for f, cols in listed]


def render() -> str:
    listed = described_files()
    missing = [f"{f.name}: {name}" for f, cols in listed for name, note in cols if not note]
    if missing:
        raise Undocumented("columns declared without a comment: " + "; ".join(missing))
    out = ["# Columns of every file", "",
           "<!-- Written by `python -m tools.columns_doc` from the comments in the code that declares each file's "
           "columns; edit those, not this page. -->", "",
           "Every CSV a run writes, with each column's meaning as the code that declares it says "
           "([What a run writes](results.md) lists the files). Empty cells are missing values: a figure that could "
           "not be measured is left empty, and a `*_reason` column beside it says why.", ""]
    for file, cols in listed:
        sources = ", ".join(f"`{s.split(':')[0].replace('.', '/')}.py` {s.split(':')[1]}" for s in file.sources)
        out += [f"## {file.name}", "", f"{file.what[0].upper()}{file.what[1:]}. Declared in {sources}.", "",
                "| column | meaning |", "|---|---|"]
        out += [f"| {_cell(names)} | {_escape(note)} |" for names, note in _rows(cols)]
        out.append("")
    return "\n".join(out)


def main() -> int:
    try:
        text = render()
    except Undocumented as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    PAGE.write_text(text, encoding="utf-8")
    print(f"written: {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
