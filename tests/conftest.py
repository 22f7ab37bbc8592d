"""Shared fixtures: a local fake streaming server, params pointing at it, the sandbox a test running code needs."""

from __future__ import annotations

import pytest

from benchlib.scoring import sandbox
from tests.fakes.servers import FakeServer
from tests.helpers import make_params


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


@pytest.fixture
def params_for(fake_server):
    def factory(fake: dict | None = None, kind: str = "openai", **overrides):
        return make_params(fake_server.url, fake, kind, **overrides)
    return factory


@pytest.fixture
def bounded_sandbox() -> sandbox.Isolation:
    """For tests that run a model's code: where nothing on this machine bounds it the sandbox runs none (it says so,
    and tests/scoring/test_sandbox_degraded.py shows it), so what they claim cannot be shown here."""
    way = sandbox.isolation()
    if not way.bounded:
        pytest.skip(f"the sandbox runs no code on this machine ({way.missing})")
    return way
