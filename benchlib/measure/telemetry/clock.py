"""Which host a server URL names (this one or another), and the offset between this host's monotonic clock and
a remote one, measured the way NTP does: the round trip with the smallest RTT wins, the remote reading is taken
to sit at the midpoint of send and receive, and half that RTT is the uncertainty."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
import urllib.parse
from dataclasses import asdict, dataclass
from typing import Any, Callable

import psutil

# A window shorter than this many offset uncertainties is flagged: its edges may fall on the wrong side of a
# remote sample.
CLOCK_FLAG_FACTOR = 4


RESOLVE_DEADLINE_S = 2.0


@dataclass(frozen=True)
class ClockOffset:
    """remote_ns - local_ns, and its uncertainty (half the best round trip), from `round_trips` exchanges."""

    offset_ns: int
    uncertainty_ns: int
    rtt_ns: int
    round_trips: int
    at_unix: float

    def to_local(self, remote_ns: int) -> int:
        return int(remote_ns) - self.offset_ns

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure_offset(remote_now_ns: Callable[[], int], round_trips: int) -> ClockOffset:
    """Call `remote_now_ns` (one request answering the remote monotonic clock) `round_trips` times; the exchange
    with the smallest RTT gives offset = remote - (t_send + t_recv) / 2, uncertainty = RTT / 2."""
    best: tuple[int, int] | None = None  # (rtt, offset)
    for _ in range(max(1, round_trips)):
        sent = time.perf_counter_ns()
        remote = int(remote_now_ns())
        received = time.perf_counter_ns()
        rtt = received - sent
        if best is None or rtt < best[0]:
            best = (rtt, remote - (sent + received) // 2)
    assert best is not None
    return ClockOffset(offset_ns=best[1], uncertainty_ns=(best[0] + 1) // 2, rtt_ns=best[0],
                       round_trips=max(1, round_trips), at_unix=time.time())


def url_host(url: str | None) -> str:
    """The host part of a URL ("" when there is none)."""
    if not url:
        return ""
    return (urllib.parse.urlsplit(url if "//" in url else f"//{url}").hostname or "").lower()


def _this_hosts_addresses() -> set[str]:
    out: set[str] = set()
    try:
        for addresses in psutil.net_if_addrs().values():
            for item in addresses:
                if item.family in (socket.AF_INET, socket.AF_INET6):
                    out.add(item.address.split("%", 1)[0].lower())
    except (OSError, psutil.Error):
        pass
    return out


def _resolve(host: str) -> set[str]:
    """The host's addresses, or nothing when the name does not resolve within RESOLVE_DEADLINE_S (a resolver
    that hangs must not hold a run)."""
    found: set[str] = set()

    def run() -> None:
        try:
            for info in socket.getaddrinfo(host, None):
                found.add(str(info[4][0]).split("%", 1)[0].lower())
        except (OSError, UnicodeError):
            pass

    thread = threading.Thread(target=run, name="resolve-server-host", daemon=True)
    thread.start()
    thread.join(RESOLVE_DEADLINE_S)
    return set(found) if not thread.is_alive() else set()


def is_this_host(host: str) -> bool:
    """Whether `host` (a name or an address) is this machine: loopback, one of its names, or an address of one
    of its interfaces. A name that does not resolve counts as another host."""
    host = host.strip("[]").lower()
    if not host or host in ("localhost", "localhost.localdomain", "0.0.0.0", "::"):
        return True
    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    if host in names or host in {n.split(".", 1)[0] for n in names}:
        return True
    try:
        addresses = {str(ipaddress.ip_address(host))}
    except ValueError:
        addresses = _resolve(host)
    if any(ipaddress.ip_address(a).is_loopback for a in addresses if _is_address(a)):
        return True
    return bool(addresses & _this_hosts_addresses())


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
