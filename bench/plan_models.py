"""The plan's decode law against one alternative, each deployment predicted from the host's other measured ones
(leave-one-out), on the runs under outputs/ (bench/results/2026-11-29-plan.md has the figures):

    law        tok/s = median over the others of (measured tok/s × GB read per token) ÷ this one's GB read
               (benchlib.analysis.plan's EFFICIENCY RULE: the bandwidth figure cancels on one host)
    intercept  seconds per token = t0 + GB read ÷ B, t0 and B fitted by least squares on the others: a fixed
               cost per token (compute, sampling, the stream) that does not scale with the bytes read

Usage: .venv/bin/python bench/plan_models.py [--host HOST]   (default local-cpu; reads, never measures)"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from benchlib.analysis.plan import measured_points
from benchlib.paper.runs import load_runs


def law(others: pd.DataFrame, read_gb: float) -> float:
    return float(np.median(others["decode_tps"] * others["read_gb"])) / read_gb


def intercept(others: pd.DataFrame, read_gb: float) -> float:
    design = np.c_[np.ones(len(others)), others["read_gb"]]
    (t0, per_gb), *_ = np.linalg.lstsq(design, 1 / others["decode_tps"], rcond=None)
    return 1 / (t0 + per_gb * read_gb)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="local-cpu", help="the host folder under outputs/ (default %(default)s)")
    host = parser.parse_args().host
    runs = load_runs()
    points = measured_points(runs.meta, runs.requests, host).reset_index(drop=True)
    if len(points) < 3:
        sys.exit(f"{len(points)} measured deployments on {host}: leave-one-out needs 3")
    rows = []
    for i, point in points.iterrows():
        others = points.drop(index=i)
        rows.append({"deployment": point["weights_key"], "GB/token": round(point["read_gb"], 3),
                     "measured": round(point["decode_tps"], 1),
                     **{name: f"{(fn(others, point['read_gb']) - point['decode_tps']) / point['decode_tps']:+.0%}"
                        for name, fn in (("law", law), ("intercept", intercept))}})
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    for name in ("law", "intercept"):
        errors = table[name].str.rstrip("%").astype(float).abs()
        print(f"{name}: median |error| {errors.median():.1f} % over {len(errors)}")


if __name__ == "__main__":
    main()
