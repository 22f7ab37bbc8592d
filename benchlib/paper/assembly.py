"""Assembling the paper: build every table and figure the catalog declares, write them (CSV + Markdown, PNG +
SVG), the summary (summary.md, summary.txt) and the report — report.md, opening with the summary, and the same as
one self-contained report.html — to paper/out/; the entry points paper/assemble.ipynb and `frontier-bench paper`
call."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.layout_engine import PlaceHolderLayoutEngine

from benchlib.paper.catalog import (
    FIGURES,
    GLANCE,
    LONG_TABLE,
    PAPER_FIGURES,
    PAPER_TABLES,
    SECTIONS,
    SUMMARY,
    TABLES,
    Inputs,
    Section,
)
from benchlib.paper.format import Table
from benchlib.paper.report_html import GLANCE_END, report_html
from benchlib.paper.runs import Runs, load_reference_sets, load_runs
from benchlib.paper.settings import NO_RUNS, Settings, seed_prefix, shown_path
from benchlib.paper.summary import Summary, anchor
from benchlib.paper.systems import deployments_of, with_deployment
from benchlib.paper.verdicts import frontier_text
from benchlib.published import reference

CSV_ONLY = {t.name for t in PAPER_TABLES if not t.markdown}


def build_tables(ref: pd.DataFrame, runs: Runs, settings: Settings | None = None) -> dict[str, Table]:
    """Every table of the catalog its data allows, keyed by name in catalog order, each naming the host and the
    server beside every deployment; plus the per-task metrics and the systems the figures read (_task_metrics,
    _systems: not written)."""
    inputs = Inputs(ref, runs, settings or Settings.from_parameters())
    tables = {}
    for entry in PAPER_TABLES:
        table = entry.build(inputs)
        if table is not None:
            tables[entry.name] = table
    deployments = deployments_of(inputs.systems)  # every table that names a deployment names its host and server
    for table in tables.values():
        table.data = with_deployment(table.data, deployments)
        if table.display is not None:
            table.display = with_deployment(table.display, deployments)
    tables["_task_metrics"] = Table("_task_metrics", "per-task metrics (internal)", inputs.long)
    tables["_systems"] = Table("_systems", "systems (internal)", inputs.systems)
    return tables


def build_figures(tables: Mapping[str, Table], runs: Runs, settings: Settings | None = None) -> dict[str, plt.Figure]:
    """Every figure of the catalog its data allows, keyed by name in catalog order."""
    settings = settings or Settings.from_parameters()
    figures = {}
    for entry in PAPER_FIGURES:
        fig = entry.build(tables, runs, settings)
        if fig is not None:
            figures[entry.name] = fig
    return figures


def _clean_dir(directory: Path, suffixes: Sequence[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.iterdir():
        if path.is_file() and path.suffix.lstrip(".") in suffixes:
            path.unlink()


def verdict_summary(tables: Mapping[str, Table], figures: Mapping[str, Any], settings: Settings) -> Summary:
    """The summary the report opens with (catalog.SUMMARY), from an assembly's tables and figures."""
    return SUMMARY.build(tables, figures, settings)


def write_outputs(out_dir: str | Path, tables: Mapping[str, Table], figures: Mapping[str, plt.Figure],
                  runs: Runs, settings: Settings, frontier_summary: str = "",
                  summary: Summary | None = None) -> dict[str, list[Path]]:
    """tables/<name>.csv + .md, figures/<name>.<fmt>, summary.md + .txt, report.md and report.html (the summary
    first in both). Stale files in tables/ and figures/ go first."""
    out = Path(out_dir)
    table_dir, figure_dir = out / "tables", out / "figures"
    _clean_dir(table_dir, ["csv", "md"])
    _clean_dir(figure_dir, ["png", "svg", "pdf"])
    written: dict[str, list[Path]] = {"tables": [], "figures": [], "report": []}
    for name, table in tables.items():
        if name.startswith("_"):
            continue
        csv_path = table_dir / f"{name}.csv"
        table.data.to_csv(csv_path, index=False)
        written["tables"].append(csv_path)
        if name not in CSV_ONLY:
            md_path = table_dir / f"{name}.md"
            md_path.write_text(f"## {table.title}\n\n{table.markdown()}\n\n{table.caption}\n".rstrip() + "\n",
                               encoding="utf-8")
            written["tables"].append(md_path)
    for name, fig in figures.items():
        paths = [figure_dir / f"{name}.{ext}" for ext in settings.figure_formats]
        save_figure(fig, paths, settings.dpi)
        written["figures"] += paths
    if frontier_summary:
        path = table_dir / "frontier.txt"
        path.write_text(frontier_summary, encoding="utf-8")
        written["tables"].append(path)
    summary = summary or verdict_summary(tables, figures, settings)
    markdown = report_markdown(tables, figures, runs, settings, frontier_summary, summary)
    for name, text in (("report.md", markdown), ("report.html", report_html(markdown, out, REPORT_TITLE, summary.title)),
                       (f"{SUMMARY.name}.md", summary.markdown(report="report.md")),
                       (f"{SUMMARY.name}.txt", summary.text(_image_ext(settings)))):
        (out / name).write_text(text, encoding="utf-8")
        written["report"].append(out / name)
    return written


