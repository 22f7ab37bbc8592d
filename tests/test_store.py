"""The results store (benchlib.records.store): rules on memory://, bundles, and a real S3-compatible server (moto's,
started as its own process) holding two hosts' runs, one of them killed and resumed from the store on another
"machine", and one paper assembled from the URL; the same through a real SFTP server (asyncssh's, its own process),
where a folder is moved aside by a rename."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import asyncssh
import fsspec
import httpx
import pytest
import yaml

from benchlib import paper
from benchlib.records import store
from benchlib.cli import main as cli_main
from benchlib.config.params import load_params
from benchlib.config.paths import PROJECT_ROOT
from benchlib.records.rows import read_requests
from benchlib.suites.runner import run_suite

SECRET = "fb-store-secret-Zq81Kd"  # the S3 secret key: it must never reach a file, a row or the terminal


# ---- rules, on fsspec's memory file system -----------------------------------------------------------------

def test_a_url_carrying_a_secret_is_refused_in_one_line(monkeypatch):
    for url in ("s3://user:pw@bucket/runs", "s3://bucket/runs?secret_access_key=abc", "gs://b/x?token=t"):
        with pytest.raises(store.StoreError) as info:
            store.configured(url)
        assert "\n" not in str(info.value) and "pw" not in str(info.value) and "abc" not in str(info.value)
    monkeypatch.setenv(store.ENV, "memory://study/")
    assert store.configured("") == "memory://study" and store.configured("s3://b/x") == "s3://b/x"
    assert store.redact("sftp://me@host:2222/data?x=1") == "sftp://host:2222/data"


def test_push_then_pull_follows_the_rule_per_file(tmp_path):
    url = "memory://rules/h/m/text"
    here = tmp_path / "here"
    (here / "sub").mkdir(parents=True)
    (here / "requests.csv").write_text("a\n1\n2\n")
    (here / "run.json").write_text('{"run_id": "r1"}')
    (here / "sub" / "img.png").write_bytes(b"\x89PNG")
    sent: dict = {}
    assert sorted(store.push(here, url, sent)) == ["requests.csv", "run.json", "sub/img.png"]
    assert store.push(here, url, sent) == []  # nothing changed, nothing sent
    elsewhere = tmp_path / "elsewhere"
    assert sorted(store.pull(url, elsewhere)) == ["requests.csv", "run.json", "sub/img.png"]
    assert (elsewhere / "requests.csv").read_text() == "a\n1\n2\n"
    # the store holds more rows than this copy (the other host went on): the longer log comes back
    fs = fsspec.filesystem("memory")
    fs.pipe_file("/rules/h/m/text/requests.csv", b"a\n1\n2\n3\n")
    assert store.pull(url, elsewhere) == ["requests.csv"]
    assert (elsewhere / "requests.csv").read_text() == "a\n1\n2\n3\n"
    # this copy holds rows the store has not seen yet: they stay
    (elsewhere / "requests.csv").write_text("a\n1\n2\n3\n4\n")
    assert store.pull(url, elsewhere) == [] and (elsewhere / "requests.csv").read_text().endswith("4\n")
    # diverging logs: refused, nothing overwritten
    (elsewhere / "requests.csv").write_text("a\n1\n9\n")
    with pytest.raises(store.StoreConflict, match="diverge"):
        store.pull(url, elsewhere)
    assert (elsewhere / "requests.csv").read_text() == "a\n1\n9\n"
    # a non-log file that exists here is kept (ours is the one that gets pushed)
    (elsewhere / "run.json").write_text('{"run_id": "r1", "local": true}')
    store.pull("memory://rules/h/m/text", elsewhere.parent / "third")
    assert json.loads((elsewhere / "run.json").read_text())["local"] is True


@pytest.mark.parametrize("scheme", ["memory", "file"])
def test_archive_moves_the_stores_copy_aside_files_and_folders(tmp_path, scheme):
    url = f"memory://archive-{tmp_path.name}/h/m/text" if scheme == "memory" else f"file://{tmp_path}/store/h/m/text"
    here = tmp_path / "here"
    (here / "sub").mkdir(parents=True)
    (here / "requests.csv").write_text("a\n1\n")
    (here / "sub" / "img.png").write_bytes(b"\x89PNG")
    store.push(here, url)
    assert store.archive(url, "20260101-000000").endswith("/h/m/text.archived-20260101-000000")
    back = tmp_path / "back"
    assert sorted(store.pull(f"{url}.archived-20260101-000000", back)) == ["requests.csv", "sub/img.png"]
    assert (back / "requests.csv").read_text() == "a\n1\n" and (back / "sub" / "img.png").read_bytes() == b"\x89PNG"
    assert store.pull(url, tmp_path / "empty") == []  # nothing left where the run was
    assert store.archive(url, "20260101-000001") is None  # nothing to move


def test_mirror_pushes_while_running_and_at_exit(tmp_path):
    url = "memory://mirror/h/m/text"
    here = tmp_path / "suite"
    here.mkdir()
    fs = fsspec.filesystem("memory")
    with store.Mirror(here, url, every_s=0.05) as mirror:
        (here / "requests.csv").write_text("a\n1\n")
        deadline = time.monotonic() + 5
        while not fs.exists("/mirror/h/m/text/requests.csv") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert fs.cat_file("/mirror/h/m/text/requests.csv") == b"a\n1\n"  # while the run goes on
        (here / "summary.csv").write_text("task\nqa\n")
    assert fs.cat_file("/mirror/h/m/text/summary.csv") == b"task\nqa\n" and mirror.errors == []


def _suite(root: Path, host: str, run_id: str, suite: str = "text") -> Path:
    folder = root / host / "m" / suite
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"run_id": run_id}))
    (folder / "requests.csv").write_text("request_key\nk1\n")
    return folder


def test_bundle_and_import_merge_once_and_refuse_a_different_run(tmp_path, monkeypatch, capsys):
    source, target = tmp_path / "a", tmp_path / "b"
    _suite(source, "host-a", "r1")
    _suite(source, "host-a", "r1", "quality")
    (source / "host-a" / "m" / "text.archived-20260101-000000").mkdir()
    (source / "host-a" / "m" / "text.archived-20260101-000000" / "requests.csv").write_text("old\n")
    (source / "host-a" / "m" / ".text.lock").write_text("PID 1")
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(source))
    archive = tmp_path / "host-a.tar.gz"
    assert cli_main(["bundle", "host-a", "-o", str(archive)]) == 0
    with tarfile.open(archive) as handle:
        names = handle.getnames()
    assert sorted(names) == ["host-a/m/quality/requests.csv", "host-a/m/quality/run.json",
                             "host-a/m/text/requests.csv", "host-a/m/text/run.json"]  # no archive, no lock
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(target))
    assert cli_main(["import", str(archive)]) == 0
    assert (target / "host-a" / "m" / "text" / "requests.csv").read_text() == "request_key\nk1\n"
    assert cli_main(["import", str(archive)]) == 0  # the same runs again: counted once
    assert "already here (same run id, counted once): host-a/m/text" in capsys.readouterr().out
    # another run in the same folder: refused, nothing written
    other = tmp_path / "c"
    _suite(other, "host-a", "r2")
    (other / "host-a" / "m" / "text" / "requests.csv").write_text("request_key\nzz\n")
    assert store.bundle(other, "host-a", tmp_path / "other.tar.gz") == 2
    assert cli_main(["import", str(tmp_path / "other.tar.gz")]) == 2
    assert "holds run r1, the bundle's holds run r2" in capsys.readouterr().err
    assert (target / "host-a" / "m" / "text" / "requests.csv").read_text() == "request_key\nk1\n"
    # a member that leaves the root is refused before anything is written
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as handle:
        data = b"x"
        info = tarfile.TarInfo("../outside.txt")
        info.size = len(data)
        handle.addfile(info, io.BytesIO(data))
    with pytest.raises(store.StoreError, match="refusing member"):
        store.import_bundle(evil, target)
    assert not (tmp_path / "outside.txt").exists()


def test_paper_reads_several_roots_and_counts_a_run_found_twice_once(tmp_path):
    first, second = tmp_path / "one", tmp_path / "two"
    for root in (first, second):
        folder = _suite(root, "host-a", "r1")
        (folder / "summary.csv").write_text("task,n_ok\nbasic_qa,1\n")
    _suite(second, "host-b", "r9")
    runs = paper.load_runs([first, second])
    assert runs.duplicates == [f"host-a/m/text (run r1) in {second} and {first}"]
    assert runs.roots == [str(first), str(second)]
    assert "counted once (found twice): host-a/m/text" in paper.runs_text(runs)


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
