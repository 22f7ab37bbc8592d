"""report.html: report.md as one self-contained page — the summary first, every figure embedded (a base64 data
URI of the PNG, else of the SVG, written beside it), wide tables in their own horizontal scroll, a contents list of
the sections — that a browser shows without a network: no script, no stylesheet, font or image from elsewhere.

Markdown is rendered by mistune (CommonMark with GitHub tables); the anchors report.md carries (<a id=…>) stay, so
the summary's links jump to the table or figure they rest on."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import mistune

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; margin: 0;
       color: #1d1d1f; background: #fff; line-height: 1.45; }
main { max-width: 1180px; margin: 0 auto; padding: 1.5rem 1.25rem 4rem; }
h1 { font-size: 1.7rem; margin-bottom: .3rem; }
h2 { font-size: 1.35rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; margin-top: 2.2rem; }
h3 { font-size: 1.08rem; margin-top: 1.4rem; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .9em;
       background: #f4f4f6; padding: 0 .2em; border-radius: 3px; }
pre { background: #f4f4f6; padding: .7rem; overflow-x: auto; font-size: .82rem; }
pre code { background: none; padding: 0; }
img { max-width: 100%; height: auto; display: block; margin: .5rem 0; }
.table-scroll { overflow-x: auto; max-width: 100%; border: 1px solid #e3e3e6; margin: .5rem 0 .3rem; }
table { border-collapse: collapse; font-size: .8rem; }
th, td { border: 1px solid #e3e3e6; padding: .25rem .45rem; vertical-align: top; text-align: left;
         min-width: 4.5rem; max-width: 34rem; }
th { background: #f4f4f6; position: sticky; top: 0; }
tr:nth-child(even) td { background: #fafafb; }
.summary { background: #f6f9fc; border: 1px solid #d5e3f0; border-radius: 6px; padding: .2rem 1.2rem 1rem;
           margin: 1rem 0 1.5rem; }
.summary li { margin: .35rem 0; }
nav.contents { font-size: .9rem; columns: 2; margin: .5rem 0 1rem; }
nav.contents a { color: #0b5cad; }
a { color: #0b5cad; }
h1 + .verdict { margin-top: .2rem; }
.verdict { font-size: 1.2rem; font-weight: 600; line-height: 1.35; margin: .4rem 0 .6rem; padding: .5rem .9rem;
           background: #f6f9fc; border-left: 4px solid #0b5cad; }
.glance img { max-height: 300px; width: auto; margin: .2rem 0; }
.glance h3 { margin: .8rem 0 .3rem; }
.glance table { font-size: .85rem; }
.glance .table-scroll { margin: .2rem 0; }
small { color: #555; font-size: .78rem; }
details.long > summary { cursor: pointer; color: #0b5cad; font-size: .85rem; margin: .3rem 0; }
"""

_MARKDOWN = mistune.create_markdown(escape=False, plugins=["table"])


def _data_uri(path: Path) -> str | None:
    """The image at `path` as a data URI: the PNG itself, else the SVG written beside it; None when neither is."""
    for candidate, mime in ((path.with_suffix(".png"), "image/png"), (path.with_suffix(".svg"), "image/svg+xml")):
        if candidate.is_file():
            return f"data:{mime};base64," + base64.b64encode(candidate.read_bytes()).decode("ascii")
    return None


def _embed_images(body: str, out_dir: Path) -> str:
    """Every <img src="figures/…"> becomes its data URI; an image that is not on disk becomes a note, never a
    request."""
    def embed(match: re.Match) -> str:
        src, rest = match.group(1), match.group(2)
        uri = _data_uri(out_dir / html.unescape(src))
        if uri is None:
            return f"<em>(figure {html.escape(src)} was not written)</em>"
        return f'<img src="{uri}"{rest}>'
    return re.sub(r'<img src="([^"]+)"([^>]*)>', embed, body)


def _contents(body: str) -> tuple[str, str]:
    """(body, contents): each section heading (<h2>) given an id, and a list of links to them."""
    entries = []

    def number(match: re.Match) -> str:
        entries.append(match.group(1))
        return f'<h2 id="section-{len(entries)}">{match.group(1)}</h2>'
    body = re.sub(r"<h2>(.*?)</h2>", number, body)
    links = "".join(f'<li><a href="#section-{i}">{text}</a></li>' for i, text in enumerate(entries, 1))
    return body, f'<nav class="contents"><ol>{links}</ol></nav>' if entries else ""


GLANCE_END = "</div><!-- /glance -->"  # where the first screen (assembly._first_screen) ends
OPEN_ROWS = 12  # a table with more rows than this is folded under its title: the page reads in screens, not dozens


def _fold_long_tables(body: str) -> str:
    """Every table of more than OPEN_ROWS rows outside the first screen in a <details> its title stays above: one
    click opens it (its anchor, before the title, still takes a link there)."""
    def fold(match: re.Match) -> str:
        rows = match.group(0).count("<tr>") - 1  # the header row
        if rows <= OPEN_ROWS:
            return match.group(0)
        return f"<details class=\"long\"><summary>{rows} rows</summary>{match.group(0)}</details>"
    first, sep, rest = body.partition(GLANCE_END)
    if not sep:
        first, rest = "", body
    return first + sep + re.sub(r'<div class="table-scroll"><table>.*?</table></div>', fold, rest, flags=re.S)


def report_html(markdown_text: str, out_dir: str | Path, title: str = "Frontier Bench report",
                summary_heading: str = "") -> str:
    """The page for report.md's text; `out_dir` holds the figures/ it embeds. The section headed
    `summary_heading` (the summary) is framed, and the contents list follows it."""
    body = _embed_images(_MARKDOWN(markdown_text), Path(out_dir))
    body = body.replace("<table>", '<div class="table-scroll"><table>').replace("</table>", "</table></div>")
    body = _fold_long_tables(body)
    body, contents = _contents(body)
    if summary_heading:  # frame the summary (its h2 up to the next h2) and put the contents list after it
        start = re.search(r'<h2 id="section-\d+">' + re.escape(html.escape(summary_heading, quote=False)), body)
        if start:
            end = body.find("<h2 ", start.end())
            end = len(body) if end < 0 else end
            body = (body[:start.start()] + '<section class="summary">' + body[start.start():end] + "</section>"
                    + contents + body[end:])
            contents = ""
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n"
            f"<body><main>\n{contents}{body}\n</main></body></html>\n")
