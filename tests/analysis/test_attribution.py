"""Energy attribution per request and phase (benchlib.analysis.attribution): the rule's totals add up, a trace whose
power follows the phases' tokens is recovered, and what the rule cannot see stays on its own line. The end-to-end
check against a streaming server under load is bench/energy_attribution.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis.attribution import attribute

IDLE_W, E_PROMPT, E_OUTPUT = 50.0, 0.01, 0.5
S = 1_000_000_000


def request(start_s: float, prefill_s: float, decode_s: float, prompt: int, completion: int, passed=True) -> dict:
    return {"start_ns": int(start_s * S), "ttft_s": prefill_s, "e2e_s": prefill_s + decode_s,
            "prompt_tokens": prompt, "completion_tokens": completion, "passed": passed}


def counter(requests: pd.DataFrame, t_end_s: float, step_s: float = 0.05, extra: tuple = ()) -> tuple:
    """The exact cumulative energy at each sample: idle + E_PROMPT per prompt token over each prefill, E_OUTPUT per
    output token after the first over each decode; `extra` adds (from_s, to_s, watts) that no request explains."""
    grid = np.arange(0, t_end_s + step_s / 2, step_s)
    fine = np.linspace(0, t_end_s, 200_001)
    power = np.full_like(fine, IDLE_W)
    for r in requests.itertuples():
        send, first = r.start_ns / S, r.start_ns / S + r.ttft_s
        last = r.start_ns / S + r.e2e_s
        power[(fine >= send) & (fine < first)] += E_PROMPT * r.prompt_tokens / r.ttft_s
        power[(fine >= first) & (fine < last)] += E_OUTPUT * (r.completion_tokens - 1) / (last - first)
    for lo, hi, watts in extra:
        power[(fine >= lo) & (fine < hi)] += watts
    cum = np.concatenate([[0.0], np.cumsum((power[1:] + power[:-1]) / 2 * np.diff(fine))])
    return (grid * S).astype(np.int64), np.interp(grid, fine, cum)


def test_overlapping_requests_get_their_own_phases_joules_and_the_lines_add_up():
    reqs = pd.DataFrame([request(0.1, 0.3, 1.0, 400, 41), request(0.5, 0.2, 0.6, 800, 21, passed=False),
                         request(0.9, 0.4, 0.8, 300, 31), request(1.6, 0.1, 0.5, 100, 11)])
    t, energy = counter(reqs, 2.6)
    result = attribute(reqs, t, energy, IDLE_W)
    out = result.requests
    assert result.weights == "tokens weighted by each phase's fitted J/token"
    assert result.j_per_prompt_token == pytest.approx(E_PROMPT, rel=0.03)
    assert result.j_per_output_token == pytest.approx(E_OUTPUT, rel=0.03)
    assert out["prefill_j"].to_numpy() == pytest.approx(E_PROMPT * reqs["prompt_tokens"].to_numpy(), rel=0.05)
    assert out["decode_j"].to_numpy() == pytest.approx(E_OUTPUT * (reqs["completion_tokens"] - 1).to_numpy(), rel=0.05)
    assert result.attributed_j + result.unattributed_j == pytest.approx(result.total_j - result.idle_j, abs=1e-9)
    assert result.idle_j == pytest.approx(IDLE_W * 2.6)
    summary = result.summary
    assert summary["correct"] == 3 and summary["j_per_correct"] == pytest.approx(result.attributed_j / 3)
    assert summary["j_per_request_lo"] <= summary["j_per_request"] <= summary["j_per_request_hi"]


def test_energy_with_no_request_active_stays_unattributed():
    reqs = pd.DataFrame([request(0.1, 0.2, 0.5, 200, 11)])
    t, energy = counter(reqs, 1.5, extra=((1.0, 1.4, 100.0),))  # a background job after the answer
    result = attribute(reqs, t, energy, IDLE_W)
    assert result.unattributed_j == pytest.approx(40.0, rel=0.02)
    assert result.requests["prefill_j"].iloc[0] == pytest.approx(E_PROMPT * 200, rel=0.05)
    assert result.requests["decode_j"].iloc[0] == pytest.approx(E_OUTPUT * 10, rel=0.05)
    assert result.attributed_j + result.unattributed_j == pytest.approx(result.total_j - result.idle_j, abs=1e-9)


def test_too_few_intervals_fall_back_to_unweighted_tokens():
    reqs = pd.DataFrame([request(0.0, 0.1, 0.1, 100, 5)])
    t, energy = counter(reqs, 0.2, step_s=0.1)
    result = attribute(reqs, t, energy, IDLE_W)
    assert result.weights == "tokens, unweighted" and np.isnan(result.j_per_prompt_token)
    assert result.attributed_j == pytest.approx(result.total_j - result.idle_j)


def test_a_concurrency_level_attributes_the_gpu_counter_the_servers_phases_drive(fake_server, params_for, outputs,
                                                                                 monkeypatch):
    """End to end: the load sweep against the fake server, a fake GPU whose energy counter follows the server's own
    phases (idle, plus E_PROMPT per prompt token over each prefill and E_OUTPUT per output token over each decode);
    each level's J/prompt token and J/output token come back from requests.csv, telemetry.csv and the windows."""
    from benchlib.config.params import TelemetryParams
    from benchlib.measure.telemetry import Telemetry
    from benchlib.suites import runner
    from benchlib.suites.load import concurrency
    from tests.fakes.fake_nvml import FakeGpu, FakeNvml

    prompt, tokens, prefill_s, itl = 300, 20, 0.002 + 300 * 0.0003, 0.01
    seen = len(fake_server.log)

    def joules_mj(now_s: float) -> float:
        total = IDLE_W * now_s
        for entry in fake_server.log[seen:]:
            start = entry["received_ns"] / 1e9
            first = start + prefill_s
            total += E_PROMPT * prompt * float(np.clip((now_s - start) / prefill_s, 0, 1))
            total += E_OUTPUT * (tokens - 1) * float(np.clip((now_s - first) / ((tokens - 1) * itl), 0, 1))
        return total * 1000.0

    nvml = FakeNvml([FakeGpu(power_w=IDLE_W, energy_fn=joules_mj)])
    monkeypatch.setattr(runner, "Telemetry", lambda settings, out_dir: Telemetry(
        TelemetryParams(power_hz=50, slow_hz=10, idle_baseline_s=0.5), out_dir, nvml=nvml, environ={}))
    params = params_for({"ttft": 0.002, "prefill_per_token": 0.0003, "prompt_tokens": prompt, "itl": itl,
                         "tokens": tokens},
                        run={"warmups": 0, "repeats": 1, "max_tokens": 64, "timeout_s": 10},
                        sweep={"concurrency": [1, 4], "requests_per_level": 12, "context_lengths": [64],
                               "max_tokens": 64},
                        telemetry={"idle_baseline_s": 0.5})  # the runner reads the baseline from params
    with runner.open_session(params, "load", concurrency=4) as session:
        levels = concurrency.run_concurrency_sweep(session, progress=False)
    for _, level in levels.iterrows():
        assert level["attribution_reason"] == "" and level["attribution_boundary"] == "GPU board"
        assert level["j_per_prompt_token"] == pytest.approx(E_PROMPT, rel=0.10), level.to_dict()
        assert level["j_per_output_token"] == pytest.approx(E_OUTPUT * (tokens - 1) / tokens, rel=0.10)
        assert level["j_per_request_lo"] <= level["j_per_request"] <= level["j_per_request_hi"]
        assert level["j_per_request"] == pytest.approx(E_PROMPT * prompt + E_OUTPUT * (tokens - 1), rel=0.10)


def test_a_request_cut_by_the_window_is_attributed_but_not_averaged():
    reqs = pd.DataFrame([request(0.1, 0.2, 0.6, 300, 21), request(0.5, 0.2, 0.6, 300, 21),
                         request(1.4, 0.2, 0.6, 300, 21)])
    t, energy = counter(reqs, 2.4)
    result = attribute(reqs, t, energy, IDLE_W, t0_ns=0, t1_ns=int(1.8 * S))  # the third ends at 2.2 s
    assert list(result.requests["inside"]) == [True, True, False]
    assert result.summary["requests"] == 2
    assert result.summary["j_per_request"] == pytest.approx(E_PROMPT * 300 + E_OUTPUT * 20, rel=0.05)
    assert result.attributed_j + result.unattributed_j == pytest.approx(result.total_j - result.idle_j, abs=1e-9)
