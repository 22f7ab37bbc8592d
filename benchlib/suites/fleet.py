"""A study across a fleet of hosts on Ray: `frontier-bench study FILE --ray ADDRESS`.

Each deployment of the study file that names a `host:` runs on the Ray node carrying the custom resource
`host:<name>` (`ray start … --resources='{"host:<name>": 1}'` on that machine). The caller — the terminal or
notebook that ran the command — keeps one thread per host: that host's deployments go one at a time, in the
study's order, each as a Ray task that asks for the whole `host:<name>` resource, so Ray itself never puts two
deployments on one host; the hosts run side by side. On its host the task first applies the study's SETTLE RULE
to the deployment before it (benchlib.suites.study: its server groups gone, MemAvailable back), then runs the
suites, which write to the shared results store (`run.store` / FRONTIER_BENCH_STORE, benchlib.records.store) as
a `frontier-bench run` on that host would: every measurement — the client's timings, the server's /metrics, the
host's telemetry — is taken on the host that serves the deployment, never across the network to the caller.
Only the outcome (failed suites with their reasons, the server groups, the memory baseline) travels back.

A host lost mid-study (its node died, its worker crashed, its resource left the cluster) fails the deployment it
ran with Ray's reason (NodeDiedError, WorkerCrashedError, …) and the rest of the study goes on; its later
deployments fail without being sent. The caller's study.json records each outcome; re-running the same command
skips what finished under the same run id, and a deployment redone resumes at request level from the store.
The paper is then made once, by the caller, from the store (benchlib.cli).

THE CLUSTER'S EXPOSURE. Whoever reaches a Ray node's ports can run code on every host of the cluster. The nodes are
started by `frontier-bench fleet-node` (node_command), which binds every Ray port to the one address the user names
(--node-ip-address: loopback, or a private interface — never a public or a wildcard address, bind_address refuses
them), pins each port Ray opens (RAY_PORTS: one range to firewall, not random ports), keeps the dashboard (Ray's
Jobs API, itself a way to run code) on loopback, and turns on Ray's own token authentication (RAY_AUTH_MODE=token,
Ray 2.52 and later; the pinned Ray is 2.60): a process without the cluster's token — the file ~/.ray/auth_token,
made once on the head by `ray get-auth-token --generate` and copied to each node and the caller — is refused. The
token is a shared secret sent in the clear (Ray's traffic is not encrypted), so the ports stay on a private network
reachable only from the fleet's machines; docs/fleet.md says what to firewall.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shlex
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

try:  # the fleet extra (requirements/fleet.txt) is optional: --ray says how to install it when it is missing
    import ray
    from ray import exceptions as ray_errors
except ImportError:
    ray = None
    ray_errors = None

from benchlib.records import store
from benchlib.records.secrets import redact_url
from benchlib.suites.study import (
    STUDY_JSON,
    Deployment,
    SettleSpec,
    Study,
    StudyError,
    StudyResult,
    StudyState,
    SuiteRunner,
    log_tail,
    mem_available_mb,
    server_groups,
    settle,
)

RESOURCE_PREFIX = "host:"
POLL_S = 0.5
LOST_GRACE_S = 10.0  # how long a task whose host left the cluster may take to end with Ray's own error
HEARTBEAT_S = 30.0  # a "still running" line per host on the caller's terminal
RAY_ENV = "FRONTIER_BENCH_RAY"  # the cluster's address, handed to a deployment's suites (load.fleet_levels)
INSTALL_HINT = "install the fleet extra: .venv/bin/pip install --no-deps --require-hashes -r requirements/fleet.txt"
AUTH_ENV, AUTH_MODE = "RAY_AUTH_MODE", "token"  # Ray's token authentication (ray/_private/authentication)
TOKEN_ENV, TOKEN_PATH_ENV = "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"
HEAD_PORT = 6379
# Every port a node opens, pinned so a firewall can name them (Ray picks random ports otherwise): GCS (head only,
# HEAD_PORT), the raylet's node and object managers, the agents, metrics and the workers' range. The fleet extra is
# Ray without `ray[client]`, so no Ray Client server is started (its --ray-client-server-port is refused).
RAY_PORTS = {"--node-manager-port": 6380, "--object-manager-port": 6381, "--runtime-env-agent-port": 6382,
             "--dashboard-agent-grpc-port": 6383, "--dashboard-agent-listen-port": 6384, "--metrics-export-port": 6385,
             "--min-worker-port": 10002, "--max-worker-port": 10999}


def host_resource(host: str) -> str:
    """The Ray custom resource a fleet host's node carries: `host:<name>`."""
    return f"{RESOURCE_PREFIX}{host}"


