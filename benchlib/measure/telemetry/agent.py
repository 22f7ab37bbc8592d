"""The telemetry agent: `frontier-bench telemetry-agent` runs the project's own sampler (NVML, RAPL, powermetrics,
hwmon, host CPU and memory — exactly what a local run samples) on the server's host and serves its samples over
HTTP to a client elsewhere (RemoteTelemetry with telemetry.source: agent).

    GET /clock                       {"t_ns": the agent's monotonic clock} — the offset's round trips
    GET /layout                      the host's name, GPUs, sensor statuses (with reasons) and sample columns
    GET /samples?since=SEQ&tick=0|1  samples with seq >= SEQ, oldest first (tick=1: take one first), at most
                                     SAMPLES_PER_ANSWER of them ("more": true when there are others)

Samples stay raw: energy counters are sent as counters and differenced per window by the client, on this host's
clock (each sample's t_ns) placed on the client's through the measured offset. The buffer is a ring of
`buffer` samples (an hour at 10 Hz by default): a client that falls further behind loses the oldest and is told
how many. Every request needs `Authorization: Bearer <token>`, the token read from an environment variable
(compared in constant time); the agent listens on 127.0.0.1 unless told otherwise.

Connections are bounded, since each holds a thread (300 idle ones held 305 threads for ever): at most
MAX_CONNECTIONS open at once; one that has not sent an authorised request within AUTH_TIMEOUT_S of connecting is
closed (also one dripping bytes: the deadline is from the connect, not per read), as is one answered 401; an
authorised one is closed after IDLE_TIMEOUT_S without a request (the client reconnects). A connection past the cap
closes the oldest one not yet authorised; when every open one is authorised, the newcomer is refused."""

from __future__ import annotations

import contextlib
import hmac
import json
import math
import os
import signal
import socket
import tempfile
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Mapping
from urllib.parse import parse_qs, urlsplit

from benchlib.config.params import TelemetryParams
from benchlib.measure.telemetry.sampler import Telemetry, series_names

DEFAULT_PORT = 9101


DEFAULT_TOKEN_ENV = "FRONTIER_BENCH_AGENT_TOKEN"


DEFAULT_BUFFER = 36_000


SAMPLES_PER_ANSWER = 2_000


MAX_CONNECTIONS = 64  # a client uses one (the clock's round trips reuse it); a few suites at once a few more


AUTH_TIMEOUT_S = 10.0  # from connect to an authorised request: a client sends its first at once


CONNECTION_THREAD = "telemetry-agent-connection"


IDLE_TIMEOUT_S = 300.0  # an authorised connection between pulls (a window's edge, the clock every 30 s)


class AgentSampler(Telemetry):
    """The local sampler, keeping its samples in a bounded ring (with sequence numbers) instead of a series and
    telemetry.csv: an agent runs for days."""

    def __init__(self, settings: TelemetryParams, buffer: int = DEFAULT_BUFFER, **kwargs: Any):
        self._scratch = tempfile.TemporaryDirectory(prefix="frontier-bench-agent-")
        super().__init__(settings, self._scratch.name, **kwargs)
        self.ring: deque[tuple[int, int, float, tuple[float, ...]]] = deque(maxlen=max(1, buffer))
        self.seq = 0
        self.names = series_names(self._gpus) if self.enabled else []

    def _open_csv(self) -> None:
        return None  # no file: the ring is the only store (rows queued for it are dropped at each flush)

    def write_sensors_json(self, path: Any = None) -> Any:
        return None

    def _store(self, t_ns: int, t_unix: float, values: dict[str, float], remote_t_ns: int | None = None) -> None:
        self.ring.append((self.seq, t_ns, t_unix, tuple(values.get(n, math.nan) for n in self.names)))
        self.seq += 1
        self._ticks += 1

    def samples(self, since: int, limit: int = SAMPLES_PER_ANSWER) -> dict[str, Any]:
        with self._tick_lock:
            ring = list(self.ring)
        first = ring[0][0] if ring else self.seq
        chosen = [s for s in ring if s[0] >= since][:limit]
        nxt = chosen[-1][0] + 1 if chosen else max(since, first)
        return {"first": first, "next": nxt, "more": nxt < self.seq,
                "t_ns": [s[1] for s in chosen], "t_unix": [s[2] for s in chosen],
                "values": {n: [_json_number(s[3][i]) for s in chosen] for i, n in enumerate(self.names)}}

    def layout(self) -> dict[str, Any]:
        """What the client's window arithmetic needs to know about this host's sensors."""
        with self._tick_lock:
            nxt = self.seq
            first = self.ring[0][0] if self.ring else nxt
        out: dict[str, Any] = {"host": socket.gethostname(), "first": first, "next": nxt, "names": self.names}
        if not self.enabled:
            return out
        nvml = self._nvml
        soc = self._soc
        out.update(
            nvml_reason=nvml.reason, throttle_names={str(k): v for k, v in nvml.throttle_names.items()},
            gpu_selection=nvml.selection, driver_version=nvml.driver_version,
            cuda_driver_version=nvml.cuda_driver_version, sensors=self.sensors, rapl=self._rapl.status,
            soc=None if soc is None else {"status": soc.status, "energy_source": getattr(soc, "energy_source", ""),
                                          "power_source": getattr(soc, "power_source", "")},
            zones={"status": self._zones.status, "count": len(self._zones.zones)},
            meminfo=self._meminfo_status, cpu=self._cpu_status, server=self._server_status,
            gpus=[{"slot": g.slot, "index": g.index, "uuid": g.uuid, "name": g.name, "energy": g.energy,
                   "power": g.power, "memory": g.memory, "temp": g.temp, "clock": g.clock,
                   "power_limit_w": g.power_limit_w, "sensors": g.sensors} for g in self._gpus],
            describe=self.describe())
        return out

    def close(self) -> None:
        super().close()
        self._scratch.cleanup()


