"""Published figures, transcribed as tidy rows (paper/reference/*.csv), and the wide tables built from them.

Every row cites its seed file (`source`) and section; `value_text` is the cell exactly as printed and
`value` the number read from it (empty for text cells and "Not applicable"; ranges go to
value_low/value_high). paper/reference/README.md documents files and columns.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from benchlib.analysis import frontier
from benchlib.analysis.deployments import LONG_COLUMNS
from benchlib.config import metrics
from benchlib.config.identity import Deployment
from benchlib.config.paths import PROJECT_ROOT, REFERENCE_DIR

REFERENCE_COLUMNS = LONG_COLUMNS
NUMERIC_COLUMNS = ("value", "value_low", "value_high")
# seed prefix -> file under paper/reference/
REFERENCE_FILES = {
    "000": "paper_000.csv",
    "001": "heros_001.csv",
    "002": "bandwidth_002.csv",
    "004": "quant_004.csv",
}
SEEDS_DIR = PROJECT_ROOT.parent / "shared" / "seeds"

# Paper task titles (000 §4–5, §9) -> task names in testdata/tasks/*.yaml.
PAPER_TASK_IDS = {
    "Basic Q&A": "basic_qa",
    "Reasoning": "reasoning",
    "Python coding": "coding",
    "Multilingual": "multilingual",
    "Summarization": "summarization",
    "Image description": "image_description",
    "Color identification": "color_identification",
    "Transcription (ASR)": "transcription",
    "Audio Q&A": "audio_qa",
    "Video description (8 s 1280x720 MP4, 1 fps)": "video_analysis",
}
# Units a metric is converted to by harmonize_units (factor from the printed unit).
CANONICAL_UNITS = {"ttft": "s", "ttft_sd": "s", "e2e_latency": "s", "time_per_token": "s", "generation_time": "s"}
_UNIT_FACTORS = {("ms", "s"): 1e-3, ("s", "ms"): 1e3}
HEROS_TOOL_TESTS = 8  # her-os tool-calling suite size (001 §6: "8/8")


def load_reference(seeds: Iterable[str] | None = None, directory: Path | None = None) -> pd.DataFrame:
    """All reference rows (or those of the given seed prefixes, e.g. ["000"]), numbers as floats."""
    directory = Path(directory or REFERENCE_DIR)
    wanted = list(seeds) if seeds is not None else list(REFERENCE_FILES)
    frames = []
    for prefix in wanted:
        if prefix not in REFERENCE_FILES:
            raise KeyError(f"no reference file for seed '{prefix}' (known: {', '.join(REFERENCE_FILES)})")
        frames.append(pd.read_csv(directory / REFERENCE_FILES[prefix], dtype=str, keep_default_na=False))
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=REFERENCE_COLUMNS)
    frame = frame[REFERENCE_COLUMNS].copy()
    for column in NUMERIC_COLUMNS:
        frame[column] = pd.to_numeric(frame[column].replace("", np.nan), errors="coerce")
    frame["task_id"] = frame["task"].map(PAPER_TASK_IDS).fillna("")
    return frame


def seed_path(source: str, seeds_dir: Path | None = None) -> Path | None:
    """The seed file a row cites, if the seeds are present (../shared/seeds from the repo root)."""
    path = Path(seeds_dir or SEEDS_DIR) / source
    return path if path.is_file() else None


def seed_text(source: str, seeds_dir: Path | None = None) -> str | None:
    """Seed text with markdown bold removed (cells are transcribed without '**'); None when absent."""
    path = seed_path(source, seeds_dir)
    return path.read_text(encoding="utf-8").replace("**", "") if path else None


def select(ref: pd.DataFrame, section_prefix: str | None = None, **equals: str) -> pd.DataFrame:
    """Rows whose section starts with section_prefix and whose columns equal the given values."""
    mask = pd.Series(True, index=ref.index)
    if section_prefix is not None:
        mask &= ref["section"].str.startswith(section_prefix)
    for column, wanted in equals.items():
        mask &= ref[column] == wanted
    return ref[mask]


def value(ref: pd.DataFrame, section_prefix: str | None = None, **equals: str) -> float:
    """The single numeric value matching the filters (raises when zero or several rows match)."""
    rows = select(ref, section_prefix, **equals)
    if len(rows) != 1:
        raise LookupError(f"{len(rows)} reference rows match section={section_prefix!r} {equals}")
    return float(rows["value"].iloc[0])


def harmonize_units(ref: pd.DataFrame) -> pd.DataFrame:
    """Copy with time metrics converted to CANONICAL_UNITS (e.g. TTFT ms -> s); other rows unchanged."""
    out = ref.copy()
    for metric, unit in CANONICAL_UNITS.items():
        for printed in out.loc[out["metric"] == metric, "unit"].unique():
            factor = _UNIT_FACTORS.get((printed, unit))
            if factor is None:
                continue
            mask = (out["metric"] == metric) & (out["unit"] == printed)
            out.loc[mask, list(NUMERIC_COLUMNS)] = out.loc[mask, list(NUMERIC_COLUMNS)] * factor
            out.loc[mask, "unit"] = unit
    return out


def _first(rows: pd.DataFrame, metric: str, task: str | None = None) -> float:
    rows = rows[rows["metric"] == metric]
    if task is not None:
        rows = rows[rows["task"] == task]
    values = rows["value"].dropna()
    return float(values.iloc[0]) if len(values) else float("nan")


def paper_systems(ref: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per system of the paper (000): the axes its §7 frontier reasons about.

    tps_per_w is recomputed as average throughput ÷ average inference power (§6); tps_per_w_reported is
    the printed 2-decimal figure. modality_count counts the §2 'Modalities in this deployment' list.
    active_params_b is §2's active count where printed (Gemma 2.3B), else the single reported figure
    (Phi-4 ~5.6B dense; Qwen3.5-4B 4B, an upper bound if its MoE activates fewer).
    """
    ref = load_reference(["000"]) if ref is None else ref[ref["source"].str.startswith("000")]
    rows = []
    for model, group in ref[ref["model"] != ""].groupby("model", sort=False):
        host = group["host"].iloc[0]
        s2 = select(group, "§2")
        s4 = select(group, "§4")
        s5 = select(group, "§5")
        s6 = select(group, "§6")
        s9 = select(group, "§9")
        modalities = s2.loc[s2["metric"] == "modalities", "value_text"]
        avg_tps = _first(s6, "decode_tps")
        avg_power = _first(s6, "avg_power")
        vision = s4[(s4["modality"] == "vision") & (s4["metric"] == "decode_tps")]["value"]
        rows.append({
            "system": Deployment.published(model, host),
            "model": model,
            "host": host,
            "server": next((v for v in group["server"] if v), ""),
            "hardware": group["hardware"].iloc[0],
            "quantization": group["quantization"].iloc[0],
            "memory_bandwidth_gbs": _first(select(ref, "§3", host=host), "memory_bandwidth"),
            "active_params_b": (_first(s2, "params_active") if not np.isnan(_first(s2, "params_active"))
                                else _first(s2, "params_total")),
            "avg_decode_tps": avg_tps,
            "avg_power_w": avg_power,
            "peak_power_w": _first(s6, "peak_power"),
            "tps_per_w": metrics.tps_per_watt(avg_tps, avg_power),
            "tps_per_w_reported": _first(s6, "tps_per_w"),
            "avg_temp_c": _first(s6, "avg_temp"),
            "peak_temp_c": _first(s6, "peak_temp"),
            "baseline_memory_gb": _first(s6, "baseline_memory"),
            "context_window_k": _first(s9, "context_window"),
            "modality_count": len(modalities.iloc[0].split(",")) if len(modalities) else 0,
            "video_support": _first(s9, "video_support"),
            "video_decode_tps": _first(s9, "decode_tps"),
            "vision_decode_tps": float(vision.mean()) if vision.notna().any() else float("nan"),
            "asr_decode_tps": _first(s4, "decode_tps", "Transcription (ASR)"),
            "asr_e2e_s": _first(s5, "e2e_latency", "Transcription (ASR)"),
            "short_qa_decode_tps": _first(s4, "decode_tps", "Basic Q&A"),
            "short_qa_e2e_s": _first(s5, "e2e_latency", "Basic Q&A"),
            # answer length implied by the paper's own cells: Basic Q&A tok/s × its latency (an upper bound: the
            # latency includes the time to the first token); the paper prints no token counts
            "short_qa_output_tokens": _first(s4, "decode_tps", "Basic Q&A") * _first(s5, "e2e_latency", "Basic Q&A"),
            "avg_e2e_s": _first(s5, "e2e_latency", "All tasks (average)"),
        })
    return frontier.quality_columns(pd.DataFrame(rows), paper_accuracy(ref))