class HostLost(RuntimeError):
    """The host's node left the cluster while its deployment waited or ran."""


class FleetError(ValueError):
    """A fleet node that would not be started as asked (one line)."""


# ---- starting a node ------------------------------------------------------------------------------------------------
def bind_address(text: str) -> str:
    """The address a node binds every Ray port to: an IP of this machine's loopback or of a private network
    (10/8, 172.16/12, 192.168/16, fc00::/7, link-local). A wildcard (0.0.0.0, ::) would bind every interface and a
    public address would open Ray to the internet: both refused, as is a name (Ray binds an address, not a name)."""
    try:
        address = ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        raise FleetError(f"--bind {text!r}: give this machine's IP address on the fleet's private network (or "
                         f"127.0.0.1 for one machine), not a name") from None
    if address.is_unspecified:
        raise FleetError(f"--bind {text}: that is every interface; name the one private address the fleet uses")
    if address.is_multicast or not (address.is_loopback or address.is_private or address.is_link_local):
        raise FleetError(f"--bind {text}: a public address; Ray's ports run code for whoever reaches them, so a node "
                         f"binds only loopback or a private network's address (docs/fleet.md)")
    return str(address)


def node_command(bind: str, *, head: bool, join: str = "", host: str = "", client_only: bool = False,
                 port: int = HEAD_PORT, ray: str = "ray") -> list[str]:
    """`ray start` for one fleet node: every port on `bind` and pinned (RAY_PORTS), the dashboard on loopback, the
    node carrying `host:<host>` (or no CPU slots: a client-only node). Run it with node_environment()."""
    address = bind_address(bind)
    if head == bool(join):
        raise FleetError("a node is either the head (--head) or joins one (--join HEAD:PORT)")
    argv = [ray, "start", *(["--head", f"--port={port}", "--dashboard-host=127.0.0.1"] if head else
                            [f"--address={join}"]),
            f"--node-ip-address={address}", *(f"{flag}={value}" for flag, value in RAY_PORTS.items())]
    if host:
        argv.append("--resources=" + json.dumps({host_resource(host): 1}, separators=(",", ":")))
    elif client_only:
        argv.append("--num-cpus=0")
    return argv + ["--disable-usage-stats"]


def node_environment() -> dict[str, str]:
    """What every node and the caller run with: Ray's token authentication on."""
    return {AUTH_ENV: AUTH_MODE}


def shown(argv: list[str]) -> str:
    """The command as a line to type: node_environment() first, then the words as a shell reads them."""
    return " ".join(f"{k}={v}" for k, v in node_environment().items()) + " " + shlex.join(argv)


def start_node(argv: list[str], head: bool, say: Callable[[str], None] = print) -> int:
    """Run a node's `ray start` with token authentication on; its exit status. A joining node without the token is
    not started (FleetError); the head makes it when there is none, its output (the token) never shown, and keeps
    it to its owner (mode 600)."""
    os.environ.update(node_environment())
    if not token_available():
        if not head:
            raise FleetError(f"no Ray token on this machine: copy the head's ~/.ray/auth_token here (mode 600) or set "
                             f"{TOKEN_PATH_ENV}, then run this again")
        made = subprocess.run([argv[0], "get-auth-token", "--generate"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, check=False)
        token = Path.home() / ".ray" / "auth_token"
        if made.returncode or not token.is_file():
            raise FleetError(f"`ray get-auth-token --generate` failed (exit {made.returncode}); no node was started")
        token.chmod(0o600)
        say(f"made the cluster's token: {token} (copy it to every node and the caller, mode 600)")
    say(shown(argv))
    return subprocess.run(argv, check=False).returncode


def token_available() -> bool:
    """Whether this machine has the cluster's token where Ray looks (RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH
    names, ~/.ray/auth_token). Only its presence is looked at: the token itself is never read here nor printed."""
    if os.environ.get(TOKEN_ENV):
        return True
    path = Path(os.environ[TOKEN_PATH_ENV]) if os.environ.get(TOKEN_PATH_ENV) else Path.home() / ".ray" / "auth_token"
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


# ---- on the host --------------------------------------------------------------------------------------------------
def on_host(run_suites: SuiteRunner, dep: Deployment, fresh: bool, spec: SettleSpec, previous: list[int],
            baseline_mb: float | None, run_id: str) -> dict[str, Any]:
    """One deployment on its host (a Ray task): settle after the one before it, run the suites, say what happened."""
    node = socket.gethostname()
    here = dep.params.identity()
    if here != run_id:  # other code or task files on that host would write a run nobody asked for
        return {"failed": {"*": f"the host computes run id {here}, the caller {run_id}: it runs other code or task "
                                f"files; check out the caller's commit there"}, "groups": [], "node": node}
    seen = settle(previous, baseline_mb, spec) if previous and baseline_mb is not None else None
    baseline_mb = mem_available_mb()
    if ray is not None and ray.is_initialized():  # a notebook kernel is no Ray worker: sweep.nodes joins through it
        os.environ[RAY_ENV] = ray.get_runtime_context().gcs_address
    failed, dirs = run_suites(dep.params, dep.notebooks, fresh)
    return {"failed": failed, "groups": server_groups(dirs), "baseline_mb": baseline_mb, "settle": seen,
            "log_tail": log_tail(dirs) if failed else "", "node": node}


_on_host_task = ray.remote(on_host) if ray is not None else None


# ---- on the caller ------------------------------------------------------------------------------------------------
def reason(exc: BaseException) -> str:
    """One line: the exception's type and first line; a task's own error is named by its cause."""
    cause = getattr(exc, "cause", None)
    if ray_errors is not None and isinstance(exc, ray_errors.RayTaskError) and isinstance(cause, BaseException):
        exc = cause
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0][:300]}" if lines else type(exc).__name__


