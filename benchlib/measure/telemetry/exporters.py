"""The Prometheus exporters operators already run on a GPU host, scraped as a telemetry source: NVIDIA's DCGM
exporter (per GPU: DCGM_FI_DEV_POWER_USAGE in W, DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION in mJ since boot,
DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_FB_USED in MiB, DCGM_FI_DEV_SM_CLOCK, DCGM_FI_DEV_CLOCKS_EVENT_REASONS or the
older DCGM_FI_DEV_CLOCK_THROTTLE_REASONS; labels gpu, UUID, device, modelName, Hostname) and node_exporter
(node_cpu_seconds_total, node_memory_MemAvailable_bytes, node_rapl_*_joules_total, node_hwmon_temp_celsius,
node_thermal_zone_temp, node_uname_info).

Parsed with prometheus_client's exposition parser, as the servers' /metrics are (benchlib.measure.servers.prometheus),
and fetched with benchlib.measure.http.bounded.fetch. An exporter's text carries no timestamp of this host's clock:
each scrape's values are placed at the midpoint of its request and answer, within half its round trip.
Energy comes from the counter where the exporter has one (the DCGM total-energy counter, node_exporter's RAPL
package counters) and otherwise from integrated DCGM power, labelled so in the window row. DCGM refreshes its
fields every collect interval (dcgm-exporter -c, 30 s by default): a value repeated from the previous scrape is
counted as stale (stale_samples), as a repeated NVML reading is."""

from __future__ import annotations

import math
import re
import time
from collections import deque
from typing import Any, Iterable, Mapping

import httpx
from prometheus_client.parser import text_string_to_metric_families

from benchlib.measure.http.bounded import fetch
from benchlib.measure.telemetry.clock import url_host
from benchlib.measure.telemetry.common import NAN, sensor_status
from benchlib.records.secrets import redact_url

SCRAPE_DEADLINE_S = 2.0


SCRAPE_MAX_BYTES = 4 * 2**20  # node_exporter with every collector is ~100–300 kB; DCGM's ~10 kB per GPU


UNCERTAINTY_WINDOW = 50  # scrapes whose half round trip bounds where a sample sits on the local clock


DCGM_FIELDS = {  # series key -> (metric names, first present wins; factor to the local sampler's unit)
    "power": (("DCGM_FI_DEV_POWER_USAGE",), 1.0),
    "energy": (("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",), 1.0),  # mJ, like NVML's counter
    "mem": (("DCGM_FI_DEV_FB_USED",), float(2**20)),  # MiB
    "temp": (("DCGM_FI_DEV_GPU_TEMP",), 1.0),
    "clock": (("DCGM_FI_DEV_SM_CLOCK",), 1.0),
    "throttle": (("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"), 1.0),
}


DCGM_LABELS = {"energy": "dcgm_counter", "power": "dcgm_power_usage", "power_text": "DCGM_FI_DEV_POWER_USAGE",
               "mem": "dcgm_fb_used", "temp": "dcgm"}


# NVML's clock-event reason bits, which DCGM's reasons field carries unchanged.
THROTTLE_NAMES = {0x1: "GpuIdle", 0x2: "ApplicationsClocksSetting", 0x4: "SwPowerCap", 0x8: "HwSlowdown",
                  0x10: "SyncBoost", 0x20: "SwThermalSlowdown", 0x40: "HwThermalSlowdown",
                  0x80: "HwPowerBrakeSlowdown", 0x100: "DisplayClockSetting"}


BUSY_MODES = ("user", "nice", "system", "irq", "softirq", "steal")  # as host_cpu_times counts busy time


