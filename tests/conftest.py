"""Shared fixtures: a local fake streaming server and params pointing at it."""

from __future__ import annotations

import pytest

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
