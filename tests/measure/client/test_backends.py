"""Backends against a local server that speaks each project's documented wire shapes, with known timings, so the
server-side figures and the cross-check flags can be asserted exactly.

Shapes the fake server (tests/fakes/servers.py) reproduces, and where they are documented:
- Ollama /api/chat NDJSON: message.content / message.thinking / message.tool_calls per line; the final line
  (done: true) carries done_reason, total_duration, load_duration, prompt_eval_count, prompt_eval_duration,
  eval_count, eval_duration (all durations in ns) and, since 0.3x, prompt_eval_cached_count.
  https://github.com/ollama/ollama/blob/main/docs/api.md#generate-a-chat-completion ,
  https://docs.ollama.com/api/chat , https://docs.ollama.com/api/usage .
  keep_alive: a number is seconds, a string goes through Go's time.ParseDuration (ollama api/types.go,
  Duration.UnmarshalJSON). GET /api/ps (size, size_vram, context_length, expires_at), GET /api/version,
  GET /api/tags, POST /api/show: docs/api.md "List Running Models", "Show Model Information".
- llama.cpp llama-server: the last stream chunk's `timings` {cache_n, prompt_n, prompt_ms, prompt_per_token_ms,
  prompt_per_second, predicted_n, predicted_ms, predicted_per_token_ms, predicted_per_second} beside `usage`
  with prompt_tokens_details.cached_tokens; prompt_n counts processed tokens, cache_n those reused.
  https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md ("Timings and context usage", GET /props).
- vLLM: usage.prompt_tokens_details.cached_tokens (with --enable-prompt-tokens-details), thinking text in
  delta.reasoning (renamed from reasoning_content, vllm-project/vllm#27752), chat_template_kwargs.enable_thinking.
  https://docs.vllm.ai/en/latest/features/reasoning_outputs.html
"""

from __future__ import annotations

import httpx
import pandas as pd
import pytest

from benchlib.analysis import crosscheck
from benchlib.config.params import EmbeddedParams
from benchlib.measure.client.backends import make_backend, ollama_keep_alive
from benchlib.measure.pacing import event_loop
from benchlib.measure.servers.llama_cpp import EmbeddedServer, parse_timings
from tests.helpers import make_params, send


def wire(fake_server):
    """The fields of the last request as the server received them."""
    return httpx.get(f"{fake_server.url}/log").json()[-1]["request"]


# ---- Ollama native /api/chat ---------------------------------------------------------------------------------
def test_ollama_final_chunk_gives_exact_server_rates(params_for, fake_server):
    record = send(params_for({"ttft": 0.1, "itl": 0.02, "server_itl": 0.02, "tokens": 40, "prompt_tokens": 30},
                             kind="ollama"))
    # eval_count 40 / eval_duration 800_000_000 ns; prompt_eval_count 30 / prompt_eval_duration 100_000_000 ns
    assert record.server_decode_tps == pytest.approx(50.0, rel=1e-12)
    assert record.server_prefill_tps == pytest.approx(300.0, rel=1e-12)
    assert record.server_load_s == 0.0 and record.cached_tokens is None
    assert record.completion_tokens == 40 and record.prompt_tokens == 30 and record.token_source == "usage"
    crosscheck.flag_record(record)
    assert record.decode_ratio == pytest.approx(1.0, abs=0.05)  # client (39 ITLs) vs server, same real rate
    assert not (record.rate_mismatch or record.cache_suspect or record.cold)
    sent = wire(fake_server)
    assert sent["think"] is False and sent["keep_alive"] == "30m" and sent["options"]["num_predict"] == 64


def test_ollama_load_duration_above_bound_is_cold(params_for):
    params = params_for({"load_ms": 2500, "tokens": 4}, kind="ollama", run={"cold_load_s": 1.0})
    record = crosscheck.flag_record(send(params), cold_load_s=params.run.cold_load_s)
    assert record.server_load_s == 2.5 and record.cold
    warm = crosscheck.flag_record(send(params_for({"load_ms": 3, "tokens": 4}, kind="ollama")), cold_load_s=1.0)
    assert warm.server_load_s == pytest.approx(0.003) and not warm.cold


def test_ollama_prompt_cache_count_is_cache_suspect(params_for):
    record = crosscheck.flag_record(send(params_for({"prompt_tokens": 30, "cached_tokens": 24, "tokens": 4},
                                                    kind="ollama")))
    assert record.cached_tokens == 24 and record.prompt_tokens == 30 and record.cache_suspect


def test_ollama_thinking_is_kept_apart_and_counted_by_the_server(params_for, fake_server):
    record = send(params_for({"tokens": 5, "reasoning_tokens": 3}, kind="ollama"), thinking=True)
    assert record.reasoning_text.split() == ["alpha", "bravo", "charlie"]
    assert record.response_text.split()[0] == "delta"
    assert record.completion_tokens == 8  # eval_count covers thinking and answer
    assert wire(fake_server)["think"] is True


