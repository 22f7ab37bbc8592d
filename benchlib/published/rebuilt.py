"""The seeds' own tables and claims rebuilt from their transcribed cells (paper/reference/), beyond what the
paper's run tables cover:

- law_002: 002's bandwidth law, fitted. Per model, decode tok/s against each machine's bandwidth: the ratio the
  blog prints (tok/s per GB/s), the least-squares line through the origin (tok/s = k × GB/s, so 1/k is the GB a
  token effectively reads), each machine's residual from it, and the log-log slope over the three machines (the
  law says 1). The machine whose ratio is furthest from the others is flagged, as the blog flags the M4.
- prefill_002: 002's short- and long-prompt breakdowns (decode, prefill, TTFT per machine and model), the cached-
  prefill artefact (one prompt repeated: 5345 tok/s against ~1065 uncached) and the cold vs warm runs.
- napkin_004: 004's napkin ceiling (≈ 10 GB read per token ÷ 273 GB/s ≈ 27 tok/s) beside the roofline's own
  bytes-per-token model (active parameters × bytes per parameter: 4B × 2 = 8 GB → 34 tok/s) and the weight
  tree's other readings, each with the share of it the measured 19.2 tok/s reaches. A reading whose ceiling lies
  below the measured rate cannot be what a token reads. The PLE tables are looked up one row per token, so they
  add ~20 KB per token, not their 5.4 GB.
- verdicts_001: each her-os decision table judged by its own printed thresholds (Phase 1: > 25 tok/s, < 500 ms,
  < 20 GB; 31B: 5–15 tok/s, ≤ 30 GB; FP8: 25–40 tok/s, > 35 GB, < 200 ms; …), taken from the threshold cells or
  the parenthesis of the value cell, criterion by criterion beside the status the seed prints.
- contradictions: claims two seeds (or one seed and its own cells) make differently (paper/reference/
  contradictions.csv, each claim quoted verbatim; tests find every quote in its seed)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from benchlib.config.paths import REFERENCE_DIR
from benchlib.published.reference import bandwidth_runs

LAW_COLUMNS = ["model", "host", "memory_bandwidth_gbs", "decode_tps", "ratio_printed", "ratio", "fit_tps",
               "residual", "k_tps_per_gbs", "gb_per_token_effective", "loglog_slope", "loglog_slope_se", "outlier",
               "loglog_slope_without_outlier"]


def law_002(ref: pd.DataFrame) -> pd.DataFrame:
    """One row per model × machine (module docstring); empty without 002's rows."""
    runs = bandwidth_runs(ref)
    if runs.empty:
        return pd.DataFrame(columns=LAW_COLUMNS)
    rows = []
    for model, group in runs.groupby("model", sort=False):
        bw = pd.to_numeric(group["memory_bandwidth_gbs"], errors="coerce").to_numpy(float)
        tps = pd.to_numeric(group["decode_tps"], errors="coerce").to_numpy(float)
        k = float((bw * tps).sum() / (bw * bw).sum())  # least squares through the origin
        fit = scipy_stats.linregress(np.log(bw), np.log(tps)) if len(bw) > 2 else None
        ratio = tps / bw
        spread = np.abs(np.log(ratio) - np.log(np.median(ratio)))
        outlier = (spread == spread.max()) & (spread.max() > math.log(1.3))
        kept = ~outlier
        slope_kept = (float(np.polyfit(np.log(bw[kept]), np.log(tps[kept]), 1)[0]) if kept.sum() >= 2 and outlier.any()
                      else math.nan)
        for i, row in enumerate(group.itertuples()):
            rows.append({"model": model, "host": row.host, "memory_bandwidth_gbs": bw[i], "decode_tps": tps[i],
                         "ratio_printed": row.tps_per_gbs_reported, "ratio": ratio[i],
                         "fit_tps": k * bw[i], "residual": tps[i] / (k * bw[i]) - 1, "k_tps_per_gbs": k,
                         "gb_per_token_effective": 1 / k,
                         "loglog_slope": fit.slope if fit else math.nan,
                         "loglog_slope_se": fit.stderr if fit else math.nan,
                         "outlier": bool(outlier[i]), "loglog_slope_without_outlier": slope_kept})
    return pd.DataFrame(rows, columns=LAW_COLUMNS)


PREFILL_COLUMNS = ["host", "model", "prompt", "decode_tps", "prefill_tps", "ttft_s", "note"]