def save_figure(fig: plt.Figure, paths: Sequence[Path], dpi: int) -> None:
    """One figure in every format, cropped to its tight bounding box (what bbox_inches="tight" gives), the box
    measured once at the raster resolution. savefig's "tight" lays the figure out and measures it again for every
    format, and lays it out even with a given box while the figure keeps a layout engine: tight_layout leaves a
    placeholder that does nothing, set aside here. get_tightbbox places what it measures (ticks, titles, legends,
    annotations) itself; a figure with a working engine (constrained layout) is left to savefig."""
    engine = fig.get_layout_engine()
    if engine is not None and not isinstance(engine, PlaceHolderLayoutEngine):
        for path in paths:
            fig.savefig(path, dpi=dpi, bbox_inches="tight", facecolor="white")
        return
    original_dpi = fig.dpi
    fig.set_dpi(dpi)
    try:
        bbox = fig.get_tightbbox().padded(plt.rcParams["savefig.pad_inches"])
    finally:
        fig.set_dpi(original_dpi)
    if engine is not None:
        with plt.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
            fig.set_layout_engine(None)  # (with either rc setting on, None would mean a working engine)
    try:
        for path in paths:
            fig.savefig(path, dpi=dpi, bbox_inches=bbox, facecolor="white")
    finally:
        if engine is not None:
            fig.set_layout_engine(engine)


REPORT_TITLE = "Frontier Bench — deployment frontier report"


def _image_ext(settings: Settings) -> str:
    return "png" if "png" in settings.figure_formats else settings.figure_formats[0]


def report_markdown(tables: Mapping[str, Table], figures: Mapping[str, Any], runs: Runs, settings: Settings,
                    frontier_summary: str = "", summary: Summary | None = None) -> str:
    """report.md: the summary first (which deployment for what, each sentence linked to the table or figure it
    rests on: every table and figure carries an anchor), then every section of the catalog."""
    image_ext = _image_ext(settings)
    sources = ", ".join(f"`paper/reference/{reference.REFERENCE_FILES[seed_prefix(s)]}`"
                        for s in settings.reference_sets)
    summary = summary or verdict_summary(tables, figures, settings)
    captions = {f.name: f.caption for f in PAPER_FIGURES}
    lines = [f"# {REPORT_TITLE}", ""] + _first_screen(tables, figures, summary, image_ext, captions) + \
        [summary.markdown(), "",
             f"Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')} by `paper/assemble.ipynb` from "
             f"{sources} and the runs under `{shown_path(runs.root)}`.", "",
             ("**This run: " + NO_RUNS + ".** Every table and figure below is regenerated from the published "
              "reference data alone; run `make run` to add a measured system." if runs.empty else
              f"**Runs:** {len(runs.systems)} deployment(s) of ours (the deployments table keys each short label to "
              "its full name) — shown as *this run* beside the published systems."), "",
             "Sources: *seed 000* = the paper (`000_341285de21da4f3a.txt`), *seed 001* = her-os report, "
             "*seed 002* = bandwidth blog, *seed 004* = quantization blog. CSV versions of every table sit beside "
             f"the Markdown in `tables/`; `tables/{LONG_TABLE}.csv` holds every number in tidy form.", ""]
    for section in SECTIONS[1:]:  # the first is the first screen's
        present_tables, present_figures = section.present(tables, figures)
        if not present_tables and not present_figures:
            if section.absent:
                lines += [f"## {section.heading}", "", section.absent, ""]
            continue
        lines += [f"## {section.heading}", ""]
        for name in present_figures:
            lines += [f'<a id="{anchor("figure", name)}"></a>', "", f"![{name}](figures/{name}.{image_ext})", "",
                      f"*Figure: {captions[name]}* "
                      f"([{'/'.join(settings.figure_formats).upper()}](figures/{name}.{image_ext}))", ""]
        for name in present_tables:
            table = tables[name]
            lines += [f'<a id="{anchor("table", name)}"></a>', "", f"### {table.title}", "", table.markdown(), ""]
            if table.caption:
                lines += [f"_{table.caption}_", ""]
            lines += [f"[CSV](tables/{name}.csv)", ""]
            if name == "frontier" and frontier_summary:
                lines += ["```text", frontier_summary.rstrip(), "```", ""]
    return "\n".join(lines)