def published_model(ref: pd.DataFrame, seed: str, model: str) -> dict | None:
    """A seed's printed sizes of one model, as a plan's catalog entry (benchlib.analysis.candidates): params_b
    (total, else the single count), active_params_b (active, else the same count), quantization, source and notes
    (architecture; a single count read as all parameters). None when the seed prints nothing for it."""
    rows = ref[ref["source"].str.startswith(seed) & (ref["model"] == model)] if len(ref) else ref
    if not len(rows):
        return None
    total, active = _first(rows, "params_total"), _first(rows, "params_active")
    arch = rows.loc[rows["metric"] == "architecture", "value_text"]
    notes = [f"architecture {arch.iloc[0]} (seed {seed})"] if len(arch) else []
    if np.isnan(active):
        notes.append(f"seed {seed} prints one parameter count: read as all of them (fewer if some are inactive)")
    return {"name": model, "params_b": total if not np.isnan(total) else active,
            "active_params_b": active if not np.isnan(active) else total,
            "quantization": str(rows["quantization"].iloc[0]), "source": f"seed {seed} §2", "notes": notes}


def paper_accuracy(ref: pd.DataFrame | None = None) -> pd.DataFrame:
    """The paper's (000 §5) per-task accuracy as published: a pass/fail summary coded 1 = reported correct,
    one "scored" item per task (basis "reported", never a measured rate). A reasoning answer the paper says
    was truncated but reported correct keeps that in its note."""
    ref = load_reference(["000"]) if ref is None else ref[ref["source"].str.startswith("000")]
    rows = []
    cells = ref[(ref["metric"] == "accuracy") & (ref["model"] != "")] if len(ref) else ref
    for cell in cells.itertuples():
        if pd.isna(cell.value):  # "Not applicable": the deployment does not take that input; nothing reported
            continue
        task = PAPER_TASK_IDS.get(cell.task, cell.task)
        text = f"{cell.value_text} {cell.note}"
        short = re.match(r"[a-z]+", cell.model.lower()).group()  # "Gemma and Qwen truncated": names by family
        truncated = "truncated" in text.lower() and short in text.lower().split("truncated")[0].split(";")[-1]
        rows.append({"system": Deployment.published(cell.model, cell.host), "task": task, "passed": float(cell.value),
                     "scored": 1.0, "basis": "reported",
                     "note": "reported correct, but the answer was truncated (000 §5)" if truncated else ""})
    return pd.DataFrame(rows, columns=frontier.QUALITY_LONG_COLUMNS)