def parse_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Exposition text → (sample name, labels, value) for every sample (NaN ones left out)."""
    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not math.isnan(sample.value):
                out.append((sample.name, dict(sample.labels), float(sample.value)))
    return out


def dcgm_values(samples: Iterable[tuple[str, dict[str, str], float]]) -> dict[str, dict[str, Any]]:
    """Per GPU index (the `gpu` label): its identity labels and each field's value in the sampler's unit."""
    gpus: dict[str, dict[str, Any]] = {}
    by_name: dict[str, list[tuple[dict[str, str], float]]] = {}
    for name, labels, value in samples:
        if name.startswith("DCGM_FI_") and "gpu" in labels:
            # prometheus_client names a counter's sample <family>_total, which DCGM's own names lack
            name = name.removesuffix("_total")
            by_name.setdefault(name, []).append((labels, value))
            gpus.setdefault(labels["gpu"], {"uuid": labels.get("UUID", ""), "name": labels.get("modelName", ""),
                                            "host": labels.get("Hostname", ""), "values": {}, "fields": {}})
    for key, (names, factor) in DCGM_FIELDS.items():
        for gpu in gpus.values():
            for name in names:
                hits = [v for labels, v in by_name.get(name, []) if gpus.get(labels["gpu"]) is gpu]
                if hits:
                    gpu["values"][key], gpu["fields"][key] = hits[0] * factor, name
                    break
    return gpus


def node_values(samples: Iterable[tuple[str, dict[str, str], float]]) -> dict[str, Any]:
    """node_exporter's host figures: CPU busy/total seconds, MemAvailable, the RAPL package counter (µJ), the
    hottest hwmon or thermal-zone temperature, and the host's name."""
    busy = total = 0.0
    cpu = False
    rapl: list[float] = []
    temps: list[float] = []
    out: dict[str, Any] = {"host": ""}
    for name, labels, value in samples:
        if name == "node_cpu_seconds_total":
            cpu = True
            mode = labels.get("mode", "")
            if mode in BUSY_MODES:
                busy += value
            if mode in BUSY_MODES or mode in ("idle", "iowait"):
                total += value
        elif name == "node_memory_MemAvailable_bytes":
            out["mem_avail"] = value
        elif name in ("node_hwmon_temp_celsius", "node_thermal_zone_temp"):
            temps.append(value)
        elif name == "node_uname_info":
            out["host"] = labels.get("nodename", "")
        else:
            match = re.fullmatch(r"node_rapl_(\w+)_joules_total", name)
            zone = match.group(1) if match else labels.get("zone", "") if name == "node_rapl_joules_total" else ""
            if zone.startswith("package"):  # packages only, as the local Rapl sums them (psys overlaps)
                rapl.append(value)
    if cpu:
        out["cpu_busy_s"], out["cpu_total_s"] = busy, total
    if rapl:
        out["rapl_uj"] = sum(rapl) * 1e6
    if temps:
        out["soc_temp"] = max(temps)
    return out


