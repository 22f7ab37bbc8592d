"""The load notebook end to end on the real embedded llama.cpp server: concurrency, context and rate sweeps through
`frontier-bench run --only load`, every file the suite writes, and the summary's limits."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from benchlib.analysis import load_levels
from benchlib.config.paths import PROJECT_ROOT
from benchlib.records.rows import read_requests


@pytest.mark.e2e
def test_load_notebook_on_the_embedded_server(tmp_path):
    import llama_cpp  # noqa: F401 — `make test` installs the embedded extra; its absence must fail, not skip
    import yaml

    data = yaml.safe_load((PROJECT_ROOT / "params" / "embedded.yaml").read_text())
    data["host"]["name"] = "e2e-load"
    data["run"] = {**data["run"], "warmups": 1, "notebooks": ["load"]}
    data["telemetry"] = {"idle_baseline_s": 0.2, "loaded_baseline_s": 0.2}
    data["sweep"] = {"concurrency": [1, 2], "requests_per_level": 2, "context_lengths": [64, 128], "max_tokens": 8,
                     "rate": {"points": 1, "duration_s": 3, "min_requests": 4, "max_concurrency": 2,
                              "prompt_tokens": {"mean": 40}, "output_tokens": {"mean": 8}},
                     "slo": {"ttft_ms": 5000}}
    params_file = tmp_path / "load.yaml"
    params_file.write_text(yaml.safe_dump(data))
    outputs = tmp_path / "outputs"
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "benchlib.cli", "run", str(params_file), "--only", "load",
                             "--no-paper", "--quiet"], capture_output=True, text=True, cwd=PROJECT_ROOT,
                            env={**os.environ, "FRONTIER_BENCH_OUTPUTS": str(outputs)}, timeout=240)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    run_dir = outputs / "e2e-load" / "gemma3-270m-q4_k_m" / "load"
    for name in ("load.ipynb", "requests.csv", "summary.csv", load_levels.CONCURRENCY_CSV, load_levels.CONTEXT_CSV,
                 "load_concurrency.png", "load_context.png", "manifest.json", "sweep_rate.csv", "load_rate.png"):
        assert (run_dir / name).is_file(), f"{name} missing"
    rows = read_requests(run_dir / "requests.csv")
    measured = rows[~rows["is_warmup"] & (rows["task"] != "rate")]
    assert set(measured["status"]) == {"ok"} and len(measured) == 2 + 2 + 2
    rate_rows = rows[rows["task"] == "rate"]
    assert set(rate_rows["status"]) == {"ok"} and (rate_rows["completion_tokens"] == 8).all()
    sync = rate_rows[rate_rows["variant"] == "sync"]  # at one in flight the server's log counts the prompt
    assert (sync["prompt_tokens"] == 40).all(), sync[["target_prompt_tokens", "prompt_tokens"]]
    rate = pd.read_csv(run_dir / "sweep_rate.csv")
    assert rate["level"].tolist()[:2] == ["sync", "throughput"] and len(rate) == 3
    assert (rate["achieved_rps"] > 0).all() and rate["meets_slo"].all()
    concurrency = pd.read_csv(run_dir / load_levels.CONCURRENCY_CSV)
    assert list(concurrency["concurrency"]) == [1, 2] and (concurrency["throughput_tps"] > 0).all()
    context = pd.read_csv(run_dir / load_levels.CONTEXT_CSV)
    assert list(context["target_tokens"]) == [64, 128]
    assert context["method"].str.contains("llama-cpp-python").all()
    assert (context["token_error"].abs() <= 2).all(), context[["target_tokens", "prompt_tokens", "template_tokens"]]
    summary = pd.read_csv(run_dir / "summary.csv")
    assert summary["max_concurrency_ok"].iloc[0] == 2 and summary["max_context_ok"].iloc[0] == 128
    assert summary["max_slo_rate_rps"].iloc[0] == rate["rate_rps"].max()
    assert elapsed < 120, f"load notebook took {elapsed:.0f} s"
