"""Request explorer: runs and requests listed from outputs/, media resolved through the task files, metrics,
verdicts, the telemetry timeline, the cascading dropdowns, and notebooks/explore.ipynb through papermill."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import papermill
import pytest

from benchlib.config.paths import NOTEBOOKS_DIR, PROJECT_ROOT
from benchlib.suites.notebooks import execute_notebook
from benchlib.views import evidence, timeline
from benchlib.views import explorer as explorer_view
from tests.fakes.synthetic_run import SYN_HOST, SYN_MODEL, SYN_SERVER, SYN_SYSTEM, write_graded, write_synthetic_run


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return write_synthetic_run(tmp_path_factory.mktemp("outputs"))


def test_list_runs_skips_archived_and_orders_suites(root):
    runs = explorer_view.list_runs(root)
    assert runs["suite"].tolist() == ["text", "vision", "audio", "video"]
    assert set(runs["host"]) == {SYN_HOST} and set(runs["model"]) == {SYN_MODEL}
    assert runs.set_index("suite").loc["text", "n_requests"] == 7  # 1 warm-up + 2 tasks × 3
    assert not any("archived" in p for p in runs["path"])
    assert explorer_view.list_runs(root / "nothing-here").empty
    opts = explorer_view.choices(runs)
    assert opts == {"hosts": [SYN_HOST], "models": [SYN_MODEL], "suites": ["text", "vision", "audio", "video"]}


def test_requests_and_load_request(root):
    frame = explorer_view.read_suite(root / SYN_HOST / SYN_MODEL / "text")
    listed = explorer_view.list_requests(frame)
    assert listed["tasks"] == ["basic_qa", "reasoning"]
    assert listed["requests"][0].startswith("warm-up 0 · ")
    assert [r.split(" · ")[0] for r in listed["requests"]] == ["warm-up 0", "repeat 0", "repeat 1", "repeat 2"]
    first = explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "text")
    assert first["is_warmup"] is False and first["repeat"] == 0  # the first scored request, not the warm-up
    assert first["decode_tps"] == 30.0
    warm = explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "text", "basic_qa", listed["requests"][0])
    assert warm["is_warmup"] is True and warm["decode_tps"] == 99.0  # still reachable by its label
    measured = explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "text", "reasoning", 1)
    assert measured["decode_tps"] == 22.0 and measured["is_warmup"] is False
    assert measured["path"].endswith("/text")
    by_label = explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "text", "basic_qa", listed["requests"][2])
    assert by_label["repeat"] == 1
    with pytest.raises(LookupError, match="no run folder"):
        explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "load")
    with pytest.raises(LookupError, match="no repeat 9"):
        explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "text", "basic_qa", 9)


def test_request_media_resolves_testdata(root):
    vision = explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "vision")
    media = evidence.request_media(vision["task"], vision["variant"])
    assert [m.kind for m in media["items"]] == ["image"] and media["items"][0].exists
    assert media["items"][0].path.suffix == ".png"
    audio = explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "audio")
    assert [m.kind for m in evidence.request_media(audio["task"], audio["variant"])["items"]] == ["audio"]
    assert evidence.request_media("basic_qa", vision["variant"])["note"].startswith("variant")
    assert evidence.request_media("basic_qa", explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "text")["variant"])[
        "note"].startswith("text only")
    assert "no request was sent" in evidence.request_media("video_analysis", "*")["note"]
    assert "not in testdata" in evidence.request_media("no_such_task", "x")["note"]
    frames = evidence.video_frames(PROJECT_ROOT / "testdata" / "video" / "digits_8s_720p.mp4", count=3)
    assert len(frames) == 3 and all(f[:2] == b"\xff\xd8" for f in frames)  # JPEG


def test_metrics_and_verdict(root):
    row = explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "text", "basic_qa", 1)
    metrics = explorer_view.request_metrics(row).set_index("metric")
    assert metrics.loc["time to first token", "value"] == "0.05"
    assert metrics.loc["decode rate", "value"] == "40"
    assert metrics.loc["finish reason", "value"] == "stop"
    assert metrics.loc["flags", "value"] == "none"
    verdict = explorer_view.request_verdict(row)
    assert verdict["passed"] is False and verdict["summary"].startswith("contains: FAIL")
    assert verdict["detail"] == "expected answer missing"
    warm = explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "text", "basic_qa",
                                explorer_view.list_requests(explorer_view.read_suite(row["path"]))["requests"][0])
    assert explorer_view.request_verdict(warm)["summary"] == "not scored: warm-up request"
    assert explorer_view.request_metrics(warm).set_index("metric").loc["flags", "value"] == "is_warmup"
    refused = explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "video")
    assert explorer_view.request_verdict(refused)["summary"] == "not scored: request unsupported"


def test_timeline_shades_the_request(root):
    row = explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "text", "reasoning", 2)
    start, end = timeline.request_span(row)
    assert end - start == pytest.approx(1e9)
    fig = timeline.telemetry_figure(row["path"], row)
    try:
        axes = fig.axes
        assert len(axes) == 4  # cpu_percent and server RSS, full + zoom
        t0 = 0  # the synthetic telemetry starts at t_ns = 0
        zoom = axes[1].get_xlim()
        assert zoom[0] < (start - t0) / 1e9 < (end - t0) / 1e9 < zoom[1]
        assert zoom[1] - zoom[0] == pytest.approx(1.0 + 2 * 3.0)
    finally:
        plt.close(fig)
    refused = explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "video")
    assert timeline.request_span(refused) is None
    plt.close(timeline.telemetry_figure(refused["path"], refused))


def test_render_shows_prompt_media_response_and_timeline(root):
    from IPython.display import HTML, Audio, Image

    row = explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "vision")
    shown = explorer_view.render(row)
    assert any(isinstance(o, Image) for o in shown)
    html = " ".join(o.data for o in shown if isinstance(o, HTML))
    assert "prompt for image_description" in html and "answer to image_description" in html
    assert sum(isinstance(o, Image) for o in shown) == 2  # the task's image and the timeline (as a PNG)
    audio = explorer_view.render(explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "audio"), show_timeline=False)
    assert any(isinstance(o, Audio) for o in audio)
    assert not any(isinstance(o, Image) for o in audio)


def test_dropdowns_cascade(root):
    explorer = explorer_view.Explorer(root, show_timeline=False)
    assert explorer.suite.options == ("text", "vision", "audio", "video")
    assert explorer.task.options == ("basic_qa", "reasoning")
    assert explorer.request.value.startswith("repeat 0")  # the first scored request by default
    assert explorer.request.options[0].startswith("warm-up 0")
    explorer.suite.value = "vision"
    assert explorer.task.options == ("image_description",)
    assert explorer.selection()["task"] == "image_description"
    explorer.select(suite="text", task="reasoning")
    assert len(explorer.request.options) == 3 and explorer.request.value.startswith("repeat 0")
    explorer.select(request=explorer.request.options[2])
    chosen = explorer.selection()
    assert (chosen["task"], chosen["repeat"], chosen["decode_tps"]) == ("reasoning", 2, 24.0)
    with pytest.raises(ValueError, match="not found"):
        explorer.select(suite="load")
    empty = explorer_view.Explorer(root / "nothing-here")
    assert empty.selection() is None and "no run folders" in empty.describe()


def test_explore_notebook_runs_through_papermill(root, tmp_path):
    notebook = NOTEBOOKS_DIR / "explore.ipynb"
    assert "outputs_dir" in papermill.inspect_notebook(str(notebook))
    executed = tmp_path / "explore.ipynb"
    execute_notebook(notebook, executed, {"outputs_dir": str(root)}, progress=False)  # as `frontier-bench` runs one
    cells = json.loads(executed.read_text(encoding="utf-8"))["cells"]
    outputs = [o for c in cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    shown = " ".join("".join(o["data"]["text/html"]) for o in outputs if "text/html" in o.get("data", {}))
    assert f"{SYN_SYSTEM} · text · basic_qa · repeat 0" in shown  # the first scored request, its deployment named
    assert "<img src='data:image/png;base64," in shown  # the timeline, inline in the section's HTML
    assert f"<h3>{SYN_SYSTEM} · text</h3>" in shown and "basic_qa: 1 of 3 wrong" in shown  # the items got wrong
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
    source = json.loads(notebook.read_text(encoding="utf-8"))
    dirty = [c for c in source["cells"] if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty  # committed without outputs


def test_rough_edges_labels_unsent_rows_and_one_figure(root):
    # a load row's variant already names its level: said once
    assert explorer_view.request_label({"repeat": 3, "variant": "c2", "concurrency": 2}) == "repeat 3 · c2"
    assert explorer_view.request_label({"repeat": 0, "variant": "q", "concurrency": 4}) == "repeat 0 · q · c4"
    # a request never sent: the reason in full, no empty prompt/response boxes, no timeline
    refused = explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "video")
    refused["error_message"] = "declared without 'video' input " + "x" * 300
    objects = explorer_view.build(refused)
    from IPython.display import HTML, Image

    html = " ".join(o.data for o in objects if isinstance(o, HTML))
    assert "No request was sent" in html and "x" * 300 in html and "(empty)" not in html
    assert not any(isinstance(o, Image) for o in objects)
    # the timeline arrives as a finished PNG, its figure already closed
    row = explorer_view.load_request(root, SYN_HOST, SYN_MODEL, "text", "reasoning", 2)
    before = plt.get_fignums()
    images = [o for o in explorer_view.build(row) if isinstance(o, Image)]
    assert len(images) == 1 and images[0].data[:4] == b"\x89PNG" and plt.get_fignums() == before


def test_progress_ends_with_a_plain_count(capsys):
    from benchlib.suites.runner import progress_bar

    with progress_bar(3, "text · m", enabled=True) as bar:
        bar.update(2)
    assert "text · m: 2/3 requests done (1 not sent)" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ sections follow

SLOW = f"{SYN_MODEL} · {SYN_SERVER} · slow · {SYN_HOST}"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Two deployments that answered the shipped arithmetic set's first three items: the base one got item 1 wrong,
    the slow one items 0 and 1."""
    root = write_synthetic_run(tmp_path_factory.mktemp("outputs"), with_media=False, text_passed=True)
    write_synthetic_run(root, variant="slow", speed=0.5, with_media=False)
    write_graded(root, [True, False, True], seed="s2024")
    write_graded(root, [False, False, True], variant="slow", seed="s2024")
    return root


