"""Steady-state energy per load level (benchlib.analysis.load_levels.level_steady): the window from the first instant
the level's concurrency is reached to the last instant before it drops below it, computed on synthetic rows, its
tokens and energy; and through a real concurrency sweep on a fake 120 W GPU, written to sweep_concurrency.csv."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import load_levels
from benchlib.analysis.load_levels import level_steady, open_loop_window, steady_window, tokens_between

S = 1_000_000_000  # ns
O = 100 * S  # perf_counter stamps are never 0 (a row stamped 0 never went on the wire)


def shifted(window):
    return None if window is None else (window[0] - O, window[1] - O)


def rows(spans: list[tuple[float, float]], level=2, tokens=10, ttft=0.0) -> pd.DataFrame:
    """Requests of one concurrency level from (start s, end s) pairs."""
    return pd.DataFrame([{"task": "concurrency", "concurrency": level, "status": "ok", "is_warmup": False,
                          "start_ns": O + int(a * S), "e2e_s": b - a, "ttft_s": ttft, "completion_tokens": tokens,
                          "itl_s": None} for a, b in spans])


def test_the_window_runs_from_reaching_the_level_to_the_start_of_the_drain():
    # two streams, five requests: the second starts at 0.5 s (level reached), the hand-overs at 2 and 3 s keep
    # two in flight, the request ending at 4 s leaves one for good (the drain)
    frame = rows([(0, 2), (0.5, 4), (2, 3), (3, 5), (4.5, 4.8)])
    start, end = load_levels.spans(frame)
    # in flight: 0–0.5: 1; 0.5–2: 2; 2: end+start (2); 3: end+start (2); 4: 1; 4.5: 2; 4.8: 1; 5: 0
    assert shifted(steady_window(start, end, 2)) == (int(0.5 * S), int(4.8 * S))
    assert steady_window(start, end, 3) is None  # never three in flight
    assert shifted(steady_window(start, end, 1)) == (0, 5 * S)


def test_a_closed_loop_hand_over_is_no_dip():
    frame = rows([(0, 1), (0, 1), (1, 2), (1, 2), (2, 3)])
    start, end = load_levels.spans(frame)
    # at 1 s both end and two start: still two; at 2 s both end and one starts: one in flight — the drain
    assert shifted(steady_window(start, end, 2)) == (0, 2 * S)


def test_tokens_inside_the_window_from_stamps_or_spread_evenly():
    stamped = pd.DataFrame([{"status": "ok", "start_ns": 0, "ttft_s": 1.0, "e2e_s": 4.0, "completion_tokens": 4,
                             "itl_s": [1.0, 1.0, 1.0]}])  # tokens at 1, 2, 3, 4 s
    assert tokens_between(stamped, 2 * S, 3 * S) == 2
    spread = stamped.assign(itl_s=[None])
    assert tokens_between(spread, 2 * S, 3 * S) == pytest.approx(4 * 1 / 3)
    assert tokens_between(spread.assign(status="failed"), 0, 10 * S) == 0


def test_an_open_loop_level_runs_from_the_end_of_the_ramp_to_the_last_send():
    starts = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], dtype=float) * S
    assert open_loop_window(starts, 0.2) == (2 * S, 9 * S)
    assert open_loop_window(starts[:1], 0.2) is None


class FakeTelemetry:
    """measure() as the sampler's: a 100 W reading over the window, recorded; windows_frame() gives them back."""

    def __init__(self, energy=True):
        self.windows: list[dict] = []
        self.energy = energy

    def measure(self, name, kind, t0, t1):
        row = {"window": name, "kind": kind, "t_start_ns": t0, "t_end_ns": t1,
               "energy_j": 100.0 * (t1 - t0) / S if self.energy else None,
               "energy_reason": "" if self.energy else "no GPU; no RAPL"}
        self.windows.append(row)
        return row

    def windows_frame(self):
        return pd.DataFrame(self.windows)


