"""Real BMC emulators for the node-power tests, started here: sushy-tools' static Redfish emulator (`sushy-static`,
PyPI sushy-tools) serving a mockup these helpers write and rewrite while it runs, and OpenIPMI's `ipmi_sim`
(Debian openipmi; `make test` installs it: Makefile .venv/.openipmi) serving an SDR power sensor it polls from a
file these helpers rewrite.

Which parts are ours: the emulators are the real programs a BMC client is tested against; what they serve is a
known power trace (PowerTrace) that a writer thread turns into what a BMC reports — a rolling average over W seconds
refreshed every R seconds, and an energy counter. sushy-tools' dynamic emulator (`sushy-emulator`) has no Power or
EnvironmentMetrics resource, so the static one serves them; ipmi_sim answers no DCMI command (Get Power Reading is
'invalid command' 0xC1), so the SDR sensor in watts is tested against it as it is, and DCMI with a module of ours
(ipmi_sim_dcmi.c, compiled here against libopenipmi-dev) loaded into it: ipmi_sim keeps the RMCP+ session,
authentication and routing; the module only lays out the DCMI answer."""

from __future__ import annotations

import bisect
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import httpx

SUSHY_STATIC = str(Path(sys.executable).with_name("sushy-static"))
DCMI_SOURCE = Path(__file__).with_name("ipmi_sim_dcmi.c")
OPENIPMI_HEADERS = Path("/usr/include/OpenIPMI/mcserv.h")  # Debian libopenipmi-dev
IPMI_SIM = shutil.which("ipmi_sim") or "/usr/bin/ipmi_sim"
IPMI_USER, IPMI_PASSWORD = "bench", "emulated-bmc"  # the emulator's own account: no real credential


class PowerTrace:
    """A piecewise-constant power P(t) on time.perf_counter_ns, with the exact integrals a BMC would report."""

    def __init__(self, watts: float):
        self.lock = threading.Lock()
        self.t0 = time.perf_counter_ns()
        self.times = [self.t0]
        self.watts = [float(watts)]

    def set(self, watts: float) -> int:
        with self.lock:
            now = time.perf_counter_ns()
            self.times.append(now)
            self.watts.append(float(watts))
            return now

    def energy(self, a_ns: int, b_ns: int) -> float:
        """∫_a^b P dt in joules (P before the first step is the first level)."""
        with self.lock:
            times, watts = list(self.times), list(self.watts)
        total = 0.0
        for i, level in enumerate(watts):
            lo = times[i] if i else -(2**62)
            hi = times[i + 1] if i + 1 < len(times) else 2**62
            lo, hi = max(lo, a_ns), min(hi, b_ns)
            if hi > lo:
                total += level * (hi - lo) / 1e9
        return total

    def rolling(self, t_ns: int, window_s: float) -> float:
        if window_s <= 0:
            with self.lock:
                return self.watts[bisect.bisect_right(self.times, t_ns) - 1]
        return self.energy(t_ns - int(window_s * 1e9), t_ns) / window_s

    def counter(self, t_ns: int) -> float:
        return self.energy(self.t0, t_ns)


class Refresher:
    """A thread calling `write(now_ns)` every `refresh_s`: the BMC's own update of what it reports."""

    def __init__(self, write: Callable[[int], None], refresh_s: float):
        self.write, self.refresh_s = write, refresh_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.write(time.perf_counter_ns())
            self.stop.wait(self.refresh_s)

    def __enter__(self) -> "Refresher":
        self.write(time.perf_counter_ns())
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """index.json replaced whole (sushy-static opens the file on each GET: never a half-written one)."""
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / "index.json.tmp"
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path / "index.json")


class RedfishMockup:
    """A Redfish mockup tree for one chassis, served by sushy-static (which maps /redfish/v1/X to ROOT/X/index.json).
    `resources` maps a chassis resource name (EnvironmentMetrics, Power) to a function of the time giving its JSON;
    `refresh()` rewrites them."""

    def __init__(self, root: Path, resources: dict[str, Callable[[int], dict[str, Any]]], chassis: str = "1U"):
        self.root, self.resources, self.chassis = root, resources, chassis
        base = "/redfish/v1"
        write_json(root, {"@odata.id": f"{base}/", "Id": "RootService", "RedfishVersion": "1.17.0",
                                         "Chassis": {"@odata.id": f"{base}/Chassis"}})
        write_json(root / "Chassis", {"@odata.id": f"{base}/Chassis", "Members@odata.count": 2, "Members": [
            {"@odata.id": f"{base}/Chassis/Enclosure"}, {"@odata.id": f"{base}/Chassis/{chassis}"}]})
        write_json(root / "Chassis/Enclosure", {"@odata.id": f"{base}/Chassis/Enclosure", "Id": "Enclosure",
                                                           "ChassisType": "Enclosure"})  # reports no power: skipped
        write_json(root / f"Chassis/{chassis}", {
            "@odata.id": f"{base}/Chassis/{chassis}", "Id": chassis, "ChassisType": "RackMount",
            **{name: {"@odata.id": f"{base}/Chassis/{chassis}/{name}"} for name in resources}})
        self.refresh(time.perf_counter_ns())

    def refresh(self, now_ns: int) -> None:
        for name, make in self.resources.items():
            write_json(self.root / f"Chassis/{self.chassis}/{name}", make(now_ns))


