"""The report a person reads: it opens with the verdict (per regime who wins among our deployments and overall,
how sure, what would flip it, who is not eligible and why; per deployment its thresholds), every sentence linked to
the table or figure it rests on; report.html is one self-contained page, checked in a real headless Chromium; every
view names a deployment the same way (model · server · settings · host); the roofline takes bytes per token from
the GGUF's tensor table where the run served one."""

from __future__ import annotations

import argparse
import math
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from playwright.sync_api import sync_playwright

from benchlib import cli, paper
from benchlib.analysis import frontier
from benchlib.analysis.weights import read_gguf
from benchlib.config.identity import Deployment
from benchlib.config.params import load_params
from benchlib.config.paths import PROJECT_ROOT
from benchlib.paper import summary as summary_text
from benchlib.paper import systems
from benchlib.paper.report_html import GLANCE_END, OPEN_ROWS, report_html
from benchlib.views import explorer as explorer_view
from benchlib.views import run_summary
from benchlib.views.suite_report import console_table
from tests.fakes.synthetic_run import SYN_HOST, SYN_MODEL, SYN_SERVER, SYN_SYSTEM, write_synthetic_run
from tests.suites.test_ladder import tiny_gguf

FAST = SYN_SYSTEM  # every text answer right, full speed
SLOW = f"{SYN_MODEL} · {SYN_SERVER} · slow · {SYN_HOST}"  # the study's grid point "slow": half the speed
# how the summary and the first screen name them, the deployments table keying each to its full name once
FAST_LABEL, SLOW_LABEL = SYN_MODEL, f"{SYN_MODEL} · slow"
# Debian's chromium, installed by `make test` (Makefile: .venv/.chromium); Playwright drives it, no browser download
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> paper.Paper:
    """Two deployments of one model on one host: the base one (all 6 text answers right) and a grid point at half
    the speed (4 of the same 6 right): the slow one answers the same items, so quality is a paired verdict."""
    root = write_synthetic_run(tmp_path_factory.mktemp("outputs"), text_passed=True)
    write_synthetic_run(root, variant="slow", speed=0.5)
    return paper.assemble(outputs_dir=root, out_dir=tmp_path_factory.mktemp("paper-out"))


