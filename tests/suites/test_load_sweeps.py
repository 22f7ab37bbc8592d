"""Load sweeps against the fake server (known timing), knee rule, exact prompt lengths, client self-check.

Tolerances: the fake server schedules tokens on absolute monotonic deadlines, so a request of `tokens` tokens
lasts ttft + (tokens − 1) × itl on the server. A level's wall span adds, per sequential request, the client's
request start and the row's fsync'd append (≲ 2 ms each here) and, on a busy 2-core CI box, a few ms of
scheduling jitter; over spans of 0.25–1 s that is < 5 %, so aggregate throughput is checked at 10 % of the
known rate (a wrong span or token count — one request's e2e, a missing level, double counting — is off by
≥ 25 %). Throughput can never beat the server's own schedule by more than clock noise (1 %).
"""

from __future__ import annotations

import ast
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import load_levels, stats
from benchlib.measure.pacing import event_loop
from benchlib.measure.selfcheck import client_health
from benchlib.measure.traffic import prompt_fitting
from benchlib.records.rows import read_requests
from benchlib.suites.load import concurrency
from benchlib.suites.load import context as load_context
from benchlib.suites.runner import open_session
from tests.fakes.servers import FAKE_TEMPLATE_TOKENS


def sweep_params(params_for, fake, **sweep):
    return params_for(fake, run={"warmups": 0, "repeats": 1, "max_tokens": 64, "timeout_s": 10},
                      sweep={"concurrency": [1, 4], "requests_per_level": 4, "context_lengths": [64],
                             "max_tokens": 64, **sweep})


def test_concurrency_sweep_levels_counts_and_throughput(params_for, outputs):
    fake = {"ttft": 0.05, "itl": 0.01, "tokens": 20}
    params = sweep_params(params_for, fake, concurrency=[1, 2, 4], requests_per_level=3)
    with open_session(params, "load", concurrency=4) as session:
        levels = concurrency.run_concurrency_sweep(session, progress=False)
        out_dir = session.out_dir
    rows = read_requests(out_dir / "requests.csv")
    assert len(rows) == 3 + 3 + 4  # max(requests_per_level, level)
    assert set(rows["suite"]) == {"load"} and set(rows["task"]) == {"concurrency"}
    assert rows["request_key"].is_unique and set(rows["status"]) == {"ok"}
    assert rows.groupby("concurrency").size().to_dict() == {1: 3, 2: 3, 4: 4}
    assert rows["prompt"].is_unique  # unique prompts: no prompt cache has seen them
    on_disk = pd.read_csv(out_dir / load_levels.CONCURRENCY_CSV)
    assert list(on_disk["concurrency"]) == [1, 2, 4] == list(levels["concurrency"])
    assert list(levels["n_requests"]) == [3, 3, 4] and list(levels["n_failed"]) == [0, 0, 0]
    per_request = 0.05 + 19 * 0.01  # s on the server's schedule
    waves = {1: 3, 2: 2, 4: 1}  # sequential rounds per level
    for _, level in levels.iterrows():
        ideal = level["n_requests"] * 20 / (waves[level["concurrency"]] * per_request)
        assert level["throughput_tps"] == pytest.approx(ideal, rel=0.10), level.to_dict()
        assert level["throughput_tps"] <= ideal * 1.01
        assert level["ttft_s_p50"] == pytest.approx(0.05, abs=0.02)
        assert level["e2e_s_p50"] == pytest.approx(per_request, abs=0.03)
        assert level["decode_tps_p50"] == pytest.approx(100, rel=0.05)
        for column in client_health.HEALTH_COLUMNS:
            assert column in on_disk
        assert level["loop_lag_samples"] > 0 and level["client_cpu_per_request_ms"] > 0
    assert not levels["knee"].any()  # the fake server scales linearly: no knee within the sweep
    assert load_levels.frontier_figures(levels, pd.DataFrame())["max_concurrency_ok"] == 4