class SushyStatic:
    """`sushy-static -m ROOT` on a free loopback port. Its request log (it prints every request's headers, the
    Authorization header among them) goes to /dev/null: nothing of a credential reaches the terminal."""

    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "SushyStatic":
        self.proc = subprocess.Popen([SUSHY_STATIC, "-i", "127.0.0.1", "-p", str(self.port), "-m", str(self.root)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/redfish/v1/", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.05)
        self.__exit__()
        raise RuntimeError("sushy-static did not answer within 20 s")

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def full_sensor_record(number: int, name: str, m: int) -> list[int]:
    """An IPMI full sensor record (SDR type 01, IPMI 2.0 table 43-1): a threshold sensor of type Current, entity
    power supply, in watts (base unit 6), linear, reading × m watts, unsigned raw 0–255."""
    body = [0x20, 0x00, number,  # owner: the BMC at 0x20, LUN 0, sensor number
            0x15, 0x01,  # entity: power supply, instance 1
            0x67, 0x88,  # initialisation (scanning, events), capabilities (thresholds readable)
            0x03, 0x01,  # sensor type Current, event/reading type threshold
            0, 0, 0, 0, 0, 0,  # event masks
            0x00, 0x06, 0x00,  # units: unsigned, base unit watts, no modifier
            0x00,  # linear
            m & 0xFF, (m >> 8) & 0x03, 0, 0, 0, 0x00,  # M, tolerance, B, accuracy, R and B exponents 0
            0, 0, 0xFF, 0x00, 0xFF, 0x00,  # analog flags, nominal, normal max/min, sensor max/min
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  # thresholds, hysteresis, reserved, OEM
            0xC0 | len(name)] + [ord(c) for c in name]
    return [0x00, 0x00, 0x51, 0x01, len(body)] + body


def build_dcmi_module(folder: Path) -> Path:
    """ipmi_sim_dcmi.c compiled into a module ipmi_sim loads (`loadlib`): DCMI Get Power Reading."""
    out = folder / "ipmi_sim_dcmi.so"
    subprocess.run([shutil.which("cc") or "gcc", "-shared", "-fPIC", "-O2", "-o", str(out), str(DCMI_SOURCE)],
                   check=True, capture_output=True, timeout=120)
    return out


class IpmiSim:
    """OpenIPMI's ipmi_sim on a free loopback UDP port: a BMC at 0x20 with one SDR sensor in watts (number 1,
    `name`) that ipmi_sim polls every `poll_ms` from `value_file` (watts, divided by `m` into the raw byte); with
    `dcmi`, the module from ipmi_sim_dcmi.c loaded too, answering DCMI Get Power Reading from the same file."""

    def __init__(self, folder: Path, name: str = "Pwr Consumption", m: int = 2, poll_ms: int = 100,
                 dcmi: bool = False):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port(socket.SOCK_DGRAM)
        self.value_file = folder / "power_w"
        self.value_file.write_text("0\n")
        self.proc: subprocess.Popen | None = None
        (folder / "state").mkdir(exist_ok=True)
        module = f'loadlib "{build_dcmi_module(folder)}" "{self.value_file}"\n' if dcmi else ""
        (folder / "lan.conf").write_text(f"""name "frontier"
{module}set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 {self.port}
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  user 2 true "{IPMI_USER}" "{IPMI_PASSWORD}" admin 10 none md2 md5 straight
""")
        sdr = " ".join(f"0x{b:02x}" for b in full_sensor_record(1, name, m))
        # numbers are written 0x…: ipmi_sim reads bare ones with C conventions (51 would be decimal)
        (folder / "bmc.emu").write_text(f"""mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02
sel_enable 0x20 50 0x0a
sensor_add 0x20 0 1 0x03 0x01 poll {poll_ms} file "{self.value_file}" div={m}
main_sdr_add 0x20 {sdr}
sensor_set_event_support 0x20 0 1 enable scanning per-state \\
  000000000000000 000000000000000 000000000000000 000000000000000
mc_enable 0x20
""")

    def set_watts(self, watts: float) -> None:
        tmp = self.value_file.with_suffix(".tmp")
        tmp.write_text(f"{int(round(watts))}\n")
        os.replace(tmp, self.value_file)

    def __enter__(self) -> "IpmiSim":
        self.proc = subprocess.Popen([IPMI_SIM, "-n", "-c", str(self.folder / "lan.conf"), "-f",
                                      str(self.folder / "bmc.emu"), "-s", str(self.folder / "state")],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # bound when its UDP port is taken
            if f":{self.port:04X} " in Path("/proc/net/udp").read_text():
                return self
            time.sleep(0.05)
        self.__exit__()
        raise RuntimeError("ipmi_sim did not bind its port within 10 s")

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
