"""The paper layer: everything paper/assemble.ipynb does, from runs and reference data to paper/out/.

Modules:
    settings         notebook parameters, names of tables/figures/reference sets, the paper's task order
    runs             our runs under outputs/ and the published reference sets, read once
    systems          deployments as rows (published and ours), per-task metrics in long form, roofline points
    format           how a table is drawn: Table, cell formatting, Markdown
    tables           descriptive tables (setup, platform, throughput, latency, memory/power, capability, ...)
    verdicts         frontier and decision tables, the frontier text
    published_tables the seeds' own tables rebuilt (benchlib.published) as paper tables
    style, labels    figure palette and theme; non-overlapping point labels
    figures          bar and line figures; frontier_figure, roofline_figure, ladder_figure: the scatter figures
    assembly         build everything, write paper/out/ and report.md (assemble, Paper)

May import: config, records, measure, scoring, analysis, published, suites, views.
"""

from benchlib.paper.assembly import (
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
