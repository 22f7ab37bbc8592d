"""Request explorer: pick host → model → suite → task → request and see what was sent and what came back.

Pure functions (list_runs, list_requests, load_request, request_media, request_metrics, request_verdict,
timeline_figure) hold the logic; Explorer wires them to ipywidgets dropdowns for notebooks/explore.ipynb,
and render() draws one request as static output (what a headless papermill run keeps).
"""

from __future__ import annotations

import base64
import csv
import html
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from benchlib.paths import outputs_root
from benchlib.records import STATUS_OK, read_requests

RUN_COLUMNS = ["host", "model", "suite", "path", "n_requests", "modalities"]
FLAG_COLUMNS = ("truncated", "cache_suspect", "cold", "rate_mismatch", "looping", "is_warmup")
NO_REQUESTS = "no requests recorded"
SUITE_ORDER = ("text", "quality", "vision", "audio", "video", "load")


# ------------------------------------------------------------------------------------------------ runs

def _root(outputs_dir: str | Path | None) -> Path:
    return Path(outputs_dir) if outputs_dir else outputs_root()


def _manifest(path: Path) -> dict[str, Any]:
    try:
        return json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def list_runs(outputs_dir: str | Path | None = None) -> pd.DataFrame:
    """One row per outputs/<host>/<model>/<suite>/ folder holding requests.csv (archived folders skipped):
    host and model as the params name them (folder names when no manifest), suite, path, request count."""
    root = _root(outputs_dir)
    rows = []
    if root.is_dir():
        for path in sorted(p for p in root.glob("*/*/*") if p.is_dir() and ".archived-" not in p.name):
            requests = path / "requests.csv"
            if not requests.is_file():
                continue
            params = _manifest(path).get("params") or {}
            host = (params.get("host") or {}).get("name") or path.parent.parent.name
            server = params.get("server") or {}
            try:
                with requests.open(newline="", encoding="utf-8") as handle:
                    count = sum(1 for _ in csv.DictReader(handle))  # quoted prompts span several lines
            except (OSError, csv.Error):
                count = 0
            rows.append({"host": str(host), "model": str(server.get("model") or path.parent.name),
                         "suite": path.name, "path": str(path), "n_requests": count,
                         "modalities": ", ".join(server.get("modalities") or [])})
    frame = pd.DataFrame(rows, columns=RUN_COLUMNS)
    if len(frame):  # suites in the order the main job runs them
        rank = {name: i for i, name in enumerate(SUITE_ORDER)}
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
    frame = read_requests(Path(path) / "requests.csv")
    if frame.empty:
        return frame.assign(label=pd.Series(dtype=str))
    frame = frame.reset_index(drop=True)
    frame["label"] = [request_label(r) for r in frame.to_dict("records")]
    return frame


def request_label(row: Mapping[str, Any]) -> str:
    """'repeat 0 · capital_france' (warm-ups and concurrency levels say so)."""
    parts = [("warm-up " if _truthy(row.get("is_warmup")) else "repeat ") + str(row.get("repeat", "")),
             str(row.get("variant", ""))]
    if int(_num(row.get("concurrency")) or 1) > 1:
        parts.append(f"c{int(_num(row.get('concurrency')))}")
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
    return pick_request(frame, task, request) | {"path": str(path)}


def pick_request(frame: pd.DataFrame, task: str | None = None, request: str | int | None = None) -> dict[str, Any]:
    if frame.empty:
        raise LookupError(NO_REQUESTS)
    task = task if task is not None else frame["task"].iloc[0]
    rows = frame[frame["task"] == task]
    if rows.empty:
        raise LookupError(f"task {task!r} not in this suite (have: {', '.join(dict.fromkeys(frame['task']))})")
    if request is None:
        chosen = rows.iloc[0]
    elif isinstance(request, (int, np.integer)) or (isinstance(request, str) and request.isdigit()):
        hits = rows[rows["repeat"].astype(int) == int(request)]
        if hits.empty:
            raise LookupError(f"task {task!r} has no repeat {request}")
        measured = hits[~hits["is_warmup"].astype(bool)]
        chosen = (measured if len(measured) else hits).iloc[0]
    else:
        hits = rows[rows["label"] == request]
        if hits.empty:
            raise LookupError(f"task {task!r} has no request {request!r}")
        chosen = hits.iloc[0]
    return {k: _clean(v) for k, v in chosen.to_dict().items()}


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


