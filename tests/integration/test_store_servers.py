"""The results store (benchlib.records.store) against real servers, each its own process: an S3-compatible one
(moto's) holding two hosts' runs, one of them killed and resumed from the store on another "machine", and one
paper assembled from the URL; the same through an SFTP server (asyncssh's), where a folder is moved aside by a
rename."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import asyncssh
import fsspec
import httpx
import pytest
import yaml

from benchlib import paper
from benchlib.config.params import load_params
from benchlib.config.paths import PROJECT_ROOT
from benchlib.records import store
from benchlib.records.rows import read_requests
from benchlib.suites.runner import run_suite

SECRET = "fb-store-secret-Zq81Kd"  # the S3 secret key: it must never reach a file, a row or the terminal


# ---- a real S3-compatible server ------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """moto's standalone S3 server as its own process, and the AWS environment that points s3fs at it."""
    port = _free_port()
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                               stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=1)
            break
        except httpx.HTTPError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail("moto's S3 server did not start")
            time.sleep(0.2)
    env = {"AWS_ACCESS_KEY_ID": "fb-test-key", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": url}
    yield env
    process.terminate()
    process.wait(timeout=10)
    log.close()


RUNNER = textwrap.dedent("""
    import sys
    from benchlib.config.params import load_params
    from benchlib.suites.runner import run_suite
    run_suite(load_params(sys.argv[1]), "text", progress=False)
""")


def _params(tmp_path: Path, host: str, url: str, fake_url: str) -> Path:
    data = {"host": {"name": host},
            "server": {"kind": "openai", "base_url": fake_url, "model": "fake-model",
                       "extra_body": {"fake": {"ttft": 0.25, "itl": 0.01, "tokens": 5}}},
            "run": {"warmups": 1, "repeats": 4, "max_tokens": 32, "store": url, "store_every_s": 0.2},
            "tasks": ["basic_qa", "summarization"],
            "telemetry": {"idle_baseline_s": 0, "loaded_baseline_s": 0, "power_hz": 5}}
    path = tmp_path / f"{host}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_two_hosts_in_s3_a_killed_run_resumed_elsewhere_and_one_paper_from_the_url(
        s3_server, fake_server, tmp_path, monkeypatch):
    for name, value in s3_server.items():
        monkeypatch.setenv(name, value)
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir("study-bucket")
    url = "s3://study-bucket/study"
    host_a, host_b = _params(tmp_path, "host-a", url, fake_server.url), _params(tmp_path, "host-b", url,
                                                                                 fake_server.url)
    # host A, machine 1: killed mid-run after the store has seen some of its rows
    machine_1 = tmp_path / "machine-1"
    env = {**os.environ, "FRONTIER_BENCH_CACHE": str(machine_1)}
    child = subprocess.Popen([sys.executable, "-c", RUNNER, str(host_a)], env=env, cwd=PROJECT_ROOT)
    remote_csv = "study-bucket/study/host-a/fake-model/text/requests.csv"

    def store_rows():
        fs.invalidate_cache()
        if not fs.exists(remote_csv):
            return None
        copy = tmp_path / "in-store.csv"
        copy.write_bytes(fs.cat_file(remote_csv))
        return read_requests(copy)

    def rows_in_store() -> int:
        rows = store_rows()
        return 0 if rows is None else len(rows)

    deadline = time.monotonic() + 60
    while rows_in_store() < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    in_store = rows_in_store()
    assert 3 <= in_store < 9, f"kill landed at {in_store} rows in the store; the test needs a mid-run kill"
    before = store_rows().set_index("request_key")["ttft_s"]

    # host A resumed on machine 2, which has nothing local: it reads back what the store holds
    monkeypatch.setenv("FRONTIER_BENCH_CACHE", str(tmp_path / "machine-2"))
    result = run_suite(load_params(host_a), "text", progress=False)
    keys = result.requests["request_key"]
    assert len(keys) == 9 and keys.is_unique and set(result.requests["status"]) == {"ok"}
    kept = result.requests.set_index("request_key")["ttft_s"].reindex(before.index)
    assert kept.tolist() == before.tolist(), "the rows measured on machine 1 came back from the store unchanged"
    local = store.staging_dir(url) / "host-a" / "fake-model" / "text"
    assert len(read_requests(local / "requests.csv")) == 9
    assert rows_in_store() == 9  # the finished run is in the store
    # host B, a second params file, written to the same store from machine 2, then started over with --fresh:
    # the store's copy is moved aside (every object copied under the new prefix, then removed)
    run_suite(load_params(host_b), "text", progress=False)
    old_b = fs.cat_file("study-bucket/study/host-b/fake-model/text/requests.csv")
    run_suite(load_params(host_b), "text", fresh=True, progress=False)
    fs.invalidate_cache()
    moved = [p for p in fs.ls("study-bucket/study/host-b/fake-model") if ".archived-" in p]
    assert len(moved) == 1 and fs.cat_file(f"{moved[0]}/requests.csv") == old_b
    assert fs.cat_file("study-bucket/study/host-b/fake-model/text/requests.csv") != old_b

    # one paper from the URL, on a third machine: both hosts, the resumed run whole
    monkeypatch.setenv("FRONTIER_BENCH_CACHE", str(tmp_path / "machine-3"))
    built = paper.assemble(outputs_dir=url, out_dir=tmp_path / "paper")
    assert set(built.runs.meta["host"]) == {"host-a", "host-b"}
    assert built.runs.roots == [url] and built.runs.duplicates == []
    requests = built.runs.requests
    assert len(requests[(requests["host"] == "host-a") & ~requests["is_warmup"]]) == 8
    assert "2 run(s) from 2 host(s) under s3://study-bucket/study" in paper.runs_text(built.runs)
    # credentials came from the environment: the secret is in no object of the store
    for path in fs.find("study-bucket"):
        assert SECRET.encode() not in fs.cat_file(path), path


