"""What an open-loop level sends and when: seeded arrival schedules and seeded length draws.

Arrivals (as `vllm bench serve` draws them): the gap between two sends is
    constant   1 / rate
    poisson    exponential with mean 1 / rate
    gamma      gamma(shape = burstiness, scale = 1 / (rate × burstiness)): mean 1 / rate; burstiness 1 is
               Poisson, below 1 burstier (more short gaps and a few long ones), above 1 more regular
The first request leaves at offset 0. Every draw is seeded by (params seed, level name): a rerun or a resume
sends the same schedule, and two levels never share one.

Lengths (prompt tokens, output budgets): fixed, uniform on [min, max], or normal (mean, sd) rounded and clipped
to [min, max] (defaults: 1 and 2 × mean)."""

from __future__ import annotations

import hashlib

import numpy as np

from benchlib.config.params import LengthParams

ARRIVALS = ("constant", "poisson", "gamma")


def rng_for(seed: int, name: str) -> np.random.Generator:
    """A generator seeded by (seed, name): stable across runs and processes (no Python hash randomisation)."""
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def gaps(arrival: str, rate: float, n: int, burstiness: float = 1.0, seed: int = 0, name: str = "") -> np.ndarray:
    """n − 1 inter-arrival gaps (seconds) of the process at `rate` requests per second."""
    if arrival not in ARRIVALS:
        raise ValueError(f"arrival must be one of {', '.join(ARRIVALS)}, not {arrival!r}")
    if not rate > 0:
        raise ValueError(f"rate must be > 0 requests/s, not {rate!r}")
    count = max(n - 1, 0)
    if arrival == "constant":
        return np.full(count, 1.0 / rate)
    rng = rng_for(seed, f"arrivals/{name}")
    shape = 1.0 if arrival == "poisson" else float(burstiness)
    return rng.gamma(shape, 1.0 / (rate * shape), size=count)


def offsets(arrival: str, rate: float, n: int, burstiness: float = 1.0, seed: int = 0, name: str = "") -> list[float]:
    """Send offsets (seconds from the level's start) of n requests: 0, then the cumulative gaps."""
    if n <= 0:
        return []
    return [0.0] + np.cumsum(gaps(arrival, rate, n, burstiness, seed, name)).tolist()


def level_size(rate: float, duration_s: float, min_requests: int) -> int:
    """Requests an open-loop level sends: rate × duration, at least min_requests."""
    return max(int(min_requests), int(round(rate * duration_s)))


def lengths(spec: LengthParams, n: int, seed: int = 0, name: str = "") -> list[int]:
    """n token lengths drawn from the distribution (seeded by seed and name)."""
    low = spec.min or 1
    high = spec.max or max(2 * spec.mean, low)
    if spec.dist == "fixed":
        return [int(spec.mean)] * n
    rng = rng_for(seed, f"lengths/{name}")
    if spec.dist == "uniform":
        return rng.integers(low, high + 1, size=n).astype(int).tolist()
    drawn = np.rint(rng.normal(spec.mean, spec.sd, size=n))
    return np.clip(drawn, low, high).astype(int).tolist()
