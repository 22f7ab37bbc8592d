"""The server's own Prometheus metrics (`GET /metrics`), read around every task and sweep-level window.

A scrape is parsed with prometheus_client's exposition-format parser into sample name → value (summed over
label sets: engines, model names). Counters and histograms are differenced between the scrape at a window's
start and the one at its end; gauges (requests running / waiting, KV-cache usage) are polled every `poll_s`
while windows are open and their peaks kept. Each window's row is appended and fsynced to
server_metrics_windows.csv as it closes, like telemetry_windows.csv; server_metrics.csv adds the client's view
of the same windows when the suite ends (benchlib.analysis.crosscheck.check_server_metrics).

Names per server, from each server's own source (declared once, in each profile of benchlib.config.servers):
- vLLM (v1 engine): vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds (older:
  time_per_output_token_seconds), vllm:e2e_request_latency_seconds histograms; vllm:num_requests_running /
  _waiting, vllm:kv_cache_usage_perc (older: gpu_cache_usage_perc) gauges; vllm:num_preemptions_total,
  vllm:prompt_tokens_total, vllm:generation_tokens_total counters.
- SGLang: sglang:time_to_first_token_seconds, sglang:inter_token_latency_seconds, sglang:e2e_request_latency_seconds;
  sglang:num_running_reqs, sglang:num_queue_reqs, sglang:token_usage; sglang:num_retracted_requests_total
  (its preemption), sglang:prompt_tokens_total, sglang:generation_tokens_total.
- llama.cpp `llama-server --metrics`: no latency histograms; llamacpp:requests_processing / _deferred,
  llamacpp:kv_cache_usage_ratio (older builds), llamacpp:prompt_tokens_total (cached tokens excluded),
  llamacpp:tokens_predicted_total and tokens_predicted_seconds_total (the server's own decode rate).
A server without /metrics (Ollama, llama-cpp-python's server) gets one reason, once, and no rows.

Every scrape is bounded (benchlib.measure.http.bounded): SCRAPE_DEADLINE_S for the whole answer and SCRAPE_MAX_BYTES
for its size (real servers answer in well under a second with some 10–500 kB; the exposition parser takes about
a second and a half per MB), so a /metrics that never ends, drips, or sends a huge label set fails that scrape
with a reason instead of holding the run. A failed scrape's reason quotes the server as little as it can, cut
short, and with the API key scrubbed out (the server may put anything where a value belongs)."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

import httpx
import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

from benchlib.config.servers import MetricNames, by_name, by_prefix
from benchlib.measure.http.bounded import fetch, within
from benchlib.measure.http.failures import RequestFailed
from benchlib.records.rows import append_csv_row
from benchlib.records.schema import ColumnKind, read_csv
from benchlib.records.secrets import cut, scrub

SERVER_METRICS_LOG = "server_metrics_windows.csv"  # appended and fsynced as each window closes (resume reads it)


SERVER_METRICS_CSV = "server_metrics.csv"  # the log with the client-side cross-checks, written when a suite ends


SCRAPE_DEADLINE_S = 5.0


SCRAPE_MAX_BYTES = 2 * 2**20


REASON_LIMIT = 300  # characters of a failed scrape's reason


SERVER_METRICS_COLUMNS = [  # each line's comment is its columns' meaning (docs/columns.md is written from them)
    "window", "kind", "t_start_ns", "t_end_ns",  # the telemetry window it covers (its name, kind and edges)
    "software",  # whose metric names were read (vLLM, SGLang, llama.cpp)
    # the server's mean TTFT, inter-token latency and end-to-end time over the window, s, from its histograms' deltas,
    # and the requests those histograms counted
    "server_ttft_mean_s", "server_itl_mean_s", "server_e2e_mean_s", "server_requests",
    # peaks of the gauges polled inside the window: requests running, requests waiting, KV-cache usage (0–1)
    "server_running_peak", "server_waiting_peak", "server_kv_usage_peak",
    "server_preemptions",  # requests the server preempted in the window
    "server_prompt_tokens", "server_generation_tokens",  # prompt and generated tokens the server counted in the window
    "server_decode_tok_s",  # the server's own decode rate (llama.cpp: tokens predicted ÷ the seconds it spent on them)
    "server_metrics_reason",  # why a figure is missing (no /metrics, a scrape that failed, a name the server lacks)
]


SERVER_METRICS_KINDS: dict[str, ColumnKind] = {
    c: ("str" if c in ("window", "kind", "software", "server_metrics_reason") else
        "int" if c in ("t_start_ns", "t_end_ns") else "float") for c in SERVER_METRICS_COLUMNS}


def read_server_metrics(path: Path | str) -> pd.DataFrame:
    """server_metrics_windows.csv or server_metrics.csv typed (the latter's cross-check columns come back as
    numbers or text); an empty frame if absent."""
    return read_csv(path, SERVER_METRICS_KINDS, label=str(path), required=("window", "t_start_ns"))


def parse_metrics(text: str) -> dict[str, float]:
    """Exposition text → sample name → value, summed over label sets (NaN samples skipped)."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_bucket") or sample.name.endswith("_created") or math.isnan(sample.value):
                continue
            values[sample.name] = values.get(sample.name, 0.0) + float(sample.value)
    return values


