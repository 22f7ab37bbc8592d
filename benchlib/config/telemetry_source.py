"""Where the server host's telemetry comes from (telemetry.source and its URLs): the fields TelemetryParams
inherits, kept here so params.py stays one screenful per section. docs/energy.md, "Telemetry where the model runs",
describes each source."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from benchlib.config.sections import Section, url_credentials


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
