"""Open-loop levels sent from several worker processes (benchlib.measure.traffic.workers) against the fake server: the
split, the merged rows (every request once, in requests.csv, scored by the parent), the common schedule (each
request due at t0 + its planned offset in whichever worker sends it), the per-worker lag columns, and resume.

Schedule accuracy is judged against the schedule itself and a one-process control on the same schedule, not an
absolute bound: every due instant recorded by either worker is the planned offset from one common start, exactly,
and the levels here send every 50 ms, so nearly every wire start must lie nearer its own due instant than any
other request's, as in the control (a sender that lost the schedule would misplace most of them)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import serving
from benchlib.measure.client.backends import ChatRequest
from benchlib.measure.traffic import workers, workload
from benchlib.records.rows import RequestRecord, read_requests
from benchlib.suites.load import rate as load_rate
from benchlib.suites.runner import open_session

FAKE = {"ttft": 0.01, "itl": 0.005, "tokens": 100, "prompt_tokens": "words"}


def rate_params(params_for, **rate):
    settings = {"min_requests": 6, "max_concurrency": 8, "duration_s": 1.5, "arrival": "constant", "rates": [20.0],
                "prompt_tokens": {"dist": "fixed", "mean": 24}, "output_tokens": {"dist": "fixed", "mean": 3},
                **rate}
    return params_for(FAKE, sweep={"concurrency": [1], "context_lengths": [64], "rate": settings,
                                   "slo": {"ttft_ms": 500}})


def level_rows(out_dir):
    rows = read_requests(out_dir / "requests.csv")
    return rows[(rows["task"] == "rate") & (rows["variant"] == "r20")].sort_values("repeat").reset_index(drop=True)


# ---- the split --------------------------------------------------------------------------------------------------
def test_workers_resolve_split_and_share_the_cap():
    assert workers.resolve_workers(3, 100.0, 50) == 3
    assert workers.resolve_workers(4, 100.0, 2) == 2  # never more processes than requests
    assert workers.resolve_workers("auto", 10.0, 100) == 1
    assert workers.resolve_workers("auto", 100_000.0, 10**6) >= 1
    assert workers.worker_caps(16, 3) == [6, 5, 5] and workers.worker_caps(1, 2) == [1, 1]
    records = [RequestRecord(repeat=i, request_key=f"k{i}") for i in (0, 1, 2, 3, 5)]  # 4 already done
    items = [(r, ChatRequest(messages=[], max_tokens=1)) for r in records]
    jobs = workers.split_jobs(None, None, items, [0.0, 0.1, 0.2, 0.3, 0.5], 4, 2)
    assert [r.repeat for r in jobs[0].records] == [0, 2] and jobs[0].offsets == [0.0, 0.2]
    assert [r.repeat for r in jobs[1].records] == [1, 3, 5] and jobs[1].offsets == [0.1, 0.3, 0.5]
    assert [j.concurrency for j in jobs] == [2, 2]
    with pytest.raises(ValueError, match="2 send offsets"):
        workers.split_jobs(None, None, items, [0.0, 0.1], 4, 2)


def test_merged_health_sums_cpu_and_keeps_the_worst_worker():
    calm = {"wall_s": 2.0, "client_cpu_s": 0.2, "client_cpu_share": 0.1, "loop_lag_p50_ms": 0.5,
            "loop_lag_p99_ms": 1.0, "loop_lag_max_ms": 2.0, "loop_lag_samples": 200, "client_bound": False,
            "client_bound_reason": "", "n_requests": 10}
    busy = {**calm, "client_cpu_s": 1.8, "client_cpu_share": 0.9, "loop_lag_p99_ms": 7.0, "client_bound": True,
            "client_bound_reason": "client CPU 90% of one core > 50%", "n_requests": 10}
    merged = workers.merged_health([calm, busy])
    assert merged["client_cpu_s"] == pytest.approx(2.0) and merged["client_cpu_per_request_ms"] == pytest.approx(100)
    assert merged["client_cpu_share"] == 0.9 and merged["loop_lag_p99_ms"] == 7.0 and merged["loop_lag_samples"] == 400
    assert merged["client_bound"] and merged["client_bound_reason"] == "worker 1: client CPU 90% of one core > 50%"
    assert not workers.merged_health([calm, calm])["client_bound"]
    refused = "normal (SCHED_FIFO not permitted: Operation not permitted)"
    assert workers.merged_health([{**calm, "pacer": "realtime (SCHED_FIFO 1)"}, {**calm, "pacer": refused}])["pacer"] \
        == "realtime (SCHED_FIFO 1); " + refused  # each different one once
    assert workers.merged_health([{**calm, "pacer": refused}] * 2)["pacer"] == refused


# ---- a level from two workers, against a one-process control ----------------------------------------------------
def placed(rows: pd.DataFrame, planned: list[float]) -> float:
    """The share of requests whose wire start lies nearer their own due instant than any other's; the due
    instants themselves must be the planned offsets from one start (two workers with two start instants would
    not give that exactly)."""
    due = rows["scheduled_ns"].astype("int64").to_numpy()
    assert (due - due[0]) / 1e9 == pytest.approx(np.asarray(planned) - planned[0], abs=2e-9)
    start = rows["start_ns"].astype("int64").to_numpy()
    nearest = np.abs(start[:, None] - due[None, :]).argmin(axis=1)
    return float((nearest == np.arange(len(rows))).mean())


def test_two_workers_send_the_level_once_on_the_common_schedule(params_for, outputs, fake_server):
    planned = workload.offsets("constant", 20.0, 30, seed=0, name="r20")
    with open_session(rate_params(params_for, workers=1), "load", concurrency=8, fresh=True) as session:
        one = load_rate.run_rate_sweep(session, progress=False)
        control = level_rows(session.out_dir)
    with open_session(rate_params(params_for, workers=2), "load", concurrency=8, fresh=True) as session:
        sent_before = len(fake_server.log)
        two = load_rate.run_rate_sweep(session, progress=False)
        rows = level_rows(session.out_dir)
        plan = json.loads((session.out_dir / load_rate.RATE_PLAN).read_text())
    assert len(rows) == len(control) == 30 and rows["request_key"].is_unique and set(rows["status"]) == {"ok"}
    served = [e["prompt"] for e in fake_server.log[sent_before:]]
    for prompt in rows["prompt"]:  # every request reached the server exactly once
        assert sum(prompt.split("\n", 1)[0] in s for s in served) == 1
    # a stall on a busy box can push one request past its neighbour's instant; a worker off the schedule (or a
    # second start instant) would misplace half the level
    share, control_share = placed(rows, planned), placed(control, planned)
    assert share >= 0.9 and share >= control_share - 0.1, (share, control_share)
    # the parent scored what the workers sent: server counts and the fitted prompt lengths are on every row
    assert (rows["prompt_tokens"] == rows["target_prompt_tokens"]).all() and (rows["completion_tokens"] == 3).all()
    assert rows["client_stall_ms"].notna().all() and rows["schedule_lag_s"].notna().all()
    offered = 20.0
    level, control_level = two.iloc[0], one.iloc[0]
    assert abs(level["sent_rps"] / offered - 1) <= abs(control_level["sent_rps"] / offered - 1) + 0.05
    assert level["workers"] == 2 and control_level["workers"] == 1 and control_level["worker_lag_ms"] == ""
    parts = level["worker_lag_ms"].split("; ")
    assert len(parts) == 2 and all(len(p.split("/")) == 2 for p in parts)
    lag = rows["schedule_lag_s"] * 1000
    mine = [lag[rows["repeat"] % 2 == k] for k in (0, 1)]
    assert parts == [f"{np.percentile(m, 50):.2f}/{m.max():.2f}" for m in mine]  # 15 each: p99 is the max
    assert next(iter(plan.values()))["levels"][0]["workers"] == 2
    assert level["loop_lag_samples"] > 0 and level["client_cpu_s"] > 0  # the workers' own health, merged
    # each worker's pacing thread says what scheduling it got; the one-process control's too
    assert level["pacer"] == control_level["pacer"] != "" and level["pacer"].count("; ") == 0
    written = pd.read_csv(session.out_dir / serving.RATE_CSV)
    assert written["workers"].tolist() == [2] and written["worker_lag_ms"].tolist() == [level["worker_lag_ms"]]


def test_a_cut_worker_level_resumes_without_dropping_or_duplicating(params_for, outputs):
    params = rate_params(params_for, workers=2)
    with open_session(params, "load", concurrency=8, fresh=True) as session:
        load_rate.run_rate_sweep(session, progress=False)
        path = session.log.path
    lines = path.read_text().splitlines(keepends=True)
    header, body = lines[0], lines[1:]
    level = [i for i, line in enumerate(body) if "/rate/r20/" in line or ",rate,r20," in line]
    assert len(level) == 30
    path.write_text(header + "".join(line for i, line in enumerate(body) if i not in level[-7:]))
    with open_session(params, "load", concurrency=8) as session:
        again = load_rate.run_rate_sweep(session, progress=False)
    rows = level_rows(path.parent)
    assert len(rows) == 30 and rows["request_key"].is_unique
    assert bool(again["resumed"].iloc[0]) and again["workers"].iloc[0] == 2
    size = path.stat().st_size
    with open_session(params, "load", concurrency=8) as session:
        load_rate.run_rate_sweep(session, progress=False)
    assert path.stat().st_size == size  # finished: nothing re-sent
