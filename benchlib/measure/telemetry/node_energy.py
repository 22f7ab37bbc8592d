"""How a BMC's readings become a window's joules, with the error the source allows (docs/energy.md, "The node").

A BMC reports the node's input power in one of three shapes, and each is integrated for what it means:

- an energy counter (Redfish EnergyJoules / EnergykWh): the window's increase, interpolated at its edges. Its error is
  the counter's resolution (the smallest step seen, learned as it is read) plus half the increase over the sample
  gap at each edge. A counter coarser than 1 % of the window's increase (EnergykWh to three decimals is 3.6 kJ a step)
  is not used for that window: the power reading is.
- a rolling average over W seconds (IPMI DCMI, Redfish AverageConsumedWatts over IntervalInMin, a PowerWatts reading
  whose BMC averages): A(t) = (1/W) ∫_{t-W}^{t} P. Integrating A over the window itself gives the wrong joules: it
  lags the power by W/2, so it misses the last W/2 of a burst and counts W/2 of whatever ran before. What A means is
  recovered exactly from ∫_{t0}^{t1+W} A dt = ∫_{t0}^{t1} P + (the power just before t0 and just after t1, each
  weighted by a triangle of area W/2), so

      E(t0, t1) = ∫_{t0}^{t1+W} A dt − (W/2)·(A(t0) + A(t1 + W))

  which needs readings until W after the window closes. The two edge terms take the triangle-weighted power of the
  W before t0 and after t1 as its plain average (A(t0), A(t1+W)): exact when the power is steady in those spans,
  off by at most W·(P_max − P_min)/8 at each edge otherwise. What a short window loses: nothing in the mean, but the
  edge error does not shrink with the window, so a window not several W long carries an error of the order of
  W × the power swing at its edges; that error is stated (error_j) with each figure.
- an instantaneous reading (W = 0): the trapezoid over the window.

Every error here is a bound, not a standard deviation: the edge terms from the range of readings within W of each
edge, the sampling term Σ h·|ΔA|/2 over the gaps h between readings (the most a trapezoid can miss of a monotone
curve between two samples), half the reading's step over the span (an IPMI sensor's raw byte), and a reading lag of
up to the BMC's refresh interval R (R × the change of A across the window). Pure functions over arrays of
local-clock nanoseconds; the sampler is benchlib.measure.telemetry.bmc."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchlib.measure.telemetry.windows import _counter_delta

COUNTER_MAX_SHARE = 0.01  # a counter step coarser than this share of the window's increase: the power reading is used


@dataclass(frozen=True)
class NodeEnergy:
    """A window's node energy: joules and their error bound, or why not; `method` names the integration."""

    joules: float | None
    error_j: float | None
    method: str
    reason: str = ""


def _valid(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = ~np.isnan(v)
    return t[keep], v[keep]


def _at(t: np.ndarray, v: np.ndarray, x: float) -> float:
    return float(np.interp(x, t, v))


def _integral(t: np.ndarray, v: np.ndarray, a: float, b: float) -> tuple[float, float]:
    """∫_a^b v dt (t, a, b in seconds) by trapezoids, with the bound Σ h·|Δv|/2 on what the trapezoids may miss."""
    inside = (t > a) & (t < b)
    ts = np.concatenate([[a], t[inside], [b]])
    vs = np.concatenate([[_at(t, v, a)], v[inside], [_at(t, v, b)]])
    h = np.diff(ts)
    return float(np.sum((vs[1:] + vs[:-1]) / 2.0 * h)), float(np.sum(h * np.abs(np.diff(vs)) / 2.0))


def _swing(t: np.ndarray, v: np.ndarray, a: float, b: float) -> float:
    """Range of the readings in [a, b] and the values interpolated at its ends."""
    inside = v[(t >= a) & (t <= b)]
    vals = np.concatenate([inside, [_at(t, v, a), _at(t, v, b)]])
    return float(vals.max() - vals.min())


def power_energy(t_ns: np.ndarray, watts: np.ndarray, t0_ns: int, t1_ns: int, averaging_s: float,
                 refresh_s: float = 0.0, resolution_w: float = 0.0) -> NodeEnergy:
    """The window's joules from power readings that are rolling averages over `averaging_s` (0: instantaneous),
    refreshed by the BMC every `refresh_s` (0: unknown, no lag term), each rounded to `resolution_w` (an IPMI
    sensor's step: half a step over the span integrated)."""
    t_ns, watts = _valid(np.asarray(t_ns, dtype=np.int64), np.asarray(watts, dtype=float))
    w = float(averaging_s)
    if len(t_ns) < 2:
        return NodeEnergy(None, None, "", "fewer than two power readings")
    base = int(t_ns[0])
    t = (t_ns - base) / 1e9
    a, b = (t0_ns - base) / 1e9, (t1_ns - base) / 1e9
    end = b + w
    if t[0] > a or t[-1] < end:
        need = f"until {w:g} s after the window (the BMC averages over {w:g} s)" if w else "over the window"
        return NodeEnergy(None, None, "", f"power readings do not cover the window: they are needed {need}")
    area, sampling = _integral(t, watts, a, end)
    lag = refresh_s * abs(_at(t, watts, end) - _at(t, watts, a)) + resolution_w / 2.0 * (end - a)
    if not w:
        return NodeEnergy(area, sampling + lag, "instant_trapezoid")
    edges = (w / 8.0) * (_swing(t, watts, a, a + w) + _swing(t, watts, b, end))
    joules = area - (w / 2.0) * (_at(t, watts, a) + _at(t, watts, end))
    return NodeEnergy(joules, sampling + lag + edges, "rolling_average_deconvolved")


def counter_energy(t_ns: np.ndarray, joules: np.ndarray, t0_ns: int, t1_ns: int, quantum_j: float | None
                   ) -> NodeEnergy:
    """The window's joules from an energy counter whose smallest step seen is `quantum_j` (None: no step seen yet)."""
    t_ns, joules = _valid(np.asarray(t_ns, dtype=np.int64), np.asarray(joules, dtype=float))
    delta, reset, why = _counter_delta(t_ns, joules, t0_ns, t1_ns)
    if delta is None:
        return NodeEnergy(None, None, "", f"energy counter: {why}")
    if not quantum_j:
        return NodeEnergy(None, None, "", "energy counter: no step seen yet (its resolution is unknown)")
    if delta <= 0 or quantum_j > COUNTER_MAX_SHARE * delta:
        return NodeEnergy(None, None, "", f"energy counter: its step ({quantum_j:.4g} J) is coarser than "
                                          f"{COUNTER_MAX_SHARE:.0%} of the window's increase ({delta:.4g} J)")
    edge = 0.0
    for x in (t0_ns, t1_ns):  # the counter at an edge lies somewhere within the increase over the gap around it
        hi = min(int(np.searchsorted(t_ns, x, side="left")), len(t_ns) - 1)
        edge += float(joules[hi] - joules[max(hi - 1, 0)])
    return NodeEnergy(delta, quantum_j + edge, "counter")


def smallest_step(values: np.ndarray) -> float | None:
    """The smallest positive step between consecutive readings of a counter (its resolution, as far as seen)."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    steps = np.diff(values)
    steps = steps[steps > 0]
    return float(steps.min()) if len(steps) else None