def test_keep_alive_is_sent_the_way_ollama_parses_it(fake_server):
    assert ollama_keep_alive("30m") == "30m" and ollama_keep_alive("0") == 0
    assert ollama_keep_alive("300") == 300 and ollama_keep_alive("-1") == -1 and ollama_keep_alive("1.5") == 1.5
    assert ollama_keep_alive("nan") == "nan" and ollama_keep_alive(" 10m ") == "10m"
    fake_server.loaded.clear()
    send(make_params(fake_server.url, {"tokens": 2}, kind="ollama"))
    assert [m["name"] for m in httpx.get(f"{fake_server.url}/api/ps").json()["models"]] == ["fake-model"]
    send(make_params(fake_server.url, {"tokens": 2}, kind="ollama", server={"keep_alive": "0"}))
    assert wire(fake_server)["keep_alive"] == 0  # a JSON number: unload after this request (cold loads on purpose)
    assert httpx.get(f"{fake_server.url}/api/ps").json()["models"] == []


# ---- OpenAI-compatible: llama.cpp timings, vLLM usage ----------------------------------------------------------
def test_llamacpp_timings_documented_example(params_for):
    # README example: cache_n 236, prompt_n 1 -> the prompt was 237 tokens, 236 of them reused from the cache
    spec = {"ttft": 0.04, "itl": 0.01, "server_itl": 0.01, "tokens": 20, "timings": True, "prompt_tokens": 237,
            "prompt_n": 1, "cached_tokens": 236}
    record = crosscheck.flag_record(send(params_for(spec)))
    assert record.server_prompt_tokens == 1 and record.prompt_tokens == 237 and record.cached_tokens == 236
    assert record.server_prefill_tps == pytest.approx(1 / 0.04, rel=1e-9)
    assert record.server_decode_tps == pytest.approx(100.0, rel=1e-9)  # predicted_n 20 / predicted_ms 200
    assert record.cache_suspect and not record.rate_mismatch


@pytest.mark.parametrize("kind", ["openai", "ollama"])
def test_server_rate_disagreement_is_rate_mismatch(params_for, kind):
    # the server claims 10 ms per token while tokens really arrive every 20 ms: a 2x disagreement
    spec = {"itl": 0.02, "server_itl": 0.01, "tokens": 30, "timings": True}
    record = crosscheck.flag_record(send(params_for(spec, kind=kind)))
    assert record.server_decode_tps == pytest.approx(100.0, rel=1e-9)
    assert record.decode_tps == pytest.approx(50.0, rel=0.05)
    assert record.decode_ratio == pytest.approx(0.5, rel=0.05) and record.rate_mismatch


def test_vllm_cached_tokens_reasoning_field_and_thinking_switch(params_for, fake_server):
    spec = {"tokens": 4, "reasoning_tokens": 2, "reasoning_field": "reasoning", "cached_tokens": 30,
            "prompt_tokens": 40}
    record = crosscheck.flag_record(send(params_for(spec)))
    assert record.reasoning_text.split() == ["alpha", "bravo"] and record.response_text.split()[0] == "charlie"
    assert record.cached_tokens == 30 and record.cache_suspect
    assert record.server_decode_tps is None and record.decode_ratio is None  # vLLM reports no server timings
    sent = wire(fake_server)
    assert sent["chat_template_kwargs"] == {"enable_thinking": False}
    assert sent["stream_options"] == {"include_usage": True}


# ---- a whole table through the flags ---------------------------------------------------------------------------
def test_requests_table_flags_and_counts(params_for):
    runs = [("clean", {"tokens": 20}, "ollama"), ("clean", {"tokens": 20}, "ollama"),
            ("clean", {"tokens": 20}, "ollama"),
            ("cold", {"tokens": 20, "load_ms": 2500}, "ollama"),
            ("cached", {"tokens": 20, "cached_tokens": 8}, "ollama"),
            ("liar", {"tokens": 20, "itl": 0.02, "server_itl": 0.01, "timings": True}, "openai")]
    rows = []
    for label, spec, kind in runs:
        record = send(params_for(spec, kind=kind))
        record.task, record.variant = "tbl", label
        rows.append(record.to_row())
    flagged = crosscheck.flag_requests(pd.DataFrame(rows), cold_load_s=1.0)
    assert flagged["cold"].tolist() == [False, False, False, True, False, False]
    assert flagged["cache_suspect"].tolist() == [False, False, False, False, True, False]
    assert flagged["rate_mismatch"].tolist() == [False] * 5 + [True]
    counts = crosscheck.flag_counts(flagged).iloc[0]
    assert (counts.n_flag_checked, counts.n_cold, counts.n_cache_suspect, counts.n_rate_mismatch) == (6, 1, 1, 1)
    assert counts.n_decode_ratio == 6 and counts.decode_ratio_median == pytest.approx(1.0, abs=0.06)