def _json_number(value: float) -> float | None:
    return None if math.isnan(value) else value


class _BoundedHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with its connections counted and bounded (the module docstring): the open ones by
    socket, each with the instant it was accepted and whether it has been authorised."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type, max_connections: int, auth_timeout_s: float):
        super().__init__(address, handler)
        self.max_connections = max_connections
        self.auth_timeout_s = auth_timeout_s
        self.lock = threading.Lock()
        self.open: dict[socket.socket, list] = {}  # connection -> [accepted (monotonic s), authorised]

    def verify_request(self, request: Any, client_address: Any) -> bool:
        with self.lock:
            self._close_late()
            if len(self.open) >= self.max_connections:
                waiting = [c for c, (_, authorised) in self.open.items() if not authorised]
                if not waiting:
                    return False  # every slot holds an authorised client: the newcomer is closed unanswered
                self._close(min(waiting, key=lambda c: self.open[c][0]))
            self.open[request] = [time.monotonic(), False]
        return True

    def authorised(self, connection: socket.socket) -> None:
        with self.lock:
            if connection in self.open:
                self.open[connection][1] = True

    def service_actions(self) -> None:  # serve_forever calls it every poll (0.5 s)
        with self.lock:
            self._close_late()

    def shutdown_request(self, request: Any) -> None:
        with self.lock:
            self.open.pop(request, None)
        super().shutdown_request(request)

    def _close_late(self) -> None:
        now = time.monotonic()
        for connection in [c for c, (at, authorised) in self.open.items()
                           if not authorised and now - at > self.auth_timeout_s]:
            self._close(connection)

    def _close(self, connection: socket.socket) -> None:
        """End a connection from outside its thread: the thread's read returns at once and the thread ends."""
        self.open.pop(connection, None)
        with contextlib.suppress(OSError):  # its own thread may be closing it at this instant
            connection.shutdown(socket.SHUT_RDWR)


class AgentServer:
    """The agent's HTTP server in a thread; `url` once started. `token` None refuses every request."""

    def __init__(self, sampler: AgentSampler, token: str | None, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 max_connections: int = MAX_CONNECTIONS, auth_timeout_s: float = AUTH_TIMEOUT_S,
                 idle_timeout_s: float = IDLE_TIMEOUT_S):
        self.sampler = sampler
        self.token = token
        self.idle_timeout_s = idle_timeout_s
        # a connection's reads wait at most auth_timeout_s until it is authorised (setup), then idle_timeout_s
        handler = type("Handler", (_Handler,), {"agent": self, "timeout": auth_timeout_s})
        self.httpd = _BoundedHTTPServer((host, port), handler, max_connections, auth_timeout_s)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="telemetry-agent", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "AgentServer":
        self.sampler.start()
        self.thread.start()
        return self

    def authorised(self, header: str | None) -> bool:
        if not self.token or not header:
            return False
        return hmac.compare_digest(header.encode(), f"Bearer {self.token}".encode())

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.sampler.close()


class _Handler(BaseHTTPRequestHandler):
    agent: AgentServer
    protocol_version = "HTTP/1.1"  # keep-alive: the clock's round trips must not each pay a TCP handshake

    def setup(self) -> None:
        threading.current_thread().name = CONNECTION_THREAD  # one per open connection: what the cap bounds
        super().setup()
        # headers and body go out in two writes: without this, Nagle's algorithm and the client's delayed ACK
        # hold the body ~40 ms, and every clock round trip with it
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 — the base class's signature
        return None

    def _send(self, status: int, payload: Any) -> None:
        body = json.dumps(payload, allow_nan=False, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 — http.server's name
        sampler = self.agent.sampler
        if not self.agent.authorised(self.headers.get("Authorization")):
            self.close_connection = True  # no second try on this connection
            self._send(401, {"error": "missing or wrong Bearer token"})
            return
        self.agent.httpd.authorised(self.connection)
        self.connection.settimeout(self.agent.idle_timeout_s)
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        try:
            if parts.path == "/clock":
                self._send(200, {"t_ns": time.perf_counter_ns()})  # the clock samples are stamped with
            elif parts.path == "/layout":
                self._send(200, sampler.layout())
            elif parts.path == "/samples":
                if query.get("tick", ["0"])[0] == "1":
                    sampler.sample_now()
                self._send(200, sampler.samples(int(query.get("since", ["0"])[0])))
            else:
                self._send(404, {"error": f"no such path {parts.path}"})
        except ValueError as exc:
            self._send(400, {"error": str(exc)[:200]})


def serve(host: str = "127.0.0.1", port: int = DEFAULT_PORT, token_env: str = DEFAULT_TOKEN_ENV,
          settings: TelemetryParams | None = None, buffer: int = DEFAULT_BUFFER,
          environ: Mapping[str, str] | None = None, **sampler_kwargs: Any) -> None:
    """Run the agent until SIGINT or SIGTERM. Raises ValueError when the token's variable is unset or empty."""
    env = os.environ if environ is None else environ
    token = env.get(token_env, "")
    if not token:
        raise ValueError(f"set {token_env} to the token clients will send (telemetry.agent_token_env on their side)")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server = AgentServer(AgentSampler(settings or TelemetryParams(), buffer, **sampler_kwargs), token, host, port)
    server.start()
    print(f"telemetry agent on {server.url} (token from ${token_env}); sensors: "
          + ", ".join(k for k, v in server.sampler.sensors.items() if v.get("available")), flush=True)
    try:
        stop.wait()
    finally:
        server.close()
