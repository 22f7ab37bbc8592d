"""The node's BMC as a telemetry source: the whole node's input power over Redfish or IPMI, beside the chip-level
sources (NVML, RAPL, powermetrics, hwmon), with the boundary "whole node, input power (BMC)".

What each protocol offers is declared as data (REDFISH_FIELDS, IPMI_POWER_NAMES) and read in that order:

- Redfish: the first chassis (or telemetry.bmc.chassis) that reports power; its EnvironmentMetrics (EnergyJoules or
  EnergykWh, an energy counter; PowerWatts) and its older Power resource (PowerControl[0].PowerConsumedWatts, else
  PowerMetrics.AverageConsumedWatts, a rolling average over IntervalInMin). Every request goes through
  benchlib.measure.http.bounded.fetch (deadline and size cap), as every other probe here does; the resources are plain
  JSON at fixed links, so the reader walks them itself: sushy's Power model has no PowerControl and neither sushy
  nor the DMTF redfish library bounds an answer's size (docs/energy.md says more).
- IPMI over RMCP+ (python-ipmi, no ipmitool needed): DCMI Get Power Reading where the BMC answers it; a BMC without
  DCMI (OpenIPMI's ipmi_sim among them) through its SDR sensor in watts (telemetry.bmc.sensor, else one whose name
  says it is the node's consumption, else the first in watts). Each command is bounded by telemetry.bmc.deadline_s
  (UDP; an answer is one datagram).

Credentials come only from the environment variables telemetry.bmc.user_env / password_env; nothing here writes them
or an object that holds them. The readings are sampled by NodePower in their own thread every poll_s (a BMC answers
in tens to hundreds of ms: the chip sampler's ticks must not wait for it), each placed at the midpoint of its
request on the local monotonic clock, and kept in node_power.csv. A window's node figures come from
benchlib.measure.telemetry.node_energy, which integrates a rolling average for what it means."""

from __future__ import annotations

import math
import os
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import httpx
import numpy as np
import pyipmi
import pyipmi.interfaces
from pyipmi.errors import CompletionCodeError

from benchlib.config.telemetry_source import BmcParams
from benchlib.measure.http.bounded import fetch
from benchlib.measure.telemetry.boundary import NODE_INPUT
from benchlib.measure.telemetry.common import NAN, sensor_status
from benchlib.measure.telemetry.node_energy import NodeEnergy, counter_energy, power_energy, smallest_step
from benchlib.records.secrets import redact_url

NODE_POWER_CSV = "node_power.csv"


NODE_POWER_COLUMNS = ["t_ns", "t_unix", "power_w", "energy_j", "request_ms"]


REDFISH_MAX_BYTES = 2 * 2**20  # a chassis or its metrics are a few kB; a service root with OEM sections ~50 kB


IPMI_PORT = 623


FAILING_READS = 3  # reads missed in a row after which a window's close no longer waits for the BMC


IPMI_WATTS = 6  # the SDR base-unit code of watts (IPMI 2.0, table 43-15)


@dataclass(frozen=True)
class RedfishField:
    """One place a Redfish chassis may report its input power: the chassis's link to the resource, the path to the
    number inside it, its kind (energy: a counter; power: a reading; average: a rolling average), the factor to
    joules or watts, and where the averaging window is said (a path inside the same resource, in minutes)."""

    kind: str
    resource: str
    path: tuple[str | int, ...]
    factor: float = 1.0
    interval_min: tuple[str | int, ...] = ()

    @property
    def label(self) -> str:
        return f"redfish {self.resource} " + ".".join(f"[{p}]" if isinstance(p, int) else p for p in self.path)


REDFISH_FIELDS = (  # first present of each kind wins
    RedfishField("energy", "EnvironmentMetrics", ("EnergyJoules", "Reading")),
    RedfishField("energy", "EnvironmentMetrics", ("EnergykWh", "Reading"), 3.6e6),
    RedfishField("power", "EnvironmentMetrics", ("PowerWatts", "Reading")),
    RedfishField("power", "Power", ("PowerControl", 0, "PowerConsumedWatts")),
    RedfishField("average", "Power", ("PowerControl", 0, "PowerMetrics", "AverageConsumedWatts"), 1.0,
                 ("PowerControl", 0, "PowerMetrics", "IntervalInMin")),
)


