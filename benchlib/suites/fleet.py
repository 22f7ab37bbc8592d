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
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

try:  # the fleet extra (requirements/fleet.txt) is optional: --ray says how to install it when it is missing
    import ray
    from ray import exceptions as ray_errors
except ImportError:
    ray = None
    ray_errors = None

from benchlib.records import store
from benchlib.records.secrets import redact_url
from benchlib.suites.study import (STUDY_JSON, Deployment, SettleSpec, Study, StudyError, StudyResult, StudyState,
                                   SuiteRunner, log_tail, mem_available_mb, server_groups, settle)

RESOURCE_PREFIX = "host:"
POLL_S = 0.5
LOST_GRACE_S = 10.0  # how long a task whose host left the cluster may take to end with Ray's own error
HEARTBEAT_S = 30.0  # a "still running" line per host on the caller's terminal
RAY_ENV = "FRONTIER_BENCH_RAY"  # the cluster's address, handed to a deployment's suites (load.fleet_levels)
INSTALL_HINT = "install the fleet extra: .venv/bin/pip install --no-deps --require-hashes -r requirements/fleet.txt"


def host_resource(host: str) -> str:
    """The Ray custom resource a fleet host's node carries: `host:<name>`."""
    return f"{RESOURCE_PREFIX}{host}"


class HostLost(RuntimeError):
    """The host's node left the cluster while its deployment waited or ran."""


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
            lost = (f"no node of the Ray cluster carries {host_resource(host)} (on that machine: ray start "
                    f"--address=… --resources='{{\"{host_resource(host)}\": 1}}')")
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
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise StudyError(f"cannot join the Ray cluster at {address}: {reason(exc)}") from None
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
