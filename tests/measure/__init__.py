"""Tests of benchlib.measure: protocol clients, the wire, payloads, provenance, servers and telemetry."""
