"""Where the server host's telemetry comes from (telemetry.source and its URLs, and telemetry.bmc: the node's BMC as a
whole-node power source beside the chip-level ones): the fields TelemetryParams inherits, kept here so params.py stays
one screenful per section. docs/energy.md describes each source and the BMC's."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from benchlib.config.sections import Section, url_credentials


class BmcParams(Section):
    """The server node's baseboard management controller, read over Redfish or IPMI for the whole node's input power
    (benchlib.measure.telemetry.bmc). Credentials never appear here: only the names of the environment variables
    that hold them."""

    protocol: Literal["none", "redfish", "ipmi"] = Field(
        "none", description="none (no BMC), redfish (Chassis EnvironmentMetrics / Power over HTTPS) or ipmi (DCMI Get "
                            "Power Reading, else an SDR sensor in watts, over RMCP+ / lanplus)")
    url: str | None = Field(None, description="redfish: the BMC's base URL (https://bmc-host[:port]); ipmi: "
                                              "ipmi://host[:port] (port 623 by default)")
    chassis: str | None = Field(None, description="redfish: the Chassis Id to read; None = the first chassis that "
                                                  "reports power")
    sensor: str | None = Field(None, description="ipmi without DCMI: the SDR sensor (its name) in watts that reports "
                                                 "the node's input power; None = the first such sensor")
    user_env: str = Field("FRONTIER_BENCH_BMC_USER", description="The environment variable holding the BMC user name")
    password_env: str = Field("FRONTIER_BENCH_BMC_PASSWORD", description="The environment variable holding the BMC "
                                                                         "password")
    poll_s: float = Field(1.0, ge=0.05, le=60, description="Seconds between two readings of the BMC")
    averaging_s: float | None = Field(None, ge=0, le=3600, description="The window (s) over which the BMC averages "
                                                                       "the power it reports, when it does not say so "
                                                                       "itself; None = what the BMC states, else 0 "
                                                                       "(taken as instantaneous, and said so)")
    tail_wait_s: float = Field(15.0, ge=0, le=600, description="The longest a window's close waits for the readings "
                                                               "that an averaging BMC reports after it (averaging_s "
                                                               "+ one poll): past it, the window's node energy "
                                                               "stays empty with the reason")
    deadline_s: float = Field(2.0, gt=0, le=30, description="Bound on one request to the BMC (HTTP exchange or one "
                                                            "IPMI command)")
    verify_tls: bool = Field(True, description="redfish: verify the BMC's certificate (many BMCs ship a self-signed "
                                               "one: false accepts it, and the manifest says so)")

    @model_validator(mode="after")
    def _url(self) -> "BmcParams":
        if self.protocol != "none" and not self.url:
            raise ValueError(f"bmc.protocol {self.protocol} needs bmc.url")
        where = url_credentials(self.url or "")
        if where:
            raise ValueError(f"bmc.url carries {where}: it would be written to manifest.json and the notebook; the "
                             "BMC's user and password come from the environment variables bmc.user_env and "
                             "bmc.password_env name")
        return self


class TelemetrySourceParams(Section):
    source: Literal["local", "agent", "exporters"] = Field(
        "local", description="Where the server host's telemetry comes from: local (this process samples this host), "
                             "agent (`frontier-bench telemetry-agent` on the server's host, at agent_url), exporters "
                             "(DCGM exporter and/or node_exporter on the server's host)")
    agent_url: str | None = Field(None, description="source agent: the agent's base URL, e.g. http://gpu-box:9101")
    agent_token_env: str | None = Field(None, description="source agent: the environment variable holding the "
                                                          "agent's Bearer token (the same name on both hosts)")
    dcgm_url: str | None = Field(None, description="source exporters: the DCGM exporter's /metrics URL (GPU power, "
                                                   "energy counter, temperature, memory, clocks)")
    node_url: str | None = Field(None, description="source exporters: node_exporter's /metrics URL (CPU, "
                                                   "MemAvailable, RAPL counters, hwmon/thermal-zone temperatures)")
    bmc: BmcParams = Field(default_factory=BmcParams, description="The node's BMC as a whole-node input power "
                                                                  "source beside the chip-level ones (docs/energy.md)")
    clock_round_trips: int = Field(8, ge=1, le=100, description="source agent: round trips per clock-offset "
                                                                "measurement (the one with the smallest RTT wins)")

    @model_validator(mode="after")
    def _source_urls(self) -> "TelemetrySourceParams":
        if self.source == "agent" and not self.agent_url:
            raise ValueError("source agent needs agent_url")
        if self.source == "exporters" and not (self.dcgm_url or self.node_url):
            raise ValueError("source exporters needs dcgm_url and/or node_url")
        for name in ("agent_url", "dcgm_url", "node_url"):
            where = url_credentials(getattr(self, name) or "")
            if where:
                raise ValueError(f"{name} carries {where}: it would be written to manifest.json and the notebook; "
                                 "the agent's token goes through agent_token_env (the NAME of an environment "
                                 "variable) instead")
        return self
