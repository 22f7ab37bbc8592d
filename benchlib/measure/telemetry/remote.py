"""Telemetry of the server's host read from somewhere else: RemoteTelemetry has the local sampler's API, files and
window arithmetic, but its samples come from a source on the server's host — the project's own agent
(`frontier-bench telemetry-agent`, AgentSource) or the Prometheus exporters operators already run
(benchlib.measure.telemetry.exporters) — each sample placed on this process's monotonic clock, the one windows
are opened and closed on.

A source describes its host once (`layout()`: which GPUs, which sensors and why not), then answers `pull(force)`
with the samples taken since the last pull, already on the local clock; `force` asks for a fresh sample first
(window edges, like the local sampler's synchronous tick). Counters stay counters: windows difference them,
so an energy counter read on the agent's host is exact over a window, up to where the clock offset places its
edges. The agent's offset is measured when the suite starts, every CLOCK_EVERY_S while it runs and when it ends;
every measurement is in sensors.json and the manifest."""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Mapping

import httpx

from benchlib.config.params import TelemetryParams
from benchlib.measure.http.bounded import fetch
from benchlib.measure.telemetry.bmc import node_status_missing
from benchlib.measure.telemetry.clock import ClockOffset, measure_offset, url_host
from benchlib.measure.telemetry.common import NAN, sensor_status
from benchlib.measure.telemetry.exporters import ExporterSource
from benchlib.measure.telemetry.nvml import Gpu
from benchlib.measure.telemetry.sampler import Telemetry, _close_if_alive, series_names
from benchlib.measure.telemetry.windows import Series
from benchlib.records.secrets import redact_url

AGENT_DEADLINE_S = 2.0


AGENT_MAX_BYTES = 8 * 2**20  # a pull is at most the agent's SAMPLES_PER_ANSWER samples (~1 MB with 8 GPUs)


CLOCK_EVERY_S = 30.0  # clocks of two hosts drift apart by tens of µs per second: re-measure while a suite runs


EDGE_TRIES = 5  # forced pulls at a window edge until a sample lies past it on the local clock


HISTORY = 50  # samples the agent already has, taken before the first pull: the first window's start is bracketed


Sample = tuple[int, float, dict[str, float], int | None]  # (local t_ns, t_unix, values, the sample's own t_ns)


class AgentError(RuntimeError):
    """The agent answered, but not with samples (wrong token, unknown path)."""


class AgentSource:
    """The telemetry agent on the server's host, over HTTP with a Bearer token; every request is bounded
    (deadline and size) by benchlib.measure.http.bounded.fetch."""

    label = "agent"

    def __init__(self, url: str, token: str | None, round_trips: int = 8, client: httpx.Client | None = None,
                 token_env: str | None = None):
        self.url = url.rstrip("/")
        self.token_note = "" if token else (f"; ${token_env} is not set here" if token_env
                                            else "; telemetry.agent_token_env names no token variable")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = client or httpx.Client(headers=headers, trust_env=False)
        self.round_trips = round_trips
        self.host = ""
        self.offset: ClockOffset | None = None
        self.next_seq: int | None = None
        self.lost = 0  # samples the agent's ring buffer dropped before we pulled them

    def where(self) -> str:
        return f"telemetry agent at {redact_url(self.url)}"

    def _get(self, path: str) -> Any:
        answer = fetch(self.client, "GET", f"{self.url}{path}", deadline_s=AGENT_DEADLINE_S, max_bytes=AGENT_MAX_BYTES)
        if answer.status_code != 200:
            note = self.token_note if answer.status_code == 401 else ""
            raise AgentError(f"HTTP {answer.status_code} on {path.split('?')[0]}: {answer.text[:200]}{note}")
        return answer.json()

    def layout(self) -> dict[str, Any]:
        data = self._get("/layout")
        self.host = str(data.get("host", ""))
        self.next_seq = max(int(data.get("first", 0)), int(data.get("next", 0)) - HISTORY)
        return data

    def measure_clock(self) -> ClockOffset:
        self.offset = measure_offset(lambda: int(self._get("/clock")["t_ns"]), self.round_trips)
        return self.offset

    def uncertainty_s(self) -> float | None:
        return None if self.offset is None else self.offset.uncertainty_ns / 1e9

    def pull(self, force: bool) -> list[Sample]:
        if self.offset is None:
            self.measure_clock()
        assert self.offset is not None
        out: list[Sample] = []
        while True:
            data = self._get(f"/samples?since={self.next_seq or 0}&tick={int(force)}")
            force = False
            first, nxt = int(data["first"]), int(data["next"])
            if self.next_seq is not None and first > self.next_seq:
                self.lost += first - self.next_seq
            names = list(data["values"])
            columns = [data["values"][n] for n in names]
            for i, remote_ns in enumerate(data["t_ns"]):
                values = {n: NAN if col[i] is None else float(col[i]) for n, col in zip(names, columns)}
                out.append((self.offset.to_local(remote_ns), float(data["t_unix"][i]), values, int(remote_ns)))
            self.next_seq = nxt
            if not data.get("more"):
                return out

    def describe(self) -> dict[str, Any]:
        return {"url": redact_url(self.url), "samples_lost": self.lost}

    def close(self) -> None:
        self.client.close()