def prefill_002(ref: pd.DataFrame) -> pd.DataFrame:
    """002's per-prompt-length breakdowns, then the cached-prefill and cold/warm rows (from running text)."""
    rows = ref[ref["source"].str.startswith("002") & ref["section"].str.startswith("Full Breakdown")]
    rows = rows[rows["metric"].isin(["decode_tps", "prefill_tps", "ttft"])]
    out = []
    for (host, model, task), group in rows.groupby(["host", "model", "task"], sort=False):
        value = group.set_index("metric")["value"]
        out.append({"host": host, "model": model, "prompt": task, "decode_tps": value.get("decode_tps", math.nan),
                    "prefill_tps": value.get("prefill_tps", math.nan), "ttft_s": value.get("ttft", math.nan),
                    "note": "" if "prefill_tps" in value else "prefill/TTFT not printed (CUDA warm-up variance)"})
    for section in ("Why Unique Prompts", "FAQ (cached", "GX10 keep_alive", "FAQ (cold"):
        for row in ref[ref["source"].str.startswith("002") & ref["section"].str.startswith(section)].itertuples():
            out.append({"host": row.host, "model": row.model, "prompt": row.task,
                        "decode_tps": row.value if row.metric == "decode_tps" else math.nan,
                        "prefill_tps": row.value if row.metric == "prefill_tps" else math.nan,
                        "ttft_s": row.value if row.metric == "ttft" else math.nan,
                        "note": f"{row.value_text}: {row.note}"})
    return pd.DataFrame(out, columns=PREFILL_COLUMNS)


NAPKIN_COLUMNS = ["reading", "gb_per_token", "ceiling_tps", "measured_tps", "share", "possible", "source"]
VOCAB_ROWS = 262_144  # "word embedding (262K x 2560)" in 004's weight tree: one PLE row per vocabulary entry


def napkin_004(ref: pd.DataFrame) -> pd.DataFrame:
    """Readings of 'bytes read per token' for E4B BF16 on the DGX Spark, each with its ceiling (module docstring)."""
    sel = ref[ref["source"].str.startswith("004")]
    if sel.empty:
        return pd.DataFrame(columns=NAPKIN_COLUMNS)

    def cell(metric: str, section: str = "") -> float:
        rows = sel[(sel["metric"] == metric) & sel["section"].str.startswith(section)]
        return float(rows["value"].iloc[0]) if len(rows) else math.nan

    bandwidth = cell("memory_bandwidth", "BF16 Baseline (text)")
    runs = sel[sel["section"].str.startswith("BF16 Baseline") & (sel["metric"] == "decode_tps")]
    measured = float(pd.to_numeric(runs["value"], errors="coerce").mean())
    total, ple, decoder = cell("weights_total"), cell("weights_ple"), cell("weights_decoder")
    encoders = cell("weights_vision_encoder") + cell("weights_audio_encoder")
    active = cell("params_active")
    ple_row_gb = ple / VOCAB_ROWS
    readings = [
        ("the blog's napkin: PLE lookups + decoder weights", cell("bytes_per_token", "BF16 Baseline"),
         "004 'BF16 Baseline' (≈10 GB ÷ 273 GB/s ≈ 27 tok/s)"),
        ("our roofline: active parameters × 2 bytes (BF16)", active * 2, "benchlib.analysis.roofline (4B × 2 bytes)"),
        ("decoder weights only", decoder, "004 weight tree"),
        ("decoder + one PLE row per token (lookups read one row)", decoder + ple_row_gb,
         f"PLE {ple:g} GB ÷ {VOCAB_ROWS} rows = {ple_row_gb * 1e6:.0f} KB per token"),
        ("every weight except PLE tables and encoders", total - ple - encoders, "004 weight tree"),
        ("every BF16 weight (15 GB)", total, "004 weight tree"),
    ]
    out = []
    for name, gb, source in readings:
        ceiling = bandwidth / gb if gb and not math.isnan(gb) else math.nan
        out.append({"reading": name, "gb_per_token": gb, "ceiling_tps": ceiling, "measured_tps": measured,
                    "share": measured / ceiling if ceiling == ceiling else math.nan,
                    "possible": bool(ceiling >= measured) if ceiling == ceiling else False, "source": source})
    return pd.DataFrame(out, columns=NAPKIN_COLUMNS)


