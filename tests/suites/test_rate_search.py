"""The search for the highest rate meeting the SLOs and the over-saturation flag (benchlib.analysis.serving's
SEARCH and OVERSATURATION RULES), on rows with known timing and against a fake server of known capacity.

The capacity server is the fake server behind one slot: a request is served (first token 40 ms after its slot
frees, then one token 20 ms later) only when the one before it finished, so it completes at most
CAPACITY = 1 / 120 ms = 8.3 req/s and queues every request beyond, without bound. With constant arrivals below
that no request waits; above it each waits longer than the one before (by 1/CAPACITY − 1/rate s), so with a TTFT
SLO of 150 ms the highest rate meeting the SLOs is the capacity itself. (Service times this long keep the
client's and the fake's own few milliseconds, on a busy box, small beside them.)"""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import serving
from benchlib.config.params import ParamsError, SloParams
from benchlib.records.rows import read_requests
from benchlib.suites.load import rate as load_rate
from benchlib.suites.runner import open_session
from tests.fakes.servers import FakeServer
from tests.helpers import make_params

NS = 1_000_000_000
TTFT, ITL = 0.1, 0.02
CAPACITY = 1 / (TTFT + ITL)  # 2 tokens each, one at a time


class OneSlotServer(FakeServer):
    """The fake server serving one chat request at a time; the rest wait in its queue."""

    slot: asyncio.Semaphore | None = None

    async def _chat(self, body: dict, writer: asyncio.StreamWriter, received: int, ollama: bool) -> bool:
        if self.slot is None:
            self.slot = asyncio.Semaphore(1)
        async with self.slot:  # service (the first token's deadline) starts when the slot is free
            return await super()._chat(body, writer, time.perf_counter_ns(), ollama)


@pytest.fixture(scope="module")
def one_slot():
    server = OneSlotServer().start_thread()
    yield server
    server.stop()


def search_params(url: str, **rate):
    settings = {"min_requests": 6, "max_concurrency": 8, "duration_s": 3.0, "arrival": "constant", "search": True,
                "precision": 0.1, "max_levels": 6, "prompt_tokens": {"dist": "fixed", "mean": 24},
                "output_tokens": {"dist": "fixed", "mean": 2}, **rate}
    return make_params(url, {"ttft": TTFT, "itl": ITL, "tokens": 100, "prompt_tokens": "words"},
                       sweep={"concurrency": [1], "context_lengths": [64], "rate": settings,
                              "slo": {"ttft_ms": 150}})


# ---- the rules on known rows ----------------------------------------------------------------------------------
def test_search_bisects_to_the_precision_within_its_levels():
    limit = 23.0
    tried = []
    while (step := serving.search_next(10.0, 40.0, tried, 0.1, 8))["next"] is not None:
        tried.append((step["next"], step["next"] <= limit))
    assert tried[0] == (40.0, False)  # the top of the bracket first
    assert step["answer"] <= limit < step["high"] and step["high"] - step["low"] <= 0.1 * step["high"]
    assert abs(step["answer"] / limit - 1) <= 0.1 and step["levels"] == len(tried) <= 8
    assert step["reason"].startswith("bracket within precision")
    grow = serving.search_next(10.0, 40.0, [(40.0, True)], 0.1, 8)  # the throughput rate itself passes
    assert grow["next"] == 60.0 and grow["answer"] == 40.0 and np.isnan(grow["high"])  # the limit lies above
    above = [(40.0, True), (60.0, True), (90.0, False)]
    assert serving.search_next(10.0, 40.0, above, 0.1, 8)["next"] == 75.0
    noisy = serving.search_next(10.0, 40.0, [(40.0, False), (25.0, False), (30.0, True)], 0.1, 8)
    assert noisy["answer"] != 30.0 and noisy["high"] == 25.0  # a pass above a failure is not the answer
    short = serving.search_next(10.0, 40.0, [(40.0, False), (25.0, False)], 0.01, 2)
    assert short["next"] is None and np.isnan(short["answer"]) and "max_levels (2)" in short["reason"]
    assert serving.search_bracket(10.0, 11.0) == (5.5, pytest.approx(13.2))  # flat: widened as SWEEP RATES
    assert serving.search_next(np.nan, 5.0, [], 0.1, 8)["next"] is None
    hopeless = serving.search_next(10.0, 40.0, [], 0.1, 8, sync_passes=False)  # one at a time already fails
    assert hopeless["next"] is None and "synchronous level fails" in hopeless["reason"]
    with pytest.raises(ParamsError, match="leave rates empty"):
        make_params("http://127.0.0.1:1", sweep={"rate": {"search": True, "rates": [2.0]}})


def queue_rows(n: int, rate: float, service: float, base_ttft: float) -> pd.DataFrame:
    """Constant arrivals to a one-slot server: request i starts service when i − 1 finished."""
    arrive = np.arange(n) / rate
    begin = np.zeros(n)
    for i in range(n):
        begin[i] = max(arrive[i], begin[i - 1] + service if i else 0.0)
    ttft = begin - arrive + base_ttft
    return pd.DataFrame({"task": "rate", "variant": "L", "is_warmup": False, "status": "ok", "repeat": range(n),
                         "scheduled_ns": (arrive * NS).astype("int64") + NS, "start_ns": (arrive * NS).astype("int64")
                         + NS, "queue_wait_s": 0.0, "ttft_s": ttft, "e2e_s": begin - arrive + service,
                         "tpot_s": 0.01, "completion_tokens": 2, "itl_s": [[0.01]] * n, "error_kind": ""})


