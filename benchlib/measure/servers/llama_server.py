"""llama.cpp's own C++ `llama-server` as an embedded engine (server.embedded.engine: llama-server): the server most
llama.cpp users run, on the same packaged GGUFs as llama-cpp-python's Python server.

Built here, once per machine, from the llama.cpp tree inside the llama-cpp-python sdist that requirements/llama.txt
pins by sha256 (vendor/llama.cpp: no other download), and cached in
cache_dir()/llama-server/<sdist sha256, 16 hex>-<CPU flags hash>-<recipe hash>/ (`make llama-server`, or
`python -m benchlib.measure.servers.llama_server build`). Only the llama-server target is compiled, statically
linked, GGML_NATIVE less the AMX kernels (NO_AMX says why), without curl, OpenSSL or the web UI (whose prebuilt copy would be downloaded at configure
time), ggml in unity builds (tools/llama_server_build.cmake); build.json beside the binary keeps the flags and
the build's wall and CPU seconds.

The lifecycle is EmbeddedServer's (free 127.0.0.1 port, own process group, PR_SET_PDEATHSIG, bounded wait on
/v1/models with the log tail, group stop, log beside the results); what differs is the command: `--metrics` (its
/metrics is scraped like vLLM's: benchlib.measure.servers.prometheus), the chat template (Gemma's packaged GGUF carries none:
the project's template file, as vLLM gets it), and with server.embedded.mmproj: random a random-weights projector
(benchlib.measure.models.projector) so images and audio go through mtmd. Per-request server timings come in the
stream itself (the last chunk's `timings`, read by the chat backend), not from the log."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from benchlib.config.params import EmbeddedParams
from benchlib.config.paths import PROJECT_ROOT, cache_dir
from benchlib.measure.models.projector import projector_for
from benchlib.measure.servers.llama_cpp import EmbeddedServer, EmbeddedServerError, ServerTimings

LLAMA_LOCK = PROJECT_ROOT / "requirements" / "llama.txt"
BUILD_INCLUDE = PROJECT_ROOT / "tools" / "llama_server_build.cmake"
CHAT_TEMPLATE = PROJECT_ROOT / "tools" / "gemma_chat_template.jinja"
BINARY = "llama-server"

# What the build asks of llama.cpp's CMake (option names from the vendored CMakeLists.txt). The UI stays out:
# LLAMA_USE_PREBUILT_UI defaults to ON and downloads it at configure time.
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=ON",
    "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF", f"-DCMAKE_PROJECT_INCLUDE={BUILD_INCLUDE}",
)
BUILD_TIMEOUT_S = 3 * 3600

# AMX kernels off. GGML_NATIVE compiles ggml-cpu's AMX kernels in wherever /proc/cpuinfo lists amx_tile, and ggml then
# repacks the weights for them; on a VM that lists AMX without running its tile instructions (this project's Intel Xeon
# draw of the 2-core machine: "invalid opcode" at tilezero in ggml-cpu's AMX matmul on the first request) the server
# dies mid-answer. The wheel's build (Makefile, NO_AMX) and this one leave them out alike; on a host where AMX works
# this gives up its speed-up for the Q4_0/Q8_0 matmuls, which the measured deployments then run on AVX-512 instead.
NO_AMX = ("-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16")


# The CUDA build of llama-server for one GPU architecture (bench/gpu_check.py, on a GPU machine or here with nvcc):
# no GGML_NATIVE (a binary compiled here runs on another CPU; x86-64-v3 is what every H100/H200 host has, and with
# every layer offloaded the CPU's kernels hardly run), flash-attention kernels only for the f16 KV cache the
# deployments use (GGML_CUDA_FA_QUANTS: one vec instance instead of four), no NCCL (one GPU).
CUDA_FLAGS = (
    "-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON",
    "-DGGML_CUDA=ON", "-DGGML_CUDA_FA_QUANTS=f16-f16", "-DGGML_CUDA_NCCL=OFF",
)


def cuda_build_flags(arch: str) -> tuple[str, ...]:
    """CMAKE_FLAGS for a CUDA build for compute capability `arch` only (90: H100, H200)."""
    if not re.fullmatch(r"[0-9]{2,3}[af]?", arch):
        raise ValueError(f"CUDA architecture {arch!r}: a compute capability such as 90")
    cpu = tuple(f for f in CMAKE_FLAGS if not f.startswith("-DGGML_NATIVE="))
    return cpu + CUDA_FLAGS + (f"-DCMAKE_CUDA_ARCHITECTURES={arch}",)


# What a llama-server build never reads (so a trimmed tree travels in a few MiB): the vocab GGUFs of llama.cpp's own
# tests (models/, 75 MB), docs, examples, tests, Python converters, the web UI's sources (LLAMA_BUILD_UI stays OFF;
# its CMakeLists and scripts/ui-assets.cmake stay, tools/CMakeLists.txt adds it), and every ggml backend but the
# CPU and CUDA ones (each is added only when its GGML_<NAME> option is ON).
TRIM = ("models", "docs", "media", "benches", "examples", "tests", "pocs", "gguf-py", "conversion", "ci", "skills",
        "requirements", ".github", "tools/ui/src", "tools/ui/tests", "tools/ui/static", "tools/ui/package-lock.json",
        "tools/server/tests", "tools/server/bench", "tools/server/public", "tools/server/webui", "tools/mtmd/tests",
        "tools/mtmd/test-1.jpeg", "tools/mtmd/test-2.mp3", "tools/mtmd/test-3.mp4",
        *(f"ggml/src/ggml-{name}" for name in ("blas", "cann", "et", "hexagon", "hip", "metal", "musa", "opencl",
                                                "openvino", "rpc", "sycl", "virtgpu", "vulkan", "webgpu", "zdnn",
                                                "zendnn", "kompute")))


def trim_source(source: Path, dest: Path) -> Path:
    """A copy of the llama.cpp tree `source` at `dest` without TRIM's paths (absent ones are skipped)."""
    source, dest = Path(source), Path(dest)
    if not (source / "CMakeLists.txt").is_file():
        raise EmbeddedServerError(f"{source} is not a llama.cpp tree (no CMakeLists.txt)")
    left_out = {(source / path).resolve() for path in TRIM}

    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if (Path(folder) / n).resolve() in left_out or n.endswith(".py")}

    shutil.copytree(source, dest, ignore=ignore, symlinks=True)
    return dest