# ---- a real SFTP server ----------------------------------------------------------------------------------------

SFTP_SERVER = textwrap.dedent("""
    import asyncio, sys
    import asyncssh

    async def main(root, host_key, authorized):
        server = await asyncssh.listen("127.0.0.1", 0, server_host_keys=[host_key], authorized_client_keys=authorized,
                                       sftp_factory=lambda chan: asyncssh.SFTPServer(chan, chroot=root.encode()))
        print(server.get_port(), flush=True)
        await server.wait_closed()

    asyncio.run(main(*sys.argv[1:]))
""")


@pytest.fixture(scope="module")
def sftp_server(tmp_path_factory):
    """asyncssh's SFTP server as its own process, serving a folder; the client's key where paramiko (fsspec's
    sftp:// driver) looks by itself, ~/.ssh/id_ed25519 of a HOME made for the test: nothing in the URL."""
    base = tmp_path_factory.mktemp("sftp")
    root, home = base / "served", base / "home"
    (home / ".ssh").mkdir(parents=True)
    root.mkdir()
    host_key, client_key = asyncssh.generate_private_key("ssh-ed25519"), asyncssh.generate_private_key("ssh-ed25519")
    host_key.write_private_key(str(base / "host_key"))
    client_key.write_private_key(str(home / ".ssh" / "id_ed25519"))
    client_key.write_public_key(str(base / "authorized_keys"))
    process = subprocess.Popen([sys.executable, "-c", SFTP_SERVER, str(root), str(base / "host_key"),
                                str(base / "authorized_keys")], stdout=subprocess.PIPE, text=True)
    port = process.stdout.readline().strip()
    if not port.isdigit():
        process.kill()
        pytest.fail("the SFTP server did not start")
    yield {"url": f"sftp://fb-test@127.0.0.1:{port}", "root": root, "home": home,
           "key": (home / ".ssh" / "id_ed25519").read_bytes()}
    process.terminate()
    process.wait(timeout=10)


def test_two_hosts_through_a_real_sftp_server_resumed_archived_and_one_paper(sftp_server, fake_server, tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("HOME", str(sftp_server["home"]))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    url = sftp_server["url"] + "/study"
    served = sftp_server["root"] / "study"
    host_a, host_b = (_params(tmp_path, host, url, fake_server.url) for host in ("host-a", "host-b"))

    monkeypatch.setenv("FRONTIER_BENCH_CACHE", str(tmp_path / "machine-1"))
    first = run_suite(load_params(host_a), "text", progress=False)
    assert len(first.requests) == 9
    on_server = served / "host-a" / "fake-model" / "text"
    assert (on_server / "requests.csv").read_bytes() == (first.out_dir / "requests.csv").read_bytes()
    assert {"run.json", "summary.csv", "manifest.json"} <= {p.name for p in on_server.iterdir()}

    # machine 2 holds nothing: the run comes back from the server whole, nothing sent again
    monkeypatch.setenv("FRONTIER_BENCH_CACHE", str(tmp_path / "machine-2"))
    sent = fake_server.counts["requests"]
    again = run_suite(load_params(host_a), "text", progress=False)
    assert again.requests["request_key"].tolist() == first.requests["request_key"].tolist()
    assert again.requests["ttft_s"].tolist() == first.requests["ttft_s"].tolist()
    assert fake_server.counts["requests"] == sent
    run_suite(load_params(host_b), "text", progress=False)

    # --fresh on machine 2: the server's copy is moved aside (a rename on SFTP), a new run takes its place
    renewed = run_suite(load_params(host_a), "text", fresh=True, progress=False)
    archived = sorted(p for p in (served / "host-a" / "fake-model").iterdir() if ".archived-" in p.name)
    assert len(archived) == 1
    assert (archived[0] / "requests.csv").read_bytes() == (first.out_dir / "requests.csv").read_bytes()
    assert (on_server / "requests.csv").read_bytes() == (renewed.out_dir / "requests.csv").read_bytes()
    salts = [json.loads((folder / "run.json").read_text())["salt"] for folder in (archived[0], on_server)]
    assert len(renewed.requests) == 9 and salts[0] != salts[1]  # new prompts: a run started over

    # one paper from the URL on a third machine: both hosts, host A's current run only
    monkeypatch.setenv("FRONTIER_BENCH_CACHE", str(tmp_path / "machine-3"))
    built = paper.assemble(outputs_dir=url, out_dir=tmp_path / "paper")
    assert set(built.runs.meta["host"]) == {"host-a", "host-b"} and built.runs.duplicates == []
    requests = built.runs.requests
    assert len(requests[(requests["host"] == "host-a") & ~requests["is_warmup"]]) == 8
    for path in served.rglob("*"):
        if path.is_file():
            assert sftp_server["key"] not in path.read_bytes(), path
