"""The paper's tables, figures and report sections, each declared once: a table's name and the function that
builds it, a figure's name, builder and caption, and a section's heading with the tables and figures it shows;
and the summary the report opens with (SUMMARY: the verdict first, each sentence linked to what it rests on).
Assembly builds, writes and reports from these lists; paper/assemble.ipynb shows them section by section.

A table's title and caption are written by its builder, on the Table it returns (several depend on the data);
a builder returns None where the data it needs is absent (a seed not loaded, no load sweep, no ladder)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Mapping

import matplotlib.pyplot as plt
import pandas as pd

from benchlib.paper.audio_table import audio_transcription_table
from benchlib.paper.figures import fig_energy, fig_latency, fig_load, fig_runs_vs_published, fig_throughput
from benchlib.paper.first_screen import deployments_table, regimes_table
from benchlib.paper.format import Table
from benchlib.paper.frontier_figure import fig_pareto
from benchlib.paper.ladder_figure import fig_ladder
from benchlib.paper.on_this_host import fig_on_this_host, host_table, latency_plan_table, quality_plan_table
from benchlib.paper.predicted import fig_predicted, predicted_table
from benchlib.paper.published_figures import fig_bandwidth_law, fig_power_thermal
from benchlib.paper.published_tables import (
    bandwidth_law_table,
    contradictions_table,
    heros_thresholds_table,
    napkin_ceiling_table,
    prefill_ttft_table,
)
from benchlib.paper.quality_tables import graded_table, paired_table
from benchlib.paper.roofline_figure import fig_roofline
from benchlib.paper.runs import Runs
from benchlib.paper.settings import Settings
from benchlib.paper.summary import Summary, verdict_summary
from benchlib.paper.systems import (
    all_systems,
    published_and_runs_long,
    roofline_points,
    task_catalog,
    task_metrics_long,
)
from benchlib.paper.tables import (
    capability_table,
    ladder_law_table,
    ladder_points_and_laws,
    ladder_table,
    latency_accuracy_table,
    load_table,
    memory_power_table,
    platform_table,
    roofline_table,
    runs_table,
    seed_arithmetic_table,
    setup_table,
    throughput_table,
)
from benchlib.paper.verdicts import decisions_table, frontier_systems_table, frontier_tables, sensitivity_table


@dataclass
class Inputs:
    """What the table builders read: the reference rows, our runs and the settings, and what is derived from
    them once per assembly (systems, per-task metrics, the frontier pair, the ladder)."""

    ref: pd.DataFrame
    runs: Runs
    settings: Settings

    @cached_property
    def catalog(self) -> pd.DataFrame:
        return task_catalog()

    @cached_property
    def systems(self) -> pd.DataFrame:
        return all_systems(self.ref, self.runs)

    @cached_property
    def long(self) -> pd.DataFrame:
        return task_metrics_long(self.ref, self.runs, self.catalog)

    @cached_property
    def frontier(self) -> tuple[Table, Table]:
        return frontier_tables(self.systems, self.settings.regime_objects(), self.ref)

    @cached_property
    def decisions(self) -> Table:
        return decisions_table(self.ref, self.runs, self.settings.thresholds)

    @cached_property
    def ladder(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        return ladder_points_and_laws(self.ref, self.runs)


@dataclass(frozen=True)
class PaperTable:
    name: str
    build: Callable[[Inputs], Table | None]
    optional: bool = False  # only with data a plain run does not write (load sweeps, a ladder)
    markdown: bool = True  # False: written as CSV only


@dataclass(frozen=True)
class PaperFigure:
    name: str
    build: Callable[[Mapping[str, Table], Runs, Settings], plt.Figure | None]
    caption: str
    optional: bool = False  # only with data a plain run does not write (load sweeps, a ladder)


@dataclass(frozen=True)
class Section:
    heading: str
    tables: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()
    absent: str = ""  # what the report says when none of them was built; without it the section is left out

    def present(self, tables: Mapping[str, object], figures: Mapping[str, object]) -> tuple[list[str], list[str]]:
        """(tables, figures) of this section that were built, in the section's order."""
        return [t for t in self.tables if t in tables], [f for f in self.figures if f in figures]


LONG_TABLE = "published_and_runs_long"  # every published row plus ours, tidy, with a source column

