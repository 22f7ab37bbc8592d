"""What a BMC's rolling average does to a window's joules, and what integrating it for what it means gets back
(benchlib.measure.telemetry.node_energy).

A node idles at 150 W, then runs a level drawing 600 W with a ±80 W ripple (a 7 s period) for the whole window, then
idles again. The BMC reports the rolling average over W seconds (1 s: a typical DCMI / PowerConsumedWatts sample
period; 5 s; 60 s: Redfish AverageConsumedWatts over IntervalInMin 1), refreshed every second, and is polled every
second. For each W and window length it prints the error of
  as it looks       the readings integrated over the window itself
  deconvolved       ∫_{t0}^{t1+W} A − (W/2)(A(t0) + A(t1+W)), the readings until W after the window
  bound             the error bound node_energy states with that figure
as % of the true joules. Usage: python bench/node_averaging.py   (< 1 s)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchlib.measure.telemetry.node_energy import power_energy  # noqa: E402

IDLE_W, BUSY_W, RIPPLE_W, RIPPLE_S = 150.0, 600.0, 80.0, 7.0
POLL_S = REFRESH_S = 1.0
LEAD_S = 90.0  # idle before the window: longer than any averaging window here
DT = 0.001


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    print(f"{'W (s)':>6} {'window (s)':>10} {'as it looks':>12} {'deconvolved':>12} {'bound':>8}")
    for w in (1.0, 5.0, 60.0):
        for length in (2.0, 10.0, 60.0, 300.0):
            end = LEAD_S + length + w + 5
            t = np.arange(0, end, DT)
            busy = (t >= LEAD_S) & (t < LEAD_S + length)
            power = np.where(busy, BUSY_W + RIPPLE_W * np.sin(2 * np.pi * t / RIPPLE_S), IDLE_W)
            cum = np.concatenate([[0.0], np.cumsum(power[:-1] * DT)])
            truth = float(np.interp(LEAD_S + length, t, cum) - np.interp(LEAD_S, t, cum))
            # the BMC's reading at each refresh: the average over the last W; held until the next refresh
            refresh = np.arange(w, end, REFRESH_S)
            avg = (np.interp(refresh, t, cum) - np.interp(refresh - w, t, cum)) / w
            polls = np.arange(w + 0.37, end, POLL_S)  # polls fall anywhere within the refresh interval
            held = avg[np.searchsorted(refresh, polls, side="right") - 1]
            t_ns = (polls * 1e9).astype(np.int64)
            t0, t1 = int(LEAD_S * 1e9), int((LEAD_S + length) * 1e9)
            naive = power_energy(t_ns, held, t0, t1, 0.0)
            honest = power_energy(t_ns, held, t0, t1, w, REFRESH_S)
            print(f"{w:>6g} {length:>10g} {100 * (naive.joules / truth - 1):>+11.1f}% "
                  f"{100 * (honest.joules / truth - 1):>+11.1f}% {100 * honest.error_j / truth:>7.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
