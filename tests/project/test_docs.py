"""The manual in docs/: MkDocs builds it in strict mode (a broken link, a missing anchor or a page left out of the nav
fails the build, as it would fail make test), and its columns page is the one the code's declarations write — every
column a real run writes is on it, with the meaning its declaration gives."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from benchlib.config.paths import PROJECT_ROOT
from benchlib.suites.load.suite import run_load
from benchlib.suites.runner import run_suite
from tests.fakes.servers import FakeServer
from tests.helpers import make_params
from tools import columns_doc


def build(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=root,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def manual(tmp_path: Path) -> Path:
    """A copy of mkdocs.yml and docs/ to break on purpose."""
    root = tmp_path / "manual"
    root.mkdir()
    shutil.copy(PROJECT_ROOT / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(PROJECT_ROOT / "docs", root / "docs")
    return root


def test_the_manual_builds_in_strict_mode(tmp_path):
    done = build(PROJECT_ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    pages = {p.name for p in (tmp_path / "site").glob("*.html")}
    assert {"index.html", "columns.html", "install.html", "servers.html"} <= pages


def test_a_page_left_out_of_the_nav_fails_the_build(manual, tmp_path):
    (manual / "docs" / "orphan.md").write_text("# Orphan\n\nNo page links here and the nav leaves it out.\n")
    done = build(manual, tmp_path / "site")
    assert done.returncode != 0
    assert "orphan.md" in done.stderr


@pytest.mark.parametrize("link", ["[the columns](colums.md)", "[a heading](install.md#no-such-heading)"])
def test_a_broken_link_fails_the_build(manual, tmp_path, link):
    page = manual / "docs" / "results.md"
    page.write_text(page.read_text() + f"\nSee {link}.\n")
    done = build(manual, tmp_path / "site")
    assert done.returncode != 0
    assert "results.md" in done.stderr


def test_the_columns_page_is_the_one_the_declarations_write():
    committed = (PROJECT_ROOT / "docs" / "columns.md").read_text(encoding="utf-8")
    assert committed == columns_doc.render(), "docs/columns.md is stale: run `python -m tools.columns_doc`"


def test_a_declared_column_without_a_comment_stops_the_page(tmp_path, monkeypatch):
    (tmp_path / "declared_here.py").write_text(textwrap.dedent('''
        COLUMNS = [
            # the two ends of the window
            "t_start",
            "t_end",
            "t_ns",  # when the sample was taken
            "nobody_said",
        ]
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(columns_doc, "FILES", (columns_doc.File("x.csv", "a file", ("declared_here:COLUMNS",)),))
    monkeypatch.setattr(columns_doc, "_MODULES", {})
    assert columns_doc.columns(columns_doc.FILES[0]) == [
        ("t_start", "the two ends of the window"), ("t_end", "the two ends of the window"),
        ("t_ns", "when the sample was taken"), ("nobody_said", "")]
    with pytest.raises(columns_doc.Undocumented, match="x.csv: nobody_said"):
        columns_doc.render()


def documented() -> dict[str, set[str]]:
    """File name → the columns the page lists for it (the page test above holds the page to this)."""
    return {name: {c for c, _ in cols} for file, cols in columns_doc.described_files()
            for name in re.split(r",\s*", file.name)}


def test_every_column_a_run_writes_is_on_the_columns_page(outputs):
    """The text and load suites against a fake vLLM (its /metrics too), telemetry on: every CSV they write, every
    column of it, is on the page."""
    server = FakeServer(metrics="vllm").start_thread()
    try:
        params = make_params(server.url, {"ttft": 0.002, "itl": 0.001, "tokens": 6, "prompt_tokens": "words"},
                             server={"software": "vllm"}, run={"repeats": 1, "calibrate_client": False},
                             tasks=["basic_qa"],
                             telemetry={"enabled": True, "idle_baseline_s": 0.2, "loaded_baseline_s": 0.2},
                             sweep={"concurrency": [1, 2], "requests_per_level": 2, "context_lengths": [64],
                                    "max_tokens": 8, "rate": {"rates": [20], "duration_s": 0.3, "min_requests": 3,
                                                              "max_concurrency": 2}})
        folders = [run_suite(params, "text", progress=False).out_dir, run_load(params, progress=False).out_dir]
    finally:
        server.stop()
    listed = documented()
    written = sorted(p for folder in folders for p in folder.glob("*.csv"))
    assert {p.name for p in written} >= {"requests.csv", "summary.csv", "windows.csv", "telemetry.csv",
                                         "telemetry_windows.csv", "server_metrics.csv", "sweep_concurrency.csv",
                                         "sweep_rate.csv"}
    missing = {p.name: sorted(set(pd.read_csv(p, nrows=0).columns) - listed.get(p.name, set())) for p in written}
    assert not {name: cols for name, cols in missing.items() if cols}, missing
