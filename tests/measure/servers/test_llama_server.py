"""llama.cpp's C++ llama-server as an embedded engine, without compiling it: where the build is cached (the pinned
sdist's hash, this CPU's flags), what the build asks of CMake (real server, nothing downloaded), the command line
(--metrics, the chat template, the projector), the lifecycle around a stand-in binary (free port, ready, /metrics
scraped as llama.cpp's, the process group stopped), the params that choose it, and one-line errors. The real server
runs in tests/integration/test_llama_server_real.py (`make test-llama-server`)."""

import io
import json
import os
import sys
import tarfile
from pathlib import Path

import httpx
import pytest

from benchlib.config.params import EmbeddedParams, ParamsError, load_params, validate
from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure.servers import llama_server
from benchlib.measure.servers.llama_cpp import EmbeddedServerError, group_members
from benchlib.measure.servers.llama_server import CHAT_TEMPLATE, CMAKE_FLAGS, LlamaServer
from benchlib.measure.servers.prometheus import ServerMetrics
from tests.measure.models.test_projector import tiny_model


def test_the_cache_key_is_the_pinned_sdist_and_this_cpu(tmp_path, monkeypatch):
    lock = (PROJECT_ROOT / "requirements" / "llama.txt").read_text()
    sha = llama_server.sdist_sha256()
    assert f"--hash=sha256:{sha}" in lock
    monkeypatch.setenv("FRONTIER_BENCH_CACHE", str(tmp_path))
    key = llama_server.build_dir()
    assert key.parent == tmp_path / "llama-server"
    assert key.name == f"{sha[:16]}-{llama_server.cpu_key()}-{llama_server.recipe_key()}"
    a, b, c = (tmp_path / n for n in "abc")
    a.write_text("processor : 0\nflags : sse avx2 fma\n")
    b.write_text("processor : 1\nflags : fma sse avx2\n")  # the same flags in another order
    c.write_text("flags : sse avx2 fma avx512f\n")
    assert llama_server.cpu_key(a) == llama_server.cpu_key(b) != llama_server.cpu_key(c)


def test_a_lock_without_exactly_one_hash_is_refused(tmp_path):
    lock = tmp_path / "llama.txt"
    lock.write_text("llama-cpp-python==1 \\\n    --hash=sha256:" + "a" * 64 + " \\\n    --hash=sha256:" + "b" * 64)
    with pytest.raises(EmbeddedServerError, match="expected one sha256"):
        llama_server.sdist_sha256(lock)


def test_the_build_asks_for_the_real_server_and_downloads_nothing_more():
    flags = dict(flag[2:].split("=", 1) for flag in CMAKE_FLAGS)
    assert flags["LLAMA_BUILD_SERVER"] == "ON" and flags["LLAMA_BUILD_TOOLS"] == "ON"
    assert flags["LLAMA_USE_PREBUILT_UI"] == "OFF"  # ON downloads the web UI at configure time
    assert flags["LLAMA_CURL"] == "OFF" and flags["LLAMA_OPENSSL"] == "OFF" and flags["LLAMA_BUILD_UI"] == "OFF"
    assert flags["GGML_NATIVE"] == "ON" and flags["BUILD_SHARED_LIBS"] == "OFF"
    assert Path(flags["CMAKE_PROJECT_INCLUDE"]).is_file()