def _first_screen(tables: Mapping[str, Table], figures: Mapping[str, Any], summary: Summary, image_ext: str,
                  captions: Mapping[str, str]) -> list[str]:
    """What a reader sees first (catalog.GLANCE): the verdict in one sentence, the "On this host" figure, our
    deployments' table and the regimes' table, each with the anchor the summary's links jump to."""
    present_tables, present_figures = GLANCE.present(tables, figures)
    lines = [f'<p class="verdict">{summary.verdict}</p>', ""] if summary.verdict else []
    lines += ['<div class="glance">', ""]
    for name in present_figures:
        lines += [f'<a id="{anchor("figure", name)}"></a>', "", f"![{name}](figures/{name}.{image_ext})", "",
                  f"<small>Figure: {captions[name]}</small>", ""]
    for name in present_tables:
        table = tables[name]
        lines += [f'<a id="{anchor("table", name)}"></a>', ""]
        if name != "deployments":  # the verdict and the figure above say what the first table is
            lines += [f"### {table.title}", ""]
        lines += [table.markdown(), "", f"<small>{table.caption} ([CSV](tables/{name}.csv))</small>", ""]
    return lines + [GLANCE_END, ""]


@dataclass
class Paper:
    settings: Settings
    reference: pd.DataFrame
    runs: Runs
    tables: dict[str, Table]
    figures: dict[str, plt.Figure]
    frontier_summary: str
    written: dict[str, list[Path]]
    summary: Summary | None = None  # the verdict the report opens with


def assemble(outputs_dir: str | Path = "", out_dir: str | Path = "", reference_sets: Sequence[str] | None = None,
             regimes: Sequence[str] | None = None, thresholds: str = "heros_swap",
             figure_formats: Sequence[str] | None = None, close_figures: bool = True,
             more_roots: Sequence[str] | None = None) -> Paper:
    """Load, build every table and figure, write them; what the notebook does cell by cell."""
    settings = Settings.from_parameters(str(outputs_dir or ""), reference_sets, str(out_dir or ""), regimes,
                                        thresholds, figure_formats, more_roots=more_roots)
    ref = load_reference_sets(settings.reference_sets)
    runs = load_runs(settings.roots)
    tables = build_tables(ref, runs, settings)
    figures = build_figures(tables, runs, settings)
    frontier = frontier_summary_text(tables)
    summary = verdict_summary(tables, figures, settings)
    written = write_outputs(settings.out_dir, tables, figures, runs, settings, frontier, summary)
    if close_figures:
        for fig in figures.values():
            plt.close(fig)
    return Paper(settings, ref, runs, tables, figures, frontier, written, summary)


def frontier_summary_text(tables: Mapping[str, Table]) -> str:
    """The frontier in words (verdicts.frontier_text) from the frontier tables of an assembly."""
    return frontier_text(tables["frontier"], tables["frontier_sensitivity"])


def show(table: Table) -> Any:
    """Markdown rendering of a table for the notebook (title, table, caption)."""
    from IPython.display import Markdown

    return Markdown(f"### {table.title}\n\n{table.markdown()}\n\n_{table.caption}_" if table.caption else
                    f"### {table.title}\n\n{table.markdown()}")


def section_view(section: Section, tables: Mapping[str, Table], figures: Mapping[str, plt.Figure]) -> list[Any]:
    """What the notebook displays for one section of the report: its heading, figures and tables in report.md's
    order; the section's note when none of them was built, else nothing."""
    from IPython.display import Markdown

    present_tables, present_figures = section.present(tables, figures)
    if not present_tables and not present_figures:
        return [Markdown(f"## {section.heading}\n\n{section.absent}")] if section.absent else []
    return [Markdown(f"## {section.heading}"), *(figures[f] for f in present_figures),
            *(show(tables[t]) for t in present_tables)]


def expected_files(out_dir: str | Path, figure_formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """The files every assembly writes, runs or not (load sweeps only appear with load data)."""
    out = Path(out_dir)
    files = [out / "report.md", out / "report.html", out / f"{SUMMARY.name}.md", out / f"{SUMMARY.name}.txt",
             out / "tables" / f"{LONG_TABLE}.csv", out / "tables" / "frontier.txt"]
    for name in TABLES:
        files += [out / "tables" / f"{name}.csv", out / "tables" / f"{name}.md"]
    for name in FIGURES:
        files += [out / "figures" / f"{name}.{ext}" for ext in figure_formats]
    return files
