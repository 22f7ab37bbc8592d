"""Host sensors on Linux: RAPL package energy (powercap), the server process tree's RSS and CPU time,
MemAvailable and whole-host CPU time."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import psutil

from benchlib.measure.telemetry.common import NAN, read_sysfs, sensor_status


class Rapl:
    """Package energy from /sys/class/powercap/intel-rapl:N (AMD Zen uses the same names), unwrapped."""

    def __init__(self, root: Path):
        self.domains: list[tuple[Path, float]] = []  # (energy_uj path, max_energy_range_uj)
        self.last: list[float] = []
        self.total = 0.0
        self.status = sensor_status(False, "", "")
        if not root.is_dir():
            self.status = sensor_status(False, f"{root} does not exist: no powercap driver", "")
            return
        found = sorted(p for p in root.iterdir() if re.fullmatch(r"intel-rapl:\d+", p.name))
        # Top-level domains only (sub-domains are parts of their package); psys overlaps the packages.
        named = [(p, read_sysfs(p / "name") or p.name) for p in found]
        packages = [p for p, name in named if name != "psys"] or [p for p, _ in named]
        if not packages:
            self.status = sensor_status(False, f"no intel-rapl:N domains under {root}", "")
            return
        problems = []
        for path in packages:
            try:
                int((path / "energy_uj").read_text())
                max_range = float(int((path / "max_energy_range_uj").read_text()))
                self.domains.append((path / "energy_uj", max_range))
            except (OSError, ValueError) as exc:
                why = "permission denied (root-only on Linux >= 5.10)" if isinstance(exc, PermissionError) \
                    else f"{type(exc).__name__}: {exc}"
                problems.append(f"{path.name}: {why}")
        if problems:  # a partial package sum would under-report; all or nothing
            self.domains = []
            self.status = sensor_status(False, "; ".join(problems), "")
            return
        self.status = sensor_status(True, "", "+".join(f"{p.parent.name}/energy_uj" for p, _ in self.domains))

    def read(self) -> float:
        """Cumulative µJ since the first read, wrap-around undone with max_energy_range_uj."""
        if not self.domains:
            return NAN
        values = []
        for path, _ in self.domains:
            with open(path, "rb") as handle:
                values.append(float(int(handle.read())))
        if not self.last:
            self.last = values
            self.total = 0.0
            return self.total
        for i, (value, (_, max_range)) in enumerate(zip(values, self.domains)):
            delta = value - self.last[i]
            if delta < 0:
                delta += max_range
            self.total += delta
        self.last = values
        return self.total


class ProcessTree:
    """RSS and CPU time of the server process and its descendants."""

    # Listing descendants scans every pid on the host (~1-10 ms): do it each second while a server is starting
    # its workers, then every few seconds; RSS and CPU of the known processes are read on every slow tick.
    EARLY_S, EARLY_EVERY_S, LATE_EVERY_S = 30.0, 1.0, 5.0

    def __init__(self, pid: int):
        self.pid = pid
        self.root = psutil.Process(pid)
        self.procs: list[psutil.Process] = [self.root]
        self.since = time.monotonic()
        self.refreshed = -math.inf
        self.refresh()

    def refresh(self) -> None:
        self.refreshed = time.monotonic()
        try:
            self.procs = [self.root] + self.root.children(recursive=True)
        except psutil.Error:
            self.procs = [self.root]

    def maybe_refresh(self) -> None:
        now = time.monotonic()
        every = self.EARLY_EVERY_S if now - self.since < self.EARLY_S else self.LATE_EVERY_S
        if now - self.refreshed >= every:
            self.refresh()

    def read(self) -> tuple[float, float]:
        """(rss bytes, cpu seconds); RSS sums shared pages per process (an upper bound); NaN once the root exits."""
        rss = cpu = 0.0
        for proc in self.procs:
            try:
                times = proc.cpu_times()
                rss += proc.memory_info().rss
            except psutil.Error:
                if proc is self.root:
                    return NAN, NAN
                continue
            # children_* hold only reaped descendants, which are no longer in the tree: no double count
            cpu += times.user + times.system + times.children_user + times.children_system
        return float(rss), cpu


def read_mem_available(path: Path) -> float:
    """MemAvailable in bytes (hand-parsed so tests can point at a fake /proc/meminfo)."""
    with open(path, "rb") as handle:
        for line in handle:
            if line.startswith(b"MemAvailable:"):
                return float(int(line.split()[1]) * 1024)
    return NAN


def host_cpu_times() -> tuple[float, float]:
    """(busy, total) seconds over all cores; guest time is already inside user time.

    Both are sums of non-decreasing fields (float addition is monotonic), so neither ever steps backwards —
    total minus idle would, by rounding.
    """
    times = psutil.cpu_times()
    busy = sum(getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal"))
    return busy, busy + times.idle + getattr(times, "iowait", 0.0)
