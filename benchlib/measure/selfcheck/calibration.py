"""The client's own error on this host: how far benchlib's TTFT and ITL stamps are from the truth, measured once per
host and client version and recorded in every suite's manifest (`client_calibration`).

The reference is measure/selfcheck/stamping_server, started as a subprocess on this host: it streams one token per chunk on
absolute deadlines and logs the instant it handed each chunk to the kernel on the same CLOCK_MONOTONIC the client
stamps with. The client drives it the way a sweep does (Backend.execute under one gather with a semaphore on the
background loop) at concurrency 1 and at the levels the run uses (sweep.concurrency, and the rate sweep's
max_concurrency when it runs), each capped at MAX_LEVEL, a warm-up pair first. Per level:

  TTFT error  |client TTFT − (server's first send − client wire start)|, per request: mean, p99, n; `bias` is the
              signed mean (positive: the client stamps late)
  ITL error   |client inter-token interval − server's send interval|, per token: mean, p99, n; and `bias`

The server stamps a chunk after its write returns, and the client's kernel receive stamp can precede that: a
negative bias is the reference's own stamping lag, which the figures include.

Over the levels (`ttft_ms`, `itl_ms`): the largest p99 of any level — the "client error ±x ms" tables quote —
with the n-weighted mean and bias.

A level is left out (listed in `skipped_levels`) when the time spent would pass BUDGET_S, so the step stays under
~5 s. The result is cached in cache_dir()/client_calibration/<host>.json and reused while the host name and the
client version (a hash of the client's code: CLIENT_FILES, with the http_client setting) are the same: levels it
does not hold yet are measured and added; another host or version measures again from scratch.
bench/measure_accuracy.py is the long form (more levels, the client's CPU cost).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from benchlib.config.params import RunSettings, ServerParams
from benchlib.config.paths import PROJECT_ROOT, cache_dir, slug
from benchlib.measure.client.backends import ChatRequest, make_backend
from benchlib.measure.pacing import event_loop
from benchlib.measure.selfcheck.stamping_server import DEFAULTS as STAMP
from benchlib.records.rows import RequestRecord, write_atomic

MAX_LEVEL = 32
BUDGET_S = 5.0
WARMUPS = 2
FIRST_LEVEL_REQUESTS = 4
WAVES = 2
REFERENCE = {"ttft": STAMP["ttft"], "itl": 0.010, "tokens": 12}
# The code that decides when the client stamps a token: a change here invalidates the cached calibration.
CLIENT_FILES = ("http/wire.py", "http/sse.py", "client/timing.py", "pacing/event_loop.py", "client/backends.py",
                "http/http_response.py", "selfcheck/stamping_server.py", "selfcheck/calibration.py")


def client_version(http_client: str = "wire", here: Path | None = None) -> str:
    """A short hash of the client's code (CLIENT_FILES, under `here`: benchlib/measure) and the HTTP client it uses."""
    digest = hashlib.sha256(http_client.encode())
    here = here or Path(__file__).resolve().parents[1]
    for name in CLIENT_FILES:
        digest.update(name.encode() + b"\0" + (here / name).read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def levels_for(params: Any) -> list[int]:
    """1 and the concurrency levels the run uses, each capped at MAX_LEVEL."""
    levels = {1, *params.sweep.concurrency}
    if params.sweep.rate.enabled and "load" in params.run.notebooks:
        levels.add(params.sweep.rate.max_concurrency)
    return sorted({min(int(level), MAX_LEVEL) for level in levels})


def cache_file(host: str | None = None) -> Path:
    return cache_dir() / "client_calibration" / f"{slug(host or socket.gethostname())}.json"


# ---- measuring ------------------------------------------------------------------------------------------------
def start_server() -> tuple[subprocess.Popen, str]:
    """The stamping server in its own process; returns (process, base URL)."""
    proc = subprocess.Popen([sys.executable, "-m", "benchlib.measure.selfcheck.stamping_server"], stdout=subprocess.PIPE,
                            text=True, cwd=str(PROJECT_ROOT))
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("PORT "):
        proc.kill()
        proc.wait(timeout=5)
        raise RuntimeError(f"the stamping server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


def _messages(tag: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"[{tag}] calibrate"}]


async def drive(server: ServerParams, run: RunSettings, level: int, tags: list[str],
                messages: Callable[[str], list[dict[str, str]]] = _messages,
                max_tokens: int = REFERENCE["tokens"]) -> list[RequestRecord]:
    """One request per tag through Backend.execute, at most `level` in flight (Session._execute's gate, without
    the CSV append); the tag goes into each prompt, so the stamping server's log matches it to its record."""
    backend = make_backend(server, run, level)
    gate = asyncio.Semaphore(level)
    records: list[RequestRecord] = []

    async def one(tag: str) -> None:
        async with gate:
            record = RequestRecord(variant=tag)
            await backend.execute(ChatRequest(messages=messages(tag), max_tokens=max_tokens), record)
            records.append(record)

    try:
        await asyncio.gather(*(one(tag) for tag in tags))
    finally:
        await backend.aclose()
    return records


def errors(records: list[RequestRecord], log: dict[str, dict[str, Any]]) -> tuple[list[float], list[float]]:
    """(TTFT errors per request, ITL errors per token), signed, in ms: client − server, matched by tag."""
    ttft, itl = [], []
    for record in records:
        entry = log.get(record.variant)
        if record.status != "ok" or not entry or not entry.get("sends_ns") or record.ttft_s is None:
            continue
        sends = np.asarray(entry["sends_ns"], dtype=np.int64)
        ttft.append((record.ttft_s - (sends[0] - record.start_ns) / 1e9) * 1e3)
        client = np.asarray(record.itl_s or [], dtype=float)
        server = np.diff(sends) / 1e9
        m = min(len(client), len(server))
        itl.extend(((client[:m] - server[:m]) * 1e3).tolist())
    return ttft, itl


def figures(signed: list[float]) -> dict[str, Any]:
    """mean and p99 of the absolute error, the signed mean (bias) and n; None where nothing was measured."""
    if not signed:
        return {"mean": None, "p99": None, "bias": None, "n": 0}
    values = np.asarray(signed, dtype=float)
    return {"mean": round(float(np.abs(values).mean()), 4), "p99": round(float(np.percentile(np.abs(values), 99)), 4),
            "bias": round(float(values.mean()), 4), "n": int(values.size)}


def measure(levels: list[int], http_client: str = "wire", budget_s: float = BUDGET_S) -> dict[str, Any]:
    """Run the calibration now (the module docstring); returns the record that is cached and put in manifests."""
    started = time.monotonic()
    proc, url = start_server()
    server = ServerParams(kind="openai", base_url=url, model="calibration", software="stamping-server",
                          extra_body={"stamp": REFERENCE})
    run = RunSettings(unique_prompts=False, warmups=0, retries_429=0, http_client=http_client, timeout_s=30,
                      deadline_s=60)
    per_level: dict[str, Any] = {}
    skipped: list[int] = []
    one_request_s = REFERENCE["ttft"] + REFERENCE["tokens"] * REFERENCE["itl"]
    try:
        event_loop.run(drive(server, run, 1, [f"warm-{i}" for i in range(WARMUPS)]))
        for level in sorted(set(levels)):
            n = FIRST_LEVEL_REQUESTS if level == 1 else WAVES * level
            waves = math.ceil(n / level)
            if time.monotonic() - started + waves * one_request_s * 1.5 > budget_s:
                skipped.append(level)
                continue
            tags = [f"c{level}-{i}" for i in range(n)]
            records = event_loop.run(drive(server, run, level, tags))
            log = event_loop.run(_fetch_log(url))
            ttft, itl = errors(records, log)
            per_level[str(level)] = {"requests": n, "ok": sum(r.status == "ok" for r in records),
                                     "ttft_ms": figures(ttft), "itl_ms": figures(itl)}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
    return {"host": socket.gethostname(), "client_version": client_version(http_client), "http_client": http_client,
            "measured_unix": time.time(), "cpu_count": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2),
            "reference": {"ttft_s": REFERENCE["ttft"], "itl_s": REFERENCE["itl"], "tokens": REFERENCE["tokens"]},
            "levels": per_level, "skipped_levels": skipped, "ttft_ms": pooled(per_level, "ttft_ms"),
            "itl_ms": pooled(per_level, "itl_ms"), "wall_s": round(time.monotonic() - started, 3)}


