"""The paper layer: everything paper/assemble.ipynb does, from runs and reference data to paper/out/.

Modules, in import order (each imports only those before it):
    settings         notebook parameters, names of tables/figures/reference sets, the paper's task order
    runs             our runs under outputs/ and the published reference sets, read once
    systems          deployments as rows (published and ours), per-task metrics in long form, roofline points
    format           how a table is drawn: Table, cell formatting, Markdown
    tables           descriptive tables (setup, platform, throughput, latency, memory/power, capability, ...)
    verdicts         frontier and decision tables, the frontier text
    style, labels    figure palette and theme; non-overlapping point labels
    figures          bar and line figures; frontier_figure, roofline_figure: the two scatter figures
    report           build everything, write paper/out/ and report.md (assemble, Paper)

The paper layer sits on top: it may import the analysis layer (analysis, frontier, decisions, roofline,
reference, metrics) and the records layer below it; nothing below imports from here.
"""

from benchlib.paper.report import (
                                   FIGURE_CAPTIONS,
                                   Paper,
                                   assemble,
                                   build_figures,
                                   build_tables,
                                   expected_files,
                                   report_markdown,
                                   show,
                                   write_outputs,
)
from benchlib.paper.runs import Runs, load_reference_sets, load_runs, runs_text
from benchlib.paper.settings import FIGURES, NO_RUNS, TABLES, THIS_RUN, Settings, _shown
from benchlib.paper.verdicts import frontier_text

__all__ = ["FIGURES", "FIGURE_CAPTIONS", "NO_RUNS", "Paper", "Runs", "Settings", "TABLES", "THIS_RUN", "_shown",
           "assemble", "build_figures", "build_tables", "expected_files", "frontier_text", "load_reference_sets",
           "load_runs", "report_markdown", "runs_text", "show", "write_outputs"]