def fake_sdist(folder: Path) -> None:
    """What pip download leaves: llama-cpp-python's sdist with llama.cpp under vendor/."""
    data = b"cmake_minimum_required(VERSION 3.14)\n"
    with tarfile.open(folder / "llama_cpp_python-0.3.36.tar.gz", "w:gz") as archive:
        info = tarfile.TarInfo("llama_cpp_python-0.3.36/vendor/llama.cpp/CMakeLists.txt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))


def test_a_build_downloads_the_pinned_sdist_configures_and_caches_the_binary(tmp_path, monkeypatch):
    ran: list[list[str]] = []

    def run(command, log, cwd=None, env=None):
        ran.append(command)
        if command[1:4] == ["-m", "pip", "download"]:
            fake_sdist(Path(command[command.index("-d") + 1]))
        elif command[:2] == ["cmake", "--build"]:
            (Path(command[2]) / "bin").mkdir(parents=True)
            (Path(command[2]) / "bin" / "llama-server").write_bytes(b"\x7fELF built")
            assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == "3"

    monkeypatch.setattr(llama_server, "_run", run)
    target = tmp_path / "cache" / "key"
    binary = llama_server.build(target, jobs=3)
    assert binary == target / "llama-server" and binary.read_bytes() == b"\x7fELF built"
    download, configure, compile_ = ran
    assert download[download.index("-r") + 1] == str(llama_server.LLAMA_LOCK)
    assert {"--no-deps", "--require-hashes", "--no-binary"} <= set(download)
    assert configure[configure.index("-S") + 1].endswith("vendor/llama.cpp") and set(CMAKE_FLAGS) <= set(configure)
    assert compile_[compile_.index("--target") + 1] == "llama-server"
    info = json.loads((target / "build.json").read_text())
    assert info["cmake_flags"] == list(llama_server.build_flags()) and info["jobs"] == 3 and info["cpu_s"] >= 0
    if llama_server.no_amx_flags():  # x86_64: ggml's AMX kernels are left out of the compile (NO_AMX)
        assert "-DCMAKE_CXX_FLAGS=" + " ".join(llama_server.NO_AMX) in configure
    assert [p.name for p in target.parent.iterdir()] == ["key"]  # the work folder is gone
    ran.clear()
    assert llama_server.build(target) == binary and ran == []  # cached: nothing runs


def test_a_failed_build_step_quotes_its_log(tmp_path, monkeypatch):
    monkeypatch.setattr(llama_server.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    failing = tmp_path / "pip-that-fails"
    failing.write_text("#!/bin/sh\necho 'ERROR: THESE PACKAGES DO NOT MATCH THE HASHES' >&2\nexit 1\n")
    failing.chmod(0o755)
    monkeypatch.setattr(llama_server.sys, "executable", str(failing))
    with pytest.raises(EmbeddedServerError, match="DO NOT MATCH THE HASHES"):
        llama_server.build(tmp_path / "key")
    assert not (tmp_path / "key" / "llama-server").exists()


def settings(binary: Path, **more) -> EmbeddedParams:
    return EmbeddedParams(engine="llama-server", llama_server_binary=str(binary), n_ctx=2048, n_threads=2, **more)


def test_the_command_turns_on_metrics_and_gives_gemma_its_template(tmp_path):
    binary = tmp_path / "llama-server"
    server = LlamaServer(settings(binary, llama_server_args=["--parallel", "1"]), "gemma3-270m", tmp_path / "log")
    command = server.command("/models/g.gguf", 8123)
    assert command[0] == str(binary)
    pairs = dict(zip(command[1::2], command[2::2]))
    assert pairs["--model"] == "/models/g.gguf" and pairs["--alias"] == "gemma3-270m"
    assert pairs["--host"] == "127.0.0.1" and pairs["--port"] == "8123" and pairs["--ctx-size"] == "2048"
    assert pairs["--threads"] == "2" and pairs["--threads-batch"] == "2"
    assert "--metrics" in command and "--jinja" in command and "--mmproj" not in command
    assert command[command.index("--chat-template-file") + 1] == str(CHAT_TEMPLATE)
    assert command[-2:] == ["--parallel", "1"]
    assert server.read_new_timings() == []  # timings come in the stream


def test_chatml_and_the_gguf_s_own_template(tmp_path):
    chatml = LlamaServer(settings(tmp_path / "b", chat_format="chatml"), "m", tmp_path / "log").command("g", 1)
    assert chatml[chatml.index("--chat-template") + 1] == "chatml"
    own = LlamaServer(settings(tmp_path / "b", chat_format=""), "m", tmp_path / "log").command("g", 1)
    assert "--chat-template" not in own and "--chat-template-file" not in own and "--jinja" in own


def test_missing_binary_and_unknown_template_are_one_clear_error(tmp_path):
    with pytest.raises(EmbeddedServerError, match=r"does not exist: run `make llama-server`"):
        LlamaServer(settings(tmp_path / "nope"), "m", tmp_path / "log").start()
    binary = tmp_path / "llama-server"
    binary.write_text("")
    with pytest.raises(EmbeddedServerError, match="chat_format 'vicuna'"):
        LlamaServer(settings(binary, chat_format="vicuna"), "m", tmp_path / "log").prepare()


def test_a_random_projector_is_written_for_the_model_and_passed(tmp_path, monkeypatch):
    monkeypatch.setenv("FRONTIER_BENCH_CACHE", str(tmp_path / "cache"))
    binary = tmp_path / "llama-server"
    binary.write_text("")
    model = tiny_model(tmp_path / "m.gguf", "llama", 96)
    server = LlamaServer(settings(binary, model_path=str(model), mmproj="random"), "m", tmp_path / "log")
    assert server.prepare() == str(model)
    assert server.projector == tmp_path / "cache" / "mmproj" / "random-mmproj-v1-96.gguf"
    command = server.command(str(model), 1)
    assert command[command.index("--mmproj") + 1] == str(server.projector)


STAND_IN = """#!{python}
# stands in for llama-server: records its arguments, serves the fake OpenAI server with llama.cpp's /metrics
import asyncio, json, sys
sys.path.insert(0, {root!r})
from tests.fakes.servers import FakeServer
args = sys.argv[1:]
open({record!r}, "w").write(json.dumps(args))
asyncio.run(FakeServer(port=int(args[args.index("--port") + 1]), metrics="llama.cpp").serve())
"""


def test_started_on_a_free_port_scraped_as_llama_cpp_and_stopped_with_its_group(tmp_path):
    binary, record = tmp_path / "llama-server", tmp_path / "args.json"
    binary.write_text(STAND_IN.format(python=sys.executable, root=str(PROJECT_ROOT), record=str(record)))
    binary.chmod(0o755)
    model = tiny_model(tmp_path / "m.gguf")
    server = LlamaServer(settings(binary, model_path=str(model), startup_timeout_s=60), "m", tmp_path / "server.log")
    url = server.start()
    try:
        group = os.getpgid(server.pid)
        assert group == server.pid  # its own process group
        assert url == f"http://127.0.0.1:{server.port}/v1"
        assert json.loads(record.read_text()) == server.command_line[1:]
        assert httpx.get(f"{url}/models", timeout=5).status_code == 200
        metrics = ServerMetrics(f"http://127.0.0.1:{server.port}", software="llama.cpp")
        assert metrics.available and metrics.software == "llama.cpp"
        metrics.close()
    finally:
        server.stop()
    assert group_members(group) == []


@pytest.mark.parametrize("server, error", [
    ({"embedded": {"engine": "llama-server", "mmproj": "random"}}, "server.weights: random"),
    ({"weights": "random", "embedded": {"engine": "llama.cpp", "mmproj": "random"}}, "engine: llama-server"),
])
def test_a_random_projector_must_be_declared(server, error):
    raw = {"host": {"name": "h"}, "server": {"kind": "embedded", "model": "m", **server}}
    with pytest.raises(ParamsError, match=error):
        validate(raw)


@pytest.mark.parametrize("name", ["embedded-llama-server.yaml", "embedded-llama-server-smollm2.yaml",
                                  "embedded-llama-server-mm.yaml"])
def test_the_params_files_choose_llama_server(name):
    params = load_params(PROJECT_ROOT / "params" / name)
    assert params.server.embedded.engine == "llama-server" and params.server.software == "llama.cpp"
    if name.endswith("-mm.yaml"):
        assert params.server.weights == "random" and params.server.embedded.mmproj == "random"
        assert set(params.server.modalities) == {"text", "vision", "audio", "video"}
        assert params.server.extra_body == {"cache_prompt": False}