async def _fetch_log(url: str) -> dict[str, Any]:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(b"GET /log HTTP/1.1\r\nHost: calibration\r\nConnection: close\r\n\r\n")
        await writer.drain()
        raw = await reader.read()
    finally:
        writer.close()
    return json.loads(raw.split(b"\r\n\r\n", 1)[1])


# ---- the cache ------------------------------------------------------------------------------------------------
def pooled(levels: dict[str, Any], key: str) -> dict[str, Any]:
    """One figure over the levels: the largest p99 (the error bar a table quotes holds at every level), the
    n-weighted mean of the means and of the biases, the total n."""
    parts = [level[key] for level in levels.values() if level[key]["n"]]
    if not parts:
        return {"mean": None, "p99": None, "bias": None, "n": 0}
    n = sum(p["n"] for p in parts)
    return {"mean": round(sum(p["mean"] * p["n"] for p in parts) / n, 4), "p99": max(p["p99"] for p in parts),
            "bias": round(sum(p["bias"] * p["n"] for p in parts) / n, 4), "n": n}


def _done(record: dict[str, Any]) -> set[int]:
    return {int(k) for k in record.get("levels", {})} | {int(k) for k in record.get("skipped_levels", [])}


def for_run(levels: list[int], http_client: str = "wire", *, host: str | None = None, version: str | None = None,
            measure_fn: Callable[..., dict[str, Any]] = measure, path: Path | None = None) -> dict[str, Any]:
    """The calibration for this host and client version covering `levels`: from the cache when it holds every
    level, else the missing levels are measured now (measure_fn(levels, http_client)), merged and cached; another
    host or client version starts over. `cached` says whether anything was measured."""
    host = host or socket.gethostname()
    version = version or client_version(http_client)
    path = path or cache_file(host)
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cached = None
    if not (isinstance(cached, dict) and cached.get("host") == host and cached.get("client_version") == version):
        cached = None
    missing = sorted(set(levels) - (_done(cached) if cached else set()))
    if cached and not missing:
        return {**cached, "cached": True}
    fresh = measure_fn(missing, http_client)
    earlier = cached or {}
    both = {**earlier.get("levels", {}), **fresh.get("levels", {})}
    merged = {**earlier, **fresh, "host": host, "client_version": version,
              "levels": dict(sorted(both.items(), key=lambda item: int(item[0]))),
              "skipped_levels": sorted(set(earlier.get("skipped_levels", [])) | set(fresh.get("skipped_levels", [])))}
    merged["ttft_ms"], merged["itl_ms"] = pooled(merged["levels"], "ttft_ms"), pooled(merged["levels"], "itl_ms")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(merged, indent=2))
    return {**merged, "cached": False}


def for_params(params: Any) -> dict[str, Any]:
    """The manifest's `client_calibration` for a run: the cached or fresh calibration, or why there is none."""
    if not params.run.calibrate_client:
        return {"skipped": "run.calibrate_client is false"}
    try:
        return for_run(levels_for(params), params.run.http_client)
    except Exception as exc:  # noqa: BLE001 — a calibration that cannot run must not stop the run it describes
        return {"error": f"{type(exc).__name__}: {exc}"}


def error_note(calibration: dict[str, Any] | None) -> str:
    """'client error ±x ms TTFT, ±y ms ITL (p99, calibrated on this host)', or "" when there is no calibration."""
    if not isinstance(calibration, dict):
        return ""
    ttft = (calibration.get("ttft_ms") or {}).get("p99")
    itl = (calibration.get("itl_ms") or {}).get("p99")
    if ttft is None or itl is None:
        return ""
    return f"client error ±{_ms(ttft)} ms TTFT, ±{_ms(itl)} ms ITL (p99, calibrated on this host)"


def _ms(value: float) -> str:
    return f"{value:.2f}" if value < 1 else f"{value:.1f}"