def test_concurrency_sweep_resumes_without_resending(params_for, outputs):
    params = sweep_params(params_for, {"ttft": 0.01, "itl": 0.002, "tokens": 3}, concurrency=[1, 2],
                          requests_per_level=2)
    with open_session(params, "load", concurrency=2) as session:
        first = concurrency.run_concurrency_sweep(session, progress=False)
        path = session.log.path
    size = path.stat().st_size
    with open_session(params, "load", concurrency=2) as session:
        second = concurrency.run_concurrency_sweep(session, progress=False)
    assert path.stat().st_size == size  # nothing re-sent
    assert list(second["n_ok"]) == list(first["n_ok"]) == [2, 2]
    assert list(second["loop_lag_samples"]) == list(first["loop_lag_samples"])  # health carried over


def level_frame(levels, throughput, ttft, e2e):
    return pd.DataFrame({"concurrency": levels, "n_ok": [4] * len(levels), "throughput_tps": throughput,
                         "ttft_s_p50": ttft, "e2e_s_p50": e2e})


def test_knee_rule_on_synthetic_levels():
    # GPU-like: scales to 16, then +4 % throughput for 3x TTFT: the knee is 16, 32 and 64 are saturated
    gpu = level_frame([1, 3, 8, 16, 32, 64], [50, 145, 370, 700, 728, 735],
                      [0.05, 0.05, 0.06, 0.08, 0.24, 0.60], [1.3, 1.3, 1.4, 1.5, 2.9, 5.8])
    assert load_levels.find_knee(gpu) == 16
    marked = load_levels.mark_knee(gpu)
    assert list(marked.loc[marked["knee"], "concurrency"]) == [16]
    assert list(marked.loc[marked["saturated"], "concurrency"]) == [32, 64]
    assert marked.loc[4, "throughput_gain"] == pytest.approx(0.04)
    assert marked.loc[4, "latency_growth"] == pytest.approx(3.0)
    # one request at a time (llama-cpp-python): no gain from 1 to 2, latency doubles: knee at 1
    serial = level_frame([1, 2, 4], [40, 41, 40], [0.1, 0.5, 1.4], [0.5, 1.0, 2.0])
    assert load_levels.find_knee(serial) == 1
    # still scaling: no knee; flat throughput without latency growth is not a knee either
    assert load_levels.find_knee(level_frame([1, 2, 4], [40, 78, 150], [0.1, 0.1, 0.11], [1, 1, 1.05])) is None
    assert load_levels.find_knee(level_frame([1, 2, 4], [40, 41, 42], [0.1, 0.1, 0.11], [1, 1.1, 1.2])) is None


def level_rows(task, sizes, seed=7, **columns):
    """Measured ok rows of a sweep: `sizes` maps each level (a concurrency, or a context variant 'n<tokens>') to
    its request count; TTFT, e2e and decode rate drawn from a seeded generator."""
    rng = np.random.default_rng(seed)
    parts = []
    for level, n in sizes.items():
        parts.append(pd.DataFrame({
            "task": task, "concurrency" if task == "concurrency" else "variant": level, "is_warmup": False,
            "status": "ok", "start_ns": 10**9 + np.arange(n) * 10**6, "ttft_s": rng.gamma(2.0, 0.05, n),
            "e2e_s": rng.gamma(4.0, 0.3, n), "decode_tps": rng.normal(50, 5, n), "completion_tokens": 16,
            "error_kind": "", **columns}))
    return pd.concat(parts, ignore_index=True)