def _section(text: str, heading: str) -> str:
    """The Markdown from `heading` to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(heading + "\n")
    rest = text[start + len(heading) + 1:]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return heading + "\n" + (rest[:end.start()] if end else rest)


# ------------------------------------------------------------------------------------------------ the verdict first

def test_the_report_opens_with_the_verdict_and_every_sentence_links_to_what_it_rests_on(two):
    out = two.settings.out_dir
    report = (out / "report.md").read_text(encoding="utf-8")
    title = two.summary.title
    headings = re.findall(r"^## (.+)$", report, re.M)
    # before the long tables, not in section 6; our own deployments against each other first, then the runs
    assert headings[0] == title and headings[1:3] == ["On this host: our deployments against each other", "Runs"]
    summary = _section(report, f"## {title}")
    sentences = [line for line in summary.splitlines() if line.startswith("- ")]
    assert len(sentences) >= 12
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', report))
    for sentence in sentences:
        targets = re.findall(r"\]\(#([^)]+)\)", sentence)
        assert targets, f"links to nothing: {sentence}"
        assert set(targets) <= anchors, f"{sentence}: no such anchor {set(targets) - anchors}"
    # the stand-alone copies: summary.md links into report.md; summary.txt names files that exist
    assert "](report.md#table-frontier)" in (out / "summary.md").read_text(encoding="utf-8")
    text = (out / "summary.txt").read_text(encoding="utf-8")
    files = {f for line in text.splitlines() if "→" in line for f in line.split("→ ")[1].split(", ")}
    assert {"tables/frontier.md", "tables/decisions.md", "figures/roofline.png"} <= files
    assert all((out / f).is_file() for f in files), [f for f in files if not (out / f).is_file()]
    assert two.summary.text() == text


def test_the_summary_says_which_local_deployment_wins_how_sure_and_why_not(two):
    report = (two.settings.out_dir / "report.md").read_text(encoding="utf-8")
    work = _section(report, "### General multimodal workstation (avg_decode_tps ↑, modality_count ↑, video_support ↑, "
                            "accuracy_workstation ↑)")
    assert "On the frontier: **Gemma 4 E2B @ RTX 3090 host** [seed 000]" in work
    # among ours the fast one wins; the slow one is beaten on speed, and on quality the paired verdict is undecided
    # (8 of 8 against 6 of the same 8 items: the difference's interval includes 0), not two Wilson intervals
    assert f"Of ours, **{FAST_LABEL}** wins: avg_decode_tps ↑ 25.5" in work
    assert "accuracy_workstation ↑ 100% [68%–100%] (measured)" in work
    assert "overall dominated by Gemma 4 E2B @ RTX 3090 host" in work
    assert f"Of ours, beaten: **{SLOW_LABEL}** by {FAST_LABEL} (better on avg_decode_tps; neither better on" in work
    assert "accuracy_workstation (undecided, paired on the same items)" in work
    assert f"{FAST_LABEL} 100% vs {SLOW_LABEL} 75% on 8 items, difference +25 [" in work
    assert "undecided (the difference's interval includes 0)" in work
    assert "Would flip if tokens/s per watt were judged too (higher is better): Phi-4 Multimodal @ RTX 3090 host" \
        in work  # the change in words, not 'add tps_per_w ↑'
    flip = next(line for line in work.splitlines() if line.startswith("- Would flip if"))
    assert "tps_per_w" not in flip and "↑" not in flip
    assert "more single changes flip it" in work
    # no energy sensor: neither can be judged on the edge regime; the regimes table says so in a few words, where a
    # paragraph once did
    assert "### Energy- and thermal-constrained edge inference" not in report
    regimes = two.tables["regimes"].data.set_index("regime_key")
    assert regimes.loc["edge", "on its frontier"] == "Qwen3.5-4B @ GB10 DGX Spark [seed 000]"
    assert regimes.loc["edge", "ours"] == "not eligible (both): no tokens/s per watt or peak temperature measured"
    assert regimes.loc["workstation", "ours"].startswith(f"{FAST_LABEL}: dominated by Gemma 4 E2B @ RTX 3090 host")
    # where the quality floor is what excludes one, its interval stands beside the floor, said in words
    below = SimpleNamespace(system=SLOW, dominated_by="not eligible: no tps_per_w; accuracy_edge 67% < floor 80%")
    assert summary_text._reason(frontier.REGIMES["edge"], below, two.tables["_systems"].data) == \
        ("no tokens/s per watt measured; accuracy 67% [30%–90%] (measured) is below the 80% accuracy floor that the "
         "edge regime asks")
    assert regimes.loc["serving", "on its frontier"] == "none: no system is eligible"
    # per deployment: its thresholds PASS/FAIL, and where it sits under its roofline
    each = _section(report, "### Each of our deployments")
    assert f"**{SLOW_LABEL}**: WAIT (a threshold fails) under the heros_swap thresholds (its params set none) — tok/s " \
        "15.5 [" in each
    assert "(n 6) vs ≥40 tok/s: FAIL; memory 1.5 vs ≤25 GB: PASS" in each  # the whole interval below 40
    assert f"**{FAST_LABEL}** decodes 25.5 tok/s (its speed tasks' average); no bandwidth ceiling: bandwidth unknown" \
        in each


def test_without_runs_the_summary_says_so_and_judges_the_published(tmp_path):
    built = paper.assemble(outputs_dir=tmp_path / "none", out_dir=tmp_path / "out", figure_formats=["png"])
    text = built.summary.text()
    assert "No deployment of ours yet (`make run` measures one)" in text
    assert "Of ours" not in text and "Each of our deployments" not in text
    assert "On the frontier: Qwen3.5-4B @ GB10 DGX Spark [seed 000]" in text


def test_frontier_bench_paper_ends_with_the_summary_and_the_pages_it_wrote(two, tmp_path, monkeypatch, capsys):
    """What `frontier-bench paper` prints once the notebook has written the paper: the summary's title and verdict,
    then where the report is (run and study end on their own summary instead). The notebook runs in test_assembly."""
    out = tmp_path / "out"
    monkeypatch.setattr(cli, "PAPER_OUT_DIR", out)
    monkeypatch.setattr(cli, "execute_notebook", lambda *args, **kwargs: shutil.copytree(two.settings.out_dir, out))
    assert cli.cmd_paper(argparse.Namespace(quiet=True, roots=[str(tmp_path)])) == 0
    printed = capsys.readouterr().out
    assert printed.index("SUMMARY: WHICH DEPLOYMENT FOR WHAT, AND HOW SURE") < printed.index(two.summary.verdict) \
        < printed.index("✓ paper written")
    assert "•" not in printed  # the sentences behind the verdict are in the report and summary.txt
    assert f"report: {out / 'report.html'} (open it in a browser" in printed
    assert all(len(line) <= 120 for line in printed.splitlines())


# ------------------------------------------------------------------------------------------------ report.html

def browser_check(page_path: Path) -> tuple[list[str], dict]:
    """Open a page in headless Chromium with the network cut off: (problems, facts). A problem is any request
    but the page itself (answered with an error, so nothing leaves the machine), any console error or uncaught
    exception, any image that did not load (naturalWidth 0)."""
    assert Path(CHROMIUM).is_file(), f"{CHROMIUM} missing: `make test` installs Debian's chromium (.venv/.chromium)"
    problems: list[str] = []
    url = page_path.resolve().as_uri()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

        def route(request_route) -> None:
            if request_route.request.url == url:
                request_route.continue_()
            else:
                problems.append(f"request: {request_route.request.url[:100]}")
                request_route.abort()
        page.route("**/*", route)
        page.goto(url, wait_until="load")
        facts = page.evaluate("""() => ({
            images: Array.from(document.images).map(i => ({src: i.src.slice(0, 30), width: i.naturalWidth})),
            firstHeading: document.querySelector('h2') && document.querySelector('h2').textContent,
            summaryFramed: !!document.querySelector('section.summary h2'),
            summaryLinks: Array.from(document.querySelectorAll('section.summary a[href^="#"]'))
                               .map(a => a.getAttribute('href').slice(1)),
            scrollers: Array.from(document.querySelectorAll('.table-scroll'))
                            .map(d => ({scroll: d.scrollWidth, shown: d.clientWidth})),
            bare: document.querySelectorAll('table').length
                  - document.querySelectorAll('.table-scroll > table').length,
            pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth,
        })""")
        facts["missing_targets"] = [t for t in facts.get("summaryLinks", [])
                                    if not page.evaluate("id => !!document.getElementById(id)", t)]
        if facts["summaryLinks"]:  # a summary link jumps to what it rests on
            target = facts["summaryLinks"][-1]
            page.click(f'section.summary a[href="#{target}"]')
            facts["jumped"] = page.evaluate("id => document.getElementById(id).getBoundingClientRect().top", target)
        problems += [f"image not loaded: {i['src']}…" for i in facts["images"] if not i["width"]]
        browser.close()
    return problems, facts


def test_report_html_is_one_self_contained_page_in_a_real_browser(two):
    page = two.settings.out_dir / "report.html"
    problems, facts = browser_check(page)
    assert problems == []
    assert len(facts["images"]) == len(two.figures) >= 8 and all(i["src"].startswith("data:image/") for i in
                                                                  facts["images"])
    assert facts["firstHeading"] == two.summary.title and facts["summaryFramed"]
    assert len(facts["summaryLinks"]) >= 12 and facts["missing_targets"] == []
    assert abs(facts["jumped"]) < 5  # the roofline figure it links to is now at the top of the window
    # wide tables scroll inside their own box; the page itself never scrolls sideways
    assert facts["bare"] == 0 and any(s["scroll"] > s["shown"] for s in facts["scrollers"])
    assert facts["pageWidth"] <= facts["viewport"]


FOLD = 900  # the first screen of a 1400 × 900 window


def first_screen(page_path: Path, shot: Path) -> dict:
    """report.html in headless Chromium at 1400 × 900: the boxes of the verdict, the first screen's figure and its
    first table (the deployments'), and a screenshot of what the window shows."""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1400, "height": FOLD})
        page.goto(page_path.resolve().as_uri(), wait_until="load")
        found = {name: page.locator(selector).first for name, selector in
                 (("verdict", "p.verdict"), ("figure", ".glance img"), ("table", ".glance table"))}
        facts = {name: {**(item.bounding_box() or {}), "text": item.inner_text() if name != "figure" else "",
                        "loaded": item.evaluate("e => e.naturalWidth || 1")} for name, item in found.items()}
        page.screenshot(path=str(shot))
        browser.close()
    return facts


def test_the_first_screen_shows_the_verdict_the_figure_and_the_table(two, tmp_path):
    """A reader sees, without scrolling, the verdict in one sentence, the "On this host" figure at a readable size
    and one row per deployment with its figures and intervals."""
    facts = first_screen(two.settings.out_dir / "report.html", tmp_path / "first-screen.png")
    for name in ("verdict", "figure", "table"):
        box = facts[name]
        assert box.get("height", 0) > 0 and box["y"] + box["height"] <= FOLD, f"{name} below the fold: {box}"
    assert facts["verdict"]["text"] == two.summary.verdict
    assert facts["verdict"]["text"].startswith(f"On this host, {FAST_LABEL} dominates {SLOW_LABEL} (faster decode")
    assert facts["figure"]["loaded"] > 1 and facts["figure"]["height"] >= 150  # drawn, and big enough to read
    rows = facts["table"]["text"].splitlines()
    assert rows[0].split("\t")[:3] == ["deployment", "decode tok/s [95% CI]", "TTFT ms [95% CI]"]
    assert [row.split("\t")[0] for row in rows[1:]] == [FAST_LABEL, SLOW_LABEL]
    assert all("[" in cell for row in rows[1:] for cell in row.split("\t")[1:3])  # each figure with its interval
    assert (tmp_path / "first-screen.png").stat().st_size > 10_000


def test_a_long_table_is_folded_under_its_title_but_never_on_the_first_screen(tmp_path):
    def table(rows: int) -> str:
        return "| a | b |\n|---|---|\n" + "\n".join(f"| {i} | x |" for i in range(rows))
    markdown = (f'# Report\n\n<div class="glance">\n\n{table(20)}\n\n{GLANCE_END}\n\n## Section\n\n### Long\n\n'
                f"{table(20)}\n\n### Short\n\n{table(OPEN_ROWS)}\n")
    page = report_html(markdown, tmp_path)
    first, rest = page.split(GLANCE_END)
    assert "<details" not in first and first.count("<tr>") == 21  # the first screen's table stays open
    assert rest.count('<details class="long"><summary>20 rows</summary>') == 1
    assert rest.index("Long</h3>") < rest.index("<details") < rest.index("Short</h3>")  # its title above it
    assert rest.split("Short</h3>")[1].count("<details") == 0


def test_the_browser_check_catches_a_page_that_is_not_self_contained(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<!doctype html><html><head><meta charset="utf-8">'
                   '<link rel="stylesheet" href="https://cdn.example.com/style.css"></head><body>'
                   '<img src="figures/missing.png"><script>console.error("broken")</script></body></html>')
    problems, _ = browser_check(bad)
    assert any(p.startswith("request: https://cdn.example.com/") for p in problems)
    assert any(p.startswith("request: file://") and "missing.png" in p for p in problems)
    assert "console error: broken" in problems
    assert any(p.startswith("image not loaded") for p in problems)


# ------------------------------------------------------------------------------------------------ one name

def test_every_view_names_a_deployment_model_server_settings_host(two, tmp_path):
    root = Path(two.runs.roots[0])
    assert two.runs.systems == [FAST, SLOW]
    # the paper: frontier, decisions, roofline, the wide tables' columns, the frontier figure's point labels
    tables = two.tables
    assert {FAST, SLOW} <= set(tables["frontier"].data["system"])
    assert {FAST, SLOW} <= set(tables["decisions"].data["candidate"])
    assert {FAST, SLOW} <= set(tables["roofline"].data["label"])
    assert {f"{FAST} [this run]", f"{SLOW} [this run]"} <= set(tables["throughput"].data.columns)
    labels = {t for ax in two.figures["pareto_frontier"].axes for t in getattr(ax, "_paper_labels", ([],) * 3)[2]}
    assert f"{SLOW} [this run]" in labels
    # the explorer: its model dropdown shows each deployment's name; the request's header says it
    runs = explorer_view.list_runs(root)
    assert set(runs["deployment"]) == {FAST, SLOW} and set(runs["model"]) == {SYN_MODEL, f"{SYN_MODEL} [slow]"}
    explorer = explorer_view.Explorer(root, show_timeline=False)
    assert [shown for shown, _ in explorer.model.options] == [FAST, SLOW]
    explorer.select(model=SLOW, suite="text")
    assert explorer.describe().split("showing ")[1].startswith(f"{SLOW} · text")
    header = explorer_view.build(explorer_view.load_request(root, SYN_HOST, f"{SYN_MODEL} [slow]", "text"), show_timeline=False)
    assert header[0].data.startswith(f"### {SLOW} · text")
    # the terminal: the per-task table and the per-deployment lines at the end of run/study
    summaries = run_summary.read_summaries(sorted(root.glob("*/*/text")))
    assert set(summaries["model"]) == {FAST, SLOW} and SLOW in console_table(summaries)
    # the study's plan names a params file's deployment the same way the manifest's record of it is named
    params = load_params(PROJECT_ROOT / "params" / "embedded.yaml")
    assert Deployment.from_recorded(params.sections()) == Deployment.from_params(params)
    assert Deployment.from_params(params).name == f"{params.server.model} · llama-cpp-python · {params.host.name}"


# ------------------------------------------------------------------------------------------------ bytes per token

def test_the_roofline_takes_bytes_per_token_from_the_gguf_it_served(tmp_path, monkeypatch):
    monkeypatch.setenv("FRONTIER_BENCH_CACHE", str(tmp_path / "cache"))  # the tensor table is memoised there
    model = tiny_gguf(tmp_path / "tiny.gguf", tied=True)
    read = read_gguf(model).read_per_token_gb
    root = write_synthetic_run(tmp_path / "outputs", bandwidth=100.0, with_media=False, model_file=model)
    ref = paper.load_reference_sets(["paper_000"])
    tables = paper.build_tables(ref, paper.load_runs(root))
    roof = tables["roofline"].data.set_index("label").loc[SYN_SYSTEM]
    # not active params × bytes per param (0.5 B × 0.5 = 0.25 GB): what the file's tensor table says one token reads
    assert roof["bytes_per_token_gb"] == pytest.approx(read) and read < 0.001
    assert roof["ceiling_tps"] == pytest.approx(100.0 / read)
    assert roof["bytes_per_param_source"] == "GGUF tensor table (tiny.gguf)" and "GGUF tensor table" in roof["note"]
    shown = tables["roofline"].display.set_index("run").loc[SYN_SYSTEM]
    assert shown["bytes/param"] == "— (GB/token from the GGUF tensor table (tiny.gguf))"
    assert (tmp_path / "cache" / "weights.json").is_file()
    summary = paper.verdict_summary(tables, {}, paper.Settings.from_parameters(outputs_dir=str(root)))
    assert "GB/token from the GGUF tensor table (tiny.gguf)" in summary.text()
    # the model file is not on this machine (a run from another host): the declared figure, labelled as declared
    model.unlink()
    tables = paper.build_tables(ref, paper.load_runs(root))
    roof = tables["roofline"].data.set_index("label").loc[SYN_SYSTEM]
    assert roof["bytes_per_token_gb"] == pytest.approx(0.25)
    assert roof["bytes_per_param_source"] == "declared (server.bytes_per_param)"
    assert "GB/token = active params × bytes/param, declared (server.bytes_per_param)" in roof["note"]


def test_a_decode_rate_above_its_bandwidth_ceiling_says_the_bandwidth_figure_is_too_low():
    """A CPU's bandwidth measured while the machine was busy can sit below what the model then decodes at: the
    summary and the roofline's note say the ceiling is wrong, not that the run beat physics."""
    row = {"decode_tps": 23.1, "ceiling_tps": 15.6, "efficiency": 23.1 / 15.6, "memory_bandwidth_gbs": 3.85,
           "bytes_per_token_gb": 0.247, "bytes_per_param_source": "GGUF tensor table (m.gguf)", "note": ""}
    above = summary_text._roofline_sentence("m", pd.Series(row)).text
    assert "148% of its bandwidth ceiling" in above and "too low for this machine" in above
    within = summary_text._roofline_sentence("m", pd.Series({**row, "decode_tps": 12.0, "efficiency": 12.0 / 15.6})).text
    assert "77% of its bandwidth ceiling" in within and "too low" not in within
    point = SimpleNamespace(memory_bandwidth_gbs=3.85, active_params_b=0.27, bytes_per_param=math.nan,
                            bytes_per_param_source="GGUF tensor table (m.gguf)", efficiency=1.48)
    assert "too low for this machine" in systems._our_note(point, False, "measured under load")
    assert "too low" not in systems._our_note(SimpleNamespace(**{**vars(point), "efficiency": 0.9}), False, "measured")