IPMI_POWER_NAMES = ("consum", "total", "node", "sys", "input", "pwr", "power")  # name hints, in order of trust


@dataclass(frozen=True)
class Reading:
    """One answer of the BMC: power in W and energy in J (NaN where it reports none)."""

    power_w: float = NAN
    energy_j: float = NAN


def _dig(doc: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        if isinstance(step, int):
            doc = doc[step] if isinstance(doc, list) and len(doc) > step else None
        else:
            doc = doc.get(step) if isinstance(doc, dict) else None
        if doc is None:
            return None
    return doc


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def iso_seconds(text: Any) -> float | None:
    """An ISO 8601 duration as Redfish writes intervals (PT1S, PT0.5S, PT1M30S) in seconds; None when it is not one."""
    match = re.fullmatch(r"P(?:(\d+(?:\.\d+)?)D)?T?(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?",
                         str(text or ""))
    if not match or not any(match.groups()):
        return None
    d, h, m, s = (float(g) if g else 0.0 for g in match.groups())
    return d * 86400 + h * 3600 + m * 60 + s


class RedfishReader:
    """A Redfish service's chassis power, walked from the service root with bounded GETs and HTTP basic auth."""

    protocol = "redfish"

    def __init__(self, url: str, chassis: str | None, user: str | None, password: str | None, *,
                 verify_tls: bool = True, deadline_s: float = 2.0, client: httpx.Client | None = None):
        self.base = url.rstrip("/")
        self.chassis = chassis
        self.deadline_s = deadline_s
        self.client = client or httpx.Client(auth=(user, password or "") if user else None, verify=verify_tls,
                                             trust_env=False)
        self.plan: dict[str, tuple[str, RedfishField]] = {}  # kind -> (resource URL path, field)
        self.verify_tls = verify_tls

    def where(self) -> str:
        return f"Redfish at {redact_url(self.base)}"

    def _get(self, path: str) -> Any:
        answer = fetch(self.client, "GET", self.base + path, deadline_s=self.deadline_s, max_bytes=REDFISH_MAX_BYTES)
        if answer.status_code != 200:
            raise RuntimeError(f"HTTP {answer.status_code} on {path}")
        return answer.json()

    def probe(self) -> dict[str, Any]:
        """Find the chassis and the fields to read; what the service states about its averaging and refresh."""
        root = self._get("/redfish/v1/")
        link = _dig(root, ("Chassis", "@odata.id"))
        if not link:
            raise RuntimeError("the service root has no Chassis collection")
        members = [m.get("@odata.id", "") for m in self._get(link).get("Members", []) if isinstance(m, dict)]
        if self.chassis:
            members = [m for m in members if m.rstrip("/").rsplit("/", 1)[-1] == self.chassis]
            if not members:
                raise RuntimeError(f"no chassis {self.chassis!r} in {link}")
        for member in members:
            found = self._probe_chassis(member)
            if found:
                return found
        raise RuntimeError(f"no chassis under {link} reports power or energy (EnvironmentMetrics PowerWatts / "
                           "EnergyJoules / EnergykWh, or Power PowerControl)")

    def _probe_chassis(self, member: str) -> dict[str, Any] | None:
        chassis = self._get(member)
        docs: dict[str, tuple[str, Any]] = {}
        for resource in dict.fromkeys(f.resource for f in REDFISH_FIELDS):
            path = _dig(chassis, (resource, "@odata.id"))
            if path:
                docs[resource] = (path, self._get(path))
        plan: dict[str, tuple[str, RedfishField]] = {}
        averaging_min = None
        for field in REDFISH_FIELDS:
            kind = "power" if field.kind == "average" else field.kind
            if kind in plan or field.resource not in docs:
                continue
            path, doc = docs[field.resource]
            if _number(_dig(doc, field.path)) is not None:
                plan[kind] = (path, field)
                if field.interval_min:
                    averaging_min = _number(_dig(doc, field.interval_min))
        if not plan:
            return None
        self.plan = plan
        refresh = None
        power = plan.get("power")
        if power and power[1].path[-1] == "Reading":  # a Sensor excerpt: its Sensor may state its sensing interval
            source = _dig(docs[power[1].resource][1], (*power[1].path[:-1], "DataSourceUri"))
            if source:
                try:
                    refresh = iso_seconds(self._get(str(source)).get("SensingInterval"))
                except Exception:  # the interval is a nicety: the reading works without it
                    refresh = None
        return {"chassis": chassis.get("Id", member), "power_field": power[1].label if power else "",
                "energy_field": plan["energy"][1].label if "energy" in plan else "",
                "averaging_s": averaging_min * 60.0 if averaging_min else None,
                "averaging_said_by": "PowerMetrics.IntervalInMin" if averaging_min else "",
                "refresh_s": refresh, "verify_tls": self.verify_tls}

    def read(self) -> Reading:
        values: dict[str, float] = {}
        docs: dict[str, Any] = {}
        for kind, (path, field) in self.plan.items():
            if path not in docs:
                docs[path] = self._get(path)
            value = _number(_dig(docs[path], field.path))
            values[kind] = NAN if value is None else value * field.factor
        return Reading(values.get("power", NAN), values.get("energy", NAN))

    def close(self) -> None:
        self.client.close()


class IpmiReader:
    """An IPMI BMC over RMCP+ (python-ipmi): DCMI Get Power Reading, else an SDR sensor in watts."""

    protocol = "ipmi"

    def __init__(self, url: str, sensor: str | None, user: str | None, password: str | None, *,
                 deadline_s: float = 2.0):
        parts = urllib.parse.urlsplit(url if "//" in url else f"ipmi://{url}")
        self.host, self.port = parts.hostname or "", parts.port or IPMI_PORT
        self.sensor = sensor
        self.deadline_s = deadline_s
        self._user, self._password = user or "", password or ""
        self.ipmi: Any = None
        self.mode = ""
        self.sdr: Any = None

    def where(self) -> str:
        return f"IPMI at {self.host}:{self.port}"

    def _open(self) -> None:
        # no keep-alive thread (every poll keeps the session alive) and no resend: one bounded try per command
        interface = pyipmi.interfaces.create_interface("rmcpplus", keep_alive_interval=0, max_retries=0)
        ipmi = pyipmi.create_connection(interface)
        ipmi.session.set_session_type_rmcp(self.host, port=self.port)
        ipmi.session.set_auth_type_user(self._user, self._password)
        ipmi.target = pyipmi.Target(ipmb_address=0x20)
        interface.open()
        interface.set_timeout(self.deadline_s)
        ipmi.session.establish()
        self.ipmi = ipmi

    def probe(self) -> dict[str, Any]:
        self._open()
        try:
            answer = self.ipmi.get_power_reading(1)
            self.mode = "dcmi"
            period_ms = _number(getattr(answer, "period", None))
            # DCMI states its statistics period, not the averaging of the current reading: that comes from params
            return {"power_field": "ipmi DCMI Get Power Reading (current power)", "energy_field": "",
                    "statistics_period_s": period_ms / 1000.0 if period_ms else None, "averaging_s": None,
                    "averaging_said_by": "", "refresh_s": None, "resolution_w": 1.0}  # whole watts
        except CompletionCodeError as exc:
            dcmi_why = f"DCMI Get Power Reading answered {exc}"
        watts = [s for s in self.ipmi.get_repository_sdr_list()
                 if getattr(s, "units_2", None) == IPMI_WATTS and not getattr(s, "rate_unit", 0)
                 and not getattr(s, "percentage", 0) and hasattr(s, "convert_sensor_raw_to_value")]
        if self.sensor:
            watts = [s for s in watts if s.device_id_string == self.sensor]
        if not watts:
            raise RuntimeError(f"{dcmi_why}, and no SDR sensor in watts"
                               + (f" named {self.sensor!r}" if self.sensor else ""))

        def trust(sdr: Any) -> int:
            name = str(sdr.device_id_string).lower()
            return next((i for i, hint in enumerate(IPMI_POWER_NAMES) if hint in name), len(IPMI_POWER_NAMES))

        self.sdr = min(watts, key=trust)  # min keeps the first of equals: the repository's order
        self.mode = "sdr"
        return {"power_field": f"ipmi SDR sensor {self.sdr.device_id_string!r} (number {self.sdr.number}, watts)",
                "energy_field": "", "dcmi": dcmi_why, "averaging_s": None, "averaging_said_by": "", "refresh_s": None,
                "resolution_w": abs(float(self.sdr.m) * 10.0 ** self.sdr.k2)}

    def read(self) -> Reading:
        if self.mode == "dcmi":
            return Reading(float(self.ipmi.get_power_reading(1).current_power))
        raw, _ = self.ipmi.get_sensor_reading(self.sdr.number)
        value = self.sdr.convert_sensor_raw_to_value(raw)
        return Reading(NAN if value is None else float(value))

    def close(self) -> None:
        if self.ipmi is not None:
            try:
                self.ipmi.close()
            except Exception:  # a BMC gone already: the session ends with it
                pass


def make_reader(settings: BmcParams, environ: Mapping[str, str]) -> RedfishReader | IpmiReader:
    assert settings.url
    user, password = environ.get(settings.user_env) or None, environ.get(settings.password_env) or None
    if settings.protocol == "redfish":
        return RedfishReader(settings.url, settings.chassis, user, password, verify_tls=settings.verify_tls,
                             deadline_s=settings.deadline_s)
    return IpmiReader(settings.url, settings.sensor, user, password, deadline_s=settings.deadline_s)


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


class NodePower:
    """The BMC sampled in its own thread; a window's whole-node figures (`figures`). `reader` injects one (tests
    pass none: they start real emulators)."""

    def __init__(self, settings: BmcParams, out_dir: Path | str, environ: Mapping[str, str] | None = None,
                 reader: Any = None):
        self.settings = settings
        self.out_dir = Path(out_dir)
        self.reader = reader or make_reader(settings, os.environ if environ is None else environ)
        self.lock = threading.Lock()
        self.t_ns: list[int] = []
        self.power: list[float] = []
        self.energy: list[float] = []
        self.request_ms: list[float] = []
        self.errors: dict[str, str] = {}
        self.failures = 0
        self.failing = 0  # reads failed since the last one that answered
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._csv: Any = None
        try:
            self.layout = self.reader.probe()
            self.status = sensor_status(True, "", " + ".join(x for x in (self.layout.get("energy_field"),
                                                                          self.layout.get("power_field")) if x))
        except Exception as exc:  # the run goes on; every window says why its node cells are empty
            self.layout = {}
            self.status = sensor_status(False, f"{self.reader.where()}: {_reason(exc)}", "")
        stated = self.layout.get("averaging_s")
        if settings.averaging_s is not None:
            self.averaging_s, self.averaging_said = float(settings.averaging_s), "telemetry.bmc.averaging_s"
        elif stated:
            self.averaging_s, self.averaging_said = float(stated), str(self.layout.get("averaging_said_by"))
        else:
            self.averaging_s, self.averaging_said = 0.0, "not stated by the BMC: taken as instantaneous"
        self.refresh_s = float(self.layout.get("refresh_s") or 0.0)

    @property
    def ok(self) -> bool:
        return bool(self.status["available"])

    # -- sampling ------------------------------------------------------------------------------------------
    def start(self) -> None:
        if not self.ok or self._thread is not None:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / NODE_POWER_CSV
        fresh = not path.is_file() or path.stat().st_size == 0
        self._csv = path.open("a", encoding="utf-8")
        if fresh:
            self._csv.write(",".join(NODE_POWER_COLUMNS) + "\n")
        self._thread = threading.Thread(target=self._run, name="telemetry-bmc", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_at = time.perf_counter()
        while not self._stop.is_set():
            self.read_once()
            next_at = max(next_at + self.settings.poll_s, time.perf_counter())
            while not self._stop.is_set() and (remaining := next_at - time.perf_counter()) > 0:
                time.sleep(min(remaining, 0.05))

    def read_once(self) -> None:
        sent = time.perf_counter_ns()
        try:
            reading = self.reader.read()
        except Exception as exc:  # a BMC that misses one poll must not end the sampling
            self.failures += 1
            self.failing += 1
            self.errors.setdefault("read", _reason(exc))
            return
        self.failing = 0
        received = time.perf_counter_ns()
        t_ns = (sent + received) // 2
        t_unix = time.time() - (received - sent) / 2e9
        with self.lock:
            self.t_ns.append(t_ns)
            self.power.append(reading.power_w)
            self.energy.append(reading.energy_j)
            self.request_ms.append((received - sent) / 1e6)
        if self._csv is not None:
            cells = [str(t_ns), f"{t_unix:.6f}", *("" if math.isnan(v) else repr(v) for v in (reading.power_w,
                                                                                               reading.energy_j)),
                     f"{(received - sent) / 1e6:.3f}"]
            self._csv.write(",".join(cells) + "\n")
            self._csv.flush()

    def tail_s(self) -> float:
        """How long after a window closes its node figures need readings: the averaging window and one poll."""
        return self.averaging_s + self.settings.poll_s if self.averaging_s else self.settings.poll_s

    def wait_for(self, t1_ns: int) -> None:
        """Block until a reading lies `tail_s` past t1 (bounded by tail_wait_s plus one request's deadline)."""
        if not self.ok or self._thread is None:
            return
        need = t1_ns + int(self.tail_s() * 1e9)
        give_up = time.perf_counter() + self.settings.tail_wait_s + self.settings.deadline_s
        # a BMC that stopped answering would cost every window close the whole wait: three misses in a row end it
        while time.perf_counter() < give_up and not self._stop.is_set() and self.failing < FAILING_READS:
            with self.lock:
                if self.t_ns and self.t_ns[-1] >= need:
                    return
            time.sleep(0.02)

    # -- a window's figures ------------------------------------------------------------------------------------
    def figures(self, t0_ns: int, t1_ns: int) -> dict[str, Any]:
        """The window's node columns: energy and its error bound, average power, how it was integrated, or why not."""
        out: dict[str, Any] = {"node_energy_j": None, "node_energy_error_j": None, "node_avg_power_w": None,
                               "node_energy_source": "", "node_energy_reason": "", "node_energy_boundary": "",
                               "node_averaging_s": self.averaging_s if self.ok else None, "node_samples": 0}
        if not self.ok:
            out["node_energy_reason"] = self.status["reason"]
            return out
        with self.lock:
            t = np.array(self.t_ns, dtype=np.int64)
            power = np.array(self.power, dtype=float)
            energy = np.array(self.energy, dtype=float)
        out["node_samples"] = int(((t >= t0_ns) & (t <= t1_ns)).sum())
        tried: list[NodeEnergy] = []
        if self.layout.get("energy_field"):
            tried.append(counter_energy(t, energy, t0_ns, t1_ns, smallest_step(energy)))
        if self.layout.get("power_field"):
            tried.append(power_energy(t, power, t0_ns, t1_ns, self.averaging_s, self.refresh_s,
                                      float(self.layout.get("resolution_w") or 0.0)))
        chosen = next((e for e in tried if e.joules is not None), None)
        if chosen is None:
            out["node_energy_reason"] = "; ".join(e.reason for e in tried) or "no reading"
            return out
        field = self.layout["energy_field"] if chosen.method == "counter" else self.layout["power_field"]
        duration = (t1_ns - t0_ns) / 1e9
        out.update(node_energy_j=chosen.joules, node_energy_error_j=chosen.error_j,
                   node_energy_source=f"{field} · {chosen.method}", node_energy_boundary=NODE_INPUT,
                   node_avg_power_w=chosen.joules / duration if duration > 0 else None,
                   node_energy_reason="; ".join(e.reason for e in tried if e is not chosen and e.reason))
        return out

    def describe(self) -> dict[str, Any]:
        """sensors.json's and the manifest's node_power: where, what it reads, its averaging and who said so."""
        return {"protocol": self.reader.protocol, "where": self.reader.where(), "boundary": NODE_INPUT,
                "status": self.status, **self.layout,
                "averaging_s": self.averaging_s, "averaging_said_by": self.averaging_said,
                "poll_s": self.settings.poll_s, "readings": len(self.t_ns), "failed_reads": self.failures,
                "errors": dict(self.errors),
                "request_ms_max": round(max(self.request_ms), 3) if self.request_ms else None}

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.settings.deadline_s * 2 + 1.0)
        if self._csv is not None:
            self._csv.close()
            self._csv = None
        self.reader.close()


def node_status_missing() -> dict[str, Any]:
    return sensor_status(False, "no BMC in params (telemetry.bmc.protocol none)", "")
