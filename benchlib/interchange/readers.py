"""Other tools' results as our requests.csv rows, one reader per tool behind one small interface.

A reader is a module of this folder with
    TOOL                 the name `--from` takes ("aiperf")
    FILES                what it reads, in words, for the help and the errors
    looks_like(path)     whether that tool wrote `path`, from the file's name or its opening (foreign.head)
    read(path)           the ForeignRun (benchlib.interchange.foreign): rows, the tool's own figures, what it lacks

READERS is the table every caller asks: the command line's choices and help, detection (`import-results` without
`--from` reads a file as the one tool that claims it), and reading. A new tool is one module and one entry here."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from benchlib.interchange import aiperf, guidellm, vllm_bench
from benchlib.interchange.foreign import ForeignError, ForeignRun, check_figures

READERS: dict[str, ModuleType] = {reader.TOOL: reader for reader in (aiperf, guidellm, vllm_bench)}
TOOLS = tuple(READERS)


def detect(path: str | Path) -> str:
    """The one tool whose reader claims `path` (ForeignError, one line, when none or several do)."""
    path = Path(path)
    if not path.exists():
        raise ForeignError(f"{path}: no such file or folder")
    claimed = [tool for tool, reader in READERS.items() if reader.looks_like(path)]
    if len(claimed) == 1:
        return claimed[0]
    known = "; ".join(f"{tool}: {reader.FILES}" for tool, reader in READERS.items())
    said = f"it looks like {' and '.join(claimed)}" if claimed else "no reader knows it"
    raise ForeignError(f"{path}: which tool wrote it? {said} (known — {known}); say it with --from TOOL")


def read(tool: str | None, path: str | Path) -> ForeignRun:
    """The ForeignRun of `tool`'s results at `path`; `tool` None: the tool detect() finds (ForeignError: one line
    naming the file and the record)."""
    if tool is not None and tool not in READERS:
        raise ForeignError(f"unknown tool {tool!r} (known: {', '.join(TOOLS)})")
    if not Path(path).exists():
        raise ForeignError(f"{path}: no such file or folder")
    run = READERS[tool or detect(path)].read(Path(path))
    check_figures(run)
    return run