# ------------------------------------------------------------------------------------------------ media

@dataclass
class Media:
    kind: str  # image | audio | video
    path: Path
    exists: bool


def request_media(task: str, variant: str, suite: str | None = None) -> dict[str, Any]:
    """The media a task variant sends, resolved through benchlib.tasks: {'items': [Media], 'note': str}."""
    if suite == "load":
        return {"items": [], "note": "load-sweep request: a generated text prompt (benchlib.sweeps), no media"}
    try:
        from benchlib.tasks import load_tasks

        tasks = load_tasks()
    except Exception as exc:  # noqa: BLE001 — a broken task file must not break the explorer
        return {"items": [], "note": f"task files could not be read: {exc}"}
    if task not in tasks:
        return {"items": [], "note": f"task {task!r} is not in testdata/tasks (renamed or removed since the run)"}
    spec = tasks[task]
    variants = {v.id: v for v in spec.variants}
    if variant not in variants:
        note = ("no request was sent for this row (unsupported input), so no media either" if variant == "*"
                else f"variant {variant!r} is not in the task file any more")
        return {"items": [], "note": note}
    items = [Media(kind, path, path.is_file()) for kind, path in spec.media_paths(variants[variant]).items()]
    note = "" if items else "text only: this task sends no media"
    return {"items": items, "note": note}


def video_frames(path: str | Path, count: int = 4, fps: float = 1.0) -> list[bytes]:
    """The first `count` frames sampled at `fps` (as the runner sends them in frames mode), JPEG bytes."""
    from benchlib.media import sample_frames

    frames = sample_frames(path, fps=fps)[:count]
    return [base64.b64decode(b64) for b64, _ in frames]


# ------------------------------------------------------------------------------------------------ metrics

