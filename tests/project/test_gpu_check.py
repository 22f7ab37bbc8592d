"""`make gpu-check`'s here-testable parts (bench/gpu_check.py, bench/gpu_steps.py, bench/gpu_telemetry_check.py): the
pack's size accounting against the 64 MiB a command carries, the dry run's plan, the trimmed llama.cpp tree and the
CUDA flags, the GPU side's phases under their time limits (a phase cut short is a row, what needs it is skipped), the
deployment params it writes, the bundle it returns going through `frontier-bench import`, and the telemetry check's
arithmetic on the fake NVML. The GPU run itself is the last step, on a lent machine."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile

import pytest

from benchlib.cli import main as cli_main
from benchlib.config.params import load_params
from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure.servers import llama_server
from tests.fakes.fake_nvml import FakeGpu, FakeNvml
from tests.fakes.synthetic_run import SYN_HOST, write_synthetic_run

MiB = 1 << 20


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, PROJECT_ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


gpu_check = _script("gpu_check")
gpu_steps = _script("gpu_steps")
telemetry_check = _script("gpu_telemetry_check")


def test_the_orchestrator_imports_only_the_standard_library():
    # it runs on the GPU machine's bare Python before any wheel is installed
    code = ("import sys; sys.path.insert(0, 'bench'); import gpu_check; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'benchlib', 'pandas', 'numpy', 'yaml', "
            "'pydantic', 'gguf'}); print(bad)")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_file_too_big_for_one_command_is_split_across_the_next():
    assert gpu_check.split_sizes(93 * MiB, 30 * MiB) == [30 * MiB, 63 * MiB]
    assert gpu_check.split_sizes(10 * MiB, 30 * MiB) == [10 * MiB]
    assert gpu_check.split_sizes(94 * MiB, 15 * MiB) == [15 * MiB, 63 * MiB, 16 * MiB]  # a third command
    with pytest.raises(SystemExit, match="needs 3 commands"):
        gpu_check.split_sizes(94 * MiB, 15 * MiB, parts=2)


def test_the_accounting_names_the_part_over_the_limit():
    packed = gpu_check.Packed()
    packed.add(1, "wheels/a.whl", 40 * MiB)
    packed.add(1, "llama.cpp.tar.xz", 20 * MiB)
    packed.add(2, "smollm2.gguf.part2", 60 * MiB)
    assert gpu_check.account(packed) == []
    packed.add(1, "tokenizer-smollm2.gguf", 5 * MiB)
    assert gpu_check.account(packed) == ["part 1: 65.0 MiB is over the 64.0 MiB a command carries beside the "
                                         "working tree"]
    assert gpu_check.account(packed, 64 * MiB - 5 * MiB)[0].startswith("part 1: 65.0 MiB is over the 59.0 MiB")


def test_the_working_tree_that_travels_with_each_command_is_counted():
    tree = gpu_check.tree_bytes()
    assert 1 * MiB < tree < 32 * MiB  # the repository's own files, not .venv, outputs or .gpu-pack
    manifest = _manifest()
    manifest["tree_bytes"] = 2 * MiB
    assert 'command 1: carry [".gpu-pack/part1"]: 65.0 MiB of 64 MiB (OVER)' in gpu_check.plan(manifest)


def test_the_lock_gives_each_package_its_pin_and_hashes():
    entries = gpu_check.lock_entries(PROJECT_ROOT / "requirements" / "run.txt")
    assert entries["pydantic-core"].startswith("pydantic-core==")
    assert entries["pydantic-core"].count("--hash=sha256:") >= 10  # every wheel of the release, cp312's too
    assert all(line.startswith("    --hash") for line in entries["numpy"].splitlines()[1:])


def _manifest(build: str = "source") -> dict:
    files = {"1": {"llama.cpp.tar.xz": {"bytes": 9 * MiB, "sha256": "0"},
                   "tokenizer-smollm2.gguf": {"bytes": 2 * MiB, "sha256": "0"},
                   "wheels/numpy-2.4.6-cp312.whl": {"bytes": 16 * MiB, "sha256": "0"},
                   "wheels/pandas-3.1.1-cp312.whl": {"bytes": 12 * MiB, "sha256": "0"},
                   "smollm2.gguf.part1": {"bytes": 24 * MiB, "sha256": "0"}},
             "2": {"smollm2.gguf.part2": {"bytes": 64 * MiB + 1, "sha256": "0"}}}
    return {"packed_unix": 1_790_000_000.0, "build": build, "files": files, "tree_bytes": 0, "parts": 2, "machine_s_own": ["numpy"], "not_in_lock": ["aiohttp"],
            "smollm2": {"name": "x.gguf", "bytes": 88 * MiB, "sha256": "0"}}


def test_the_dry_run_prints_each_command_s_mib_and_time():
    text = gpu_check.plan(_manifest())
    assert 'command 1: carry [".gpu-pack/part1"]: 63.0 MiB of 64 MiB (fits)' in text
    assert 'command 2: carry [".gpu-pack/part2"]: 64.0 MiB of 64 MiB (OVER)' in text  # one byte over
    assert "wheels                          28.0 MiB (2 files)" in text
    assert "run: make gpu-check PART=1" in text and "run: make gpu-check PART=2" in text
    part1 = gpu_check.phases(1, 2, True)
    assert f"budget 480 s, expected {sum(p.expected_s for p in part1)} s" in text
    assert "all 2 commands: expected" in text and "not carried: numpy (the machine's own); aiohttp" in text
    assert "frontier-bench import" in text


def test_each_part_fits_its_budget():
    for parts in (1, 2, 3):
        for part in range(1, parts + 1):
            assert gpu_check.BUDGET_S[part] + 60 <= 600  # the run tool's limit a command, with room to start
            for build_from_source in (True, False):
                steps = gpu_check.phases(part, parts, build_from_source)
                assert sum(p.expected_s for p in steps) <= gpu_check.BUDGET_S[part]
                assert all(p.limit_s <= gpu_check.BUDGET_S[part] for p in steps)
                assert steps[0].name == "probe" and steps[-1].name == "bundle"
    assert gpu_check.BUDGET_S[1] <= 8 * 60  # the issue's 8 minutes
    names = [p.name for p in gpu_check.phases(1, 2, True)]
    assert names.index("build") < names.index("params") < names.index("text") < names.index("bundle")
    assert "telemetry" in [p.name for p in gpu_check.phases(1, 2, False)]  # the binary built here: in part 1
    assert "smollm2" in [p.name for p in gpu_check.phases(3, 3, True)]  # where its last piece arrives
    assert "smollm2" not in [p.name for p in gpu_check.phases(2, 3, True)]


def test_a_phase_past_its_limit_is_a_row_and_what_needs_it_is_skipped(tmp_path):
    runner = gpu_check.Runner(1, tmp_path, budget_s=60, log=tmp_path / "log")
    slow = runner.phase(gpu_check.Phase("build", 1, 1), ["sleep", "30"])
    assert slow.status == "timeout" and slow.wall_s < 15
    after = runner.phase(gpu_check.Phase("text", 10, 1, ("build",)), ["true"])
    assert after.status == "skipped" and after.detail == "needs build"
    failed = runner.phase(gpu_check.Phase("model", 10, 1), None, fn=lambda limit: limit / 0)
    assert failed.status == "failed" and "ZeroDivisionError" in failed.detail
    fine = runner.phase(gpu_check.Phase("bundle", 10, 1), [sys.executable, "-c", "print('bundled')"])
    assert fine.status == "ok" and "bundled" in fine.detail
    written = json.loads((tmp_path / "gpu-check.json").read_text())
    assert [(p["name"], p["status"]) for p in written["phases"]] == [
        ("build", "timeout"), ("text", "skipped"), ("model", "failed"), ("bundle", "ok")]


def test_a_later_part_on_a_fresh_machine_says_part_1_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "PACK", tmp_path / "pack")
    monkeypatch.setattr(gpu_check, "WORK", tmp_path / "work")
    assert gpu_check.gpu(2, 60, tmp_path / "out") == 2
    written = json.loads((tmp_path / "out" / "gpu-check.json").read_text())
    assert written["phases"][0]["status"] == "failed" and "run part 1 first" in written["phases"][0]["detail"]


def test_no_phase_starts_without_time_for_the_bundle(tmp_path):
    runner = gpu_check.Runner(1, tmp_path, budget_s=10, log=tmp_path / "log")
    assert runner.phase(gpu_check.Phase("load", 150, 1), ["true"], reserve_s=20).detail == "no time left"
    assert runner.phase(gpu_check.Phase("bundle", 20, 1), ["true"]).status == "ok"


def test_the_trimmed_tree_keeps_what_the_build_reads(tmp_path):
    src = tmp_path / "llama.cpp"
    for name in ("CMakeLists.txt", "src/llama.cpp", "common/arg.cpp", "ggml/src/ggml-cuda/fattn.cu",
                 "ggml/src/ggml-cpu/ggml-cpu.c", "ggml/src/ggml-vulkan/ggml-vulkan.cpp", "models/ggml-vocab-x.gguf",
                 "tools/ui/CMakeLists.txt", "tools/ui/src/app.svelte", "tools/server/server.cpp",
                 "tools/server/tests/test.py", "scripts/ui-assets.cmake", "convert_hf_to_gguf.py", "docs/build.md"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text("x")
    out = llama_server.trim_source(src, tmp_path / "trimmed")
    kept = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert kept == ["CMakeLists.txt", "common/arg.cpp", "ggml/src/ggml-cpu/ggml-cpu.c", "ggml/src/ggml-cuda/fattn.cu",
                    "scripts/ui-assets.cmake", "src/llama.cpp", "tools/server/server.cpp", "tools/ui/CMakeLists.txt"]
    with pytest.raises(llama_server.EmbeddedServerError, match="not a llama.cpp tree"):
        llama_server.trim_source(tmp_path / "nothing", tmp_path / "t2")


def test_the_cuda_build_is_for_one_architecture_and_not_this_cpu():
    flags = llama_server.cuda_build_flags("90")
    assert "-DGGML_CUDA=ON" in flags and "-DCMAKE_CUDA_ARCHITECTURES=90" in flags
    assert "-DGGML_NATIVE=OFF" in flags and "-DGGML_NATIVE=ON" not in flags
    assert "-DLLAMA_USE_PREBUILT_UI=OFF" in flags  # nothing downloaded at configure time
    with pytest.raises(ValueError, match="compute capability"):
        llama_server.cuda_build_flags("sm_90; rm -rf /")


def test_the_deployments_it_writes_are_valid_params_and_the_random_one_is_never_scored(tmp_path):
    for kind in gpu_steps.DEPLOYMENTS:
        out = tmp_path / f"{kind}.yaml"
        assert gpu_steps.main(["params", kind, str(out), "--model", "/m.gguf", "--binary", "/bin/llama-server",
                               "--host", "gpu-h100-80gb-hbm3", "--accelerator", "NVIDIA H100 80GB HBM3",
                               "--params-b", "3.885"]) == 0
        params = load_params(str(out))
        assert params.server.embedded.engine == "llama-server"
        assert params.server.embedded.llama_server_args[:2] == ["-ngl", "99"]  # every layer on the GPU
        assert params.telemetry.source == "local" and max(params.sweep.concurrency) == 64
        assert max(params.sweep.context_lengths) < params.server.context_window <= params.server.embedded.n_ctx
    assert load_params(str(tmp_path / "random-4b.yaml")).server.weights == "random"
    assert max(load_params(str(tmp_path / "random-4b.yaml")).sweep.context_lengths) >= 32000
    assert load_params(str(tmp_path / "smollm2.yaml")).server.weights == "trained"


def test_the_returned_bundle_goes_into_the_paper_s_outputs(tmp_path, monkeypatch):
    there, here = tmp_path / "there", tmp_path / "here"
    write_synthetic_run(there)
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(there))
    bundle = tmp_path / "out" / f"gpu-check-{SYN_HOST}.tar.gz"
    assert gpu_steps.main(["bundle", SYN_HOST, str(bundle)]) == 0
    assert bundle.stat().st_size < gpu_check.RETURN_LIMIT
    with tarfile.open(bundle) as archive:
        names = archive.getnames()
    assert all(n.startswith(f"{SYN_HOST}/") for n in names) and not any(".archived-" in n for n in names)
    monkeypatch.setenv("FRONTIER_BENCH_OUTPUTS", str(here))
    assert cli_main(["import", str(bundle)]) == 0
    moved = sorted(p.relative_to(here).as_posix() for p in here.rglob("*") if p.is_file())
    assert moved == sorted(names)
    for name in names:
        assert (here / name).read_bytes() == (there / name).read_bytes()


def _fake(idle_w: float = 70.0, busy_w: float = 650.0, counter_scale: float = 1.0):
    gpu = FakeGpu(power_w=idle_w)
    if counter_scale != 1.0:
        def overcounting(now: float) -> float:  # the energy the fake integrates, scaled
            with gpu._lock:
                spent = gpu._acc_mj + gpu.power_w * (now - gpu._since) * 1000.0
            return gpu.energy_offset_mj + counter_scale * spent
        gpu.energy_fn = overcounting
    return FakeNvml([gpu]), telemetry_check.FakeLoad(gpu, idle_w, busy_w)


SHORT = dict(power_hz=50.0, idle_s=0.6, busy_s=0.6, period_s=0.4, cycles=2, hold_bytes=3 << 30, overhead_s=0.5,
             tolerance_pct=12.0)


def test_the_telemetry_check_passes_an_honest_counter(tmp_path):
    nvml, load = _fake()
    rows = {r.check: r for r in telemetry_check.check(load, tmp_path, nvml=nvml, **SHORT)}
    energy = rows["energy: counter vs ∫power (busy)"]
    assert energy.ok and abs(energy.value) <= 12.0
    assert rows["windows: busy then idle, busy's power"].value > 500
    assert rows["windows: the idle window after the load"].ok
    assert abs(rows["windows: busy + idle energy vs one window over both"].value) < 0.5
    assert rows["memory: NVML used grew by"].measured == "3.000 GiB" and rows["memory: NVML used grew by"].ok
    assert {"overhead: sampler at 10 Hz", "overhead: sampler at 50 Hz"} <= set(rows)
    table = telemetry_check.table(list(rows.values()))
    assert table.splitlines()[0].startswith("check") and len(table.splitlines()) == len(rows) + 1


def test_the_telemetry_check_catches_a_counter_that_overcounts(tmp_path):
    nvml, load = _fake(counter_scale=1.3)  # the counter runs 30 % fast against the power it reports
    rows = {r.check: r for r in telemetry_check.check(load, tmp_path, nvml=nvml, **SHORT)}
    energy = rows["energy: counter vs ∫power (busy)"]
    assert not energy.ok and -35 < energy.value < -15  # ∫power is ~23 % below the counter


def test_the_cuda_compile_here_hands_its_toolkit_to_cmake(tmp_path, monkeypatch):
    # nvcc's own toolkit lacks cuBLAS here: the merged root, cuBLAS and the libcuda stub go to CMake as -D flags
    pack = tmp_path / "pack"
    (pack / "cuda" / "cublas" / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    (pack / "cuda" / "cublas" / "nvidia" / "cu13" / "lib" / "libcublas.so.13").write_bytes(b"")
    (pack / "cuda" / "llama.cpp").mkdir(parents=True)
    (pack / "cuda" / "llama.cpp" / "CMakeLists.txt").write_text("")
    monkeypatch.setattr(gpu_check, "PACK", pack)
    monkeypatch.setattr(gpu_check.shutil, "which", lambda tool: "/usr/local/bin/nvcc")
    monkeypatch.setattr(gpu_check, "cuda_root", lambda dest, nvcc, cublas: dest)
    commands = []
    monkeypatch.setattr(gpu_check.subprocess, "run", lambda command, check: commands.append(command))
    gpu_check.build_cuda_here("90", 2, None)
    (command,) = commands
    compiled = []
    monkeypatch.setattr(gpu_steps.llama_server, "compile_server",
                        lambda source, target, flags, **kw: compiled.append((source, target, flags, kw)) or target)
    monkeypatch.setattr(gpu_steps.llama_server, "build_info", lambda binary: {})
    assert gpu_steps.main(command[2:]) == 0  # the step parses what the orchestrator sends it
    source, target, flags, kw = compiled[0]
    root = pack / "cuda" / "root"
    assert source == pack / "cuda" / "llama.cpp" and target == pack / "prebuilt"
    assert f"-DCUDAToolkit_ROOT={root}" in flags and f"-DCMAKE_CUDA_COMPILER={root}/bin/nvcc" in flags
    assert f"-DCUDA_cuda_driver_LIBRARY={root}/lib64/stubs/libcuda.so" in flags
    assert "-DCMAKE_CUDA_ARCHITECTURES=90" in flags and kw["build_root"] == pack / "cuda" / "build"