def no_amx_flags(compiler: str = "c++") -> tuple[str, ...]:
    """NO_AMX where the build targets x86_64 and the compiler knows the flags, else ()."""
    if platform.machine() not in ("x86_64", "AMD64") or shutil.which(compiler) is None:
        return ()
    probe = subprocess.run([compiler, *NO_AMX, "-x", "c++", "-E", "-"], input=b"", capture_output=True, check=False)
    return NO_AMX if probe.returncode == 0 else ()


def build_flags() -> tuple[str, ...]:
    """CMAKE_FLAGS and the compiler flags (NO_AMX) this build is configured with."""
    extra = " ".join(no_amx_flags())
    return CMAKE_FLAGS + ((f"-DCMAKE_C_FLAGS={extra}", f"-DCMAKE_CXX_FLAGS={extra}") if extra else ())


def recipe_key() -> str:
    """8 hex of how the binary is built (build_flags and the CMake include's text): a binary built another way, e.g.
    before NO_AMX, is never taken for this one."""
    basis = "\n".join(build_flags()) + "\n" + BUILD_INCLUDE.read_text(encoding="utf-8")
    return hashlib.sha256(basis.encode()).hexdigest()[:8]

# chat_format → llama-server's template flags. Only "chatml" is a name llama-server resolves itself when templates
# are Jinja (its default); "" keeps the GGUF's own template.
TEMPLATES: dict[str, list[str]] = {
    "gemma": ["--jinja", "--chat-template-file", str(CHAT_TEMPLATE)],
    "chatml": ["--jinja", "--chat-template", "chatml"],
    "": ["--jinja"],
}