def carried(host: str) -> bool:
    """Whether a live node of the cluster carries the host's resource."""
    return ray.cluster_resources().get(host_resource(host), 0) > 0


def fleet_store(study: Study) -> str:
    """The one results store every host writes to (each deployment's run.store, else FRONTIER_BENCH_STORE)."""
    urls = {store.configured(dep.params.run.store) for dep in study.deployments}
    if urls == {""} or not urls:
        raise StudyError(f"{study.source}: a fleet study needs a results store every host writes to and the paper "
                         f"reads: run.store in the study's overrides, or {store.ENV}")
    if len(urls) > 1:
        raise StudyError(f"{study.source}: the deployments name different results stores; a fleet study has one")
    url = urls.pop()
    if not url:
        raise StudyError(f"{study.source}: a deployment has no results store while others have one")
    store.check_url(url)
    return url


def check_hosts(study: Study) -> None:
    for dep in study.deployments:
        if not dep.host:
            raise StudyError(f"{study.source}: {dep.origin} names no host; with --ray every deployment needs "
                             f"`host: <name>` (the node carrying resource {host_resource('<name>')})")


@dataclass
class _Shared:
    state: StudyState
    result: StudyResult
    progress: Callable[[str], None]
    lock: threading.Lock
    labels: dict[str, str]  # each deployment's short label by its key (Study.labels): what the progress lines say

    def record(self, dep: Deployment, **fields: Any) -> None:
        with self.lock:
            self.state.record(dep, host=dep.host, **fields)

    def say(self, host: str, line: str) -> None:
        with self.lock:
            self.progress(f"[{host}] {line}")


def _await(ref: Any, dep: Deployment, shared: _Shared, started: float) -> dict[str, Any]:
    """The task's outcome (Ray's own error where it gives one); HostLost once no live node has carried the host's
    resource for LOST_GRACE_S and Ray said nothing (the task is cancelled)."""
    beat, gone = started, None
    while True:
        ready, _ = ray.wait([ref], timeout=POLL_S)
        if ready:
            return ray.get(ref)
        gone = None if carried(dep.host) else (gone or time.monotonic())
        if gone is not None and time.monotonic() - gone >= LOST_GRACE_S:
            ray.cancel(ref, force=True)
            raise HostLost(f"no live node of the cluster carries {host_resource(dep.host)} any more")
        if time.monotonic() - beat >= HEARTBEAT_S:
            beat = time.monotonic()
            shared.say(dep.host, f"  … {shared.labels[dep.key]} running for {beat - started:.0f} s")