def software_of(values: Mapping[str, float]) -> str:
    """Which server wrote these metrics, by its profile's name prefix ("" if no profile's)."""
    profile = by_prefix(values)
    return profile.name if profile is not None else ""


def metric_names(software: str) -> MetricNames | None:
    """The Prometheus names of the profile called `software`; None where it has none or there is no such profile."""
    profile = by_name(software)
    return profile.metrics if profile is not None else None


def _first(values: Mapping[str, float], names: tuple[str, ...], suffix: str = "") -> float | None:
    for name in names:
        if name + suffix in values:
            return values[name + suffix]
    return None


def _delta(before: Mapping[str, float], after: Mapping[str, float], names: tuple[str, ...], suffix: str = ""
           ) -> float | None:
    a, b = _first(after, names, suffix), _first(before, names, suffix)
    return None if a is None or b is None else a - b


def window_row(names: MetricNames, before: Mapping[str, float], after: Mapping[str, float],
               peaks: Mapping[str, float]) -> dict[str, Any]:
    """One window's server-side figures from the scrapes at its edges and the gauges' peaks inside it."""
    row: dict[str, Any] = {}
    missing = []
    for key, fam in (("ttft", names.ttft), ("itl", names.itl), ("e2e", names.e2e)):
        total, count = _delta(before, after, fam, "_sum"), _delta(before, after, fam, "_count")
        row[f"server_{key}_mean_s"] = total / count if total is not None and count else None
        if key == "e2e":
            row["server_requests"] = count
        if fam and total is None:
            missing.append(f"{key}: {fam[0]} not exposed")
    row["server_preemptions"] = _delta(before, after, names.preemptions)
    row["server_prompt_tokens"] = _delta(before, after, names.prompt_tokens)
    row["server_generation_tokens"] = _delta(before, after, names.generation_tokens)
    seconds = _delta(before, after, names.generation_seconds)
    tokens = row["server_generation_tokens"]
    row["server_decode_tok_s"] = tokens / seconds if tokens is not None and seconds else None
    for key in ("running", "waiting", "kv_usage"):
        row[f"server_{key}_peak"] = peaks.get(key)
    row["server_metrics_reason"] = "; ".join(missing)
    return row


