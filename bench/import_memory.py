"""Peak memory and time of `frontier-bench import-results --from vllm-bench` on a large file: writes a `vllm bench
serve --save-result --save-detailed` JSON of N records (default 60,000, ~33 MB: 16 tokens, 15 gaps and a short
text each, the fixture's shape), then imports it in a child process and prints the child's peak RSS and wall time.

Two rows: the whole import, and the import with the summary statistics left out (benchlib.analysis.task_stats's
summarize_requests replaced by a stub in the child), so the import's own part — reading, checking, redacting and
writing the rows — is seen apart from the summary's bootstrap. A child that passes --limit-gb of RSS is killed
(the figure then reads "killed above N GB").

    .venv/bin/python bench/import_memory.py [--records 60000] [--limit-gb 8] [--only own|whole]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARAMS = """host: {name: bench-box, hardware: "import memory bench"}
server: {kind: openai, software: fake, base_url: "http://127.0.0.1:18431", model: fake-model}
"""
CHILD = """
import sys
from pathlib import Path
from benchlib.interchange import import_run
if sys.argv[3] == "own":
    import pandas as pd
    import_run.analysis.summarize_requests = lambda rows, **kw: pd.DataFrame([{"n_requests": len(rows)}])
done = import_run.import_results("vllm-bench", sys.argv[1], sys.argv[2], root=Path(sys.argv[4]))
print(len(done.summary))
"""
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike november oscar papa".split()


def write_vllm(path: Path, n: int, seed: int = 7) -> int:
    """A vllm bench serve result of n requests (16 output tokens each), written a list at a time; its size."""
    rng = random.Random(seed)
    ttfts = [0.05 + rng.random() * 0.01 for _ in range(n)]
    itls = [[0.01 + rng.random() * 0.002 for _ in range(15)] for _ in range(n)]
    head = {"date": "20261129-000000", "endpoint_type": "openai-chat", "backend": "openai-chat", "label": None,
            "model_id": "fake-model", "tokenizer_id": "word-tokenizer", "num_prompts": n, "request_rate": "inf",
            "burstiness": 1.0, "max_concurrency": 64, "duration": n / 64 * 0.2, "completed": n, "failed": 0,
            "total_input_tokens": 12 * n, "total_output_tokens": 16 * n}
    lists = {"input_lens": [12] * n, "output_lens": [16] * n, "ttfts": ttfts, "itls": itls,
             "latencies": [t + sum(g) for t, g in zip(ttfts, itls)],
             "start_times": [1000.0 + i * 0.003 for i in range(n)], "queue_times": [0.0] * n,
             "generated_texts": [" ".join(WORDS) for _ in range(n)], "errors": [""] * n}
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps(head)[:-1])
        for key, values in lists.items():
            out.write(f", {json.dumps(key)}: {json.dumps(values)}")
        out.write(', "mean_ttft_ms": 55.0, "median_ttft_ms": 55.0}')
    return path.stat().st_size


def run_child(source: Path, params: Path, mode: str, root: Path, limit_gb: float) -> tuple[str, float, float, float]:
    """(outcome, peak RSS in GB, wall seconds, CPU seconds) of one import in a child process, killed above limit_gb of
    RSS. CPU seconds (user + system) are the figure to compare on a shared machine: wall time counts other loads."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(source), str(params), mode, str(root)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = False
    while child.poll() is None:  # the RSS is watched, not capped by RLIMIT_AS: numpy reserves address space
        try:
            status = Path(f"/proc/{child.pid}/status").read_text()
            rss_kb = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))
        except (OSError, StopIteration, ValueError):
            rss_kb = 0
        if rss_kb > limit_gb * 2**20:
            child.kill()
            killed = True
        time.sleep(0.05)
    _, err = child.communicate()
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    peak_gb = after.ru_maxrss / 2**20  # KB on Linux; the largest child so far
    if killed:
        return f"killed above {limit_gb:g} GB", peak_gb, seconds, cpu
    if child.returncode:
        return f"failed: {(err.strip().splitlines() or ['?'])[-1][:200]}", peak_gb, seconds, cpu
    return "ok", peak_gb, seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--limit-gb", type=float, default=8.0, help="kill a child whose RSS passes this")
    parser.add_argument("--only", choices=("own", "whole"), help="run one of the two rows")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="import-memory-") as tmp:
        folder = Path(tmp)
        source = folder / "result.json"
        size = write_vllm(source, args.records)
        (folder / "deployment.yaml").write_text(PARAMS)
        print(f"vllm bench serve result: {args.records:,} records, {size / 1e6:.1f} MB")
        # the own part first: ru_maxrss of RUSAGE_CHILDREN is the largest child so far, so the smaller one goes first
        for mode in ("own", "whole"):
            if args.only and mode != args.only:
                continue
            outcome, peak, seconds, cpu = run_child(source, folder / "deployment.yaml", mode, folder / f"out-{mode}",
                                                    args.limit_gb)
            what = "import without the summary" if mode == "own" else "whole import (with the summary)"
            print(f"  {what:36s} peak RSS {peak:.2f} GB, {seconds:.1f} s wall, {cpu:.1f} s CPU  [{outcome}]")


if __name__ == "__main__":
    main()
