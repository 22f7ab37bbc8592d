"""How BMC readings become a window's joules (benchlib.measure.telemetry.node_energy), on traces whose joules are
known exactly: a rolling average deconvolved, a counter preferred only when it is fine enough."""

from __future__ import annotations

import numpy as np
import pytest

from benchlib.measure.telemetry.node_energy import counter_energy, power_energy, smallest_step

S = 1_000_000_000


def burst_trace(averaging_s: float, step_s: float = 0.01):
    """100 W, then 500 W over [10, 14) s, then 100 W; readings every step_s of the rolling average over W."""
    t = np.arange(0, 30, step_s)
    fine = np.arange(0, 30, 0.0005)
    power = np.where((fine >= 10) & (fine < 14), 500.0, 100.0)
    cum = np.concatenate([[0.0], np.cumsum(power[:-1] * 0.0005)])
    avg = (np.interp(t, fine, cum) - np.interp(t - averaging_s, fine, cum)) / averaging_s if averaging_s else \
        np.interp(t, fine, power)
    return (t * S).astype(np.int64), avg, (t * S).astype(np.int64), np.interp(t, fine, cum)


@pytest.mark.parametrize("averaging", [1.0, 3.0])
def test_a_rolling_average_is_deconvolved_to_the_windows_joules(averaging):
    t, avg, _, _ = burst_trace(averaging)
    got = power_energy(t, avg, 10 * S, 14 * S, averaging)
    assert got.method == "rolling_average_deconvolved"
    assert got.joules == pytest.approx(2000.0, rel=0.005)
    assert abs(got.joules - 2000.0) <= got.error_j
    as_it_looks = power_energy(t, avg, 10 * S, 14 * S, 0.0)
    assert 2000.0 - as_it_looks.joules == pytest.approx(400.0 * averaging / 2, rel=0.05)


def test_the_readings_after_the_window_are_needed():
    t, avg, _, _ = burst_trace(3.0)
    keep = t <= 15 * S  # only 1 s after the window: the average still holds 2 s of the burst
    got = power_energy(t[keep], avg[keep], 10 * S, 14 * S, 3.0)
    assert got.joules is None and "until 3 s after the window" in got.reason


def test_a_counter_is_used_when_fine_and_refused_when_coarse():
    _, _, t, cum = burst_trace(0.0)
    fine = counter_energy(t, np.round(cum, 1), 10 * S, 14 * S, smallest_step(np.round(cum, 1)))
    assert fine.method == "counter" and fine.joules == pytest.approx(2000.0, abs=fine.error_j)
    kwh = np.floor(cum / 3600.0) * 3600.0  # EnergykWh to three decimals: 3.6 kJ a step
    coarse = counter_energy(t, kwh, 10 * S, 14 * S, smallest_step(kwh))
    assert coarse.joules is None and "coarser than 1%" in coarse.reason