METRIC_ROWS = [
    ("status", "status", ""), ("error_kind", "error kind", ""), ("error_message", "error message", ""),
    ("ttft_s", "TTFT (first token, incl. reasoning)", "s"), ("ttfo_s", "TTFO (first answer output)", "s"),
    ("e2e_s", "end-to-end", "s"), ("decode_tps", "decode rate (client)", "tok/s"),
    ("server_decode_tps", "decode rate (server)", "tok/s"), ("prefill_tps", "prefill rate", "tok/s"),
    ("tpot_s", "time per output token", "s"), ("prompt_tokens", "prompt tokens", ""),
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
    flags = [f for f in FLAG_COLUMNS if _truthy(row.get(f))]
    rows.append({"metric": "flags", "value": ", ".join(flags) if flags else "none", "unit": ""})
    return pd.DataFrame(rows, columns=["metric", "value", "unit"])


def request_verdict(row: Mapping[str, Any]) -> dict[str, Any]:
    """The checker's verdict: checker, passed (True/False/None), score, detail, with a one-line summary."""
    checker = row.get("checker") or ""
    passed = row.get("passed")
    passed = None if passed is None or passed == "" else _truthy(passed)
    score = row.get("score")
    if row.get("status") != STATUS_OK:
        summary = f"not scored: request {row.get('status')}"
    elif _truthy(row.get("is_warmup")):
        summary = "not scored: warm-up request"
    elif not checker:
        summary = "not scored"
    else:
        summary = f"{checker}: {'PASS' if passed else 'FAIL'}" + (f" (score {float(score):.2f})"
                                                                  if score is not None else "")
    return {"checker": checker, "passed": passed, "score": score, "detail": row.get("check_detail") or "",
            "summary": summary}


# ------------------------------------------------------------------------------------------------ timeline

SERIES = [("power_w", "GPU power (W)", 1.0), ("cpu_percent", "host CPU (%)", 1.0),
          ("server_rss_bytes", "server RSS (GB)", 1e-9), ("mem_used_bytes", "GPU memory (GB)", 1e-9),
          ("temp_c", "GPU temperature (°C)", 1.0)]


def read_telemetry(path: str | Path) -> pd.DataFrame:
    file = Path(path) / "telemetry.csv"
    if not file.is_file() or file.stat().st_size == 0:
        return pd.DataFrame()
    try:
        return pd.read_csv(file)
    except (pd.errors.EmptyDataError, pd.errors.ParserError):
        return pd.DataFrame()


def request_span(row: Mapping[str, Any]) -> tuple[int, int] | None:
    """(start_ns, end_ns) on the telemetry clock (perf_counter_ns), None when no request went out."""
    start, e2e = _num(row.get("start_ns")), _num(row.get("e2e_s"))
    if not start or math.isnan(start) or start <= 0:
        return None
    return int(start), int(start + (0 if math.isnan(e2e) else e2e) * 1e9)


def timeline_figure(path: str | Path, row: Mapping[str, Any], zoom_margin_s: float = 3.0) -> plt.Figure:
    """Telemetry of the suite (one row per available series) with the task windows lightly shaded and this
    request's span (start_ns … start_ns + e2e_s) shaded strongly, first token marked; right column: zoom."""
    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.9)
    telemetry = read_telemetry(path)
    series = [(c, label, scale) for c, label, scale in SERIES
              if c in telemetry and pd.to_numeric(telemetry[c], errors="coerce").notna().any()]
    span = request_span(row)
    if telemetry.empty or not series or "t_ns" not in telemetry:
        fig, ax = plt.subplots(figsize=(11, 2.2))
        ax.set_axis_off()
        reason = "no telemetry.csv in this run folder" if telemetry.empty else "telemetry has no usable series"
        ax.text(0.5, 0.5, f"Telemetry timeline: {reason}" + ("" if span else "; no request was sent"),
                ha="center", va="center", transform=ax.transAxes, style="italic", color="0.35")
        return fig
    t0 = int(telemetry["t_ns"].min())
    telemetry = telemetry.assign(t_s=(telemetry["t_ns"] - t0) / 1e9)
    windows = _read_windows(path)
    fig, axes = plt.subplots(len(series), 2, figsize=(13, 2.3 * len(series) + 0.8), squeeze=False,
                             gridspec_kw={"width_ratios": [2.2, 1]}, sharex="col")
    color = sns.color_palette("dark")[3]
    for r, (column, label, scale) in enumerate(series):
        data = telemetry[["t_s", column]].assign(value=pd.to_numeric(telemetry[column], errors="coerce") * scale)
        data = data.dropna(subset=["value"])
        for c, ax in enumerate(axes[r]):
            sns.lineplot(data=data, x="t_s", y="value", ax=ax, linewidth=1.0, color="0.25")
            ax.set(ylabel=label if c == 0 else "", xlabel="")
            if c == 0:
                for i, (_, win) in enumerate(windows.iterrows()):
                    a, b = (win["t_start_ns"] - t0) / 1e9, (win["t_end_ns"] - t0) / 1e9
                    ax.axvspan(a, b, color=("0.86" if i % 2 else "0.93"), zorder=0, lw=0)
                    if r == 0:
                        ax.text((a + b) / 2, 1.01, str(win["window"]), transform=ax.get_xaxis_transform(),
                                ha="center", va="bottom", fontsize=7, color="0.4", rotation=25)
            if span:
                a, b = (span[0] - t0) / 1e9, (span[1] - t0) / 1e9
                ax.axvspan(a, max(b, a + 0.02), color=color, alpha=0.3, lw=0, zorder=1)
                ttft = _num(row.get("ttft_s"))
                if not math.isnan(ttft):
                    ax.axvline(a + ttft, color=color, lw=1, ls="--")
                if c == 1:
                    ax.set_xlim(a - zoom_margin_s, b + zoom_margin_s)
    axes[-1, 0].set_xlabel("seconds since the suite's telemetry started")
    axes[-1, 1].set_xlabel("zoom on this request (±%g s)" % zoom_margin_s)
    title = f"Telemetry with this request shaded ({row.get('task')} · {row.get('label', row.get('variant'))})"
    if not span:
        title += " — no request was sent (no span)"
    else:
        title += "; dashed = first token; grey = telemetry windows (idle, loaded, tasks)"
    fig.suptitle(title, fontsize=11, fontweight="bold")
    fig.tight_layout()
    return fig