def make_source(settings: TelemetryParams, environ: Mapping[str, str] | None = None) -> Any:
    """The source params name: the agent (its token read from the environment variable params name) or the
    exporters."""
    env = os.environ if environ is None else environ
    if settings.source == "agent":
        assert settings.agent_url
        token = env.get(settings.agent_token_env, "") if settings.agent_token_env else ""
        return AgentSource(settings.agent_url, token or None, settings.clock_round_trips,
                           token_env=settings.agent_token_env)
    return ExporterSource(settings.dcgm_url, settings.node_url)


def _gpu(entry: Mapping[str, Any]) -> Gpu:
    return Gpu(slot=int(entry["slot"]), index=int(entry["index"]), handle=None, uuid=str(entry.get("uuid", "")),
               name=str(entry.get("name", "")), energy=bool(entry.get("energy")), power=str(entry.get("power", "")),
               memory=str(entry.get("memory", "")), temp=bool(entry.get("temp")), clock=bool(entry.get("clock")),
               power_limit_w=entry.get("power_limit_w"), sensors=dict(entry.get("sensors", {})),
               labels=dict(entry.get("labels", {})))


class RemoteNvml:
    """What the window arithmetic and sensors.json ask of NVML, answered from the remote host's layout."""

    def __init__(self, layout: Mapping[str, Any]):
        self.reason = str(layout.get("nvml_reason", ""))
        self.ok = bool(layout.get("gpus"))
        self.throttle_names = {int(bit): name for bit, name in layout.get("throttle_names", {}).items()}
        self.selection = str(layout.get("gpu_selection", ""))
        self.driver_version = str(layout.get("driver_version", ""))
        self.cuda_driver_version = str(layout.get("cuda_driver_version", ""))
        self.errors: dict[str, str] = {}
        self.error_counts: dict[str, int] = {}

    def note_error(self, key: str, reason: str) -> None:
        self.error_counts[key] = self.error_counts.get(key, 0) + 1
        self.errors.setdefault(key, reason)

    def decode_throttle(self, mask: int) -> list[str]:
        names = [label for bit, label in sorted(self.throttle_names.items()) if mask & bit]
        rest = mask & ~sum(self.throttle_names)
        return names + ([f"0x{rest:x}"] if rest else [])

    def shutdown(self) -> None:
        return None