def test_level_percentiles_carry_their_order_statistic_bounds():
    rows = level_rows("concurrency", {1: 5, 2: 40, 8: stats.INTERVAL_N["p99"]})
    levels = load_levels.concurrency_levels(rows).set_index("concurrency")
    for level, mine in rows.groupby("concurrency"):
        n = len(mine)
        for metric, names in (("decode_tps", ("p50",)), ("ttft_s", ("p50", "p90", "p99")),
                              ("e2e_s", ("p50", "p90", "p99"))):
            values = mine[metric].to_numpy()
            bounds = stats.percentile_bounds(values, {name: stats.PERCENTILES[name] for name in names})
            for name in names:
                q, column, (estimate, low, high) = stats.PERCENTILES[name], f"{metric}_{name}", bounds[name]
                # the estimate is the one the level always had (numpy's quantile from 1 / (1 − q) values), shown
                # from fewer values than its interval needs
                expected = np.quantile(values, q) if n >= stats.min_samples(q) else np.nan
                assert levels.loc[level, column] == pytest.approx(expected, rel=1e-12, nan_ok=True)
                if n >= stats.INTERVAL_N[name]:
                    assert levels.loc[level, column] == pytest.approx(estimate, rel=1e-12)
                    assert (levels.loc[level, f"{column}_lo"], levels.loc[level, f"{column}_hi"]) == (low, high)
                    assert low <= levels.loc[level, column] <= high and low < high
                else:
                    assert math.isnan(levels.loc[level, f"{column}_lo"]) and math.isnan(levels.loc[level, f"{column}_hi"])
    # 5 requests: a median but no interval; 40: p50 and p90 intervals, a p99 estimate without one; 368: all
    assert levels.loc[1, "ttft_s_p50"] > 0 and math.isnan(levels.loc[1, "ttft_s_p50_lo"])
    assert levels.loc[2, "ttft_s_p90_lo"] > 0 and math.isnan(levels.loc[2, "ttft_s_p99"])
    assert levels.loc[8, "e2e_s_p99_lo"] < levels.loc[8, "e2e_s_p99"] <= levels.loc[8, "e2e_s_p99_hi"]
    assert list(levels.reset_index().columns) == [c for c in load_levels.CONCURRENCY_COLUMNS if c in levels.reset_index()]


def test_context_medians_carry_their_bounds():
    rows = level_rows("context", {"n64": 3, "n512": 12}, prompt_tokens=64)
    levels = load_levels.context_levels(rows).set_index("target_tokens")
    for target, n in ((64, 3), (512, 12)):
        mine = rows[rows["variant"] == f"n{target}"]
        for metric in ("ttft_s", "e2e_s"):
            estimate, low, high = stats.percentile_bounds(mine[metric].to_numpy(), {"p50": 0.5})["p50"]
            assert levels.loc[target, f"{metric}_p50"] == pytest.approx(np.median(mine[metric]), rel=1e-12)
            got = (levels.loc[target, f"{metric}_p50_lo"], levels.loc[target, f"{metric}_p50_hi"])
            assert (np.isnan(got).all() if n < stats.INTERVAL_N["p50"] else got == (low, high))
    assert levels.loc[512, "prefill_tps"] == pytest.approx(64 / levels.loc[512, "ttft_s_p50"])


def test_context_targets_clip_to_the_window():
    targets = prompt_fitting.context_targets([128, 1024, 4096, 32768], window=2048, max_tokens=16)
    assert [t["target_tokens"] for t in targets] == [128, 1024, 2048 - 16 - prompt_fitting.CONTEXT_MARGIN]
    assert "4096, 32768" in targets[-1]["note"]
    assert [t["target_tokens"] for t in prompt_fitting.context_targets([64, 128], None, 16)] == [64, 128]


def test_context_sweep_hits_exact_lengths_with_the_tokenizer(params_for, outputs):
    # Fake server: one token per word via /extras/tokenize, prompt_tokens = words + 3 per message, and a prefill
    # of 0.4 ms per prompt token added to the 20 ms TTFT.
    fake = {"prompt_tokens": "words", "prefill_per_token": 0.0004, "ttft": 0.02, "itl": 0.002, "tokens": 4}
    params = params_for(fake, server={"context_window": 700},
                        run={"warmups": 0, "repeats": 1, "max_tokens": 64, "timeout_s": 10},
                        sweep={"concurrency": [1], "requests_per_level": 1, "context_lengths": [60, 150, 400, 9000],
                               "max_tokens": 8})
    with open_session(params, "load") as session:
        levels = load_context.run_context_sweep(session, progress=False)
        out_dir = session.out_dir
    limit = 700 - 8 - prompt_fitting.CONTEXT_MARGIN
    assert list(levels["target_tokens"]) == [60, 150, 400, limit]
    assert levels["exact"].all() and (levels["token_error"] == 0).all(), levels[["target_tokens", "prompt_tokens"]]
    assert (levels["template_tokens"] == FAKE_TEMPLATE_TOKENS).all()
    assert levels["method"].str.contains("/extras/tokenize").all()
    assert "9000" in levels.iloc[-1]["note"]
    for _, level in levels.iterrows():
        expected = 0.02 + 0.0004 * level["target_tokens"]
        assert level["ttft_s_p50"] == pytest.approx(expected, abs=0.015)
        assert level["prefill_tps"] == pytest.approx(level["target_tokens"] / level["ttft_s_p50"])
    rows = read_requests(out_dir / "requests.csv")
    assert set(rows.loc[~rows["is_warmup"], "variant"]) == {f"n{n}" for n in (60, 150, 400, limit)}
    assert rows.loc[rows["is_warmup"], "variant"].tolist() == ["calibrate"]
    on_disk = pd.read_csv(out_dir / load_levels.CONTEXT_CSV)
    assert list(on_disk["target_tokens"]) == list(levels["target_tokens"])
    assert load_levels.frontier_figures(pd.DataFrame(), levels)["max_context_ok"] == limit