def test_oversaturation_needs_both_trends_and_a_real_rise():
    plan = {"level": "L", "mode": "constant", "offered_rps": 30.0, "max_concurrency": 64}
    over = serving.rate_level(queue_rows(60, 30.0, 0.05, 0.04), plan, SloParams(), 0.2)
    assert over["oversaturated"] and "Kendall tau" in over["oversaturation"]
    under = serving.rate_level(queue_rows(60, 15.0, 0.05, 0.04), {**plan, "offered_rps": 15.0}, SloParams(), 0.2)
    assert not under["oversaturated"] and under["oversaturation"] == ""
    # TTFT creeping up by 1 % over the window while nothing piles up: significant, but no queue and no real rise
    drift = queue_rows(60, 15.0, 0.05, 0.04)
    drift["ttft_s"] = 0.04 * (1 + 0.01 * np.arange(60) / 60)
    assert not serving.rate_level(drift, {**plan, "offered_rps": 15.0}, SloParams(), 0.2)["oversaturated"]
    few = serving.rate_level(queue_rows(15, 30.0, 0.05, 0.04), plan, SloParams(), 0.2)
    assert not few["oversaturated"]  # under OVERSATURATION_MIN in the window: no test
    levels = pd.DataFrame([over, under])
    assert serving.max_slo_rate(levels) == (15.0, "L")  # an oversaturated level never counts as meeting the SLOs
    assert serving.passes(levels).tolist() == [False, True]


# ---- against the one-slot server --------------------------------------------------------------------------------
def test_a_server_that_queues_without_bound_is_oversaturated(one_slot, outputs):
    params = search_params(one_slot.url, search=False, rates=[5.0, 12.0])
    with open_session(params, "load", concurrency=8, fresh=True) as session:
        levels = load_rate.run_rate_sweep(session, progress=False).set_index("level")
    assert not levels.at["r5", "oversaturated"] and levels.at["r5", "meets_slo"]
    assert levels.at["r12", "oversaturated"] and not levels.at["r12", "meets_slo"]
    assert levels.at["r12", "ttft_s_p50"] > 3 * levels.at["r5", "ttft_s_p50"]  # the queue it flagged


def test_the_search_finds_the_known_capacity_within_its_precision(one_slot, outputs):
    params = search_params(one_slot.url)
    with open_session(params, "load", concurrency=8, fresh=True) as session:
        levels = load_rate.run_rate_sweep(session, progress=False)
        plan = json.loads((session.out_dir / load_rate.RATE_PLAN).read_text())[session.run_id]
    figures = serving.serving_figures(levels)
    searched = levels[levels["search_step"].notna()]
    assert searched["search_step"].tolist() == list(range(1, len(searched) + 1)) and len(searched) <= 6
    assert searched["level"].tolist() == [serving.level_name(r) for r in searched["offered_rps"]]
    outcomes = searched[["offered_rps", "meets_slo", "oversaturation"]].to_dict("records")
    assert abs(figures["search_rate_rps"] / CAPACITY - 1) <= 0.1, outcomes
    assert figures["search_levels"] == len(searched) and plan["search"]["levels"] == len(searched)
    assert figures["search_bound_rps"] - figures["search_rate_rps"] <= 0.1 * figures["search_bound_rps"]
    assert plan["search"]["answer"] == figures["search_rate_rps"]
    failing = searched[~serving.passes(searched)]
    assert len(failing) and failing["offered_rps"].min() > 0.9 * CAPACITY  # nothing well under capacity failed


def test_a_search_cut_mid_way_resumes_where_it_stopped(one_slot, outputs, monkeypatch):
    params = search_params(one_slot.url, max_levels=4, precision=0.01)
    real, calls = load_rate.send_level, []

    def cut_on_the_third_search_level(session, plan, items, due, bar):
        calls.append(plan["level"])
        if plan.get("search_step") == 3:  # half of it goes out, then the process dies
            real(session, plan, items[:len(items) // 2], due[:len(items) // 2], bar)
            raise KeyboardInterrupt
        return real(session, plan, items, due, bar)

    monkeypatch.setattr(load_rate, "send_level", cut_on_the_third_search_level)
    with pytest.raises(KeyboardInterrupt), open_session(params, "load", concurrency=8, fresh=True) as session:
        load_rate.run_rate_sweep(session, progress=False)
    monkeypatch.setattr(load_rate, "send_level", real)
    cut_level = calls[-1]
    with open_session(params, "load", concurrency=8) as session:
        before = read_requests(session.log.path)
        levels = load_rate.run_rate_sweep(session, progress=False)
        after = read_requests(session.log.path)
    rate_rows = after[after["task"] == "rate"]
    assert rate_rows["request_key"].is_unique
    cut_n = int(levels.set_index("level").at[cut_level, "n_requests"])
    assert len(after) - len(before) == cut_n - int((before["variant"] == cut_level).sum()) + \
        sum(int(n) for n in levels.loc[levels["search_step"] > 3, "n_requests"])  # only the missing ones sent
    searched = levels[levels["search_step"].notna()].sort_values("search_step")
    assert searched["level"].tolist()[:3] == calls[-3:] and len(searched) == 4  # max_levels
    assert bool(levels.set_index("level").at[cut_level, "resumed"])
    # the resumed search went on from the levels it had: its steps are the rule's on their outcomes
    tried = [(float(r), bool(ok)) for r, ok in zip(searched["offered_rps"], serving.passes(searched))]
    sync, thr = (float(levels.set_index("level").at[name, "rate_rps"]) for name in ("sync", "throughput"))
    for k in range(1, 4):
        assert serving.search_next(sync, thr, tried[:k], 0.01, 4)["next"] == tried[k][0]
