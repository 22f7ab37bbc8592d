"""The seeds' own totals, averages and ratios, recomputed from the cells they were printed from.

Each derivation names the printed figure (a reference row), how the seed got it from other printed cells, and
the tolerance: half a unit of the printed figure's last decimal (the printed inputs are themselves rounded, so a
ratio may also carry the inputs' rounding, stated in `rule`). `agrees` is False where the printed figure cannot be
recomputed from the printed cells by the stated rule: those are findings about the seed, listed in
`paper/out/tables/seed_arithmetic.csv` and the reference README, never silently corrected.
"""

from __future__ import annotations

import math

import pandas as pd

from benchlib.published import reference

COLUMNS = ["seed", "figure", "printed", "recomputed", "rule", "tolerance", "agrees"]


def _half_unit(text: str) -> float:
    number = text.replace(",", "").strip().split()[0].rstrip("%xsWC")
    decimals = len(number.split(".")[1]) if "." in number else 0
    return 0.5 * 10 ** -decimals


def _row(ref: pd.DataFrame, section: str, **equals: str) -> pd.Series:
    rows = reference.select(ref, section, **equals)
    if len(rows) != 1:
        raise LookupError(f"{len(rows)} reference rows match {section!r} {equals}")
    return rows.iloc[0]


def _derivation(seed: str, figure: str, printed: pd.Series, recomputed: float, rule: str,
                extra: float = 0.0) -> dict:
    tolerance = _half_unit(printed["value_text"]) + extra
    agrees = math.isfinite(recomputed) and abs(recomputed - printed["value"]) <= tolerance + 1e-9
    return {"seed": seed, "figure": figure, "printed": printed["value"], "recomputed": round(recomputed, 4),
            "rule": rule, "tolerance": tolerance, "agrees": bool(agrees)}


def _paper(ref: pd.DataFrame) -> list[dict]:
    out = []
    for model in ("Gemma 4 E2B", "Phi-4 Multimodal", "Qwen3.5-4B"):
        tps = reference.select(ref, "§4", model=model, metric="decode_tps")["value"].dropna()
        out.append(_derivation("000", f"§6 average throughput · {model}", _row(ref, "§6", model=model,
                               metric="decode_tps"), tps.mean(), f"mean of §4's {len(tps)} task rates"))
        latency = reference.select(ref, "§5 Latency and Accuracy (table)", model=model,
                                   metric="e2e_latency")["value"].dropna()
        out.append(_derivation("000", f"§5 average latency · {model}", _row(ref, "§5 Latency and Accuracy (text)",
                               model=model), latency.mean(), f"mean of §5's {len(latency)} task latencies"))
        avg = _row(ref, "§6", model=model, metric="decode_tps")
        power = _row(ref, "§6", model=model, metric="avg_power")
        out.append(_derivation("000", f"§6 tokens per second per watt · {model}", _row(ref, "§6", model=model,
                               metric="tps_per_w"), avg["value"] / power["value"],
                               "§6 average throughput ÷ average inference power"))
    return out


def _bandwidth(ref: pd.DataFrame) -> list[dict]:
    out = []
    hosts = {"MBP": "MBP (M1 Max 32GB)", "GX10": "GX10 (GB10 128GB)", "openclaw": "openclaw (M4 16GB)"}
    for host in hosts:
        bandwidth = _row(ref, "The Setup", host=host, metric="memory_bandwidth")["value"]
        for model in ("Gemma 4 E2B", "Gemma 4 E4B"):
            tps = _row(ref, "Generation Speed", host=host, model=model, metric="decode_tps")["value"]
            out.append(_derivation("002", f"tok/s per GB/s · {host} · {model}", _row(
                ref, "Why Bandwidth", host=host, model=model), tps / bandwidth,
                "summary tok/s ÷ the machine's bandwidth", extra=0.5 / bandwidth))
    for table in ("Full Breakdown: MBP", "Full Breakdown: GX10", "Full Breakdown: openclaw"):
        rows = reference.select(ref, table)
        for label, group in rows[rows["metric"] != "speedup"].groupby("seed_row", sort=False):
            delta = _row(rows, table, seed_row=label, metric="speedup")
            if math.isnan(delta["value"]):
                continue
            e2b = _row(group, table, model="Gemma 4 E2B")["value"]
            e4b = _row(group, table, model="Gemma 4 E4B")["value"]
            out.append(_derivation("002", f"{table.split(': ')[1]} · {label} · E2B vs E4B", delta,
                                   100 * (e2b / e4b - 1), "100 × (E2B ÷ E4B − 1)"))
    for host, label in hosts.items():
        short = {m: _row(ref, f"Full Breakdown: {host}", model=m, seed_row="Gen (short, 256 tok)",
                         metric="decode_tps")["value"]
                 for m in ("Gemma 4 E2B", "Gemma 4 E4B")}
        out.append(_derivation("002", f"Generation Speed · {host} · E2B vs E4B", _row(
            ref, "Generation Speed", seed_row=label, metric="speedup"),
            100 * (short["Gemma 4 E2B"] / short["Gemma 4 E4B"] - 1), "100 × (E2B ÷ E4B − 1), short-prompt rates"))
    return out