def test_context_sweep_calibrates_without_a_tokenizer(params_for, outputs, monkeypatch):
    monkeypatch.setattr(prompt_fitting.ServerTokenizer, "detect", classmethod(lambda cls, params: None))
    fake = {"prompt_tokens": "words", "ttft": 0.01, "itl": 0.002, "tokens": 3}
    params = params_for(fake, run={"warmups": 0, "repeats": 1, "max_tokens": 64, "timeout_s": 10},
                        sweep={"concurrency": [1], "requests_per_level": 1, "context_lengths": [100, 300, 600],
                               "max_tokens": 8})
    with open_session(params, "load") as session:
        levels = load_context.run_context_sweep(session, progress=False)
    assert levels["method"].str.startswith("calibrated").all()
    errors = (levels["prompt_tokens"] - levels["target_tokens"]).abs() / levels["target_tokens"]
    assert (errors < 0.15).all(), levels[["target_tokens", "prompt_tokens"]]
    assert errors.iloc[-1] < 0.05  # refitted on every length: the last one is close


def test_fit_to_tokens_is_exact_with_two_token_words():
    # a tokenizer that counts 'x.' as two tokens: counts jump by 2 at some word counts, suffixes close the gap
    count = lambda text: sum(2 if w.endswith(".") else 1 for w in text.split())  # noqa: E731
    make = lambda n: " ".join(["intro"] + [("w." if i % 3 == 2 else "w") for i in range(n)])  # noqa: E731
    for target in (5, 6, 7, 50, 51):
        text, counted, _ = prompt_fitting.fit_to_tokens(count, make, target)
        assert counted == count(text) == target


def test_loop_lag_sampler_sees_a_blocked_loop():
    async def block(seconds):
        time.sleep(seconds)  # a synchronous call on the client's loop, as a careless callback would make

    sampler = event_loop.LoopLagSampler().start()
    time.sleep(0.1)
    idle = sampler.stop()
    assert idle["loop_lag_samples"] >= 5 and idle["loop_lag_p50_ms"] < 5
    sampler.start()
    time.sleep(0.03)
    before = time.perf_counter_ns()
    event_loop.run(block(0.08))
    after = time.perf_counter_ns()
    time.sleep(0.03)
    # while the block is still being slept off, the overdue sleep counts (a request may finish first)
    assert sampler.max_lag_ms(before, after) >= 60
    busy = sampler.stop()
    assert busy["loop_lag_max_ms"] >= 60
    # per interval: the hold-up belongs to what was in flight during it, not to what came before it
    assert sampler.max_lag_ms(before, after) >= 60
    assert sampler.max_lag_ms(before - 25_000_000, before - 15_000_000) < 5
    assert sampler.max_lag_ms(0, 1) != sampler.max_lag_ms(0, 1)  # no samples then: NaN, not 0


def test_client_bound_rule():
    calm = client_health.health_figures(0.2, 1.0, 10, {"loop_lag_p99_ms": 1.0})
    assert not calm["client_bound"] and calm["client_cpu_per_request_ms"] == pytest.approx(20)
    assert client_health.health_figures(0.6, 1.0, 10, {"loop_lag_p99_ms": 1.0})["client_bound"]
    lagging = client_health.health_figures(0.1, 1.0, 10, {"loop_lag_p99_ms": 7.5})
    assert lagging["client_bound"] and "loop lag p99 7.5 ms" in lagging["client_bound_reason"]