VERDICT_COLUMNS = ["seed_table", "candidate", "criterion", "value", "value_text", "threshold", "status",
                   "printed_status", "agrees", "printed_decision", "verdict"]
_CRITERIA = ["decode_tps", "ttft", "vram", "model_memory", "tools_passed", "tools_share", "entity_persons",
             "kannada_entities", "vision_works"]
_BOUND = re.compile(r"(≥|>=|>|≤|<=|<)\s*(\d+(?:\.\d+)?)")
_RANGE = re.compile(r"(\d+(?:\.\d+)?)\s*[-–]\s*(\d+(?:\.\d+)?)\s*range")


def threshold_status(value: float, threshold: str) -> str:
    """PASS / FAIL of `value` against a printed threshold ('> 25 tok/s', '≤30 GB', '5-15 range', '≥ 4/6');
    '' when the text holds no bound."""
    if value != value:
        return "NO DATA"
    found = _RANGE.search(threshold)
    if found:
        return "PASS" if float(found.group(1)) <= value <= float(found.group(2)) else "FAIL"
    found = _BOUND.search(threshold)
    if not found:
        return ""
    op, bound = found.group(1), float(found.group(2))
    ok = {"≥": value >= bound, ">=": value >= bound, ">": value > bound, "≤": value <= bound, "<=": value <= bound,
          "<": value < bound}[op]
    return "PASS" if ok else "FAIL"


def verdicts_001(ref: pd.DataFrame) -> pd.DataFrame:
    """Every criterion of every 001 decision table under that table's own printed threshold (module docstring)."""
    rows = ref[ref["seed_table"].astype(str).str.match(r"001-.*-decision$")] if "seed_table" in ref else ref.iloc[0:0]
    out = []
    for table, group in rows.groupby("seed_table", sort=False):
        first = group.iloc[0]
        candidate = " ".join(str(v) for v in (first["model"], first["quantization"], f"({first['server']})") if v)
        decision = group[group["metric"] == "decision"]["value_text"]
        judged, rows_of_table = [], []
        for criterion in _CRITERIA:
            cells = group[group["metric"] == criterion]
            if cells.empty:
                continue
            cell = cells.iloc[0]
            key = "vision" if criterion == "vision_works" else criterion
            limit = group[group["metric"] == f"threshold_{key}"]["value_text"]
            inline = re.search(r"\(([^)]*)\)", str(cell["value_text"]))
            threshold = str(limit.iloc[0]) if len(limit) else (inline.group(1) if inline else "")
            printed = group[group["metric"] == f"status_{key}"]["value_text"]
            printed = str(printed.iloc[0]) if len(printed) else (
                threshold.split(":")[-1].strip() if ":" in threshold else
                next((w for w in ("PASS", "FAIL") if w in str(cell["value_text"])), ""))
            if criterion == "vision_works":
                status = "PASS" if cell["value"] == 1 else ("FAIL" if cell["value"] == 0 else "NO DATA")
            else:
                status = threshold_status(float(cell["value"]), threshold.split(":")[0])
            word = {"NO": "FAIL", "YES": "PASS"}.get(printed.split(" ")[0], printed.split(" ")[0]) if printed else ""
            judged.append((criterion, status or (f"{word} (printed)" if word else ""), threshold or "printed",
                           cell["value"]))
            rows_of_table.append({"seed_table": table, "candidate": candidate, "criterion": criterion, "value": cell["value"],
                        "value_text": cell["value_text"], "threshold": threshold, "status": status,
                        "printed_status": printed, "agrees": (word == status) if word and status else None,
                        "printed_decision": str(decision.iloc[0]) if len(decision) else ""})
        fails = [f"{c} {v:g} vs {t}" for c, s, t, v in judged if s.startswith("FAIL")]
        verdict = ("fails " + "; ".join(fails)) if fails else "every printed threshold passes"
        out += [{**row, "verdict": verdict} for row in rows_of_table]
    return pd.DataFrame(out, columns=VERDICT_COLUMNS)


CONTRADICTION_COLUMNS = ["topic", "seed_a", "says_a", "seed_b", "says_b", "reading"]


def contradictions() -> pd.DataFrame:
    """paper/reference/contradictions.csv: what two seeds (or a seed and its own cells) say differently."""
    return pd.read_csv(REFERENCE_DIR / "contradictions.csv", dtype=str).fillna("").reindex(
        columns=CONTRADICTION_COLUMNS)