def _run_host(host: str, deps: list[Deployment], run_suites: SuiteRunner, url: str, study: Study, fresh: bool,
              shared: _Shared) -> None:
    """One host's deployments in turn (the caller's thread for that host)."""
    previous: list[int] = []
    baseline: float | None = None
    lost = ""
    for i, dep in enumerate(deps, 1):
        head = f"■ {i}/{len(deps)}: {shared.labels[dep.key]}"
        if not fresh and shared.state.done(dep):
            shared.say(host, f"{head} — done earlier (run {dep.params.identity()}), skipped")
            with shared.lock:
                shared.result.skipped.append(dep.label)
            continue
        if not lost and not carried(host):
            lost = (f"no node of the Ray cluster carries {host_resource(host)} (on that machine: frontier-bench "
                    f"fleet-node --join <head>:{HEAD_PORT} --bind <its private address> --host {host} --start)")
        if lost:
            _failed(dep, lost, "", shared)
            continue
        shared.say(host, f"{head} · suites {', '.join(dep.notebooks)}")
        started_unix, started = time.time(), time.monotonic()
        shared.record(dep, status="running", started_unix=started_unix)
        shipped = Deployment(params=dep.params.model_copy(update={"run": dep.params.run.model_copy(
            update={"store": url})}), notebooks=dep.notebooks, origin=dep.origin, host=dep.host)
        ref = _on_host_task.options(resources={host_resource(host): 1}, num_cpus=0, max_retries=0,
                                    name=f"deployment {dep.label}").remote(
            run_suites, shipped, fresh, study.settle, previous, baseline, dep.params.identity())
        seconds = lambda: round(time.monotonic() - started, 1)  # noqa: E731
        try:
            out = _await(ref, dep, shared, started)
        except HostLost as exc:
            lost = f"host {host} lost earlier in this study: {exc}"
            _failed(dep, str(exc), "", shared, seconds=seconds())
            continue
        except ray_errors.RayTaskError as exc:  # the task itself raised: the host is still there
            _failed(dep, reason(exc), "", shared, seconds=seconds())
            continue
        except ray_errors.RayError as exc:  # NodeDiedError, WorkerCrashedError, ObjectLostError…: whether the host
            _failed(dep, reason(exc), "", shared, seconds=seconds())  # is gone, the next one's check says
            continue
        previous, baseline = out.get("groups", []), out.get("baseline_mb")
        extra = {"node": out.get("node"), "settle": out.get("settle")}
        if out["failed"]:
            why = "; ".join(f"{suite}: {text}" for suite, text in out["failed"].items())
            _failed(dep, why, out.get("log_tail", ""), shared, seconds=seconds(), **extra)
        else:
            shared.record(dep, status="done", reason="", seconds=seconds(), **extra)
            with shared.lock:
                shared.result.done.append(dep.label)
            shared.say(host, f"  ✓ {shared.labels[dep.key]} done in {seconds():.0f} s on node {out.get('node')}")


def _failed(dep: Deployment, why: str, tail: str, shared: _Shared, **fields: Any) -> None:
    shared.record(dep, status="failed", reason=why, log_tail=tail, **fields)
    with shared.lock:
        shared.result.failed[dep.label] = why
    shared.say(dep.host, f"  ✗ {shared.labels[dep.key]}: {why}")


def run_fleet(study: Study, address: str, run_suites: SuiteRunner, fresh: bool = False,
              progress: Callable[[str], None] = print) -> StudyResult:
    """Every host's deployments, hosts in parallel (see the module's docstring); what finished, failed or was
    skipped. The caller makes the paper from the store afterwards (fleet_store(study) names it)."""
    if ray is None:
        raise StudyError(f"--ray needs Ray, which is not installed: {INSTALL_HINT}")
    check_hosts(study)
    url = fleet_store(study)
    if not ray.is_initialized():
        try:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError, ray_errors.RayError) as exc:
            hint = "" if os.environ.get(AUTH_ENV) == AUTH_MODE and token_available() else \
                (f" (a cluster started by `frontier-bench fleet-node` asks for Ray's token: run this with "
                 f"{AUTH_ENV}={AUTH_MODE} and the cluster's token in ~/.ray/auth_token)")
            raise StudyError(f"cannot join the Ray cluster at {address}: {reason(exc)}{hint}") from None
    shared = _Shared(StudyState.read(study.folder / STUDY_JSON), StudyResult(), progress, threading.Lock(),
                     study.labels)
    hosts: dict[str, list[Deployment]] = {}
    for dep in study.deployments:
        hosts.setdefault(dep.host, []).append(dep)
    progress(f"fleet: {len(hosts)} host(s) ({', '.join(hosts)}) on the Ray cluster at {address}; "
             f"store {redact_url(url)}")
    threads = [threading.Thread(target=_run_host, args=(host, deps, run_suites, url, study, fresh, shared),
                                name=f"fleet-{host}", daemon=True) for host, deps in hosts.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():  # joined in slices so Ctrl-C reaches the caller
            thread.join(0.5)
    return shared.result