def test_energy_per_level_from_its_own_window_with_known_power(params_for, outputs, monkeypatch):
    """A fake GPU drawing exactly 120 W: each level's energy is 120 W × its window, warm-ups and calibration are
    in no level's window, tokens per joule and tok/s/W come from the level's own tokens and aggregate rate."""
    from benchlib.config.params import TelemetryParams
    from benchlib.measure.telemetry import Telemetry
    from benchlib.suites import runner
    from tests.fakes.fake_nvml import FakeGpu, FakeNvml

    nvml = FakeNvml([FakeGpu(power_w=120.0)])
    monkeypatch.setattr(runner, "Telemetry", lambda settings, out_dir: Telemetry(
        TelemetryParams(power_hz=50, slow_hz=10), out_dir, nvml=nvml, environ={}))
    params = sweep_params(params_for, {"ttft": 0.02, "itl": 0.005, "tokens": 20, "prompt_tokens": "words"},
                          concurrency=[1, 2], requests_per_level=2, context_lengths=[40, 80], max_tokens=20)
    params = params.model_copy(update={"run": params.run.model_copy(update={"warmups": 1})})
    with open_session(params, "load", concurrency=2) as session:
        levels = concurrency.run_concurrency_sweep(session, progress=False)
        context = load_context.run_context_sweep(session, progress=False)
        windows = session.telemetry.windows_frame()
    for frame, key, task in ((levels, "concurrency", "concurrency"), (context, "target_tokens", "context")):
        assert (frame["energy_reason"] == "").all(), frame["energy_reason"].tolist()
        for _, level in frame.iterrows():
            window = windows[windows["window"] == f"{task}:{int(level[key])}"].iloc[-1]
            assert window["kind"] == "level"
            assert level["energy_j"] == pytest.approx(120.0 * level["level_window_s"], rel=0.02)
            assert level["avg_power_w"] == pytest.approx(120.0, rel=0.02)
            assert level["tokens_per_joule"] == pytest.approx(level["completion_tokens"] / level["energy_j"])
    for _, level in levels.iterrows():
        assert level["tps_per_w"] == pytest.approx(level["throughput_tps"] / level["avg_power_w"])
    warmup = read_requests(session.out_dir / "requests.csv").query("is_warmup").iloc[0]
    warmup_end = int(warmup["start_ns"]) + warmup["e2e_s"] * 1e9
    measured = windows[windows["kind"].isin(["task", "level"])]
    assert (measured["t_start_ns"] > warmup_end).all()  # no measured window contains the warm-up


def test_level_energy_without_a_sensor_says_why():
    levels = pd.DataFrame({"concurrency": [1], "completion_tokens": [40.0], "throughput_tps": [10.0]})
    windows = pd.DataFrame({"window": ["concurrency:1"], "kind": ["level"], "duration_s": [2.0],
                            "energy_j": [float("nan")], "energy_reason": ["no GPU; no RAPL"]})
    out = load_levels.level_energy(levels, windows, "concurrency", "concurrency")
    assert math.isnan(out["tokens_per_joule"].iloc[0]) and out["energy_reason"].iloc[0] == "no energy: no GPU; no RAPL"


def test_no_load_sweep_imports_another():
    """What the sweeps share lives in load.common; a sweep reaching into another sweep's module would tie their
    changes together again."""
    sweeps = {"concurrency", "context", "rate", "workloads"}
    folder = Path(concurrency.__file__).parent
    for name in sorted(sweeps):
        tree = ast.parse((folder / f"{name}.py").read_text(encoding="utf-8"))
        imported = {node.module.rsplit(".", 1)[-1] for node in tree.body
                    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchlib.suites.load.")}
        assert not imported & (sweeps - {name}), f"load.{name} imports sweep(s) {sorted(imported & sweeps)}"
        assert "common" in imported, f"load.{name} does not take its shared helpers from load.common"