PAPER_TABLES: tuple[PaperTable, ...] = (
    PaperTable("deployments", lambda i: deployments_table(i.runs, i.decisions), optional=True),
    PaperTable("regimes", lambda i: regimes_table(i.frontier[0], i.settings.regime_objects(), i.runs.labels)),
    PaperTable("on_this_host", lambda i: host_table(i.runs, i.systems), optional=True),
    PaperTable("quality_plan", lambda i: quality_plan_table(i.runs), optional=True),
    PaperTable("latency_plan", lambda i: latency_plan_table(i.runs), optional=True),
    PaperTable("runs", lambda i: runs_table(i.runs)),
    PaperTable("setup", lambda i: setup_table(i.ref, i.runs)),
    PaperTable("platform", lambda i: platform_table(i.ref, i.runs)),
    PaperTable("throughput", lambda i: throughput_table(i.long, i.systems, i.catalog)),
    PaperTable("latency_accuracy", lambda i: latency_accuracy_table(i.long, i.systems, i.catalog, i.ref)),
    PaperTable("graded_sets", lambda i: graded_table(i.runs), optional=True),
    PaperTable("graded_paired", lambda i: paired_table(i.runs), optional=True),
    PaperTable("memory_power_thermal", lambda i: memory_power_table(i.systems)),
    PaperTable("frontier", lambda i: i.frontier[0]),
    PaperTable("frontier_sensitivity",
               lambda i: sensitivity_table(i.systems, i.settings.regime_objects(), i.ref, i.runs)),
    PaperTable("frontier_dominance", lambda i: i.frontier[1]),
    PaperTable("frontier_systems", lambda i: frontier_systems_table(i.systems)),
    PaperTable("capability_context", lambda i: capability_table(i.ref, i.runs, i.long)),
    PaperTable("audio_transcription", lambda i: audio_transcription_table(i.ref, i.runs)),
    PaperTable("roofline", lambda i: roofline_table(roofline_points(i.ref, i.runs, i.systems))),
    PaperTable("decisions", lambda i: i.decisions),
    PaperTable("seed_arithmetic", lambda i: seed_arithmetic_table(i.ref)),
    PaperTable("bandwidth_law", lambda i: bandwidth_law_table(i.ref)),
    PaperTable("prefill_ttft", lambda i: prefill_ttft_table(i.ref)),
    PaperTable("napkin_ceiling", lambda i: napkin_ceiling_table(i.ref)),
    PaperTable("heros_thresholds", lambda i: heros_thresholds_table(i.ref)),
    PaperTable("contradictions", lambda i: contradictions_table()),
    PaperTable("load_concurrency", lambda i: load_table(i.runs, "concurrency"), optional=True),
    PaperTable("load_context", lambda i: load_table(i.runs, "context"), optional=True),
    PaperTable("load_rate", lambda i: load_table(i.runs, "rate"), optional=True),
    PaperTable("ladder", lambda i: ladder_table(i.ladder[0]), optional=True),
    PaperTable("ladder_law", lambda i: ladder_law_table(*i.ladder, i.runs), optional=True),
    PaperTable("predicted_vs_measured", lambda i: predicted_table(i.runs, i.ref), optional=True),
    PaperTable(LONG_TABLE, lambda i: Table(LONG_TABLE, "Published rows and ours, tidy",
                                           published_and_runs_long(i.ref, i.runs)), markdown=False),
)

PAPER_FIGURES: tuple[PaperFigure, ...] = (
    PaperFigure("on_this_host", lambda t, r, s: fig_on_this_host(t, r),
                "Our deployments on this host, axis by axis, each with its 95 % interval (speed and TTFT as the "
                "table below gives them; answers: accuracy on the graded items both answered, Wilson interval); the "
                "verdicts, prompt by prompt and item by item, are in the On this host table.",
                optional=True),
    PaperFigure("throughput_by_task", lambda t, r, s: fig_throughput(t, r),
                "Decode tok/s per task and system; our runs hatched with ± sd whiskers."),
    PaperFigure("latency", lambda t, r, s: fig_latency(t, r),
                "End-to-end latency per task (published and ours) and, for our runs, time to first token."),
    PaperFigure("energy_efficiency", lambda t, r, s: fig_energy(t, r),
                "tok/s per watt and tokens per joule, one row of panels per energy boundary (GPU board, CPU "
                "package, …): joules of different boundaries are never put on one axis; runs without an energy "
                "sensor show the reason."),
    PaperFigure("pareto_frontier", fig_pareto,
                "Regime presets: stars are on the regime's frontier (judged on all its axes), hollow markers are "
                "dominated or not eligible (the note under each panel names the dominators or the reason); labels "
                "sit on their own points, coinciding points share one; the dashed step is the Pareto front of the "
                "two plotted axes."),
    PaperFigure("roofline", lambda t, r, s: fig_roofline(t, r),
                "Measured decode tok/s against the bandwidth ceiling (bandwidth ÷ GB read per token); 002 and 004 "
                "reference runs and ours. A run whose bandwidth is unknown is a horizontal line, not a point."),
    PaperFigure("runs_vs_published", lambda t, r, s: fig_runs_vs_published(t, r),
                "Headline numbers of our runs beside the paper's systems."),
    PaperFigure("load_sweeps", lambda t, r, s: fig_load(r),
                "Concurrency, context and rate sweeps of the load suite (rate: open-loop levels' output tok/s and "
                "goodput under the run's SLOs against the offered rate).", optional=True),
    PaperFigure("power_thermal", lambda t, r, s: fig_power_thermal(t, r),
                "Left: each published platform's idle, average and peak inference power beside its envelope (the "
                "seed's cells, one run each). Right: our first run's telemetry — power where a sensor reads it, "
                "else CPU utilisation — with its idle, loaded and task windows shaded."),
    PaperFigure("bandwidth_law", lambda t, r, s: fig_bandwidth_law(t),
                "002's generation speeds against each machine's bandwidth, per model, with the least-squares line "
                "through the origin; the ringed point is the outlier (the M4, as 002 says)."),
    PaperFigure("ladder", lambda t, r, s: fig_ladder(t),
                "The bandwidth law on this host's quantization ladder (make ladder) beside 004's published E4B "
                "ladder: each rung's decode tok/s against the GB it reads per token, the fitted law and the "
                "bandwidth ceiling; right, accuracy against file size where it is that precision's own.",
                optional=True),
    PaperFigure("predicted_vs_measured", lambda t, r, s: fig_predicted(t),
                "Decode tok/s predicted by `frontier-bench plan` before measuring (own runs left out of the "
                "calibration) against measured, with both intervals; the band is ±15 %.", optional=True),
)