class ServerMetrics:
    """Scrapes one server's /metrics around windows; `available` False (with `reason`) when it has none.

    `client` is injectable (tests); by default an httpx client with the run's headers. `secret` (the API key) is
    scrubbed from every reason; `deadline_s` and `max_bytes` bound each scrape, `connect_s` (the run's connect
    timeout) the wait for a connection."""

    def __init__(self, root_url: str, headers: Mapping[str, str] | None = None, *, software: str = "",
                 out_dir: Path | str | None = None, poll_s: float = 0.5, client: httpx.Client | None = None,
                 secret: str = "", deadline_s: float = SCRAPE_DEADLINE_S, max_bytes: int = SCRAPE_MAX_BYTES,
                 connect_s: float | None = None):
        self.url = root_url.rstrip("/") + "/metrics"
        self.client = client or httpx.Client(timeout=within(deadline_s, connect_s), headers=dict(headers or {}), trust_env=False)
        self.secret = secret
        self.deadline_s, self.max_bytes = deadline_s, max_bytes
        self.out_dir = Path(out_dir) if out_dir else None
        self.poll_s = poll_s
        self.reason = ""
        self.rows: list[dict[str, Any]] = []
        self._open: dict[str, tuple[str, int, dict[str, float], dict[str, float]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        first = self.scrape()
        self.software = software_of(first or {}) or software
        self.names = metric_names(self.software)
        if first is None:
            return
        if self.names is None:
            self.reason = f"{self.url}: no metric names known for this server ({software or 'unknown'})"

    @property
    def gauges(self) -> dict[str, tuple[str, ...]]:
        names = self.names or MetricNames("")
        return {"running": names.running, "waiting": names.waiting, "kv_usage": names.kv_usage}

    @property
    def available(self) -> bool:
        return self.names is not None and not self.reason

    def _failed(self, why: str) -> None:
        self.reason = scrub(f"{self.url}: {cut(why, REASON_LIMIT)}", self.secret)

    def scrape(self) -> dict[str, float] | None:
        try:
            response = fetch(self.client, "GET", self.url, deadline_s=self.deadline_s, max_bytes=self.max_bytes)
        except RequestFailed as exc:
            self._failed(f"{exc.kind}: {exc.message}")
            return None
        except httpx.HTTPError as exc:
            self._failed(f"{type(exc).__name__}: {exc}")
            return None
        if response.status_code != 200:
            self._failed(f"HTTP {response.status_code} (the server exposes no Prometheus metrics here)")
            return None
        try:
            return parse_metrics(response.text)
        except Exception as exc:  # not the exposition format
            self._failed(f"not Prometheus text ({type(exc).__name__}: {exc})")
            return None

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_s):
            with self._lock:
                if not self._open:
                    continue
            values = self.scrape()
            if values is None:
                continue
            self._note_peaks(values)

    def _note_peaks(self, values: Mapping[str, float]) -> None:
        with self._lock:
            for _, _, _, peaks in self._open.values():
                for key, fam in self.gauges.items():
                    value = _first(values, fam)
                    if value is not None:
                        peaks[key] = max(peaks.get(key, value), value)

    @contextlib.contextmanager
    def window(self, name: str, kind: str) -> Iterator[None]:
        """Scrape at the start and the end; the row is recorded even if the block raises."""
        if not self.available:
            yield
            return
        assert self.names is not None
        before = self.scrape() or {}
        key = f"{name}\x00{time.perf_counter_ns()}"
        with self._lock:
            self._open[key] = (kind, time.perf_counter_ns(), before, {})
        self._note_peaks(before)
        if self._thread is None:
            self._thread = threading.Thread(target=self._poll, name="server-metrics", daemon=True)
            self._thread.start()
        try:
            yield
        finally:
            after = self.scrape()
            if after is not None:
                self._note_peaks(after)
            with self._lock:
                kind, t0, before, peaks = self._open.pop(key)
            row = {"window": name, "kind": kind, "t_start_ns": t0, "t_end_ns": time.perf_counter_ns(),
                   "software": self.software}
            if after is None or not before:
                row.update({c: None for c in SERVER_METRICS_COLUMNS if c.startswith("server_")},
                           server_metrics_reason=f"scrape failed: {self.reason}")
            else:
                row.update(window_row(self.names, before, after, peaks))
            self.rows.append(row)
            if self.out_dir is not None:
                append_csv_row(self.out_dir / SERVER_METRICS_LOG, SERVER_METRICS_COLUMNS, row)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self.client.close()
