"""Request explorer: pick host → model → suite → task → request and see what was sent and what came back.
Each deployment is named as every view names it (config.identity.Deployment.name: model · server · settings · host).

Pure functions (list_runs, list_requests, load_request, request_metrics, request_verdict) hold the logic;
build() turns one request into display objects (prompt, media, the answer beside the expected one and the checker's
reasoning, metrics, the telemetry timeline from benchlib.views.timeline), render() displays them, and Explorer wires
them to ipywidgets dropdowns for notebooks/explore.ipynb: every section it shows (the request, the items the
deployment got wrong in the suite: benchlib.views.evidence.wrong_html) follows the dropdowns. The default request
of a task is its first scored (measured) one, not a warm-up.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import ipywidgets as widgets
import matplotlib.pyplot as plt
import mistune
import numpy as np
import pandas as pd
from IPython.display import HTML, Audio, Image, Markdown, display

from benchlib.config import metrics
from benchlib.config.identity import Deployment
from benchlib.config.params import NOTEBOOK_ORDER
from benchlib.config.paths import outputs_root
from benchlib.records.rows import STATUS_OK
from benchlib.records.run_folder import RunFolder, suite_folders
from benchlib.records.schema import flag, number
from benchlib.views import evidence
from benchlib.views.evidence import Media, request_media, video_frames
from benchlib.views.timeline import telemetry_figure

RUN_COLUMNS = ["host", "model", "deployment", "suite", "path", "n_requests", "modalities"]
FLAG_COLUMNS = ("truncated", "echo", "cache_suspect", "cold", "rate_mismatch", "looping", "is_warmup")
NO_REQUESTS = "no requests recorded"


# ------------------------------------------------------------------------------------------------ runs

def _root(outputs_dir: str | Path | None) -> Path:
    return Path(outputs_dir) if outputs_dir else outputs_root()


def list_runs(outputs_dir: str | Path | None = None) -> pd.DataFrame:
    """One row per outputs/<host>/<model>/<suite>/ folder holding requests.csv (archived folders skipped):
    host and model as the params name them (folder names when no manifest; a study's grid point is 'model
    [variant]', as the paper calls it), the deployment's name, suite, path, request count."""
    root = _root(outputs_dir)
    rows = []
    for path in suite_folders(root)[0]:
        folder = RunFolder(path)
        if not folder.has_requests():
            continue
        params = folder.params
        host = (params.get("host") or {}).get("name") or path.parent.parent.name
        server = params.get("server") or {}
        count = len(folder.requests())
        model = str(server.get("model") or path.parent.name)
        model += f" [{server['variant']}]" if server.get("variant") else ""
        rows.append({"host": str(host), "model": model,
                     "deployment": Deployment.from_recorded(params, str(host), path.parent.name).name,
                     "suite": path.name, "path": str(path), "n_requests": count,
                     "modalities": ", ".join(server.get("modalities") or [])})
    frame = pd.DataFrame(rows, columns=RUN_COLUMNS)
    if len(frame):  # suites in the order the main job runs them
        rank = {name: i for i, name in enumerate(NOTEBOOK_ORDER)}
        frame = frame.assign(_r=frame["suite"].map(lambda s: rank.get(s, len(rank))))
        frame = frame.sort_values(["host", "model", "_r", "suite"], kind="stable").drop(columns="_r")
    return frame.reset_index(drop=True)


def choices(runs: pd.DataFrame, host: str | None = None, model: str | None = None) -> dict[str, list[str]]:
    """Dropdown options: hosts; models of the host; suites of the host × model (first ones when not given)."""
    hosts = list(dict.fromkeys(runs["host"])) if len(runs) else []
    host = host if host in hosts else (hosts[0] if hosts else None)
    mine = runs[runs["host"] == host] if host else runs.iloc[0:0]
    models = list(dict.fromkeys(mine["model"]))
    model = model if model in models else (models[0] if models else None)
    suites = list(mine.loc[mine["model"] == model, "suite"]) if model else []
    return {"hosts": hosts, "models": models, "suites": suites}


def suite_path(runs: pd.DataFrame, host: str, model: str, suite: str) -> Path | None:
    hit = runs[(runs["host"] == host) & (runs["model"] == model) & (runs["suite"] == suite)]
    return Path(hit["path"].iloc[0]) if len(hit) else None


def read_suite(path: str | Path) -> pd.DataFrame:
    """requests.csv of one suite folder with a stable label per request, in file order."""
    frame = RunFolder(path).requests()
    if frame.empty:
        return frame.assign(label=pd.Series(dtype=str))
    frame = frame.reset_index(drop=True)
    frame["label"] = [request_label(r) for r in frame.to_dict("records")]
    return frame


def request_label(row: Mapping[str, Any]) -> str:
    """'repeat 0 · capital_france' (warm-ups and concurrency levels say so)."""
    parts = [("warm-up " if flag(row.get("is_warmup")) else "repeat ") + str(row.get("repeat", "")),
             str(row.get("variant", ""))]
    level = number(row.get("concurrency"))
    if level == level and level > 1 and f"c{int(level)}" != parts[1]:  # load variants are already "c<level>"
        parts.append(f"c{int(level)}")
    if row.get("status") and row.get("status") != STATUS_OK:
        parts.append(str(row["status"]))
    return " · ".join(p for p in parts if p)


def list_requests(frame: pd.DataFrame, task: str | None = None) -> dict[str, list[str]]:
    """Tasks in file order, and the request labels of `task` (default: the first task)."""
    tasks = list(dict.fromkeys(frame["task"])) if len(frame) else []
    task = task if task in tasks else (tasks[0] if tasks else None)
    labels = frame.loc[frame["task"] == task, "label"].tolist() if task else []
    return {"tasks": tasks, "requests": labels}


def load_request(outputs_dir: str | Path | None, host: str, model: str, suite: str, task: str | None = None,
                 request: str | int | None = None) -> dict[str, Any]:
    """One request row as a dict (JSON columns decoded), plus 'path' (its suite folder).

    request: a label from list_requests, or a repeat number (the measured request of that repeat; the warm-up
    when only a warm-up has it); None = the first request of the task (task None = the first task)."""
    runs = list_runs(outputs_dir)
    path = suite_path(runs, host, model, suite)
    if path is None:
        raise LookupError(f"no run folder for {host}/{model}/{suite} under {_root(outputs_dir)}")
    frame = read_suite(path)
    named = runs.loc[runs["path"] == str(path), "deployment"]
    return pick_request(frame, task, request) | {"path": str(path), "deployment": str(named.iloc[0])}


def pick_request(frame: pd.DataFrame, task: str | None = None, request: str | int | None = None) -> dict[str, Any]:
    if frame.empty:
        raise LookupError(NO_REQUESTS)
    task = task if task is not None else frame["task"].iloc[0]
    rows = frame[frame["task"] == task]
    if rows.empty:
        raise LookupError(f"task {task!r} not in this suite (have: {', '.join(dict.fromkeys(frame['task']))})")
    if request is None:
        chosen = default_row(rows)
    elif isinstance(request, (int, np.integer)) or (isinstance(request, str) and request.isdigit()):
        hits = rows[rows["repeat"].astype(int) == int(request)]
        if hits.empty:
            raise LookupError(f"task {task!r} has no repeat {request}")
        measured = hits[~hits["is_warmup"].map(flag)]
        chosen = (measured if len(measured) else hits).iloc[0]
    else:
        hits = rows[rows["label"] == request]
        if hits.empty:
            raise LookupError(f"task {task!r} has no request {request!r}")
        chosen = hits.iloc[0]
    return {k: _clean(v) for k, v in chosen.to_dict().items()}


def default_row(rows: pd.DataFrame) -> pd.Series:
    """The request shown first: the first scored one, else the first measured (non-warm-up), else the first."""
    measured = rows[~rows["is_warmup"].map(flag)] if "is_warmup" in rows else rows
    scored = measured[measured["passed"].notna()] if "passed" in measured else measured.iloc[0:0]
    for candidates in (scored, measured, rows):
        if len(candidates):
            return candidates.iloc[0]
    raise LookupError(NO_REQUESTS)


def default_label(frame: pd.DataFrame, task: str | None) -> str | None:
    rows = frame[frame["task"] == task] if task is not None and len(frame) else frame.iloc[0:0]
    return str(default_row(rows)["label"]) if len(rows) else None


def _clean(value: Any) -> Any:
    if value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value




# ------------------------------------------------------------------------------------------------ metrics

def _registered(name: str) -> tuple[str, str, str]:
    """(column, label, unit) of a metric declared in benchlib.config.metrics."""
    entry = metrics.metric(name)
    return name, entry.label, entry.unit


METRIC_ROWS = [
    ("status", "status", ""), ("error_kind", "error kind", ""),
    _registered("ttft_s"), _registered("ttfo_s"), _registered("e2e_s"), _registered("decode_tps"),
    ("server_decode_tps", "decode rate (the server's own)", "tok/s"), _registered("prefill_tps"),
    _registered("tpot_s"), ("prompt_tokens", "prompt tokens", ""),
    ("completion_tokens", "completion tokens", ""), ("reasoning_tokens", "reasoning tokens", ""),
    ("cached_tokens", "cached prompt tokens", ""), ("token_source", "token counts from", ""),
    ("client_deltas", "client deltas (chunks with text)", ""), ("max_tokens", "max_tokens", ""),
    ("finish_reason", "finish reason", ""), ("media_count", "media items sent", ""),
    ("payload_bytes", "media payload bytes", ""), ("client_prep_s", "client prep before the wire stamp", "s"),
]


def request_metrics(row: Mapping[str, Any]) -> pd.DataFrame:
    """metric / value / unit rows for one request, then its flags (those set are listed)."""
    rows = []
    for key, label, unit in METRIC_ROWS:
        value = row.get(key)
        if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
            continue
        if isinstance(value, float):
            value = f"{value:.4g}"
        rows.append({"metric": label, "value": str(value), "unit": unit})
    flags = [f for f in FLAG_COLUMNS if flag(row.get(f))]
    rows.append({"metric": "flags", "value": ", ".join(flags) if flags else "none", "unit": ""})
    return pd.DataFrame(rows, columns=["metric", "value", "unit"])


def request_verdict(row: Mapping[str, Any]) -> dict[str, Any]:
    """The checker's verdict: checker, passed (True/False/None), score, detail, with a one-line summary."""
    checker = row.get("checker") or ""
    passed = row.get("passed")
    passed = None if passed is None or passed == "" else flag(passed)
    score = row.get("score")
    if row.get("status") != STATUS_OK:
        summary = f"not scored: request {row.get('status')}"
    elif flag(row.get("is_warmup")):
        summary = "not scored: warm-up request"
    elif not checker:
        summary = "not scored"
    else:
        summary = f"{checker}: {'PASS' if passed else 'FAIL'}" + (f" (score {float(score):.2f})"
                                                                  if score is not None else "")
    return {"checker": checker, "passed": passed, "score": score, "detail": row.get("check_detail") or "",
            "summary": summary}


# ------------------------------------------------------------------------------------------------ rendering

def _pre(text: str, label: str, empty: str = "(empty)") -> str:
    body = html.escape(str(text)) if text else f"<i>{empty}</i>"
    return (f"<div style='margin:6px 0'><b>{label}</b><pre style='white-space:pre-wrap;background:#f6f6f6;"
            f"padding:8px;border-radius:4px;max-height:320px;overflow:auto'>{body}</pre></div>")


def figure_image(fig: plt.Figure, dpi: int = 100) -> Image:
    """A figure as a PNG Image, the figure closed: displayed once, never again by the inline backend."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return Image(data=buffer.getvalue(), format="png")


def _media_objects(item: Media) -> list[Any]:
    if not item.exists:
        return [Markdown(f"*{item.kind}: file missing: `{item.path}`*")]
    if item.kind == "image":
        return [Markdown(f"**Image** `{item.path.name}`"), Image(filename=str(item.path), width=360)]
    if item.kind == "audio":
        return [Markdown(f"**Audio** `{item.path.name}`"), Audio(filename=str(item.path))]
    try:
        frames = video_frames(item.path)
    except Exception as exc:  # noqa: BLE001 — PyAV missing or a broken file: say so
        return [Markdown(f"*Video `{item.path.name}`: frames could not be decoded ({exc})*")]
    tags = "".join(f"<img src='data:image/jpeg;base64,{base64.b64encode(f).decode()}' width='180' "
                   f"style='margin:2px'/>" for f in frames)
    return [HTML(f"<b>Video</b> <code>{html.escape(item.path.name)}</code>: first {len(frames)} frames "
                 f"at 1 fps<br>{tags}")]


def answer_beside(row: Mapping[str, Any], verdict: Mapping[str, Any]) -> str:
    """The response, and beside it what it was checked against: the expected answer (the task file's), the answer
    the checker read out of the text, and the checker's verdict with its score and its reasoning (check_detail) —
    why an answer scored 0.5, say. An unscored request shows the response alone."""
    response = _pre(row.get("response_text", ""), "Response")
    if not verdict["checker"]:
        return response
    expected = evidence.expected_for(str(row.get("task")), str(row.get("variant")))
    side = _pre(expected, "Expected answer", empty="none in the task file")
    if row.get("answer_read"):
        side += _pre(row["answer_read"], "Answer the checker read")
    side += _pre(verdict["detail"], f"Checker: {verdict['summary']}", empty="no reasoning recorded")
    return (f"<div style='display:flex;gap:12px;align-items:flex-start'><div style='flex:3;min-width:0'>{response}"
            f"</div><div style='flex:2;min-width:0'>{side}</div></div>")


def build(row: Mapping[str, Any], show_timeline: bool = True) -> list[Any]:
    """One request as display objects: header, prompt, media, response (and reasoning), metrics, verdict,
    timeline. Nothing is displayed here, so a widget can build first and swap its output in one step."""
    objects: list[Any] = []
    verdict = request_verdict(row)
    # a task whose input the deployment does not take gets a row with the reason and no request
    sent = not (row.get("status") == "unsupported" and row.get("error_kind") == "modality_not_supported"
                and not row.get("http_status"))
    named = row.get("deployment") or f"{row.get('model')} · {row.get('host')}"
    objects.append(Markdown(f"### {named} · {row.get('suite')} · {row.get('task')} · "
                            f"{row.get('label') or request_label(row)}\n"
                            f"status **{row.get('status')}** · {verdict['summary']} · request key "
                            f"`{row.get('request_key')}`"))
    if not sent:
        objects.append(HTML(_pre(row.get("error_message", ""), "No request was sent — why",
                                 empty="no reason recorded")))
        return objects
    objects.append(HTML(_pre(row.get("prompt", ""), "Prompt (as sent, with its unique (ref …) prefix)")))
    media = request_media(str(row.get("task")), str(row.get("variant")), str(row.get("suite")))
    for item in media["items"]:
        objects += _media_objects(item)
    if media["note"]:
        objects.append(Markdown(f"*Media: {media['note']}*"))
    if row.get("status") != STATUS_OK and row.get("error_message"):
        objects.append(HTML(_pre(row["error_message"], f"Error ({row.get('error_kind') or 'failed'})")))
    objects.append(HTML(answer_beside(row, verdict)))
    if row.get("reasoning_text"):
        objects.append(HTML(_pre(row.get("reasoning_text", ""), "Reasoning (kept apart from the answer)")))
    tool_calls = row.get("tool_calls")
    if tool_calls:
        objects.append(HTML(_pre(json.dumps(tool_calls, indent=2, ensure_ascii=False), "Tool calls")))
    objects.append(request_metrics(row))
    if show_timeline and row.get("path"):
        objects.append(figure_image(telemetry_figure(row["path"], row)))
    return objects


def render(row: Mapping[str, Any], show_timeline: bool = True) -> list[Any]:
    """Display one request (see build); returns the displayed objects (tests check them without a frontend)."""
    objects = build(row, show_timeline)
    for obj in objects:
        display(obj)
    return objects


_MARKDOWN = mistune.create_markdown(escape=False, plugins=["table"])


def as_html(objects: list[Any]) -> str:
    """Display objects as one HTML block (Markdown rendered, images inline, tables as HTML): what a display handle
    can swap whole when the selection changes."""
    parts = []
    for obj in objects:
        if isinstance(obj, Markdown):
            parts.append(_MARKDOWN(obj.data))
        elif isinstance(obj, Image):
            parts.append(f"<img src='data:image/{obj.format or 'png'};base64,"
                         f"{base64.b64encode(obj.data).decode('ascii')}' style='max-width:100%'/>")
        elif isinstance(obj, pd.DataFrame):
            parts.append(obj.to_html(index=False, escape=True))
        elif hasattr(obj, "_repr_html_"):  # HTML, Audio
            parts.append(obj._repr_html_())
        else:
            parts.append(f"<pre>{html.escape(str(obj))}</pre>")
    return "\n".join(parts)


class Shown:
    """One section's content as one HTML object (as_html), with its text kept for a reader without a browser."""

    def __init__(self, html_text: str):
        self.html = html_text

    def _repr_html_(self) -> str:
        return self.html


SECTIONS = ("request", "wrong")  # what Explorer.show draws below the dropdowns, each following them


class Explorer:
    """Dropdowns host → model → suite → task → request; each change refills the next ones and redraws every section
    shown (show): the selected request and the items the selected deployment got wrong in the selected suite. A
    section is a display handle, so the notebook's output under it is plain HTML that an exported or headless
    notebook keeps, and a live kernel swaps it when a dropdown changes."""

    def __init__(self, outputs_dir: str | Path | None = None, show_timeline: bool = True):
        self.root = _root(outputs_dir)
        self.show_timeline = show_timeline
        self.runs = list_runs(self.root)
        self._frame = pd.DataFrame()
        layout = widgets.Layout(width="360px")
        self.host = widgets.Dropdown(description="host", layout=layout)
        self.model = widgets.Dropdown(description="model", layout=layout)
        self.suite = widgets.Dropdown(description="suite", layout=layout)
        self.task = widgets.Dropdown(description="task", layout=layout)
        self.request = widgets.Dropdown(description="request", layout=widgets.Layout(width="480px"))
        self.status = widgets.HTML()
        self._handles: dict[str, Any] = {}
        self.rendered: dict[str, str] = {}  # each section's HTML as last drawn
        self._busy = False
        self._fill(self.host, choices(self.runs)["hosts"])
        self._on_host()
        self.host.observe(lambda _: self._on_host(), names="value")
        self.model.observe(lambda _: self._on_model(), names="value")
        self.suite.observe(lambda _: self._on_suite(), names="value")
        self.task.observe(lambda _: self._on_task(), names="value")
        self.request.observe(lambda _: self._redraw(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.host, self.model, self.suite]),
                                    widgets.HBox([self.task, self.request]), self.status])

    @staticmethod
    def _fill(dropdown: Any, options: Iterable[Any], value: str | None = None) -> None:
        options = list(options)  # values, or (shown, value) pairs
        values = [o[1] if isinstance(o, tuple) else o for o in options]
        dropdown.options = options
        dropdown.value = value if value in values else (values[0] if values else None)

    def _deployment(self, model: Any) -> str:
        hit = self.runs[(self.runs["host"] == self.host.value) & (self.runs["model"] == model)]
        return str(hit["deployment"].iloc[0]) if len(hit) else str(model)

    def _on_host(self) -> None:
        self._busy = True  # each model shown by its deployment's name, as the paper and the terminal name it
        self._fill(self.model, [(self._deployment(m), m) for m in choices(self.runs, self.host.value)["models"]])
        self._busy = False
        self._on_model()

    def _on_model(self) -> None:
        if self._busy:
            return
        self._busy = True
        # the suite and task picked stay picked where the next deployment has them: one set compared across two
        self._fill(self.suite, choices(self.runs, self.host.value, self.model.value)["suites"], self.suite.value)
        self._busy = False
        self._on_suite()

    def _on_suite(self) -> None:
        if self._busy:
            return
        path = suite_path(self.runs, self.host.value, self.model.value, self.suite.value) \
            if self.suite.value else None
        self._frame = read_suite(path) if path else pd.DataFrame()
        self._busy = True
        self._fill(self.task, list_requests(self._frame)["tasks"] if len(self._frame) else [], self.task.value)
        self._busy = False
        self._on_task()

    def _on_task(self) -> None:
        if self._busy:
            return
        self._busy = True
        self._fill(self.request, list_requests(self._frame, self.task.value)["requests"] if len(self._frame) else [],
                   default_label(self._frame, self.task.value))
        self._busy = False
        self._redraw()

    def select(self, host: str = "", model: str = "", suite: str = "", task: str = "", request: str = "") -> None:
        """Preselect (empty keeps the first option); an unknown value raises with the known ones."""
        for dropdown, value in ((self.host, host), (self.model, model), (self.suite, suite), (self.task, task),
                                (self.request, request)):
            if not value:
                continue
            pairs = [o if isinstance(o, tuple) else (o, o) for o in dropdown.options]
            found = [v for shown, v in pairs if value in (shown, v)]  # a model by its value or its name
            if not found:
                raise ValueError(f"{dropdown.description} {value!r} not found (have: "
                                 f"{', '.join(shown for shown, _ in pairs)})")
            dropdown.value = found[0]

    def selection(self) -> dict[str, Any] | None:
        """The selected request row (None when there is nothing to show)."""
        if self._frame.empty or self.task.value is None or self.request.value is None:
            return None
        path = suite_path(self.runs, self.host.value, self.model.value, self.suite.value)
        return pick_request(self._frame, self.task.value, self.request.value) | {
            "path": str(path), "deployment": self._deployment(self.model.value)}

    @property
    def frame(self) -> pd.DataFrame:
        """Every row of the selected deployment's suite (what evidence.show_wrong lists the wrong answers of)."""
        return self._frame

    def describe(self) -> str:
        if self.runs.empty:
            return f"{NO_REQUESTS}: no run folders under {self.root}"
        return (f"{len(self.runs)} suite folder(s) under {self.root}; showing "
                f"{self._deployment(self.model.value)} · {self.suite.value} · {self.task.value} · "
                f"{self.request.value}")

    def section(self, name: str) -> str:
        """A section's HTML for the current selection: 'request' (build) or 'wrong' (the selected deployment's wrong
        answers in the selected suite, per set: evidence.wrong_html)."""
        if name == "request":
            row = self.selection()
            return as_html([Markdown(f"*{self.describe()}*")] if row is None else
                           build(row, show_timeline=self.show_timeline))
        if name == "wrong":
            if self._frame.empty:
                return f"<i>{html.escape(self.describe())}</i>"
            heading = f"<h3>{html.escape(self._deployment(self.model.value))} · {html.escape(str(self.suite.value))}</h3>"
            return heading + "".join(evidence.wrong_html(self._frame))
        raise ValueError(f"no section {name!r} (have: {', '.join(SECTIONS)})")

    def show(self, name: str) -> None:
        """Display a section here; from now on every change of a dropdown redraws it in place."""
        self.rendered[name] = self.section(name)
        self._handles[name] = display(Shown(self.rendered[name]), display_id=True)

    def _redraw(self) -> None:
        if self._busy:
            return
        self.status.value = html.escape(self.describe())
        for name, handle in self._handles.items():  # each built whole first (the figure a closed PNG), then swapped
            self.rendered[name] = self.section(name)
            handle.update(Shown(self.rendered[name]))