def _read_windows(path: str | Path) -> pd.DataFrame:
    file = Path(path) / "windows.csv"
    try:
        frame = pd.read_csv(file) if file.is_file() and file.stat().st_size else pd.DataFrame()
    except (pd.errors.EmptyDataError, pd.errors.ParserError):
        frame = pd.DataFrame()
    needed = {"window", "t_start_ns", "t_end_ns"}
    if frame.empty or not needed <= set(frame.columns):
        return pd.DataFrame(columns=sorted(needed))
    return frame.dropna(subset=["t_start_ns", "t_end_ns"])


# ------------------------------------------------------------------------------------------------ rendering

def _pre(text: str, label: str, empty: str = "(empty)") -> str:
    body = html.escape(str(text)) if text else f"<i>{empty}</i>"
    return (f"<div style='margin:6px 0'><b>{label}</b><pre style='white-space:pre-wrap;background:#f6f6f6;"
            f"padding:8px;border-radius:4px;max-height:320px;overflow:auto'>{body}</pre></div>")


def render(row: Mapping[str, Any], show_timeline: bool = True) -> list[Any]:
    """Display one request: header, prompt, media, response (and reasoning), metrics, verdict, timeline.
    Returns the displayed objects (tests check them without a frontend)."""
    from IPython.display import HTML, Audio, Image, Markdown, display

    shown: list[Any] = []

    def show(obj: Any) -> None:
        shown.append(obj)
        display(obj)

    verdict = request_verdict(row)
    show(Markdown(f"### {row.get('host')} · {row.get('model')} · {row.get('suite')} · {row.get('task')} · "
                  f"{row.get('label') or request_label(row)}\n"
                  f"status **{row.get('status')}** · {verdict['summary']} · request key `{row.get('request_key')}`"))
    show(HTML(_pre(row.get("prompt", ""), "Prompt (as sent, with its unique (ref …) prefix)")))
    media = request_media(str(row.get("task")), str(row.get("variant")), str(row.get("suite")))
    for item in media["items"]:
        if not item.exists:
            show(Markdown(f"*{item.kind}: file missing: `{item.path}`*"))
        elif item.kind == "image":
            show(Markdown(f"**Image** `{item.path.name}`"))
            show(Image(filename=str(item.path), width=360))
        elif item.kind == "audio":
            show(Markdown(f"**Audio** `{item.path.name}`"))
            show(Audio(filename=str(item.path)))
        elif item.kind == "video":
            try:
                frames = video_frames(item.path)
                tags = "".join(f"<img src='data:image/jpeg;base64,{base64.b64encode(f).decode()}' width='180' "
                               f"style='margin:2px'/>" for f in frames)
                show(HTML(f"<b>Video</b> <code>{html.escape(item.path.name)}</code>: first {len(frames)} frames "
                          f"at 1 fps<br>{tags}"))
            except Exception as exc:  # noqa: BLE001 — PyAV missing or a broken file: say so
                show(Markdown(f"*Video `{item.path.name}`: frames could not be decoded ({exc})*"))
    if media["note"]:
        show(Markdown(f"*Media: {media['note']}*"))
    show(HTML(_pre(row.get("response_text", ""), "Response")))
    if row.get("reasoning_text"):
        show(HTML(_pre(row.get("reasoning_text", ""), "Reasoning (kept apart from the answer)")))
    tool_calls = row.get("tool_calls")
    if tool_calls:
        show(HTML(_pre(json.dumps(tool_calls, indent=2, ensure_ascii=False), "Tool calls")))
    show(request_metrics(row))
    show(Markdown(f"**Checker verdict:** {verdict['summary']}" +
                  (f"\n\n> {verdict['detail']}" if verdict["detail"] else "")))
    if show_timeline and row.get("path"):
        fig = timeline_figure(row["path"], row)
        plt.close(fig)
        show(fig)
    return shown


