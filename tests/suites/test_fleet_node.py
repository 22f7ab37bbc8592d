"""A fleet node's `ray start` (benchlib.suites.fleet.node_command, `frontier-bench fleet-node`): every Ray port bound
to the one address the user names — loopback or a private network's, never a wildcard or a public one — and
pinned, the dashboard on loopback, Ray's token authentication on, the token never printed; a caller that cannot
join is told what the cluster asks for. No Ray cluster is started here (tests/suites/test_fleet.py, marker ray,
runs one)."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest
import yaml
from ray.scripts import scripts as ray_cli

from benchlib import cli
from benchlib.records import store
from benchlib.suites import fleet, study


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "10.1.2.3", "172.16.0.5", "192.168.1.2", "fd12::1",
                                     "169.254.10.1"])
def test_loopback_and_private_addresses_are_taken(address):
    assert fleet.bind_address(address) == address


@pytest.mark.parametrize("address,says", [
    ("0.0.0.0", "every interface"), ("::", "every interface"), ("8.8.8.8", "a public address"),
    ("2001:4860:4860::8888", "a public address"), ("224.0.0.1", "a public address"), ("box1.lab", "not a name"),
])
def test_a_wildcard_a_public_address_or_a_name_is_one_line(address, says):
    with pytest.raises(fleet.FleetError) as caught:
        fleet.bind_address(address)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def _options(argv: list[str]) -> dict:
    """The command's options as the pinned Ray's own `ray start` parser reads them (nothing is started)."""
    with ray_cli.start.make_context("start", argv[2:]) as context:
        return dict(context.params)


def test_the_head_binds_every_port_to_the_named_address_pins_them_and_keeps_the_dashboard_on_loopback():
    argv = fleet.node_command("10.0.0.5", head=True, host="box1")
    options = _options(argv)
    assert options["head"] and options["node_ip_address"] == "10.0.0.5" and options["port"] == fleet.HEAD_PORT
    assert options["dashboard_host"] == "127.0.0.1"
    for flag, port in fleet.RAY_PORTS.items():
        assert options[flag.lstrip("-").replace("-", "_")] == port
    assert options["resources"] == '{"host:box1":1}' and options["disable_usage_stats"]
    assert not any("0.0.0.0" in word or "::" in word for word in argv)
    assert fleet.node_environment() == {"RAY_AUTH_MODE": "token"}


def test_a_joining_node_names_the_head_and_its_own_address():
    options = _options(fleet.node_command("192.168.7.2", head=False, join="192.168.7.1:6379", host="box2"))
    assert not options["head"] and options["address"] == "192.168.7.1:6379"
    assert options["node_ip_address"] == "192.168.7.2" and options["resources"] == '{"host:box2":1}'
    client = _options(fleet.node_command("192.168.7.3", head=False, join="192.168.7.1:6379", client_only=True))
    assert client["num_cpus"] == 0 and client["resources"] == "{}"  # Ray's default: no host resource
    with pytest.raises(fleet.FleetError, match="either the head"):
        fleet.node_command("192.168.7.3", head=True, join="192.168.7.1:6379")


def test_the_command_prints_the_node_and_caller_lines_with_authentication_on(capsys):
    assert cli.main(["fleet-node", "--head", "--bind", "10.0.0.5", "--host", "box1"]) == 0
    node, caller = capsys.readouterr().out.strip().splitlines()
    assert node.startswith("RAY_AUTH_MODE=token ") and " start --head " in node
    assert "--node-ip-address=10.0.0.5" in node and "--dashboard-host=127.0.0.1" in node
    assert "RAY_AUTH_MODE=token .venv/bin/frontier-bench study FILE --ray 10.0.0.5:6379" in caller
    assert cli.main(["fleet-node", "--head", "--bind", "0.0.0.0"]) == 2
    assert capsys.readouterr().err.strip() == \
        "error: --bind 0.0.0.0: that is every interface; name the one private address the fleet uses"


@pytest.fixture
def runs(monkeypatch, tmp_path):
    """subprocess.run recorded instead of run; `ray get-auth-token --generate` writes a token as Ray would."""
    calls = []
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)

    def run(argv, **kwargs):
        calls.append((list(argv), kwargs, dict(os.environ)))
        if argv[1:] == ["get-auth-token", "--generate"]:
            token = tmp_path / "home" / ".ray" / "auth_token"
            token.parent.mkdir(parents=True)
            token.write_text("f" * 64)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(fleet.subprocess, "run", run)
    return calls


def test_a_joining_node_without_the_token_is_not_started(runs, capsys):
    assert cli.main(["fleet-node", "--join", "10.0.0.5:6379", "--bind", "10.0.0.6", "--host", "box2", "--start"]) == 2
    assert "no Ray token on this machine" in capsys.readouterr().err and runs == []


def test_the_head_makes_the_token_unseen_and_private_then_starts_with_authentication(runs, tmp_path, capsys):
    assert cli.main(["fleet-node", "--head", "--bind", "127.0.0.1", "--host", "box1", "--start"]) == 0
    (make, made_how, _), (start, _, env) = runs
    assert make[1:] == ["get-auth-token", "--generate"] and made_how["stdout"] == subprocess.DEVNULL
    token = tmp_path / "home" / ".ray" / "auth_token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert start[1:3] == ["start", "--head"] and env["RAY_AUTH_MODE"] == "token"
    assert "f" * 64 not in capsys.readouterr().out


def test_a_caller_that_cannot_join_is_told_what_the_cluster_asks_for(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.setenv(store.ENV, f"file://{tmp_path / 'store'}")
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump({"name": "f", "deployments": [{"host": "box1", "params": {"server": {
        "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "a", "software": "fake"}}}]}))

    def refused(**kwargs):
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.5:6379")

    monkeypatch.setattr(fleet.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(fleet.ray, "init", refused)
    with pytest.raises(study.StudyError) as caught:
        fleet.run_fleet(study.load_study(path), "10.0.0.5:6379", lambda *a: ({}, []))
    assert "RAY_AUTH_MODE=token" in str(caught.value) and "~/.ray/auth_token" in str(caught.value)
