"""Shared fixtures: a local fake streaming server and params pointing at it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from servers import FakeServer  # noqa: E402

from benchlib.params import validate  # noqa: E402


@pytest.fixture(scope="session")
def fake_server():
    server = FakeServer().start_thread()
    yield server
    server.stop()


@pytest.fixture
def outputs(tmp_path, monkeypatch):
    """Results go to a temp dir, never the repo's outputs/."""
    root = tmp_path / "outputs"
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(root))
    return root


def make_params(base_url: str, fake: dict | None = None, kind: str = "openai", **overrides):
    data = {
        "host": {"name": "test-host"},
        "server": {"kind": kind, "base_url": base_url, "model": "fake-model", "software": "fake",
                   "extra_body": {"fake": fake or {}}},
        "run": {"warmups": 0, "repeats": 1, "max_tokens": 64, "timeout_s": 5, "connect_timeout_s": 2,
                "retries_429": 2},
        "telemetry": {"enabled": False, "idle_baseline_s": 0, "loaded_baseline_s": 0},
    }
    for section, values in overrides.items():
        if isinstance(values, dict):
            data.setdefault(section, {}).update(values)
        else:
            data[section] = values
    return validate(data, source="test-params.yaml")


@pytest.fixture
def params_for(fake_server):
    def factory(fake: dict | None = None, kind: str = "openai", **overrides):
        return make_params(fake_server.url, fake, kind, **overrides)
    return factory