# ---- embedded llama-cpp-python: per-request figures from its llama_perf log lines --------------------------------
# Verbatim from the real embedded server's log (Gemma 3 270M). Request 1: cut at max_tokens=64, 64 streamed deltas;
# request 2: ended by end-of-turn after 13 deltas; request 3: end-of-turn as the first token (empty answer).
EMBEDDED_LOG = """\
Llama.generate: 10 prefix-match hit, remaining 13 prompt tokens to eval
llama_perf_context_print:        load time =       0.43 ms
llama_perf_context_print: prompt eval time =      82.20 ms /    13 tokens (    6.32 ms per token,   158.16 tokens per second)
llama_perf_context_print:        eval time =    1001.44 ms /    63 runs   (   15.90 ms per token,    62.91 tokens per second)
llama_perf_context_print:       total time =    1235.72 ms /    76 tokens
llama_perf_context_print:    graphs reused =         62
INFO:     127.0.0.1:36848 - "POST /v1/chat/completions HTTP/1.1" 200 OK
Llama.generate: 10 prefix-match hit, remaining 12 prompt tokens to eval
llama_perf_context_print:        load time =       0.30 ms
llama_perf_context_print: prompt eval time =      60.97 ms /    12 tokens (    5.08 ms per token,   196.81 tokens per second)
llama_perf_context_print:        eval time =     333.52 ms /    13 runs   (   25.66 ms per token,    38.98 tokens per second)
llama_perf_context_print:       total time =     441.01 ms /    25 tokens
llama_perf_context_print:    graphs reused =         12
Llama.generate: 10 prefix-match hit, remaining 12 prompt tokens to eval
llama_perf_context_print:        load time =       0.30 ms
llama_perf_context_print: prompt eval time =     107.13 ms /    12 tokens (    8.93 ms per token,   112.01 tokens per second)
llama_perf_context_print:        eval time =       0.00 ms /     1 runs   (    0.00 ms per token,      inf tokens per second)
llama_perf_context_print:       total time =     109.31 ms /    13 tokens
"""


def test_embedded_log_timings_and_token_mapping():
    cut, eos, empty = parse_timings(EMBEDDED_LOG)
    assert (cut.prompt_tokens, cut.cached_tokens, cut.prompt_eval_tokens) == (23, 10, 13)
    assert cut.eval_runs == 63 and cut.total_ms == 1235.72
    assert cut.completion_tokens("length") == 64  # the 64th token is sampled, never evaluated
    assert eos.completion_tokens("stop") == 13    # end-of-turn sampled after the 13th token's eval, not counted
    assert empty.eval_runs == 0 and empty.completion_tokens("stop") == 0  # "0.00 ms / 1 runs" is max(1, 0)
    assert empty.decode_tps is None and empty.decode_wall_tps is None
    # decode compute only vs the generation phase's wall time (what the client's clock spans)
    assert cut.decode_tps == pytest.approx(63 / 1.00144)
    assert cut.decode_wall_ms == pytest.approx(1235.72 - 82.20)
    assert cut.decode_wall_tps == pytest.approx(63 / (1.23572 - 0.08220))


def test_embedded_log_implausible_prompt_time_yields_no_server_rates():
    """Seen on the real server: the prompt pass logged as 0.08 ms for 70 tokens (875k tok/s on 2 CPU cores)."""
    bogus, sane = parse_timings(
        "Llama.generate: 7 prefix-match hit, remaining 70 prompt tokens to eval\n"
        "llama_perf_context_print: prompt eval time =       0.08 ms /    70 tokens\n"
        "llama_perf_context_print:        eval time =     784.81 ms /    63 runs\n"
        "llama_perf_context_print:       total time =    1536.42 ms /   133 tokens\n"
        "llama_perf_context_print: prompt eval time =     482.65 ms /   137 tokens\n"
        "llama_perf_context_print:        eval time =     997.48 ms /    63 runs\n"
        "llama_perf_context_print:       total time =    1687.25 ms /   200 tokens\n")
    for timing in (bogus, sane):
        timing.drop_implausible_prompt_time()
    assert bogus.prefill_tps is None and bogus.decode_wall_tps is None and "implausible" in bogus.prompt_timing_note
    assert bogus.prompt_tokens == 77 and bogus.completion_tokens("length") == 64  # counts stay usable
    assert sane.prefill_tps == pytest.approx(137 / 0.48265) and sane.prompt_timing_note == ""
    assert sane.decode_wall_tps == pytest.approx(63 / (1.68725 - 0.48265))


def test_ollama_backend_closes_its_client(params_for):
    backend = make_backend(params_for(kind="ollama").server, params_for(kind="ollama").run)
    assert not backend.http.is_closed
    event_loop.run(backend.aclose())
    assert backend.http.is_closed


def test_embedded_server_openmp_spin_is_short_unless_the_user_set_openmp_wait(monkeypatch, tmp_path):
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    server = EmbeddedServer(EmbeddedParams(), "m", tmp_path / "server.log")
    assert server.environment()["GOMP_SPINCOUNT"] == "1000" and server.openmp() == {"GOMP_SPINCOUNT": "1000"}
    assert "GOMP_SPINCOUNT" not in EmbeddedServer(EmbeddedParams(omp_spin_count=None), "m", tmp_path).environment()
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")  # the user's choice wins, and is what the manifest records
    assert server.openmp() == {"OMP_WAIT_POLICY": "active"}
    monkeypatch.setenv("GOMP_SPINCOUNT", "50")
    assert server.openmp() == {"GOMP_SPINCOUNT": "50", "OMP_WAIT_POLICY": "active"}