class Handle:
    """What IPython's display(…, display_id=True) gives: the notebook output a section swaps when it changes."""

    def __init__(self, shown):
        self.shown = [shown]

    def update(self, shown):
        self.shown.append(shown)


def test_every_section_follows_the_dropdowns(graded, monkeypatch):
    """The request and the items got wrong are redrawn in place when another deployment, suite or request is picked
    (they once kept showing the first deployment)."""
    monkeypatch.setattr(explorer_view, "display", lambda shown, display_id=None: Handle(shown))
    explorer = explorer_view.Explorer(graded, show_timeline=False)
    explorer.select(suite="quality")
    explorer.show("request")
    explorer.show("wrong")
    request, wrong = explorer._handles["request"], explorer._handles["wrong"]
    assert f"<h3>{SYN_SYSTEM} · quality</h3>" in wrong.shown[-1].html and "arithmetic: 1 of 3 wrong" in wrong.shown[-1].html
    assert f"{SYN_SYSTEM} · quality · arithmetic · repeat 0" in request.shown[-1].html
    explorer.model.value = f"{SYN_MODEL} [slow]"  # another deployment: both sections follow
    assert f"<h3>{SLOW} · quality</h3>" in wrong.shown[-1].html and "arithmetic: 2 of 3 wrong" in wrong.shown[-1].html
    assert f"{SLOW} · quality · arithmetic · repeat 0" in request.shown[-1].html
    assert explorer.rendered["wrong"] == wrong.shown[-1].html
    explorer.request.value = explorer.request.options[2]  # another request: the request section follows
    assert f"{SLOW} · quality · arithmetic · repeat 2" in request.shown[-1].html
    explorer.suite.value = "text"  # another suite: the items got wrong are the text suite's
    assert f"<h3>{SLOW} · text</h3>" in wrong.shown[-1].html and "arithmetic" not in wrong.shown[-1].html


def test_the_answer_is_shown_beside_the_expected_one_and_the_checkers_reasoning(graded):
    from benchlib.config.tasks import load_tasks

    item = load_tasks()["arithmetic"].variants[1]
    row = explorer_view.load_request(graded, SYN_HOST, SYN_MODEL, "quality", "arithmetic", 1)
    row["answer_read"], row["score"] = "12", 0.5
    row["check_detail"] = "read last_number: '12'; basic_arithmetic score 0.50 (partial credit)"
    html = explorer_view.answer_beside(row, explorer_view.request_verdict(row))
    response, side = html.split("</div><div style='flex:2;min-width:0'>")
    assert "Response" in response and "answer to arithmetic" in response
    assert side.index("Expected answer") < side.index(str(item.expected["answer"])) < side.index("Answer the checker read")
    assert "Checker: reasoning_gym: FAIL (score 0.50)" in side and "score 0.50 (partial credit)" in side
    unscored = explorer_view.load_request(graded, SYN_HOST, SYN_MODEL, "text", "basic_qa", 0)
    unscored["checker"] = ""
    assert "Expected answer" not in explorer_view.answer_beside(unscored, explorer_view.request_verdict(unscored))