def test_level_steady_energy_tokens_and_tokens_per_joule():
    requests = pd.concat([rows([(0, 2), (0.5, 4), (2, 3), (3, 5), (4.5, 4.8)]),
                          rows([(10, 11)], level=1)], ignore_index=True)
    levels = pd.DataFrame({"concurrency": [1, 2], "energy_j": [50.0, 600.0]})
    telemetry = FakeTelemetry()
    out = level_steady(levels, requests, "concurrency", "concurrency", telemetry).set_index("concurrency")
    two = out.loc[2]
    assert two["steady_s"] == pytest.approx(4.3) and two["steady_energy_j"] == pytest.approx(430.0)
    assert two["energy_j"] == 600.0  # the whole level's figure stays beside it
    assert two["steady_tokens_per_joule"] == pytest.approx(two["steady_tokens"] / 430.0)
    assert telemetry.windows[-1]["window"] == "concurrency:2:steady"
    assert telemetry.windows[-1]["kind"] == load_levels.STEADY_KIND
    # a second pass (a resumed run) reuses the recorded window instead of measuring again
    again = level_steady(levels, requests, "concurrency", "concurrency", telemetry)
    assert len(telemetry.windows) == 2 and list(again["steady_energy_j"]) == list(out["steady_energy_j"])
    none = level_steady(levels, requests, "concurrency", "concurrency", FakeTelemetry(energy=False))
    assert none["steady_energy_j"].isna().all() and none["steady_reason"].iloc[1] == "no energy: no GPU; no RAPL"


def test_rate_levels_use_their_mode():
    requests = pd.DataFrame([{"task": "rate", "variant": "r1", "status": "ok", "is_warmup": False,
                              "start_ns": O + int(t * S), "e2e_s": 0.5, "ttft_s": 0.1, "completion_tokens": 5,
                              "itl_s": None} for t in range(10)])
    levels = pd.DataFrame({"level": ["r1"], "mode": ["poisson"], "max_concurrency": [4]})
    out = level_steady(levels, requests, "rate", "level", FakeTelemetry(), ramp_share=0.2)
    assert out["steady_s"].iloc[0] == pytest.approx(7.0)  # from the 3rd send to the last one
    sync = level_steady(levels.assign(mode="synchronous"), requests, "rate", "level", FakeTelemetry())
    assert sync["steady_s"].iloc[0] == pytest.approx(9.5)


def test_a_real_sweep_writes_steady_state_energy_beside_the_whole_level(params_for, outputs, monkeypatch):
    from benchlib.config.params import TelemetryParams
    from benchlib.measure.telemetry import Telemetry
    from benchlib.suites import runner
    from benchlib.suites.load import concurrency
    from benchlib.suites.runner import open_session
    from tests.fakes.fake_nvml import FakeGpu, FakeNvml

    nvml = FakeNvml([FakeGpu(power_w=120.0)])
    monkeypatch.setattr(runner, "Telemetry", lambda settings, out_dir: Telemetry(
        TelemetryParams(power_hz=50, slow_hz=10), out_dir, nvml=nvml, environ={}))
    params = params_for({"ttft": 0.02, "itl": 0.01, "tokens": 20},
                        run={"warmups": 0, "repeats": 1, "max_tokens": 20, "timeout_s": 10},
                        sweep={"concurrency": [1, 2], "requests_per_level": 4, "max_tokens": 20})
    with open_session(params, "load", concurrency=2) as session:
        levels = concurrency.run_concurrency_sweep(session, progress=False)
        out_dir = session.out_dir
    on_disk = pd.read_csv(out_dir / load_levels.CONCURRENCY_CSV)
    assert {"steady_s", "steady_energy_j", "steady_tokens_per_joule"} <= set(on_disk.columns)
    for _, level in levels.iterrows():
        assert level["steady_reason"] == "" and 0 < level["steady_s"] <= level["level_window_s"]
        assert level["steady_energy_j"] == pytest.approx(120.0 * level["steady_s"], rel=0.05)
        assert 0 < level["steady_tokens"] <= level["completion_tokens"]
    assert math.isfinite(on_disk["steady_energy_j"].iloc[-1])