def _quant(ref: pd.DataFrame) -> list[dict]:
    out = []
    for section, quant in (("BF16 Baseline (table)", "bf16"), ("FP8 Online (table)", "fp8 (online)"),
                           ("Results: 49.9 tok/s (table)", "nvfp4a16")):
        runs = reference.select(ref, section, metric="decode_tps")["value"]
        out.append(_derivation("004", f"The Full Picture · {quant} tok/s", _row(
            ref, "The Full Picture", quantization=quant, metric="decode_tps"), runs.mean(),
            f"mean of the {len(runs)} printed runs"))
    bf16 = _row(ref, "The Full Picture", quantization="bf16", metric="decode_tps")["value"]
    for quant in ("bf16", "fp8 (online)", "nvfp4a16"):
        tps = _row(ref, "The Full Picture", quantization=quant, metric="decode_tps")["value"]
        out.append(_derivation("004", f"The Full Picture · {quant} relative", _row(
            ref, "The Full Picture", quantization=quant, metric="relative_speed"), tps / bf16, "tok/s ÷ BF16 tok/s"))
    runs = reference.select(ref, "Results: 49.9 tok/s (table)")
    for run, group in runs.groupby("seed_row"):
        tokens = _row(group, "Results", metric="output_tokens")["value"]
        time = _row(group, "Results", metric="generation_time")
        out.append(_derivation("004", f"NVFP4 run {run} tok/s", _row(group, "Results", metric="decode_tps"),
                               tokens / time["value"], "tokens ÷ time", extra=tokens * 0.005 / time["value"] ** 2))
    parts = reference.select(ref, "What E4B", metric="weights_ple")["value"].iloc[0]
    for metric in ("weights_decoder", "weights_word_embedding", "weights_vision_encoder", "weights_audio_encoder",
                   "weights_other"):
        parts += reference.select(ref, "What E4B", metric=metric)["value"].iloc[0]
    out.append(_derivation("004", "E4B weights total", _row(ref, "What E4B", metric="weights_total"), parts,
                           "sum of the six printed parts"))
    read = _row(ref, "BF16 Baseline (text)", metric="bytes_per_token")["value"]
    bandwidth = _row(ref, "BF16 Baseline (text)", metric="memory_bandwidth")["value"]
    out.append(_derivation("004", "napkin ms per token", _row(ref, "BF16 Baseline (text)", metric="time_per_token"),
                           1000 * read / bandwidth, "GB read per token ÷ GB/s"))
    out.append(_derivation("004", "napkin tok/s ceiling", _row(ref, "BF16 Baseline (text)",
                           metric="theoretical_decode_tps"), bandwidth / read, "GB/s ÷ GB read per token"))
    return out


def derivations(ref: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every printed total, average and ratio of seeds 000, 002 and 004 (those present) beside its recomputation."""
    ref = reference.load_reference() if ref is None else ref
    rows = []
    for seed, derive in (("000", _paper), ("002", _bandwidth), ("004", _quant)):
        if ref["source"].str.startswith(seed).any():
            rows += derive(ref)
    return pd.DataFrame(rows, columns=COLUMNS)