class Explorer:
    """Dropdowns host → model → suite → task → request; each change refills the next ones and redraws."""

    def __init__(self, outputs_dir: str | Path | None = None, show_timeline: bool = True):
        import ipywidgets as widgets

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
        self.output = widgets.Output()
        self._busy = False
        self._fill(self.host, choices(self.runs)["hosts"])
        self._on_host()
        self.host.observe(lambda _: self._on_host(), names="value")
        self.model.observe(lambda _: self._on_model(), names="value")
        self.suite.observe(lambda _: self._on_suite(), names="value")
        self.task.observe(lambda _: self._on_task(), names="value")
        self.request.observe(lambda _: self._redraw(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.host, self.model, self.suite]),
                                    widgets.HBox([self.task, self.request]), self.output])

    @staticmethod
    def _fill(dropdown: Any, options: Iterable[str]) -> None:
        options = list(options)
        dropdown.options = options
        dropdown.value = options[0] if options else None

    def _on_host(self) -> None:
        self._busy = True
        self._fill(self.model, choices(self.runs, self.host.value)["models"])
        self._busy = False
        self._on_model()

    def _on_model(self) -> None:
        if self._busy:
            return
        self._busy = True
        self._fill(self.suite, choices(self.runs, self.host.value, self.model.value)["suites"])
        self._busy = False
        self._on_suite()

    def _on_suite(self) -> None:
        if self._busy:
            return
        path = suite_path(self.runs, self.host.value, self.model.value, self.suite.value) \
            if self.suite.value else None
        self._frame = read_suite(path) if path else pd.DataFrame()
        self._busy = True
        self._fill(self.task, list_requests(self._frame)["tasks"] if len(self._frame) else [])
        self._busy = False
        self._on_task()

    def _on_task(self) -> None:
        if self._busy:
            return
        self._busy = True
        self._fill(self.request, list_requests(self._frame, self.task.value)["requests"] if len(self._frame) else [])
        self._busy = False
        self._redraw()

    def select(self, host: str = "", model: str = "", suite: str = "", task: str = "", request: str = "") -> None:
        """Preselect (empty keeps the first option); an unknown value raises with the known ones."""
        for dropdown, value in ((self.host, host), (self.model, model), (self.suite, suite), (self.task, task),
                                (self.request, request)):
            if not value:
                continue
            if value not in dropdown.options:
                raise ValueError(f"{dropdown.description} {value!r} not found (have: {', '.join(dropdown.options)})")
            dropdown.value = value

    def selection(self) -> dict[str, Any] | None:
        """The selected request row (None when there is nothing to show)."""
        if self._frame.empty or self.task.value is None or self.request.value is None:
            return None
        path = suite_path(self.runs, self.host.value, self.model.value, self.suite.value)
        return pick_request(self._frame, self.task.value, self.request.value) | {"path": str(path)}

    def describe(self) -> str:
        if self.runs.empty:
            return f"{NO_REQUESTS}: no run folders under {self.root}"
        return (f"{len(self.runs)} suite folder(s) under {self.root}; showing {self.host.value} · "
                f"{self.model.value} · {self.suite.value} · {self.task.value} · {self.request.value}")

    def _redraw(self) -> None:
        if self._busy:
            return
        self.output.clear_output(wait=True)
        with self.output:
            row = self.selection()
            if row is None:
                print(self.describe())
            else:
                render(row, show_timeline=self.show_timeline)
