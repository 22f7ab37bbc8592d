"""Assembling the paper: build every table and figure, write them (CSV + Markdown, PNG + SVG) and the
report page to paper/out/; the entry points paper/assemble.ipynb and `frontier-bench paper` call."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import pandas as pd

from benchlib.published import reference
from benchlib.paper.figures import fig_energy, fig_latency, fig_load, fig_runs_vs_published, fig_throughput
from benchlib.paper.format import Table
from benchlib.paper.frontier_figure import fig_pareto
from benchlib.paper.ladder_figure import fig_ladder
from benchlib.paper.roofline_figure import fig_roofline
from benchlib.paper.runs import Runs, load_reference_sets, load_runs
from benchlib.paper.published_tables import fig_bandwidth_law, fig_power_thermal, seed_tables
from benchlib.paper.settings import FIGURES, LONG_TABLE, NO_RUNS, TABLES, Settings, _shown, seed_prefix
from benchlib.paper.systems import (
    all_systems,
    deployments_of,
    published_and_runs_long,
    roofline_points,
    task_catalog,
    task_metrics_long,
    with_deployment,
)
from benchlib.paper.tables import (
    capability_table,
    ladder_tables,
    latency_accuracy_table,
    load_tables,
    memory_power_table,
    platform_table,
    roofline_table,
    runs_table,
    seed_arithmetic_table,
    setup_table,
    throughput_table,
)
from benchlib.paper.verdicts import (
    decisions_table,
    frontier_systems_table,
    frontier_tables,
    frontier_text,
    sensitivity_table,
)


def build_tables(ref: pd.DataFrame, runs: Runs, settings: Settings | None = None) -> dict[str, Table]:
    """Every table of the paper, keyed by name (TABLES order), plus load sweeps when present."""
    settings = settings or Settings.from_parameters()
    catalog = task_catalog()
    systems = all_systems(ref, runs)
    long = task_metrics_long(ref, runs, catalog)
    frontier_table, dominance = frontier_tables(systems, settings.regime_objects(), ref)
    tables = {
        "runs": runs_table(runs),
        "setup": setup_table(ref, runs),
        "platform": platform_table(ref, runs),
        "throughput": throughput_table(long, systems, catalog),
        "latency_accuracy": latency_accuracy_table(long, systems, catalog, ref),
        "memory_power_thermal": memory_power_table(systems),
        "frontier": frontier_table,
        "frontier_dominance": dominance,
        "frontier_sensitivity": sensitivity_table(systems, settings.regime_objects(), ref, runs),
        "frontier_systems": frontier_systems_table(systems),
        "capability_context": capability_table(ref, runs, long),
        "roofline": roofline_table(roofline_points(ref, runs, systems)),
        "decisions": decisions_table(ref, runs, settings.thresholds),
        "seed_arithmetic": seed_arithmetic_table(ref),
        **seed_tables(ref),
    }
    tables.update(load_tables(runs))
    tables.update(ladder_tables(ref, runs))
    tables[LONG_TABLE] = Table(LONG_TABLE, "Published rows and ours, tidy", published_and_runs_long(ref, runs))
    deployments = deployments_of(systems)  # every table that names a deployment names its host and server beside it
    for name, table in tables.items():
        table.data = with_deployment(table.data, deployments)
        if table.display is not None:
            table.display = with_deployment(table.display, deployments)
    tables["_task_metrics"] = Table("_task_metrics", "per-task metrics (internal)", long)
    tables["_systems"] = Table("_systems", "systems (internal)", systems)
    return tables


def build_figures(tables: Mapping[str, Table], runs: Runs, settings: Settings | None = None) -> dict[str, plt.Figure]:
    settings = settings or Settings.from_parameters()
    figures = {
        "throughput_by_task": fig_throughput(tables, runs),
        "latency": fig_latency(tables, runs),
        "energy_efficiency": fig_energy(tables, runs),
        "pareto_frontier": fig_pareto(tables, runs, settings),
        "roofline": fig_roofline(tables, runs),
        "runs_vs_published": fig_runs_vs_published(tables, runs),
    }
    load = fig_load(runs)
    if load is not None:
        figures["load_sweeps"] = load
    figures["power_thermal"] = fig_power_thermal(tables, runs)
    law = fig_bandwidth_law(tables)
    if law is not None:
        figures["bandwidth_law"] = law
    ladder = fig_ladder(tables)
    if ladder is not None:
        figures["ladder"] = ladder
    return figures


FIGURE_CAPTIONS = {
    "throughput_by_task": "Decode tok/s per task and system; our runs hatched with ± sd whiskers.",
    "latency": "End-to-end latency per task (published and ours) and, for our runs, time to first token.",
    "energy_efficiency": "tok/s per watt and tokens per joule; runs without an energy sensor show the reason.",
    "pareto_frontier": "Regime presets: stars are on the regime's frontier (judged on all its axes), hollow "
                       "markers are dominated or not eligible (the note under each panel names the dominators or "
                       "the reason); labels sit on their own points, coinciding points share one; the dashed step "
                       "is the Pareto front of the two plotted axes.",
    "roofline": "Measured decode tok/s against the bandwidth ceiling (bandwidth ÷ GB read per token); 002 and 004 "
                "reference runs and ours. A run whose bandwidth is unknown is a horizontal line, not a point.",
    "runs_vs_published": "Headline numbers of our runs beside the paper's systems.",
    "load_sweeps": "Concurrency, context and rate sweeps of the load suite (rate: open-loop levels' output tok/s and "
                   "goodput under the run's SLOs against the offered rate).",
    "power_thermal": "Left: each published platform's idle, average and peak inference power beside its envelope "
                     "(the seed's cells, one run each). Right: our first run's telemetry — power where a sensor "
                     "reads it, else CPU utilisation — with its idle, loaded and task windows shaded.",
    "bandwidth_law": "002's generation speeds against each machine's bandwidth, per model, with the least-squares "
                     "line through the origin; the ringed point is the outlier (the M4, as 002 says).",
    "ladder": "The bandwidth law on this host's quantization ladder (make ladder) beside 004's published E4B ladder: "
              "each rung's decode tok/s against the GB it reads per token, the fitted law and the bandwidth ceiling; "
              "right, accuracy against file size where it is that precision's own.",
}


REPORT_SECTIONS = [
    ("Runs", ["runs"], []),
    ("1. Experimental setup (000 §2)", ["setup"], []),
    ("2. Hardware platforms (000 §3)", ["platform"], []),
    ("3. Generation throughput (000 §4)", ["throughput"], ["throughput_by_task"]),
    ("4. Latency and accuracy (000 §5)", ["latency_accuracy"], ["latency"]),
    ("5. Memory, power and thermal efficiency (000 §6)", ["memory_power_thermal"], ["energy_efficiency"]),
    ("6. Deployment frontier (000 §7)", ["frontier", "frontier_sensitivity", "frontier_dominance", "frontier_systems"],
     ["pareto_frontier"]),
    ("7. Video and context length (000 §9)", ["capability_context"], []),
    ("8. Bandwidth roofline (002, 004)", ["roofline"], ["roofline"]),
    ("9. Swap decisions (001)", ["decisions"], []),
    ("10. Our runs beside the published ones", [], ["runs_vs_published"]),
    ("11. Load sweeps", ["load_concurrency", "load_context", "load_rate"], ["load_sweeps"]),
    ("12. Quantization ladder: the bandwidth law on this host (002, 004)", ["ladder", "ladder_law"], ["ladder"]),
    ("13. The seeds' own arithmetic (000, 002, 004)", ["seed_arithmetic"], []),
    ("14. Power and thermal: published envelopes, our telemetry (000 §3, §6)", [], ["power_thermal"]),
    ("15. 002's bandwidth law, prefill and measurement artefacts", ["bandwidth_law", "prefill_ttft"],
     ["bandwidth_law"]),
    ("16. 004's napkin ceiling beside our bytes-per-token model", ["napkin_ceiling"], []),
    ("17. 001's decisions under their own thresholds", ["heros_thresholds"], []),
    ("18. Where the seeds disagree", ["contradictions"], []),
]


def _clean_dir(directory: Path, suffixes: Sequence[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.iterdir():
        if path.is_file() and path.suffix.lstrip(".") in suffixes:
            path.unlink()


def write_outputs(out_dir: str | Path, tables: Mapping[str, Table], figures: Mapping[str, plt.Figure],
                  runs: Runs, settings: Settings, frontier_summary: str = "") -> dict[str, list[Path]]:
    """tables/<name>.csv + .md, figures/<name>.<fmt>, report.md. Stale files in tables/ and figures/ go first."""
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
        if name != LONG_TABLE:
            md_path = table_dir / f"{name}.md"
            md_path.write_text(f"## {table.title}\n\n{table.markdown()}\n\n{table.caption}\n".rstrip() + "\n",
                               encoding="utf-8")
            written["tables"].append(md_path)
    for name, fig in figures.items():
        for ext in settings.figure_formats:
            path = figure_dir / f"{name}.{ext}"
            fig.savefig(path, dpi=settings.dpi, bbox_inches="tight", facecolor="white")
            written["figures"].append(path)
    if frontier_summary:
        path = table_dir / "frontier.txt"
        path.write_text(frontier_summary, encoding="utf-8")
        written["tables"].append(path)
    report = out / "report.md"
    report.write_text(report_markdown(tables, figures, runs, settings, frontier_summary), encoding="utf-8")
    written["report"].append(report)
    return written


def report_markdown(tables: Mapping[str, Table], figures: Mapping[str, Any], runs: Runs, settings: Settings,
                    frontier_summary: str = "") -> str:
    image_ext = "png" if "png" in settings.figure_formats else settings.figure_formats[0]
    sources = ", ".join(f"`paper/reference/{reference.REFERENCE_FILES[seed_prefix(s)]}`"
                        for s in settings.reference_sets)
    lines = ["# Frontier Bench — deployment frontier report", "",
             f"Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')} by `paper/assemble.ipynb` from "
             f"{sources} and the runs under `{_shown(runs.root)}`.", "",
             ("**This run: " + NO_RUNS + ".** Every table and figure below is regenerated from the published "
              "reference data alone; run `make run` to add a measured system." if runs.empty else
              f"**Runs:** {', '.join(runs.systems)} — shown as *this run* beside the published systems."), "",
             "Sources: *seed 000* = the paper (`000_341285de21da4f3a.txt`), *seed 001* = her-os report, "
             "*seed 002* = bandwidth blog, *seed 004* = quantization blog. CSV versions of every table sit beside "
             "the Markdown in `tables/`; `tables/published_and_runs_long.csv` holds every number in tidy form.", ""]
    for heading, table_names, figure_names in REPORT_SECTIONS:
        present_tables = [t for t in table_names if t in tables]
        present_figures = [f for f in figure_names if f in figures]
        if not present_tables and not present_figures:
            if heading.startswith("11."):
                lines += [f"## {heading}", "", "_No load sweeps in outputs/ yet._", ""]
            elif heading.startswith("12."):
                lines += [f"## {heading}", "", "_No quantization ladder in outputs/ yet: `make ladder` runs one._", ""]
            continue
        lines += [f"## {heading}", ""]
        for name in present_figures:
            lines += [f"![{name}](figures/{name}.{image_ext})", "",
                      f"*Figure: {FIGURE_CAPTIONS.get(name, name)}* "
                      f"([{'/'.join(settings.figure_formats).upper()}](figures/{name}.{image_ext}))", ""]
        for name in present_tables:
            table = tables[name]
            lines += [f"### {table.title}", "", table.markdown(), ""]
            if table.caption:
                lines += [f"_{table.caption}_", ""]
            lines += [f"[CSV](tables/{name}.csv)", ""]
            if name == "frontier" and frontier_summary:
                lines += ["```text", frontier_summary.rstrip(), "```", ""]
    return "\n".join(lines)


@dataclass
class Paper:
    settings: Settings
    reference: pd.DataFrame
    runs: Runs
    tables: dict[str, Table]
    figures: dict[str, plt.Figure]
    frontier_summary: str
    written: dict[str, list[Path]]


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
    summary = frontier_text(tables["frontier"], tables["frontier_sensitivity"])
    written = write_outputs(settings.out_dir, tables, figures, runs, settings, summary)
    if close_figures:
        for fig in figures.values():
            plt.close(fig)
    return Paper(settings, ref, runs, tables, figures, summary, written)


def show(table: Table) -> Any:
    """Markdown rendering of a table for the notebook (title, table, caption)."""
    from IPython.display import Markdown

    return Markdown(f"### {table.title}\n\n{table.markdown()}\n\n_{table.caption}_" if table.caption else
                    f"### {table.title}\n\n{table.markdown()}")


def expected_files(out_dir: str | Path, figure_formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """The files every assembly writes, runs or not (load sweeps only appear with load data)."""
    out = Path(out_dir)
    files = [out / "report.md", out / "tables" / f"{LONG_TABLE}.csv", out / "tables" / "frontier.txt"]
    for name in TABLES:
        files += [out / "tables" / f"{name}.csv", out / "tables" / f"{name}.md"]
    for name in FIGURES:
        files += [out / "figures" / f"{name}.{ext}" for ext in figure_formats]
    return files
