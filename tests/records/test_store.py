"""The results store (benchlib.records.store): its rules on fsspec's memory file system, bundles, and a paper
read from several roots. The same store against real S3 and SFTP servers: integration/test_store_servers.py."""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path

import fsspec
import pytest

from benchlib import paper
from benchlib.cli import main as cli_main
from benchlib.records import store
from benchlib.records.secrets import redact_url

# ---- rules, on fsspec's memory file system -----------------------------------------------------------------

def test_a_url_carrying_a_secret_is_refused_in_one_line(monkeypatch):
    for url in ("s3://user:pw@bucket/runs", "s3://bucket/runs?secret_access_key=abc", "gs://b/x?token=t"):
        with pytest.raises(store.StoreError) as info:
            store.configured(url)
        assert "\n" not in str(info.value) and "pw" not in str(info.value) and "abc" not in str(info.value)
    monkeypatch.setenv(store.ENV, "memory://study/")
    assert store.configured("") == "memory://study" and store.configured("s3://b/x") == "s3://b/x"
    assert redact_url("sftp://me@host:2222/data?x=1") == "sftp://host:2222/data"


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


# ---- nothing lost, nothing leaked: pushes, pulls and imports cut short or fed a hostile file -------------------

def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as handle:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            handle.addfile(info, io.BytesIO(data))
    return path


FINISHED = {"run.json": b'{"run_id": "r1"}', "requests.csv": b"request_key\nk1\nk2\n", "summary.csv": b"task\nqa\n",
            "windows.csv": b"window\nqa\n", "telemetry.csv": b"t\n1\n", "sensors.json": b"{}",
            "text.ipynb": b'{"cells": []}'}


def _finished(root: Path) -> Path:
    folder = root / "host-a" / "m" / "text"
    folder.mkdir(parents=True)
    for name, data in FINISHED.items():
        (folder / name).write_bytes(data)
    return folder