def sdist_sha256(lock: Path = LLAMA_LOCK) -> str:
    """The sha256 the lock pins for llama-cpp-python's sdist."""
    found = re.findall(r"--hash=sha256:([0-9a-f]{64})", lock.read_text(encoding="utf-8"))
    if len(found) != 1:
        raise EmbeddedServerError(f"{lock}: expected one sha256 for llama-cpp-python, found {len(found)}")
    return found[0]


def cpu_key(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """12 hex of the CPU's feature flags: GGML_NATIVE compiles for this CPU, so another CPU gets its own build."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.split(":", 1)[0].strip() in ("flags", "Features")), [])
    basis = platform.machine() + " " + " ".join(sorted(flags))
    return hashlib.sha256(basis.encode()).hexdigest()[:12]


def build_dir(lock: Path = LLAMA_LOCK) -> Path:
    return cache_dir() / "llama-server" / f"{sdist_sha256(lock)[:16]}-{cpu_key()}-{recipe_key()}"


def binary_path(settings: EmbeddedParams | None = None) -> Path:
    """The binary a deployment runs: server.embedded.llama_server_binary, else the cached build."""
    if settings is not None and settings.llama_server_binary:
        return Path(settings.llama_server_binary)
    return build_dir() / BINARY


def _run(command: list[str], log: Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    with log.open("ab") as out:
        out.write(("$ " + " ".join(command) + "\n").encode())
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                              env=env, timeout=BUILD_TIMEOUT_S, check=False)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-25:])
        raise EmbeddedServerError(f"{command[0]} {command[1] if len(command) > 1 else ''} failed "
                                  f"(exit {done.returncode}); log {log}, tail:\n{tail}")


def fetch_source(work: Path, log: Path, lock: Path = LLAMA_LOCK) -> Path:
    """The pinned sdist's vendor/llama.cpp, unpacked under `work`: pip downloads the sdist the lock pins (hash-checked;
    pip's cache usually has it from the wheel's build)."""
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", "llama-cpp-python",
          "--require-hashes", "-r", str(lock), "-d", str(work)], log)
    sdists = sorted(work.glob("llama_cpp_python-*.tar.gz"))
    if len(sdists) != 1:
        raise EmbeddedServerError(f"pip download left {len(sdists)} llama-cpp-python sdists in {work}")
    with tarfile.open(sdists[0]) as archive:
        archive.extractall(work / "src", filter="data")
    source = next((work / "src").glob("*/vendor/llama.cpp"), None)
    if source is None or not (source / "CMakeLists.txt").is_file():
        raise EmbeddedServerError(f"{sdists[0].name} has no vendor/llama.cpp")
    return source


def compile_server(source: Path, target: Path, flags: tuple[str, ...], *, jobs: int | None = None,
                   log: Path | None = None, extra: dict | None = None, build_root: Path | None = None) -> Path:
    """Configure `source` (a llama.cpp tree) with `flags`, compile only the llama-server target, `jobs` at a time
    (CMAKE_BUILD_PARALLEL_LEVEL, else all cores), and put the binary and build.json (flags, wall and CPU seconds,
    `extra`) into `target`. The build folder is `build_root`, kept (a build cut short resumes there), else
    target/../<name>.work-<pid>, removed afterwards."""
    target.mkdir(parents=True, exist_ok=True)
    work = Path(build_root) if build_root else target.with_name(target.name + f".work-{os.getpid()}")
    log = log or target / "build.log"
    parallel = str(jobs or os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or os.cpu_count() or 1)
    env = {**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": parallel}
    wall0, cpu0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    try:
        _run(["cmake", "-S", str(source), "-B", str(work / "build"), *generator, *flags], log, env=env)
        _run(["cmake", "--build", str(work / "build"), "--target", BINARY, "-j", parallel], log, env=env)
        built = work / "build" / "bin" / BINARY
        if not built.is_file():
            raise EmbeddedServerError(f"the build finished without {built}; log {log}")
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        info = {**(extra or {}), "cmake_flags": list(flags), "jobs": int(parallel),
                "wall_s": round(time.monotonic() - wall0, 1),
                "cpu_s": round((cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime), 1),
                "binary_bytes": built.stat().st_size}
        tmp = target / f".{BINARY}.{os.getpid()}.tmp"
        shutil.copy2(built, tmp)
        os.replace(tmp, target / BINARY)
        (target / "build.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    finally:
        if not build_root:
            shutil.rmtree(work, ignore_errors=True)
    return target / BINARY


def build(target: Path | None = None, *, jobs: int | None = None, lock: Path = LLAMA_LOCK) -> Path:
    """The llama-server binary, built now when the cache has none: the pinned sdist's vendor/llama.cpp
    (fetch_source) configured with build_flags() and compiled (compile_server)."""
    target = Path(target) if target else build_dir(lock)
    binary = target / BINARY
    if binary.is_file():
        return binary
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise EmbeddedServerError(f"building llama-server needs {tool} on PATH (apt-get install cmake g++)")
    target.mkdir(parents=True, exist_ok=True)
    fetched = target.with_name(target.name + f".src-{os.getpid()}")
    shutil.rmtree(fetched, ignore_errors=True)
    fetched.mkdir(parents=True)
    log = target / "build.log"
    log.write_bytes(b"")
    try:
        source = fetch_source(fetched, log, lock)
        compile_server(source, target, build_flags(), jobs=jobs, log=log,
                       extra={"sdist_sha256": sdist_sha256(lock), "cpu_key": cpu_key()})
    finally:
        shutil.rmtree(fetched, ignore_errors=True)
    return binary


def build_info(binary: Path) -> dict:
    """build.json beside a cached binary (flags, wall and CPU seconds); {} for a binary built elsewhere."""
    try:
        return json.loads((binary.parent / "build.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


class LlamaServer(EmbeddedServer):
    """EmbeddedServer's lifecycle around llama.cpp's C++ llama-server."""

    def __init__(self, settings: EmbeddedParams, model_alias: str, log_path: Path):
        super().__init__(settings, model_alias, log_path)
        self.projector: Path | None = None

    def prepare(self) -> str:
        binary = binary_path(self.settings)
        if not binary.is_file():
            raise EmbeddedServerError(f"server.embedded.engine is llama-server but {binary} does not exist: run "
                                      "`make llama-server` (builds it once from the pinned llama-cpp-python sdist) "
                                      "or set server.embedded.llama_server_binary")
        if self.settings.chat_format not in TEMPLATES:
            raise EmbeddedServerError(f"server.embedded.chat_format {self.settings.chat_format!r}: llama-server takes "
                                      f"{', '.join(repr(k) for k in TEMPLATES)} here ('' = the GGUF's own template)")
        model = self.gguf()
        if self.settings.mmproj == "random":
            self.projector = projector_for(model, cache_dir() / "mmproj")
        return str(model)

    def command(self, model_path: str, port: int) -> list[str]:
        threads = str(self.settings.n_threads or os.cpu_count() or 1)
        projector = ["--mmproj", str(self.projector)] if self.projector else []
        return [str(binary_path(self.settings)), "--model", model_path, "--alias", self.model_alias,
                "--host", "127.0.0.1", "--port", str(port), "--ctx-size", str(self.settings.n_ctx),
                "--threads", threads, "--threads-batch", threads, "--metrics", "--no-webui",
                *TEMPLATES[self.settings.chat_format], *projector, *self.settings.llama_server_args]

    def read_new_timings(self, expected: int = 1, wait_s: float = 0.5) -> list[ServerTimings]:
        return []  # llama-server sends each request's timings in its last stream chunk (benchlib.measure.client.backends)


def main(argv: list[str]) -> int:
    if argv[:1] != ["build"] or len(argv) > 1:
        print("usage: python -m benchlib.measure.servers.llama_server build", file=sys.stderr)
        return 2
    binary = build_dir() / BINARY
    cached = binary.is_file()
    if not cached:
        print(f"building llama-server from the pinned llama-cpp-python sdist into {binary.parent} "
              f"(log: build.log there)…", flush=True)
    build()
    info = build_info(binary)
    how = "cached" if cached else "built"
    cost = f": {info['wall_s']:.0f} s wall, {info['cpu_s']:.0f} CPU-s on {info['jobs']} jobs" if info else ""
    print(f"llama-server {how}: {binary}{cost}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
