"""The rate sweep: seeded arrival schedules and lengths, the open-loop scheduler against the fake server, the
steady-state window and goodput arithmetic on rows with known timing, the sweep end to end with resume.

Tolerances: the fake server schedules tokens on absolute monotonic deadlines, so a request of `tokens` tokens
lasts ttft + (tokens − 1) × itl on the server; the client's wire stamps are within ~0.1 ms of the server's
sends (bench/measure_accuracy.py). The scheduler wakes on the loop's millisecond timer: on this 2-core box its
lag is ~0.7 ms typical, ≤ 3 ms at p99 up to 200 req/s (bench/scheduler_lag.py); tests allow 15 ms for a busy CI
box, far below the 50–100 ms gaps they schedule (a scheduler that ignored the schedule would send everything
at once and miss by seconds).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import serving, stats
from benchlib.config.params import LengthParams, ParamsError, SloParams
from benchlib.measure.client.backends import ChatRequest
from benchlib.measure.traffic import workload
from benchlib.records.rows import read_requests
from benchlib.suites.load import rate as load_rate
from benchlib.suites.runner import Planned, open_session
from tests.fakes.servers import FAKE_TEMPLATE_TOKENS

NS = 1_000_000_000


# ---- schedules and lengths ------------------------------------------------------------------------------------
def test_arrival_schedules_have_their_rate_and_shape_and_are_seeded():
    assert workload.offsets("constant", 4.0, 5) == [0.0, 0.25, 0.5, 0.75, 1.0]
    poisson = np.diff(workload.offsets("poisson", 50.0, 20_001, seed=3, name="r50"))
    assert poisson.mean() == pytest.approx(1 / 50, rel=0.03)
    assert poisson.std() / poisson.mean() == pytest.approx(1.0, rel=0.05)  # exponential: CV 1
    bursty = np.diff(workload.offsets("gamma", 50.0, 20_001, burstiness=0.25, seed=3, name="r50"))
    assert bursty.mean() == pytest.approx(1 / 50, rel=0.05)
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.08)  # gamma shape k: CV = 1/sqrt(k)
    regular = np.diff(workload.offsets("gamma", 50.0, 20_001, burstiness=4.0, seed=3, name="r50"))
    assert regular.std() / regular.mean() == pytest.approx(0.5, rel=0.05)
    again = workload.offsets("poisson", 50.0, 100, seed=3, name="r50")
    assert again == workload.offsets("poisson", 50.0, 100, seed=3, name="r50")  # a rerun sends the same schedule
    assert again != workload.offsets("poisson", 50.0, 100, seed=3, name="r60")  # levels do not share one
    assert again != workload.offsets("poisson", 50.0, 100, seed=4, name="r50")
    with pytest.raises(ValueError, match="rate must be > 0"):
        workload.offsets("poisson", 0.0, 3)


def test_length_draws_follow_their_distribution():
    assert workload.lengths(LengthParams(mean=32), 4) == [32, 32, 32, 32]
    uniform = workload.lengths(LengthParams(dist="uniform", mean=40, min=20, max=60), 5000, seed=1, name="a")
    assert min(uniform) == 20 and max(uniform) == 60 and np.mean(uniform) == pytest.approx(40, rel=0.02)
    normal = workload.lengths(LengthParams(dist="normal", mean=100, sd=10, min=90), 5000, seed=1, name="a")
    assert min(normal) == 90 and np.mean(normal) > 100  # clipped below at min, upper default 2 × mean
    assert uniform == workload.lengths(LengthParams(dist="uniform", mean=40, min=20, max=60), 5000, seed=1, name="a")


def test_bad_rate_params_get_one_line(params_for):
    with pytest.raises(ParamsError, match=r"sweep\.rate\.prompt_tokens: min 50 > max 10"):
        params_for({}, sweep={"rate": {"prompt_tokens": {"dist": "uniform", "min": 50, "max": 10}}})
    with pytest.raises(ParamsError, match=r"sweep\.rate\.rates: every rate must be > 0"):
        params_for({}, sweep={"rate": {"rates": [2, 0]}})
    with pytest.raises(ParamsError, match=r"sweep\.slo\.ttft_ms"):
        params_for({}, sweep={"slo": {"ttft_ms": -1}})


# ---- steady-state window and goodput on rows with known timing -----------------------------------------------
def rows_at(starts_s, e2e_s, ttft_s, tokens=10, status="ok", tpot_s=0.01, itl=None):
    n = len(starts_s)

    def each(v):
        return list(v) if isinstance(v, (list, tuple, np.ndarray)) else [v] * n
    return pd.DataFrame({"task": "rate", "variant": "L", "is_warmup": False, "status": each(status),
                         "start_ns": [int(s * NS) + NS for s in starts_s], "e2e_s": each(e2e_s),
                         "ttft_s": each(ttft_s), "tpot_s": each(tpot_s), "completion_tokens": each(tokens),
                         "itl_s": itl if itl is not None else [[0.01] * 9] * n,
                         "error_kind": "", "prompt_tokens": np.nan, "target_prompt_tokens": np.nan})


def test_steady_window_leaves_out_ramp_and_drain_and_rates_are_exact():
    # constant arrivals every 0.5 s for 10 s (21 sends), each request 1 s long with 10 tokens
    rows = rows_at(np.arange(21) * 0.5, 1.0, 0.1)
    plan = {"level": "L", "mode": "constant", "offered_rps": 2.0, "max_concurrency": 8}
    level = serving.rate_level(rows, plan, SloParams(), ramp_share=0.2)
    assert level["window_s"] == pytest.approx(8.0)  # sends span 10 s, the first 20 % is ramp-up
    assert level["n_window"] == 17  # sends at 2.0, 2.5, …, 10.0
    assert level["sent_rps"] == pytest.approx(2.0)
    # each request's completion spread over its 1 s life: inside [2, 10] lie 15 whole lives (sent 2.0 … 9.0) and
    # two halves (sent 1.5 and 9.5): 16 completions in 8 s, the offered rate
    assert level["achieved_rps"] == pytest.approx(2.0)
    assert level["throughput_tps"] == pytest.approx(20.0)
    assert level["rate_rps"] == 2.0 and level["window_rule"].startswith("sends after the first 20 %")
    assert level["slo_met_share"] == 1.0 and level["meets_slo"] and level["goodput_rps"] == level["achieved_rps"]


def test_goodput_counts_requests_meeting_every_slo_and_failures_against_it():
    starts = np.arange(10) * 1.0
    ttft = [0.1, 0.1, 0.1, 0.1, 0.5, 0.1, 0.1, 0.1, 0.1, 0.1]  # one slow first token
    tpot = [0.01] * 8 + [0.03, 0.01]  # one slow decode
    status = ["ok"] * 9 + ["failed"]  # one failure
    rows = rows_at(starts, 1.0, ttft, tpot_s=tpot, status=status)
    plan = {"level": "L", "mode": "poisson", "offered_rps": 1.0, "max_concurrency": 4}
    slo = SloParams(ttft_ms=200, tpot_ms=20)
    level = serving.rate_level(rows, plan, slo, ramp_share=0.0)
    assert level["n_window"] == 10 and level["slo_met"] == 7 and level["slo_met_share"] == pytest.approx(0.7)
    assert level["goodput_rps"] == pytest.approx(level["achieved_rps"] * 0.7)
    assert level["goodput_tps"] == pytest.approx(7 * 10 / 9.0)
    assert not level["meets_slo"]  # 70 % < the 90 % attainment
    assert serving.rate_level(rows, plan, SloParams(ttft_ms=200, tpot_ms=20, attainment=0.7), 0.0)["meets_slo"]
    # ITL SLO: the request's largest gap; e2e SLO
    gaps = [[0.01] * 9] * 9 + [[0.01] * 8 + [0.2]]
    rows = rows_at(starts, 1.0, 0.1, itl=gaps)
    assert serving.rate_level(rows, plan, SloParams(itl_ms=50), 0.0)["slo_met"] == 9
    assert serving.rate_level(rows, plan, SloParams(e2e_ms=999), 0.0)["slo_met"] == 0
    assert "ttft ≤ 200 ms, tpot ≤ 20 ms (90 % of requests)" == serving.slo_text(slo)


def test_rate_percentiles_carry_their_bounds_from_the_window_requests():
    rng = np.random.default_rng(3)
    n = stats.INTERVAL_N["p99"] + 40
    ttft, tpot = rng.gamma(2.0, 0.05, n), rng.gamma(3.0, 0.004, n)
    gaps = [list(rng.gamma(3.0, 0.004, 4)) for _ in range(n)]
    rows = rows_at(np.arange(n) * 0.01, rng.gamma(4.0, 0.3, n), ttft, tpot_s=tpot, itl=gaps)
    plan = {"level": "L", "mode": "constant", "offered_rps": 100.0, "max_concurrency": 64}
    level = serving.rate_level(rows, plan, SloParams(), ramp_share=0.05)
    starts = rows["start_ns"]
    inside = rows[starts >= starts.min() + 0.05 * (starts.max() - starts.min())]
    assert level["n_window"] == len(inside) >= stats.INTERVAL_N["p99"]
    pooled = np.concatenate([np.asarray(g) for g in inside["itl_s"]])
    for metric, values in (("ttft_s", inside["ttft_s"]), ("tpot_s", inside["tpot_s"]), ("e2e_s", inside["e2e_s"]),
                           ("itl_s", pooled)):
        values = np.asarray(values, dtype=float)
        for name, (estimate, low, high) in stats.percentile_bounds(values, {"p50": 0.5, "p99": 0.99}).items():
            assert level[f"{metric}_{name}"] == pytest.approx(np.quantile(values, stats.PERCENTILES[name]))
            assert level[f"{metric}_{name}"] == pytest.approx(estimate)
            assert (level[f"{metric}_{name}_lo"], level[f"{metric}_{name}_hi"]) == (low, high) and low < high
    # a window under INTERVAL_N['p99'] requests: the p99 estimate stays, its bounds are NaN; the p50's remain
    few = serving.rate_level(rows.iloc[:200], plan, SloParams(), ramp_share=0.0)
    assert few["n_window"] == 200 and few["ttft_s_p99"] == pytest.approx(np.quantile(ttft[:200], 0.99))
    assert np.isnan(few["ttft_s_p99_lo"]) and np.isnan(few["ttft_s_p99_hi"]) and few["ttft_s_p50_lo"] > 0
    assert few["itl_s_p99_lo"] > 0  # 800 pooled gaps: enough for the ITL's p99 bounds
    assert set(serving.RATE_COLUMNS) >= {f"{m}_{q}{end}" for m in ("ttft_s", "tpot_s", "itl_s", "e2e_s")
                                         for q in ("p50", "p99") for end in ("", "_lo", "_hi")}


def test_levels_all_sent_at_once_have_no_steady_state():
    rows = rows_at([0.0] * 4, [1.0, 2.0, 3.0, 4.0], 0.1)
    level = serving.rate_level(rows, {"level": "L", "mode": "throughput", "max_concurrency": 4}, SloParams(), 0.2)
    assert level["window_rule"].startswith("all sent at once") and level["window_s"] == pytest.approx(4.0)
    assert level["achieved_rps"] == pytest.approx(1.0) and level["rate_rps"] == level["achieved_rps"]


def test_sweep_rates_and_the_highest_slo_rate():
    assert serving.sweep_rates(1.0, 5.0, 3) == [2.0, 3.0, 4.0]  # strictly between, evenly spaced
    assert serving.sweep_rates(2.0, 2.1, 2) == [1.54, 2.03]  # flat: widened to [0.5, 1.2] × 2.1 = [1.05, 2.52]
    assert serving.sweep_rates(2.0, 3.0, 0) == []
    levels = pd.DataFrame({"level": ["sync", "r2", "r3", "r4"], "rate_rps": [1.0, 2.0, 3.0, 4.0],
                           "meets_slo": [True, True, False, True], "goodput_rps": [1, 2, 1, 0.5]})
    assert serving.max_slo_rate(levels) == (4.0, "r4")  # the highest that meets them, even past a miss
    assert serving.max_slo_rate(levels.assign(meets_slo=False)) == (pytest.approx(np.nan, nan_ok=True), "")


def test_schedule_rule_flags_a_client_that_cannot_hold_the_rate():
    calm = pd.Series([0.7] * 200)
    assert serving.schedule_bound(calm, 200.0) == ""  # limit min(5, 2.5) ms
    assert "p99 0.70 ms > 0.50 ms" in serving.schedule_bound(calm, 1000.0)  # half of a 1 ms mean gap
    assert "max 9.00 ms > 5.00 ms" in serving.schedule_bound(pd.Series([0.5] * 10 + [9.0]), 10.0)
    assert serving.schedule_bound(calm, float("nan")) == ""  # closed loop: no schedule


# ---- the scheduler against the fake server ---------------------------------------------------------------------
def test_open_loop_sends_on_schedule_and_records_the_lag(params_for, outputs):
    params = params_for({"ttft": 0.01, "itl": 0.002, "tokens": 3})
    due = workload.offsets("constant", 20.0, 12)  # every 50 ms
    with open_session(params, "load", concurrency=8) as session:
        items = []
        for i in range(12):
            record = session.base_record("rate", "r20", i, concurrency=8)
            items.append(Planned(record, ChatRequest(messages=[{"role": "user", "content": f"q {i}"}], max_tokens=3)))
        records = session.execute(items, concurrency=8, offsets=due)
    records.sort(key=lambda r: r.repeat)
    scheduled = np.array([r.scheduled_ns for r in records], dtype=float)
    assert np.diff(scheduled) / 1e6 == pytest.approx([50.0] * 11, abs=1e-6)  # the intended instants, exact
    starts = np.array([r.start_ns for r in records], dtype=float)
    lag_ms = (starts - scheduled) / 1e6
    assert (lag_ms >= 0).all() and lag_ms.max() < 15, lag_ms
    # wire start − due = slot wait + the rest of the way to the wire
    assert [(r.schedule_lag_s + r.queue_wait_s) * 1000 for r in records] == pytest.approx(lag_ms.tolist(), abs=1e-6)
    assert all(r.queue_wait_s < 0.005 for r in records)  # never 8 in flight: no waiting for a slot


def test_a_full_cap_is_queue_wait_not_schedule_lag(params_for, outputs):
    params = params_for({"ttft": 0.1, "itl": 0.01, "tokens": 2})  # 110 ms each, one in flight
    with open_session(params, "load", concurrency=1) as session:
        items = [Planned(session.base_record("rate", "r20", i, concurrency=1),
                         ChatRequest(messages=[{"role": "user", "content": f"q {i}"}], max_tokens=2)) for i in range(3)]
        records = session.execute(items, concurrency=1, offsets=[0.0, 0.01, 0.02])
    records.sort(key=lambda r: r.repeat)
    assert records[2].queue_wait_s == pytest.approx(0.2, abs=0.03)  # behind two 110 ms requests, due 20 ms in
    assert all(r.schedule_lag_s < 0.015 for r in records)


# ---- the sweep end to end -----------------------------------------------------------------------------------
def rate_params(params_for, fake, **rate):
    settings = {"min_requests": 6, "max_concurrency": 4, "duration_s": 1.0, "points": 2,
                "prompt_tokens": {"dist": "uniform", "mean": 40, "min": 24, "max": 60},
                "output_tokens": {"dist": "uniform", "mean": 6, "min": 4, "max": 8}, **rate}
    return params_for(fake, sweep={"concurrency": [1], "context_lengths": [64], "rate": settings,
                                   "slo": {"ttft_ms": 200, "tpot_ms": 20}})


FAKE = {"ttft": 0.05, "itl": 0.01, "tokens": 100, "prompt_tokens": "words"}  # stops at max_tokens


def test_rate_sweep_runs_sync_throughput_and_rates_between(params_for, outputs):
    params = rate_params(params_for, FAKE)
    with open_session(params, "load", concurrency=4) as session:
        levels = load_rate.run_rate_sweep(session, progress=False)
        out_dir = session.out_dir
    assert levels["level"].tolist()[:2] == ["sync", "throughput"] and len(levels) == 4
    sync, thr = levels.iloc[0], levels.iloc[1]
    # sync: one at a time, ~6 tokens each: 0.05 + 5 × 0.01 s ≈ 0.1 s a request → ~10 req/s
    assert sync["achieved_rps"] == pytest.approx(1 / 0.1, rel=0.2)
    assert thr["achieved_rps"] == pytest.approx(4 / 0.1, rel=0.25)  # 4 in flight, the fake server scales
    between = levels.iloc[2:]
    assert between["offered_rps"].tolist() == serving.sweep_rates(sync["rate_rps"], thr["rate_rps"], 2)
    assert (between["mode"] == "poisson").all()
    assert (levels["meets_slo"]).all() and (levels["slo_met_share"] == 1).all()  # 50 ms TTFT, 10 ms TPOT
    rows = read_requests(out_dir / "requests.csv")
    rows = rows[rows["task"] == "rate"]
    assert rows["request_key"].is_unique and set(rows["status"]) == {"ok"}
    assert len(rows) == 6 + 16 + sum(workload.level_size(r, 1.0, 6) for r in between["offered_rps"])
    # exact server-counted prompt lengths (fake tokenizer: a token a word, template tokens measured)
    assert (rows["prompt_tokens"] == rows["target_prompt_tokens"]).all()
    assert rows["target_prompt_tokens"].between(24, 60).all() and rows["target_prompt_tokens"].nunique() > 5
    assert (rows["completion_tokens"] == rows["max_tokens"]).all() and rows["max_tokens"].between(4, 8).all()
    opened = rows[rows["variant"].str.startswith("r")]
    assert opened["schedule_lag_s"].notna().all() and rows.loc[rows["variant"] == "sync", "scheduled_ns"].eq(0).all()
    plan = json.loads((out_dir / load_rate.RATE_PLAN).read_text())
    assert [p["level"] for p in next(iter(plan.values()))["levels"]] == levels["level"].tolist()
    assert pd.read_csv(out_dir / serving.RATE_CSV)["level"].tolist() == levels["level"].tolist()
    # a tight TTFT SLO fails every level; figures for the frontier
    tight = serving.rate_levels(rows, next(iter(plan.values()))["levels"], SloParams(ttft_ms=20), 0.2)
    assert not tight["meets_slo"].any() and (tight["goodput_rps"] == 0).all()
    figures = serving.serving_figures(levels)
    assert figures["max_slo_rate_rps"] == levels["rate_rps"].max()
    assert figures["goodput_tps"] == levels["goodput_tps"].max()


def test_rate_sweep_resumes_a_cut_level_without_dropping_or_duplicating(params_for, outputs):
    params = rate_params(params_for, FAKE, rates=[20.0])
    with open_session(params, "load", concurrency=4) as session:
        first = load_rate.run_rate_sweep(session, progress=False)
        path = session.log.path
    assert first["level"].tolist() == ["r20"] and not first["resumed"].iloc[0]
    lines = path.read_text().splitlines(keepends=True)
    header, body = lines[0], lines[1:]
    rate_rows = [i for i, line in enumerate(body) if "/rate/r20/" in line or ",rate,r20," in line]
    assert len(rate_rows) == 20
    kept = [line for i, line in enumerate(body) if i not in rate_rows[-5:]]  # the last 5 never got written
    path.write_text(header + "".join(kept))
    with open_session(params, "load", concurrency=4) as session:
        second = load_rate.run_rate_sweep(session, progress=False)
    rows = read_requests(path)
    rows = rows[rows["task"] == "rate"]
    assert len(rows) == 20 and rows["request_key"].is_unique  # every key exactly once
    assert bool(second["resumed"].iloc[0]) and second["n_requests"].iloc[0] == 20
    size = path.stat().st_size
    with open_session(params, "load", concurrency=4) as session:
        load_rate.run_rate_sweep(session, progress=False)
    assert path.stat().st_size == size  # finished: nothing re-sent


def test_shared_prefix_is_the_same_text_ahead_of_the_request_id(params_for, outputs):
    params = rate_params(params_for, {**FAKE, "cached_tokens": 20}, rates=[20.0], shared_prefix=0.5,
                         prompt_tokens={"dist": "fixed", "mean": 60})
    with open_session(params, "load", concurrency=4) as session:
        levels = load_rate.run_rate_sweep(session, progress=False)
        rows = read_requests(session.log.path)
    prompts = rows.loc[rows["task"] == "rate", "prompt"].tolist()
    heads = {p.split("\n", 1)[0] for p in prompts}
    assert len(heads) == 1 and len(next(iter(heads)).split()) == 30  # 50 % of 60 tokens, one word a token
    assert len({p.split("\n", 1)[1] for p in prompts}) == len(prompts)  # the rest is unique per request
    assert (rows.loc[rows["task"] == "rate", "prompt_tokens"] == 60).all()
    assert levels["cached_tokens_mean"].iloc[0] == 20  # what the server said it took from its cache
    assert FAKE_TEMPLATE_TOKENS > 0  # the template's tokens were counted into the target, not the prefix


def test_each_rate_level_has_its_own_energy_window(params_for, outputs, monkeypatch):
    """A fake GPU drawing exactly 120 W: a level's energy is 120 W × its own window; tokens per joule are its
    completion tokens ÷ that energy; prompt fitting and calibration lie in no level's window."""
    from benchlib.config.params import TelemetryParams
    from benchlib.measure.telemetry import Telemetry
    from benchlib.suites import runner
    from tests.fakes.fake_nvml import FakeGpu, FakeNvml

    nvml = FakeNvml([FakeGpu(power_w=120.0)])
    monkeypatch.setattr(runner, "Telemetry", lambda settings, out_dir: Telemetry(
        TelemetryParams(power_hz=50, slow_hz=10), out_dir, nvml=nvml, environ={}))
    params = rate_params(params_for, FAKE, rates=[10.0, 20.0])
    with open_session(params, "load", concurrency=4) as session:
        levels = load_rate.run_rate_sweep(session, progress=False)
        windows = session.telemetry.windows_frame()
        rows = read_requests(session.log.path)
    assert (levels["energy_reason"] == "").all(), levels["energy_reason"].tolist()
    for _, level in levels.iterrows():
        window = windows[windows["window"] == f"rate:{level['level']}"].iloc[-1]
        assert window["kind"] == "level"
        assert level["energy_j"] == pytest.approx(120.0 * level["level_window_s"], rel=0.02)
        assert level["tokens_per_joule"] == pytest.approx(level["completion_tokens"] / level["energy_j"])
    calibration = rows[rows["variant"] == "calibrate"].iloc[0]
    calibrated_end = int(calibration["start_ns"]) + calibration["e2e_s"] * 1e9
    assert (windows.loc[windows["kind"] == "level", "t_start_ns"] > calibrated_end).all()