def _unit_denominator(unit: str) -> float:
    match = re.fullmatch(r"/(\d+)", unit or "")
    return float(match.group(1)) if match else float("nan")


def heros_decision_candidates(ref: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per decision table of the her-os report (001), with the values that table judged.

    Columns match decisions.decide: decode_tps, ttft_ms, model_memory_gb (the 'VRAM' / 'Model VRAM' the
    table used), tools_passed (of 8; a '%' share is converted), entity_recall, vision_works; plus the
    report's own decision text (reported_decision). Values a table did not show stay NaN.
    """
    ref = load_reference(["001"]) if ref is None else ref[ref["source"].str.startswith("001")]
    ref = ref[ref["section"].str.contains("Decision") & ~ref["section"].str.startswith("§8")]
    rows = []
    for section, group in ref.groupby("section", sort=False):
        ttft = group[group["metric"] == "ttft"]
        ttft_ms = _first(group, "ttft") * (1e3 if len(ttft) and ttft["unit"].iloc[0] == "s" else 1.0)
        memory = _first(group, "model_memory")
        if np.isnan(memory):
            memory = _first(group, "vram")
        tools = _first(group, "tools_passed")
        if np.isnan(tools):
            tools = _first(group, "tools_share") / 100.0 * HEROS_TOOL_TESTS
        persons = group[group["metric"] == "entity_persons"]
        recall = (float(persons["value"].iloc[0]) / _unit_denominator(persons["unit"].iloc[0])
                  if len(persons) else float("nan"))
        vision = _first(group, "vision_works")
        decision = group.loc[group["metric"] == "decision", "value_text"]
        first = group.iloc[0]
        rows.append({
            "candidate": f"{first['model']} {first['quantization']} ({first['server']}, {first['host']})",
            "section": section,
            "host": first["host"],
            "model": first["model"],
            "quantization": first["quantization"],
            "server": first["server"],
            "decode_tps": _first(group, "decode_tps"),
            "ttft_ms": ttft_ms,
            "model_memory_gb": memory,
            "tools_passed": tools,
            "entity_recall": recall,
            "vision_works": (bool(vision) if not np.isnan(vision) else np.nan),
            "reported_decision": decision.iloc[0] if len(decision) else "",
        })
    return pd.DataFrame(rows)


def bandwidth_runs(ref: pd.DataFrame | None = None) -> pd.DataFrame:
    """002's summary generation speeds per host × model, with the host's memory bandwidth and printed ratio."""
    ref = load_reference(["002"]) if ref is None else ref[ref["source"].str.startswith("002")]
    speeds = select(ref, "Generation Speed", metric="decode_tps")
    bandwidth = select(ref, "The Setup", metric="memory_bandwidth").set_index("host")["value"]
    ratios = select(ref, "Why Bandwidth", metric="tps_per_gbs").set_index(["host", "model"])["value"]
    out = speeds[["host", "hardware", "model", "quantization", "server"]].copy()
    out["decode_tps"] = speeds["value"].to_numpy()
    out["memory_bandwidth_gbs"] = out["host"].map(bandwidth).to_numpy()
    out["tps_per_gbs_reported"] = [ratios.get((h, m), np.nan) for h, m in zip(out["host"], out["model"])]
    return out.reset_index(drop=True)


def quant_runs(ref: pd.DataFrame | None = None) -> pd.DataFrame:
    """004's E4B formats on DGX Spark: tok/s and GPU memory per quantization, with the stated inputs
    (273 GB/s, ~4B parameters read per token) and the blog's own napkin ceiling for BF16."""
    ref = load_reference(["004"]) if ref is None else ref[ref["source"].str.startswith("004")]
    picture = select(ref, "The Full Picture")
    bandwidth = value(ref, "BF16 Baseline (text)", metric="memory_bandwidth")
    active = value(ref, "What E4B", metric="params_active")
    rows = []
    for quant, group in picture.groupby("quantization", sort=False):
        rows.append({
            "host": group["host"].iloc[0],
            "model": group["model"].iloc[0],
            "quantization": quant,
            "decode_tps": _first(group, "decode_tps"),
            "model_memory_gb": _first(group, "model_memory"),
            "memory_bandwidth_gbs": bandwidth,
            "active_params_b": active,
        })
    out = pd.DataFrame(rows)
    out["napkin_ceiling_tps"] = np.where(out["quantization"] == "bf16",
                                         value(ref, "BF16 Baseline (text)", metric="theoretical_decode_tps"), np.nan)
    return out
