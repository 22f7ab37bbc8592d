"""The hardware table (paper/reference/hardware.csv) and what the published runs say about efficiency on it.

Every entry names its source. A machine a seed measured on (RTX 3090, GB10, M1 Max, M4) takes its memory,
bandwidth and power envelope from that seed's transcribed cells (the reference rows: one home for the seeds'
figures), the columns the seed does not print (dense compute) from the vendor document the row cites; a common
card (RTX 4090, L4, A100, H100, H200) takes every figure from its vendor's datasheet, cited in `spec_source`.

Published efficiencies, the defaults of the plan's EFFICIENCY RULE (benchlib.analysis.plan) on a host without runs:
- decode: 004's E4B ladder on one GB10 under vLLM (BF16, FP8 online, NVFP4A16), measured tok/s ÷ (273 GB/s ÷
  ~4 B active parameters × bytes per weight) — benchlib.analysis.roofline on reference.quant_runs;
- prefill: 002's M1 Max prompt rates (E2B and E4B, short and long prompts) ÷ (Apple's 10.4 TFLOPS ÷ 2 × active
  parameters, 001 §1's 2.3 B and ~4 B).

The seeds' check (seed_checks): Gemma 4 E2B BF16 on the RTX 3090 and Qwen3.5-4B on GB10 predicted from their
published sizes (000 §2) and the cards' bandwidth (000 §3) with the default efficiencies, beside the paper's measured
average throughput (000 §6)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from benchlib.analysis import roofline
from benchlib.analysis.candidates import from_entry
from benchlib.analysis.plan import Calibration, Efficiency, Host, predict, prefill_ceiling, relative_error
from benchlib.config.paths import REFERENCE_DIR
from benchlib.published import reference

HARDWARE_FILE = REFERENCE_DIR / "hardware.csv"
SEED_METRICS = {"memory_gb": "device_memory", "bandwidth_gbs": "memory_bandwidth", "power_w": "tdp"}


class HardwareError(KeyError):
    """A named host the table does not hold (one line)."""


def _number(text: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def _seed_cell(ref: pd.DataFrame, seed: str, host: str, metric: str) -> tuple[float, str]:
    """The seed's printed cell for a host's metric, and the citation ('seed 000 §3 …: "936 GB/s"')."""
    rows = ref[ref["source"].str.startswith(seed) & (ref["host"] == host) & (ref["metric"] == metric)
               & ref["value"].notna()]
    if not len(rows):
        return math.nan, ""
    row = rows.iloc[0]
    return float(row["value"]), f"seed {seed} {row['section']}: \"{row['value_text']}\""


def load_hardware(path: Path | None = None, ref: pd.DataFrame | None = None) -> dict[str, Host]:
    """key -> Host for every row of the table, each figure with its source."""
    table = pd.read_csv(path or HARDWARE_FILE, dtype=str, keep_default_na=False)
    ref = reference.load_reference(["000", "002"]) if ref is None else ref
    hosts = {}
    for row in table.to_dict("records"):
        figures: dict[str, tuple[float, str]] = {}
        for name, column in (("memory_gb", "memory_gb"), ("bandwidth_gbs", "memory_bandwidth_gbs"),
                             ("power_w", "power_w")):
            if row["seed"]:
                figures[name] = _seed_cell(ref, row["seed"], row["seed_host"], SEED_METRICS[name])
            else:
                figures[name] = (_number(row[column]), row["spec_source"])
        compute = _number(row["compute_tflops"])
        hosts[row["key"]] = Host(
            name=row["name"], kind=row["kind"], memory_gb=figures["memory_gb"][0],
            memory_source=figures["memory_gb"][1], bandwidth_gbs=figures["bandwidth_gbs"][0],
            bandwidth_source=figures["bandwidth_gbs"][1], compute_tflops=compute,
            compute_source=(f"{row['compute_precision']}: {row['compute_source']}" if not math.isnan(compute)
                            else row["compute_source"]),
            power_w=figures["power_w"][0],
            power_source=(f"rated envelope (an upper bound on the draw): {figures['power_w'][1]}"
                          if not math.isnan(figures["power_w"][0]) else ""))
    return hosts


def named_host(key: str, hosts: dict[str, Host] | None = None) -> Host:
    hosts = load_hardware() if hosts is None else hosts
    if key not in hosts:
        raise HardwareError(f"no host {key!r} in {HARDWARE_FILE.name} (known: {', '.join(hosts)})")
    return hosts[key]


def published_decode_efficiency(ref: pd.DataFrame | None = None) -> Efficiency:
    """004's E4B ladder: measured ÷ the bandwidth ceiling of ~4 B active parameters at each format's bytes per
    weight (see the module docstring)."""
    ref = reference.load_reference(["004"]) if ref is None else ref
    runs = roofline.roofline_table(reference.quant_runs(ref))
    return Efficiency.from_ratios(runs["efficiency"], "default: 004's E4B ladder on GB10 (vLLM)")


def published_prefill_efficiency(ref: pd.DataFrame | None = None, hosts: dict[str, Host] | None = None) \
        -> Efficiency:
    """002's M1 Max prompt rates ÷ the compute ceiling of each model's active parameters (001 §1)."""
    ref = reference.load_reference(["001", "002"]) if ref is None else ref
    mbp = named_host("m1max", hosts)
    active = {m: reference.value(ref, "§1 Gemma 4 Family", model=m, metric="params_active")
              for m in ("Gemma 4 E2B", "Gemma 4 E4B")}
    rows = ref[ref["source"].str.startswith("002") & ref["section"].str.startswith("Full Breakdown")
               & (ref["host"] == "MBP") & (ref["metric"] == "prefill_tps")]
    ratios = [row.value / prefill_ceiling(mbp, active[row.model]) for row in rows.itertuples()]
    return Efficiency.from_ratios(ratios, "default: 002's M1 Max prompt rates")


# (hardware table key, seed, model as the seed names it): the seeds' deployments the plan predicts from published
# sizes and bandwidth alone
SEED_CHECKS = (("rtx3090", "000", "Gemma 4 E2B"), ("gb10", "000", "Qwen3.5-4B"))
# the reference sets the seed checks read: the deployments (000), the parameter counts (001), the prompt rates (002)
# and the efficiency ladder (004); a paper built from fewer has no seed check
SEED_CHECK_SOURCES = ("000", "001", "002", "004")


def has_seed_check_sources(ref: pd.DataFrame) -> bool:
    return len(ref) > 0 and set(SEED_CHECK_SOURCES) <= set(ref["source"].astype(str).str[:3])


def seed_checks(ref: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """Each seed deployment predicted on its host with the published default efficiencies (no run of ours there),
    beside the paper's measured average throughput and the relative error."""
    ref = reference.load_reference() if ref is None else ref
    hosts = load_hardware(ref=ref)
    defaults = Calibration((), published_decode_efficiency(ref), published_prefill_efficiency(ref, hosts))
    out = []
    for key, seed, model in SEED_CHECKS:
        published = reference.published_model(ref, seed, model)
        candidate = from_entry({**published, "name": f"{model} {published['quantization']}"})
        p = predict(candidate, hosts[key], defaults)
        paper = reference.value(ref, "§6", model=model, metric="decode_tps")
        # §6's figure averages §4's tasks, the short answers (Basic Q&A, ASR) with the long ones; the median of
        # §4's text tasks is the figure nearest a decode rate the paper prints
        tasks = reference.select(ref, "§4", model=model, metric="decode_tps", modality="text")["value"].dropna()
        median = float(tasks.median()) if len(tasks) else math.nan
        out.append({"host": key, "model": model, "candidate": candidate, "prediction": p, "measured_tps": paper,
                    "error": relative_error(p.decode_tps.value, paper), "within": p.decode_tps.contains(paper),
                    "task_median_tps": median, "task_median_error": relative_error(p.decode_tps.value, median),
                    "n_tasks": int(len(tasks))})
    return out
