"""The paper layer: everything paper/assemble.ipynb does, from runs and reference data to paper/out/.

Modules:
    settings           notebook parameters, names of reference sets and regimes, axis labels, the paper's task order
    runs               our runs under outputs/ and the published reference sets, read once
    systems            deployments as rows (published and ours), per-task metrics in long form, roofline points
    format             how a table is drawn: Table and its Markdown (numbers: benchlib.config.formatting)
    tables             descriptive tables (setup, platform, throughput, latency, memory/power, capability, ...)
    verdicts           frontier and decision tables, the frontier text
    summary            the report's opening: which deployment for what and how sure, each sentence linked to its source
    report_html        report.md as one self-contained report.html (figures embedded, nothing fetched)
    published_tables   the seeds' own tables rebuilt (benchlib.published) as paper tables
    style, labels      figure palette and theme; non-overlapping point labels
    figures            bar and line figures; frontier_figure, roofline_figure, ladder_figure: the scatter figures
    published_figures  the figures of the seeds' own tables: 002's bandwidth law, power and thermal
    catalog            every table and figure declared once (name, builder, caption) and the report's sections
    assembly           build everything, write paper/out/: report.md, report.html, summary.md/.txt (assemble, Paper)

May import: config, records, measure, scoring, analysis, published, suites, views.
"""

from benchlib.paper.assembly import (
                                   Paper,
                                   assemble,
                                   build_figures,
                                   build_tables,
                                   expected_files,
                                   frontier_summary_text,
                                   report_markdown,
                                   section_view,
                                   show,
                                   verdict_summary,
                                   write_outputs,
)
from benchlib.paper.catalog import FIGURES, LONG_TABLE, PAPER_FIGURES, PAPER_TABLES, SECTIONS, TABLES
from benchlib.paper.runs import Runs, load_reference_sets, load_runs, runs_text
from benchlib.paper.settings import NO_RUNS, THIS_RUN, Settings, shown_path
from benchlib.paper.verdicts import frontier_text

__all__ = ["FIGURES", "LONG_TABLE", "NO_RUNS", "PAPER_FIGURES", "PAPER_TABLES", "Paper", "Runs", "SECTIONS",
           "Settings", "TABLES", "THIS_RUN", "assemble", "build_figures", "build_tables", "expected_files",
           "frontier_summary_text", "frontier_text", "load_reference_sets", "load_runs", "report_markdown",
           "runs_text", "section_view", "show", "shown_path", "verdict_summary", "write_outputs"]