# The report's first screen, after the verdict sentence (assembly.report_markdown): the figure, then the tables
GLANCE = Section("At a glance", ("deployments", "regimes"), ("on_this_host",))

SECTIONS: tuple[Section, ...] = (
    GLANCE,
    Section("On this host: our deployments against each other", ("on_this_host", "quality_plan", "latency_plan")),
    Section("Runs", ("runs",)),
    Section("1. Experimental setup (000 §2)", ("setup",)),
    Section("2. Hardware platforms (000 §3)", ("platform",)),
    Section("3. Generation throughput (000 §4)", ("throughput",), ("throughput_by_task",)),
    Section("4. Latency and accuracy (000 §5)",
            ("latency_accuracy", "audio_transcription", "graded_sets", "graded_paired"), ("latency",)),
    Section("5. Memory, power and thermal efficiency (000 §6)", ("memory_power_thermal",), ("energy_efficiency",)),
    Section("6. Deployment frontier (000 §7)",
            ("frontier", "frontier_sensitivity", "frontier_dominance", "frontier_systems"), ("pareto_frontier",)),
    Section("7. Video and context length (000 §9)", ("capability_context",)),
    Section("8. Bandwidth roofline (002, 004)", ("roofline",), ("roofline",)),
    Section("9. Swap decisions (001)", ("decisions",)),
    Section("10. Our runs beside the published ones", (), ("runs_vs_published",)),
    Section("11. Load sweeps", ("load_concurrency", "load_context", "load_rate"), ("load_sweeps",),
            absent="_No load sweeps in outputs/ yet._"),
    Section("12. Quantization ladder: the bandwidth law on this host (002, 004)", ("ladder", "ladder_law"),
            ("ladder",), absent="_No quantization ladder in outputs/ yet: `make ladder` runs one._"),
    Section("13. The seeds' own arithmetic (000, 002, 004)", ("seed_arithmetic",)),
    Section("14. Power and thermal: published envelopes, our telemetry (000 §3, §6)", (), ("power_thermal",)),
    Section("15. 002's bandwidth law, prefill and measurement artefacts", ("bandwidth_law", "prefill_ttft"),
            ("bandwidth_law",)),
    Section("16. 004's napkin ceiling beside our bytes-per-token model", ("napkin_ceiling",)),
    Section("17. 001's decisions under their own thresholds", ("heros_thresholds",)),
    Section("18. Where the seeds disagree", ("contradictions",)),
    Section("19. Predicted vs measured: `frontier-bench plan` (docs/plan.md)", ("predicted_vs_measured",),
            ("predicted_vs_measured",), absent="_No plan in outputs/ yet: `frontier-bench plan` makes one._"),
)

@dataclass(frozen=True)
class PaperSummary:
    """The report's opening: built from the assembled tables (those built, and the figures drawn, are what its
    sentences may link to), written before every section and on its own (summary.md, summary.txt)."""

    name: str
    build: Callable[[Mapping[str, Table], Mapping[str, object], Settings], Summary]


def link_labels(tables: Mapping[str, object], figures: Mapping[str, object]) -> dict[tuple[str, str], str]:
    """(kind, name) -> what a link to it says, for the tables and figures an assembly built."""
    labels = {("table", t.name): f"{t.name.replace('_', ' ')} table" for t in PAPER_TABLES if t.name in tables}
    labels.update({("figure", f.name): f"{f.name.replace('_', ' ')} figure" for f in PAPER_FIGURES
                   if f.name in figures})
    return labels


SUMMARY = PaperSummary("summary", lambda tables, figures, settings: verdict_summary(
    tables, settings.regime_objects(), link_labels(tables, figures)))

# What every assembly writes, runs or not (with the default reference sets)
TABLES = [t.name for t in PAPER_TABLES if not t.optional and t.markdown]
FIGURES = [f.name for f in PAPER_FIGURES if not f.optional]
