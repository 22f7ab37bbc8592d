"""A server's token counts are taken only when plausible (benchlib.measure.client.timing.check_counts): a count that is
not a whole number >= 0, or claims more completion tokens than max_tokens and the deltas received allow, is left
empty, named in `implausible_counts`, and kept out of every rate — on both OpenAI-compatible paths and Ollama's —
and summary.csv counts it and computes nothing from it."""

from __future__ import annotations

import pytest

from benchlib.measure.client.timing import MAX_CONTEXT_TOKENS, TOKENS_PER_DELTA, completion_limit
from benchlib.suites.runner import run_suite
from tests.helpers import send

HUGE = {"prompt_tokens": 12, "completion_tokens": 10_000_000, "total_tokens": 10_000_012}
HUGE_PROMPT = f'{{"prompt_tokens": {10**40}, "completion_tokens": 3}}'  # as text: params hold no 133-bit integer


@pytest.mark.parametrize("kind, client, usage, names", [
    ("openai", "wire", HUGE, ["completion_tokens"]),
    ("openai", "sdk", HUGE, ["completion_tokens"]),
    ("openai", "wire", '{"prompt_tokens": -3, "completion_tokens": Infinity}', ["prompt_tokens", "completion_tokens"]),
    ("openai", "sdk", '{"prompt_tokens": "12", "completion_tokens": NaN}', ["prompt_tokens", "completion_tokens"]),
    ("ollama", "wire", {"eval_count": 10_000_000}, ["completion_tokens"]),
    ("ollama", "wire", '{"eval_count": -5, "prompt_eval_count": Infinity}', ["prompt_tokens", "completion_tokens"]),
])
def test_implausible_server_counts_are_flagged_and_left_out(params_for, kind, client, usage, names):
    fake = {"tokens": 3, "usage_json" if isinstance(usage, str) else "usage": usage}
    record = send(params_for(fake, kind=kind, run={"http_client": client}), max_tokens=64)
    assert record.response_text == "alpha bravo charlie "  # the answer itself is kept
    for name in names:
        assert getattr(record, name) is None and name in record.implausible_counts, record.implausible_counts
    assert record.decode_tps is None and record.tpot_s is None  # nothing computed from a count that is not one
    assert record.token_source != "client_deltas"  # nor from the deltas: the server's stream is suspect
    if kind == "ollama":
        assert record.server_decode_tps is None


def test_a_plausible_count_is_kept_however_it_is_written(params_for):
    usage = {"prompt_tokens": 12.0, "completion_tokens": 3, "completion_tokens_details": {"reasoning_tokens": 0}}
    record = send(params_for({"tokens": 3, "usage": usage}), max_tokens=64)
    assert record.implausible_counts == "" and record.prompt_tokens == 12 and record.completion_tokens == 3
    assert record.decode_tps is not None


def test_a_cached_count_above_the_prompt_is_left_out_and_no_prefill_rate_is_made_without_it(params_for):
    record = send(params_for({"tokens": 3, "prompt_tokens": 12, "cached_tokens": 40}), max_tokens=64)
    assert record.cached_tokens is None and "cached_tokens 40 above prompt_tokens 12" in record.implausible_counts
    assert record.prefill_tps is None and record.decode_tps is not None


@pytest.mark.parametrize("client", ["wire", "sdk"])
def test_a_prompt_count_longer_than_any_context_is_left_out_like_a_completion_count(params_for, client):
    """usage.prompt_tokens 10^40 made a prefill rate of 9.4e41 tok/s: it is flagged and left out as an
    implausible completion count is; the plausible completion count and its decode rate stay."""
    record = send(params_for({"tokens": 3, "usage_json": HUGE_PROMPT}, run={"http_client": client}), max_tokens=64)
    assert record.prompt_tokens is None and record.prefill_tps is None
    assert f"prompt_tokens {10**40} above {MAX_CONTEXT_TOKENS}" in record.implausible_counts
    assert record.completion_tokens == 3 and record.decode_tps is not None
    fits = send(params_for({"tokens": 3, "usage": {"prompt_tokens": MAX_CONTEXT_TOKENS, "completion_tokens": 3}},
                           run={"http_client": client}), max_tokens=64)
    assert fits.prompt_tokens == MAX_CONTEXT_TOKENS and fits.implausible_counts == ""  # the ceiling itself is kept


def test_the_servers_own_prompt_count_and_its_prefill_rate_go_with_it(params_for):
    record = send(params_for({"tokens": 3, "timings": True, "prompt_n": 10**12}), max_tokens=64)
    assert record.server_prompt_tokens is None and record.server_prefill_tps is None
    assert "server_prompt_tokens" in record.implausible_counts


def test_the_summary_keeps_a_huge_prompt_count_out_of_the_prefill_rate(params_for, outputs):
    params = params_for({"tokens": 3, "usage_json": HUGE_PROMPT}, tasks=["basic_qa"],
                        run={"warmups": 0, "repeats": 3})
    summary = run_suite(params, "text", progress=False).summary.set_index("task").loc["basic_qa"]
    assert summary["n_implausible"] == 3 and summary["prefill_tps_count"] == 0
    assert not bool(summary["valid"]) and "implausible" in summary["note"]


def test_the_completion_limit_is_the_budget_or_the_deltas():
    assert completion_limit(64, 3) == TOKENS_PER_DELTA * 3  # 10,000,000 in 3 deltas is far above it
    assert completion_limit(4096, 3) == 2 * 4096
    assert completion_limit(0, 1) == TOKENS_PER_DELTA and completion_limit(0, 0) is None  # nothing to judge by


def test_the_summary_counts_implausible_rows_and_computes_no_rate_from_them(params_for, outputs):
    params = params_for({"tokens": 3, "usage": HUGE}, tasks=["basic_qa"], run={"warmups": 0, "repeats": 3})
    result = run_suite(params, "text", progress=False)
    rows = result.requests
    assert (rows["completion_tokens"].isna()).all() and rows["implausible_counts"].str.len().gt(0).all()
    summary = result.summary.set_index("task").loc["basic_qa"]
    assert summary["n_implausible"] == 3 and summary["decode_tps_count"] == 0
    assert not bool(summary["valid"]) and "implausible" in summary["note"]