def test_a_push_cut_short_never_leaves_a_cut_file_in_the_store(tmp_path, monkeypatch):
    from fsspec.implementations.local import LocalFileSystem

    url, here = f"file://{tmp_path}/store/h/m/text", tmp_path / "here"
    here.mkdir()
    (here / "requests.csv").write_text("a\n1\n")
    (here / "run.json").write_text('{"run_id": "r1"}')
    store.push(here, url)
    (here / "requests.csv").write_text("a\n1\n2\n")
    real = LocalFileSystem.pipe_file

    def killed(self, path, value, **kwargs):  # half the bytes reach the disk, then the process dies
        real(self, path, value[: len(value) // 2], **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalFileSystem, "pipe_file", killed)
    with pytest.raises(KeyboardInterrupt):
        store.push(here, url)
    monkeypatch.undo()
    assert (tmp_path / "store" / "h" / "m" / "text" / "requests.csv").read_text() == "a\n1\n"  # whole, the old one
    assert sorted(store.pull(url, tmp_path / "elsewhere")) == ["requests.csv", "run.json"]  # the cut copy stays out
    assert "requests.csv" in store.push(here, url)
    assert (tmp_path / "store" / "h" / "m" / "text" / "requests.csv").read_text() == "a\n1\n2\n"


def test_an_emptied_run_json_in_the_store_is_one_line_and_pulls_nothing(tmp_path):
    url = f"file://{tmp_path}/store/h/m/text"
    folder = tmp_path / "store" / "h" / "m" / "text"
    folder.mkdir(parents=True)
    (folder / "requests.csv").write_text("a\n1\n")
    (folder / "run.json").write_bytes(b"")
    with pytest.raises(store.StoreError) as error:
        store.pull(url, tmp_path / "elsewhere")
    assert "\n" not in str(error.value) and "run.json is empty or not a run's identity (0 bytes" in str(error.value)
    assert not (tmp_path / "elsewhere").exists()


def test_an_archive_without_a_runs_identity_never_overwrites_a_finished_folder(tmp_path, monkeypatch, capsys):
    target = tmp_path / "outputs"
    folder = _finished(target)
    bundle = _tar(tmp_path / "b.tar.gz", {"host-a/m/text/requests.csv": b"request_key\n",
                                          "host-a/m/text/summary.csv": b"", "host-a/m/quality/requests.csv": b"x\n"})
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(target))
    assert cli_main(["import", str(bundle)]) == 1
    captured = capsys.readouterr()
    assert "skipped host-a/m/text: the bundle holds no run.json for it (the run's identity); nothing of it " \
           "written" in captured.err and "0 suite folder(s) imported, 0 completed, 2 skipped" in captured.out
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == FINISHED  # untouched
    assert not (target / "host-a" / "m" / "quality").exists()


def test_an_import_killed_midway_is_completed_by_the_next(tmp_path, monkeypatch, capsys):
    source, target = tmp_path / "a", tmp_path / "b"
    _finished(source)
    bundle = tmp_path / "host-a.tar.gz"
    store.bundle(source, "host-a", bundle)
    # what an import killed after run.json and requests.csv left: the energy, telemetry and notebook missing
    here = target / "host-a" / "m" / "text"
    here.mkdir(parents=True)
    (here / "run.json").write_bytes(FINISHED["run.json"])
    (here / "requests.csv").write_bytes(b"request_key\nk1\n")  # cut back to fewer rows than the bundle's
    (target / ".import-999999999-dead").mkdir()  # the staging folder of an import killed by SIGKILL
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(target))
    assert cli_main(["import", str(bundle)]) == 0
    assert "completed host-a/m/text (same run id: the files this copy lacked were added)" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in here.iterdir()} == FINISHED
    assert [p.name for p in target.iterdir()] == ["host-a"]  # no staging folder left
    assert cli_main(["import", str(bundle)]) == 0
    assert "already here (same run id, counted once): host-a/m/text" in capsys.readouterr().out
    # killed while extracting: nothing is in place, and the next import brings everything
    other = tmp_path / "c"
    calls = {"n": 0}
    real = store._extract

    def killed(*args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        real(*args)

    monkeypatch.setattr(store, "_extract", killed)
    with pytest.raises(KeyboardInterrupt):
        store.import_bundle(bundle, other)
    assert [p for p in other.rglob("*") if p.is_file()] == []
    monkeypatch.undo()
    assert store.import_bundle(bundle, other).added == ["host-a/m/text"]
    assert {p.name: p.read_bytes() for p in (other / "host-a" / "m" / "text").iterdir()} == FINISHED


def test_a_bundle_member_is_streamed_and_capped(tmp_path, monkeypatch):
    import tracemalloc

    big = 48 << 20  # 48 MB of zeros: 48 KB compressed
    bundle = _tar(tmp_path / "big.tar.gz", {"host-a/m/text/run.json": b'{"run_id": "r1"}',
                                            "host-a/m/text/.ipynb_checkpoints/text-checkpoint.ipynb": b"{}",
                                            "host-a/m/text/telemetry.csv": bytes(big)})
    assert bundle.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        store.import_bundle(bundle, tmp_path / "outputs")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (tmp_path / "outputs" / "host-a" / "m" / "text" / "telemetry.csv").stat().st_size == big
    assert peak < big // 4, f"peak {peak} bytes: the member was read whole"
    assert sorted(p.name for p in (tmp_path / "outputs" / "host-a" / "m" / "text").iterdir()) == \
        ["run.json", "telemetry.csv"]  # a hidden member is no result: left out
    monkeypatch.setattr(store, "_free_bytes", lambda path: 100 << 20)
    with pytest.raises(store.StoreError, match=r"its files need 50,331,664 bytes uncompressed and .* has "
                                               r"104,857,600 free; nothing written"):
        store.import_bundle(bundle, tmp_path / "elsewhere")
    monkeypatch.undo()
    monkeypatch.setattr(store, "MAX_MEMBER_BYTES", 1 << 20)
    with pytest.raises(store.StoreError, match=r"big.tar.gz: host-a/m/text/telemetry.csv is 50,331,648 bytes "
                                               r"uncompressed \(at most 1,048,576 a file, .*\); nothing written"):
        store.import_bundle(bundle, tmp_path / "elsewhere")
    assert not any(p.is_file() for p in (tmp_path / "elsewhere").rglob("*"))


@pytest.mark.parametrize("what", ["not a tar", "cut short", "clashes with a file here"])
def test_a_bundle_that_fails_anywhere_writes_nothing_and_says_so_in_one_line(tmp_path, monkeypatch, capsys, what):
    target = tmp_path / "outputs"
    target.mkdir()
    members = {f"host-{i}/m/text/{name}": data for i in range(3) for name, data in FINISHED.items()}
    members["host-2/m/text/windows.csv"] = bytes(range(256)) * 4096  # 1 MB that gzip cannot shrink
    bundle = _tar(tmp_path / "b.tar.gz", members)
    if what == "not a tar":
        bundle.write_text("hello, this is a text file\n")
    elif what == "cut short":
        bundle.write_bytes(bundle.read_bytes()[: bundle.stat().st_size // 2])
    else:  # the last folder's windows.csv would land where a folder is
        (target / "host-2" / "m" / "text" / "windows.csv").mkdir(parents=True)
        (target / "host-2" / "m" / "text" / "run.json").write_bytes(FINISHED["run.json"])
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(target))
    assert cli_main(["import", str(bundle)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {bundle}: "), err
    assert not any(p.is_file() for p in target.rglob("*") if p.name != "run.json"), "written before failing"
    assert sorted(p.name for p in target.iterdir()) == ([] if what != "clashes with a file here" else ["host-2"])
