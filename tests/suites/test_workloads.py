"""The load workloads against a fake server with a prefix cache (tests/fakes/servers.PrefixCacheServer): multi-turn
prompts carry the model's actual earlier answers, shared-prefix prompts share exactly their prefix, a trace is
replayed at its scaled offsets, a cut run sends only what is missing, and the tables come from the rows."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest

from benchlib.config.params import ParamsError, TelemetryParams
from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure.telemetry import Telemetry
from benchlib.measure.traffic.traces import TraceError, read_trace
from benchlib.records.rows import read_requests
from benchlib.suites import runner
from benchlib.suites.load import workloads
from benchlib.suites.load.workloads import run_workloads
from benchlib.suites.runner import open_session
from benchlib.suites.study import load_study
from tests.fakes.fake_nvml import FakeGpu, FakeNvml
from tests.fakes.servers import PrefixCacheServer
from tests.helpers import make_params

FAKE = {"ttft": 0.005, "itl": 0.001}
OFF = {"enabled": False}


@pytest.fixture
def cache_server():
    server = PrefixCacheServer(metrics="vllm").start_thread()
    yield server
    server.stop()


def params_with(server, **workload):
    sections = {"multiturn": OFF, "shared_prefix": OFF, "trace": OFF, **workload}
    return make_params(server.url, FAKE, sweep={"concurrency": [1], "context_lengths": [64],
                                                 "rate": {"enabled": False}, "workloads": sections},
                       run={"warmups": 0, "repeats": 1, "max_tokens": 64, "timeout_s": 5, "connect_timeout_s": 2,
                            "server_metrics_poll_s": 0.2})


def chats(server):
    """What the server received, chat requests only, in arrival order, with their reply numbers."""
    return [dict(r, number=i) for i, r in enumerate(server.received)]


def run(params, root=None):
    with open_session(params, "load", concurrency=8, root=root) as session:
        levels, turns, replay = run_workloads(session, progress=False)
        rows = read_requests(session.log.path)
        out_dir = session.out_dir
    return levels, turns, replay, rows, out_dir


MULTITURN = {"enabled": True, "sessions": 3, "turns": 3, "max_concurrency": 2, "user_tokens": 12,
             "output_tokens": 6, "think_time_s": 0.01, "think": "fixed"}


# ---- multi-turn ------------------------------------------------------------------------------------------------
def test_each_turn_carries_the_history_with_the_models_actual_answers(cache_server, outputs):
    levels, turns, _, rows, out_dir = run(params_with(cache_server, multiturn=MULTITURN))
    received = chats(cache_server)[1:]  # the first is the calibration request, outside every window
    assert sorted(len(r["messages"]) for r in received) == [1, 1, 1, 3, 3, 3, 5, 5, 5]  # turn t: 2t − 1 messages
    by_messages = {json.dumps(r["messages"]): r["number"] for r in received}
    for r in received:
        messages = r["messages"]
        for j in range(1, len(messages), 2):  # every assistant message is the server's answer to that prefix
            assert messages[j]["role"] == "assistant" and messages[j - 1]["role"] == "user"
            asked = by_messages[json.dumps(messages[:j])]
            assert messages[j]["content"].startswith(f"reply{asked} ")
    mine = rows[rows["task"] == "multiturn"]
    assert len(mine) == 9 and set(mine["status"]) == {"ok"} and mine["request_key"].is_unique
    assert sorted(mine["variant"].unique()) == ["t1", "t2", "t3"] and sorted(mine["repeat"].unique()) == [0, 1, 2]
    # the user message of each turn: user_tokens words by the fake tokenizer, distinct across the run
    assert (mine["prompt"].str.split().str.len() == 12).all() and mine["prompt"].is_unique
    # later turns find their history in the cache; first turns share only the template's opening tokens
    table = turns.set_index("turn")
    assert list(table.index) == ["1", "2", "3", "later"] and list(table["n"]) == [3, 3, 3, 6]
    assert table.at["1", "cached_share"] < 0.2 < 0.5 < table.at["later", "cached_share"]
    level = levels.set_index("workload").loc["multiturn"]
    assert level["level"] == "3x3" and level["n_requests"] == 9 and level["n_ok"] == 9
    assert level["ttft_first_s_p50"] > 0 and level["ttft_later_s_p50"] > 0
    assert pd.read_csv(out_dir / workloads.TURNS_CSV)["turn"].astype(str).tolist() == ["1", "2", "3", "later"]


def test_think_times_are_seeded_and_have_their_mean(cache_server):
    params = params_with(cache_server, multiturn={**MULTITURN, "turns": 1000, "think_time_s": 2.0,
                                                  "think": "exponential"})
    wp = params.sweep.workloads
    pauses = workloads.think_times(wp, 0)
    assert len(pauses) == 999 and np.mean(pauses) == pytest.approx(2.0, rel=0.1)
    assert pauses == workloads.think_times(wp, 0) and pauses != workloads.think_times(wp, 1)
    fixed = params_with(cache_server, multiturn={**MULTITURN, "think_time_s": 0.5, "think": "fixed"})
    assert workloads.think_times(fixed.sweep.workloads, 4) == [0.5, 0.5]


# ---- shared prefix -----------------------------------------------------------------------------------------------
SHARED = {"enabled": True, "prefixes": 2, "suffixes": 3, "prefix_tokens": 40, "suffix_tokens": 12,
          "output_tokens": 4}


def test_shared_prefix_requests_share_exactly_their_prefix(cache_server, outputs):
    params = params_with(cache_server, shared_prefix=SHARED)
    levels, _, _, rows, _ = run(params)
    mine = rows[rows["task"] == "prefix"]
    assert len(mine) == 6 and set(mine["status"]) == {"ok"}
    heads = {}
    for _, row in mine.iterrows():
        head, tail = row["prompt"].split("\n", 2)[:2], row["prompt"].split("\n", 2)[2]
        heads.setdefault(row["variant"], set()).add("\n".join(head))
        assert tail.startswith("(ref ")  # the request's own part starts right after the prefix
    assert {v: len(h) for v, h in heads.items()} == {"p0": 1, "p1": 1}  # one prefix text per group ...
    assert heads["p0"] != heads["p1"]  # ... and the groups' differ
    prefix = next(iter(heads["p0"]))
    assert len(prefix.split()) == 40  # prefix_tokens, one fake token a word
    assert mine["prompt"].is_unique and (mine["prompt_tokens"] == 52).all()  # 40 + 12, template included
    # sent in the seeded interleaved order; after a prefix's first request every one finds the prefix cached
    sent = [r for r in chats(cache_server) if r["prompt_tokens"] == 52]
    order = [(p, s) for p, s in workloads.prefix_order(params.sweep.workloads)]
    assert order != sorted(order)  # interleaved, not grouped
    firsts = {}
    for (p, _), request in zip(order, sent):
        assert request["messages"][0]["content"].startswith(next(iter(heads[f"p{p}"])))
        if p in firsts:
            assert request["cached_tokens"] >= 1 + 40  # the role marker and the whole prefix
        else:
            firsts[p] = request
            assert request["cached_tokens"] < 40
    level = levels.set_index("workload").loc["prefix"]
    expected = sum(r["cached_tokens"] for r in sent) / sum(r["prompt_tokens"] for r in sent)
    assert level["cache_hit_share"] == pytest.approx(expected) and level["cache_reported_share"] == 1.0
    assert 0.5 < level["cache_hit_share"] < 1.0
    # the server's own counters over the level's window: the same requests, so the same share
    assert level["server_cache_hit_share"] == pytest.approx(expected)


# ---- trace replay ----------------------------------------------------------------------------------------------
TRACE_LINES = [
    {"timestamp": 0, "input_length": 40, "output_length": 100, "hash_ids": [0, 1, 2]},
    {"timestamp": 80, "input_length": 60, "output_length": 3, "hash_ids": [0, 1, 2, 3]},
    {"timestamp": 200, "input_length": 30, "output_length": 5, "hash_ids": [7, 8]},
    {"timestamp": 200, "input_length": 44, "output_length": 5, "hash_ids": [0, 1, 2]},
    {"timestamp": 360, "input_length": 50, "output_length": 5, "hash_ids": [9, 10, 11, 12]},
    {"timestamp": 400, "input_length": 61, "output_length": 5, "hash_ids": [0, 1, 2, 3, 4]},
]


def trace_file(tmp_path):
    path = tmp_path / "small.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in TRACE_LINES))
    return path


def test_trace_replay_sends_at_the_scaled_offsets_with_shared_blocks(cache_server, outputs, tmp_path):
    path = trace_file(tmp_path)
    spans = {}
    for scale in (0.5, 1.0):  # the second is the control: the same trace at half the speed
        params = params_with(cache_server, trace={"enabled": True, "path": str(path), "time_scale": scale,
                                                  "block_tokens": 10, "max_output_tokens": 8})
        levels, _, replay, rows, _ = run(params, root=tmp_path / f"x{scale}")
        mine = rows[rows["task"] == "trace"].set_index("repeat").sort_index()
        assert list(mine.index) == [1, 2, 3, 4, 5, 6] and set(mine["status"]) == {"ok"}
        assert mine["max_tokens"].tolist() == [8, 3, 5, 5, 5, 5]  # output_length, capped
        assert (mine["prompt_tokens"] == mine["target_prompt_tokens"]).all()
        assert mine["prompt_tokens"].tolist() == [40, 60, 30, 44, 50, 61]
        planned = replay.set_index("line")["planned_offset_s"]
        assert planned.to_dict() == pytest.approx({1: 0.0, 2: 0.08 * scale, 3: 0.2 * scale, 4: 0.2 * scale,
                                                   5: 0.36 * scale, 6: 0.4 * scale})
        # never early: each request left at or after its due instant, and in the trace's order
        assert (replay["late_ms"] >= 0).all()
        assert (replay["actual_offset_s"] >= replay["planned_offset_s"]).all()
        starts = mine["start_ns"].astype(float)
        for a in mine.index:
            for b in mine.index:
                if planned[a] < planned[b]:
                    assert starts[a] < starts[b], (a, b)
        # from the first due instant, not the first start: a first request that left 2 ms late (a busy loop) would
        # shorten a start-to-start span below the plan while nothing left early
        spans[scale] = (starts.max() - mine["scheduled_ns"].astype(float).min()) / 1e9
        assert spans[scale] >= planned.max() - 1e-6  # ns rounding of the due instants
        level = levels.set_index("workload").loc["trace"]
        assert level["level"] == "small" and level["n_ok"] == 6 and level["send_late_max_ms"] >= 0
    assert spans[0.5] < spans[1.0]  # twice as fast replays in less time than the control
    # whole 10-token blocks that fit with the tail's 3 + 16 tokens after them: line 1 (40 tokens) takes [0, 1] of
    # its [0, 1, 2], line 2 (60) all of [0, 1, 2, 3], line 6 (61) [0, 1, 2, 3] of its five
    assert replay.set_index("line")["whole_blocks"].to_dict() == {1: 2, 2: 4, 3: 1, 4: 2, 5: 3, 6: 4}
    # the same hash id gives the same text: a request finds the blocks an earlier one sent cached; others find none
    received = [r for r in cache_server.received if r["prompt_tokens"] in (40, 60, 30, 44, 50, 61)][-6:]
    by_length = {r["prompt_tokens"]: r for r in received}
    assert by_length[60]["cached_tokens"] >= 1 + 2 * 10  # line 2 after line 1: two blocks
    assert by_length[44]["cached_tokens"] >= 1 + 2 * 10  # line 4 after line 1 (and 2): two blocks
    assert by_length[61]["cached_tokens"] >= 1 + 4 * 10  # line 6 after line 2: four blocks
    assert by_length[30]["cached_tokens"] < 10 and by_length[50]["cached_tokens"] < 10  # blocks nobody sent before


def test_a_malformed_trace_stops_before_anything_is_sent(cache_server, outputs, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(TRACE_LINES[0]) + "\n" + '{"timestamp": 5}\n')
    params = params_with(cache_server, trace={"enabled": True, "path": str(path)})
    with pytest.raises(TraceError, match=r"bad\.jsonl:2: missing input_length, output_length"):
        run(params)
    assert cache_server.received == []


def test_bad_workload_params_get_one_line(cache_server):
    with pytest.raises(ParamsError, match=r"sweep\.workloads\.trace\.time_scale"):
        params_with(cache_server, trace={"enabled": True, "time_scale": 0})
    with pytest.raises(ParamsError, match=r"sweep\.workloads\.multiturn\.sessions"):
        params_with(cache_server, multiturn={"enabled": True, "sessions": 0})


# ---- resume ----------------------------------------------------------------------------------------------------
def test_a_cut_run_sends_only_the_missing_requests(cache_server, outputs, tmp_path):
    params = params_with(cache_server, multiturn=MULTITURN, shared_prefix=SHARED,
                         trace={"enabled": True, "path": str(trace_file(tmp_path)), "time_scale": 0.2,
                                "block_tokens": 10, "max_output_tokens": 8})
    first, _, _, rows, out_dir = run(params)
    assert set(first["workload"]) == {"multiturn", "prefix", "trace"} and not first["resumed"].any()
    path = out_dir / "requests.csv"
    with path.open(newline="", encoding="utf-8") as handle:  # prompts span lines: cut whole CSV records
        header, *body = list(csv.reader(handle))
    keys = [record[header.index("request_key")] for record in body]
    # every third turn, conversation 1's second turn, four of the six shared-prefix requests, two trace requests
    cut = {k for k in keys if "/multiturn/t3/" in k or k.startswith("load/multiturn/t2/r1/")}
    cut |= set(sorted(k for k in keys if "/prefix/" in k)[2:])
    cut |= set(sorted(k for k in keys if "/trace/" in k)[-2:])
    assert len(cut) == 3 + 1 + 4 + 2
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header] + [record for record, key in zip(body, keys) if key not in cut])
    kept_rows = read_requests(path)
    answers = dict(zip(kept_rows["request_key"], kept_rows["response_text"]))
    before = len(cache_server.received)
    second, turns, _, rows, _ = run(params)
    resent = cache_server.received[before:]
    assert len(resent) == len(cut)  # the calibration row was kept: only the missing requests went out
    rows = rows[rows["task"].isin(["multiturn", "prefix", "trace"])]
    assert rows["request_key"].is_unique and set(rows["request_key"]) == {k for k in keys if "/context/" not in k}
    assert second.set_index("workload")["resumed"].all()
    # a resumed turn carries the answers recorded before the cut (or, after a turn sent again, that turn's new one)
    recorded = set(answers.values())
    carried = [m["content"] for r in resent for m in r["messages"][1::2]]
    assert sum(c in recorded for c in carried) >= 4  # conversations 0 and 2: turns 1 and 2 as recorded
    assert all(c in recorded or int(c.split()[0].removeprefix("reply")) >= before for c in carried)
    size = path.stat().st_size
    run(params)
    assert path.stat().st_size == size  # finished: nothing re-sent
    assert set(turns["turn"]) == {"1", "2", "3", "later"}


def test_the_traffic_study_turns_the_workloads_on_and_the_default_leaves_them_off():
    traffic = load_study(PROJECT_ROOT / "params" / "studies" / "traffic.yaml")
    [deployment] = traffic.deployments
    wp = deployment.params.sweep.workloads
    assert wp.multiturn.enabled and wp.shared_prefix.enabled and wp.trace.enabled
    assert deployment.params.server.variant == "traffic"  # its own folder, beside the default study's
    assert len(read_trace(workloads.trace_path(wp))) == 40  # the shipped trace, found from the project root
    for path in ("default.yaml", "full.yaml"):  # make run keeps its budget: no workload unless asked for
        assert not any(d.params.sweep.workloads.enabled() for d in load_study(PROJECT_ROOT / "params" / "studies"
                                                                                / path).deployments)


def test_each_workload_has_its_own_energy_window(cache_server, outputs, monkeypatch, tmp_path):
    """A fake GPU drawing exactly 120 W: a workload's energy is 120 W × its own window ('task:level'); the prompt
    fitting and the calibration request lie in no workload's window."""
    nvml = FakeNvml([FakeGpu(power_w=120.0)])
    monkeypatch.setattr(runner, "Telemetry", lambda settings, out_dir: Telemetry(
        TelemetryParams(power_hz=50, slow_hz=10), out_dir, nvml=nvml, environ={}))
    params = params_with(cache_server, shared_prefix=SHARED, trace={
        "enabled": True, "path": str(trace_file(tmp_path)), "time_scale": 0.5, "block_tokens": 10})
    with open_session(params, "load", concurrency=8) as session:
        levels, _, _ = run_workloads(session, progress=False)
        windows = session.telemetry.windows_frame()
    assert levels["workload"].tolist() == ["prefix", "trace"]
    for _, level in levels.iterrows():
        window = windows[windows["window"] == f"{level['workload']}:{level['level']}"].iloc[-1]
        assert window["kind"] == "level" and level["energy_reason"] == ""
        assert level["energy_j"] == pytest.approx(120.0 * level["level_window_s"], rel=0.02)
        assert level["tokens_per_joule"] == pytest.approx(level["completion_tokens"] / level["energy_j"])
    assert set(windows.loc[windows["kind"] == "level", "window"]) == {"prefix:2x3", "trace:small"}
