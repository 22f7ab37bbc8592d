"""A DCGM exporter stand-in: NVIDIA dcgm-exporter's /metrics text for scripted GPUs, in its documented format.

Names, types, units and labels as dcgm-exporter's default-counters.csv and its output have them: one family per
DCGM field with `# HELP` and `# TYPE` lines, one sample per GPU labelled gpu, UUID, pci_bus_id, device,
modelName, Hostname (and DCGM_FI_DRIVER_VERSION):
    DCGM_FI_DEV_SM_CLOCK                  gauge    SM clock frequency (in MHz)
    DCGM_FI_DEV_GPU_TEMP                  gauge    GPU temperature (in C)
    DCGM_FI_DEV_POWER_USAGE               gauge    Power draw (in W)
    DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION  counter  Total energy consumption since boot (in mJ)
    DCGM_FI_DEV_FB_USED                   gauge    Framebuffer memory used (in MiB)
    DCGM_FI_DEV_CLOCKS_EVENT_REASONS      gauge    Current clock event reasons (bitmask); DCGM before 3.3 names
                                                   it DCGM_FI_DEV_CLOCK_THROTTLE_REASONS (old_names=True)
The energy counter integrates the configured power on time.perf_counter, so a window's true energy is known.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class DcgmGpu:
    index: int = 0
    uuid: str = "GPU-6a0b6f6e-1111-2222-3333-444444444444"
    model: str = "NVIDIA H100 80GB HBM3"
    power_w: float = 300.0
    temp_c: float = 61.0
    fb_used_mib: float = 40_000.0
    sm_clock_mhz: float = 1980.0
    reasons: int = 0x4  # SwPowerCap
    energy_offset_mj: float = 8.5e9
    _since: float = field(default_factory=time.perf_counter)
    _acc_mj: float = 0.0

    def set_power(self, watts: float) -> None:
        now = time.perf_counter()
        self._acc_mj += self.power_w * (now - self._since) * 1000.0
        self._since, self.power_w = now, watts

    def energy_mj(self) -> float:
        return self.energy_offset_mj + self._acc_mj + self.power_w * (time.perf_counter() - self._since) * 1000.0


FIELDS = [  # (name, type, help, value of a DcgmGpu)
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", lambda g: g.sm_clock_mhz),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda g: g.temp_c),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda g: g.power_w),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).",
     lambda g: int(g.energy_mj())),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", lambda g: g.fb_used_mib),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask).", lambda g: g.reasons),
]


def exposition(gpus: list[DcgmGpu], hostname: str = "gpu-box", *, energy: bool = True, old_names: bool = False,
               driver: str = "550.54.15") -> str:
    lines: list[str] = []
    for name, kind, text, value in FIELDS:
        if name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" and not energy:
            continue
        if name == "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" and old_names:
            name, text = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "Current clock throttle reasons."
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for g in gpus:
            labels = (f'gpu="{g.index}",UUID="{g.uuid}",pci_bus_id="00000000:{0x18 + g.index:02X}:00.0",'
                      f'device="nvidia{g.index}",modelName="{g.model}",Hostname="{hostname}",'
                      f'DCGM_FI_DRIVER_VERSION="{driver}"')
            lines.append(f"{name}{{{labels}}} {value(g)}")
    return "\n".join(lines) + "\n"


class FakeDcgmExporter:
    """Serves exposition() at http://127.0.0.1:<port>/metrics; `scrapes` counts the requests."""

    def __init__(self, gpus: list[DcgmGpu], **options: Any):
        self.gpus, self.options, self.scrapes = gpus, options, 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_GET(self) -> None:  # noqa: N802
                owner.scrapes += 1
                body = exposition(owner.gpus, **owner.options).encode()
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/metrics"

    def __enter__(self) -> "FakeDcgmExporter":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