class ExporterSource:
    """DCGM exporter and/or node_exporter on the server's host, scraped at the telemetry rate."""

    label = "exporters"

    def __init__(self, dcgm_url: str | None, node_url: str | None, client: httpx.Client | None = None):
        self.urls = {k: u for k, u in (("dcgm", dcgm_url), ("node", node_url)) if u}
        self.client = client or httpx.Client(trust_env=False)
        self.host = ""
        self.slots: dict[str, int] = {}  # DCGM gpu label -> slot
        self.half_rtts: deque[int] = deque(maxlen=UNCERTAINTY_WINDOW)
        self.last_gpu: dict[int, tuple[float, float]] = {}
        self.cpu_last: tuple[float, float] | None = None
        self.failures: dict[str, str] = {}

    def where(self) -> str:
        return "exporters " + ", ".join(f"{k} {redact_url(u)}" for k, u in self.urls.items())

    def _scrape(self, kind: str) -> tuple[int, float, list[tuple[str, dict[str, str], float]]]:
        sent = time.perf_counter_ns()
        answer = fetch(self.client, "GET", self.urls[kind], deadline_s=SCRAPE_DEADLINE_S, max_bytes=SCRAPE_MAX_BYTES)
        received = time.perf_counter_ns()
        if answer.status_code != 200:
            raise RuntimeError(f"{kind} exporter: HTTP {answer.status_code}")
        self.half_rtts.append((received - sent + 1) // 2)
        return (sent + received) // 2, time.time() - (received - sent) / 2e9, parse_samples(answer.text)

    def uncertainty_s(self) -> float | None:
        return max(self.half_rtts) / 1e9 if self.half_rtts else None

    def layout(self) -> dict[str, Any]:
        """One scrape of each exporter: which GPUs and sensors this host's exporters report."""
        gpus: list[dict[str, Any]] = []
        node: dict[str, Any] = {}
        sensors: dict[str, dict[str, Any]] = {}
        nvml_reason = "no DCGM exporter in params (telemetry.dcgm_url)"
        if "dcgm" in self.urls:
            found = dcgm_values(self._scrape("dcgm")[2])
            nvml_reason = "" if found else "the DCGM exporter lists no GPU (no DCGM_FI_* sample with a gpu label)"
            for slot, (label, gpu) in enumerate(sorted(found.items(), key=lambda kv: int(kv[0]))):
                self.slots[label] = slot
                self.host = self.host or gpu["host"]
                fields = gpu["fields"]

                def status(key: str, fields: Mapping[str, str] = fields) -> dict[str, Any]:
                    name = fields.get(key, "")
                    why = "" if name else f"not exported ({' / '.join(DCGM_FIELDS[key][0])})"
                    return sensor_status(bool(name), why, name)

                gpus.append({"slot": slot, "index": int(label), "uuid": gpu["uuid"], "name": gpu["name"],
                             "energy": "energy" in fields, "power": "usage" if "power" in fields else "",
                             "memory": "v1" if "mem" in fields else "", "temp": "temp" in fields,
                             "clock": "clock" in fields, "labels": DCGM_LABELS,
                             "sensors": {"energy_counter": status("energy"), "power": status("power"),
                                         "memory": status("mem"), "temperature": status("temp"),
                                         "sm_clock": status("clock"), "clock_event_reasons": status("throttle")}})
            for key in ("energy_counter", "power", "memory", "temperature", "sm_clock", "clock_event_reasons"):
                entries = [g["sensors"][key] for g in gpus]
                sensors[key] = sensor_status(bool(entries) and all(e["available"] for e in entries),
                                             "; ".join(f"gpu{g['index']}: {g['sensors'][key]['reason']}" for g in gpus
                                                       if g["sensors"][key]["reason"]) or nvml_reason,
                                             " | ".join(sorted({e["source"] for e in entries if e["source"]})))
        if "node" in self.urls:
            node = node_values(self._scrape("node")[2])
            self.host = self.host or node["host"]
        self.host = self.host or url_host(next(iter(self.urls.values())))

        def node_status(key: str, source: str, why: str) -> dict[str, Any]:
            if "node" not in self.urls:
                return sensor_status(False, "no node_exporter in params (telemetry.node_url)", "")
            return sensor_status(key in node, "" if key in node else why, source if key in node else "")

        sensors.update({
            "host_cpu": node_status("cpu_busy_s", "node_cpu_seconds_total", "node_exporter has no "
                                    "node_cpu_seconds_total (cpu collector off?)"),
            "meminfo": node_status("mem_avail", "node_memory_MemAvailable_bytes", "node_exporter has no "
                                   "node_memory_MemAvailable_bytes (meminfo collector off?)"),
            "rapl": node_status("rapl_uj", "node_rapl_package*_joules_total", "node_exporter has no "
                                "node_rapl_package_joules_total (no powercap on that host, or not readable)"),
            "thermal_zones": node_status("soc_temp", "max of node_hwmon_temp_celsius, node_thermal_zone_temp",
                                         "node_exporter has no node_hwmon_temp_celsius or node_thermal_zone_temp "
                                         "(that host exposes no hwmon or thermal zone)"),
            "soc_power": sensor_status(False, "the exporters give no SoC/board power", ""),
            "server_process": sensor_status(False, "the exporters do not watch the server's processes", ""),
        })
        return {"host": self.host, "gpus": gpus, "nvml_reason": nvml_reason, "sensors": sensors,
                "throttle_names": {str(k): v for k, v in THROTTLE_NAMES.items()},
                "rapl": sensors["rapl"], "meminfo": sensors["meminfo"], "cpu": sensors["host_cpu"],
                "server": sensors["server_process"],
                "zones": {"status": sensors["thermal_zones"], "count": int("soc_temp" in node),
                          "label": "node_exporter_temp_max"}}

    def pull(self, force: bool) -> list[tuple[int, float, dict[str, float], int | None]]:
        """One scrape per exporter, each its own sample (its midpoint on the local clock); `force` changes
        nothing: every scrape is a fresh reading of what the exporter holds."""
        out = []
        for kind in self.urls:
            try:
                t_ns, t_unix, samples = self._scrape(kind)
            except Exception as exc:
                self.failures.setdefault(kind, f"{type(exc).__name__}: {exc}"[:300])
                continue
            values = self._dcgm(samples) if kind == "dcgm" else self._node(samples)
            out.append((t_ns, t_unix, values, None))
        return out

    def _dcgm(self, samples: list[tuple[str, dict[str, str], float]]) -> dict[str, float]:
        values: dict[str, float] = {}
        for label, gpu in dcgm_values(samples).items():
            slot = self.slots.get(label)
            if slot is None:  # a GPU that appeared after the layout: not one of this run's
                continue
            for key, value in gpu["values"].items():
                values[f"{key}@{slot}"] = value
            now = (gpu["values"].get("energy", NAN), gpu["values"].get("power", NAN))
            last = self.last_gpu.get(slot)
            values[f"stale@{slot}"] = float(last is not None and now == last and not all(map(math.isnan, now)))
            self.last_gpu[slot] = now
        return values

    def _node(self, samples: list[tuple[str, dict[str, str], float]]) -> dict[str, float]:
        node = node_values(samples)
        values = {k: float(v) for k, v in node.items() if k != "host"}
        if "cpu_busy_s" in values:
            busy, total = values["cpu_busy_s"], values["cpu_total_s"]
            if self.cpu_last is not None and total > self.cpu_last[1]:
                share = (busy - self.cpu_last[0]) / (total - self.cpu_last[1])
                values["cpu_percent"] = round(min(max(share, 0.0), 1.0) * 100.0, 2)
            self.cpu_last = (busy, total)
        return values

    def describe(self) -> dict[str, Any]:
        return {"urls": {k: redact_url(u) for k, u in self.urls.items()}, "scrape_failures": self.failures}

    def close(self) -> None:
        self.client.close()