class RemoteTelemetry(Telemetry):
    """Telemetry's API (start, window, measure, baseline, windows_frame, samples_frame, describe, close) over
    a source on the server's host. `source` injects one (tests); by default params name it. When the source
    cannot be reached at start, every window carries why — never this host's readings."""

    def __init__(self, settings: TelemetryParams, out_dir: Path | str, source: Any = None,
                 environ: Mapping[str, str] | None = None):
        self._init_state(settings, out_dir, environ=environ)
        self.source_label = settings.source
        self.source_host = ""
        self.clocks: dict[str, Any] = {}
        self._clock_checks = 0
        self._clock_at = 0.0
        self._pull_lock = threading.Lock()
        self._source = source
        if not self.enabled:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._source = source if source is not None else make_source(settings, environ)
        try:
            layout = self._source.layout()
        except Exception as exc:  # the run goes on; its windows say why they are empty
            layout = {}
            self.no_source_reason = f"{self._source.where()}: {_reason(exc)}"
        self.source_host = str(layout.get("host", "")) or getattr(self._source, "host", "")
        self._apply(layout)
        self._windows = self._load_previous_windows()
        atexit.register(_close_if_alive, weakref.ref(self))

    def _apply(self, layout: Mapping[str, Any]) -> None:
        self._nvml = RemoteNvml(layout)
        self._gpus = [_gpu(g) for g in layout.get("gpus", [])]
        missing = sensor_status(False, self.no_source_reason or "not reported by the source", "")
        self._rapl = SimpleNamespace(status=layout.get("rapl", missing))
        soc = layout.get("soc")
        self._soc = None if not soc else SimpleNamespace(
            status=soc["status"], energy_source=soc.get("energy_source", ""), power_source=soc.get("power_source", ""),
            pressure="", close=lambda: None)
        zones = layout.get("zones", {})
        self._zones = SimpleNamespace(status=zones.get("status", missing), zones=[None] * int(zones.get("count", 0)))
        self.host_temp_label = str(zones.get("label", self.host_temp_label))
        self._meminfo_status = layout.get("meminfo", missing)
        self._cpu_status = layout.get("cpu", missing)
        self._server_status = layout.get("server", sensor_status(False, "no server pid given to the agent", ""))
        self._series = Series(series_names(self._gpus))
        self.sensors = dict(layout.get("sensors", {})) or {"telemetry": missing}
        self.sensors.setdefault("soc_power", sensor_status(False, "not reported by the source", ""))
        self.sensors["node_power"] = self._node.status if self._node is not None else node_status_missing()
        for key in ("power", "memory", "temperature", "clock_event_reasons"):
            self.sensors.setdefault(key, sensor_status(False, self._nvml.reason or "no GPU", ""))
        self._remote_describe = layout.get("describe", {})

    # -- the source ----------------------------------------------------------------------------------------
    def set_server_url(self, url: str | None) -> None:
        """The source describes the server's host, wherever the server is: only noted."""
        self.server_host = url_host(url)

    def set_server_pid(self, pid: int | None) -> None:
        """A pid on this host names no process on the server's host."""
        return None

    def measure_clock(self, label: str) -> None:
        """Measure the source's clock offset now and keep it under `label` (start, end, or a periodic check)."""
        if not self.enabled or self.no_source_reason or not hasattr(self._source, "measure_clock"):
            return
        try:
            with self._pull_lock:
                offset = self._source.measure_clock()
        except Exception as exc:
            self._record_error(f"clock.{label}", exc)
            return
        self._clock_at = time.perf_counter()
        self._clock_checks += 1
        self.clocks[label] = offset.as_dict() if hasattr(offset, "as_dict") else offset
        self.clock_uncertainty_s = self._source.uncertainty_s()

    def start(self) -> "RemoteTelemetry":
        if not self.enabled or self._started or self._closed:
            return self
        if self.no_source_reason:  # nothing to sample on the chip's host: sensors.json still says why
            self._started = True
            if self._node is not None:  # the BMC is reached on its own, not through the source
                self._node.start()
            self.write_sensors_json()
            return self
        self.measure_clock("start")
        try:  # samples from before the first window's start: its edge is bracketed, as the local sampler's is
            self._pull(force=False)
        except Exception as exc:
            self._record_error("pull", exc)
        super().start()
        return self

    def _pull(self, force: bool) -> None:
        with self._pull_lock:
            samples = self._source.pull(force)
        with self._tick_lock:
            for t_ns, t_unix, values, remote in samples:
                # a re-measured offset may move new samples back by its change: the series must stay ordered
                last = self._series.t_ns[-1] if len(self._series.t_ns) else t_ns - 1
                self._store(max(t_ns, last + 1), t_unix, values, remote)
        self.clock_uncertainty_s = self._source.uncertainty_s()

    def _tick(self, slow: bool) -> int:
        """The background pull at the telemetry rate (the remote host samples on its own schedule)."""
        if self._clock_at and time.perf_counter() - self._clock_at > CLOCK_EVERY_S:
            self.measure_clock("latest")
        self._pull(force=False)
        return time.perf_counter_ns()

    def sample_now(self) -> int | None:
        """A window edge on the local clock, then fresh remote samples until one lies past it."""
        if not self.enabled or self._closed:
            return None
        self.start()
        if self.no_source_reason:
            return None
        edge = time.perf_counter_ns()
        for _ in range(EDGE_TRIES):
            try:
                self._pull(force=True)
            except Exception as exc:
                self._record_error("pull", exc)
                break
            if len(self._series.t_ns) and self._series.t_ns[-1] >= edge:
                break
            time.sleep((self.clock_uncertainty_s or 0.001))
        return edge

    def source_description(self) -> dict[str, Any]:
        out = {"kind": self.source_label, "host": self.source_host, "server_host": self.server_host,
               "no_source_reason": self.no_source_reason}
        if self._source is not None:
            out.update(self._source.describe())
        if self.clocks:
            out["clock"] = dict(self.clocks, checks=self._clock_checks)
            if "start" in self.clocks and "end" in self.clocks:
                out["clock"]["drift_ns"] = self.clocks["end"]["offset_ns"] - self.clocks["start"]["offset_ns"]
        if self.clock_uncertainty_s is not None:
            out["clock_uncertainty_s"] = self.clock_uncertainty_s
        return out

    def describe(self) -> dict[str, Any]:
        data = super().describe()
        if self.enabled:
            data["remote"] = self._remote_describe
        return data

    def close(self) -> None:
        if self._closed:
            return
        if self.enabled and self._started and "end" not in self.clocks:
            self.measure_clock("end")
        super().close()
        if self._source is not None:
            self._source.close()


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, AgentError) else f"{type(exc).__name__}: {text}"[:300]
