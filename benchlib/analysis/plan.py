"""What should run on this host: every candidate deployment predicted from the host and the weights, before it runs.

The model (docs/plan.md works it by hand), for one candidate on one host, every figure a value with an interval:

    fits      need = weights (every tensor) + KV cache (context × concurrency × KV bytes per token) + runtime
              overhead (RUNTIME_OVERHEAD_GB, a range per kind of host); "yes" when the high end fits the host's
              memory, "no" when the low end does not, "tight" between
    decode    ceiling = bandwidth ÷ (bytes read per generated token + the KV cache at the prompt's length) — the
              bandwidth law (seeds 002, 004; benchlib.analysis.bandwidth_law); predicted = efficiency × ceiling,
              the efficiency an Efficiency (below) with its interval. Where the bytes read are uncertain (a model
              with per-layer embeddings or experts: its active parameters read, up to all of them) the low end
              uses the larger reading
    prefill   ceiling = dense compute (FLOP/s) ÷ (2 × active parameters): the compute roofline (one multiply and
              one add per weight per prompt token); predicted = prefill efficiency × ceiling
    TTFT      prompt tokens ÷ predicted prefill tok/s (the project's prefill rate is prompt tokens ÷ TTFT, so the
              two are one figure, benchlib.config.metrics)
    energy    joules per token = the host's power figure ÷ decode tok/s, where a power figure is known (a rated
              TDP is an upper bound on the draw, so the figure is too)
    serving   aggregate tok/s at the concurrency: each decode step reads the weights once for every stream and
              computes each stream's tokens, so step time = max(memory time, compute time) and aggregate =
              streams ÷ step time

EFFICIENCY RULE: the decode efficiency is the median, over the measured runs the calibration holds, of measured
decode tok/s ÷ that run's ceiling on this host's bandwidth; its interval is the range (min–max) of those ratios,
which holds the next run's ratio with probability (n − 1)/(n + 1) when the runs are alike. A deployment's own
measurement never calibrates its own prediction (leave-own-out: `exclude`), so a measured deployment's prediction
stays a prediction. Without a run on the host the default is the published ladder (004's E4B BF16, FP8 and
NVFP4 on one GB10 under vLLM, benchlib.published.reference.quant_runs), stated as such. Each measured run added
to outputs/ on the host joins the calibration: the median moves to the host's own and the range to its own spread.
The prefill efficiency follows the same rule over measured prompt tok/s ÷ the compute ceiling; its default is
002's M1 Max prefill rows (Apple's 10.4 TFLOPS).

Ranking (rank): the frontier's regimes (benchlib.analysis.frontier.REGIMES) on what can be predicted —
workstation on decode tok/s, edge on tokens per joule (decode tok/s where no power figure is known, said so),
serving on aggregate tok/s at the concurrency; a candidate that does not fit, or whose measured graded accuracy
is below the regime's floor, is listed after the others with why. Quality is measured accuracy where the same
weights were measured, else "unknown". `flips` says which adjacent pairs the prediction's uncertainty could
swap, and at what ratio."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from benchlib.analysis import frontier, stats
from benchlib.analysis.deployments import task_accuracy
from benchlib.config import identity
from benchlib.records.rows import STATUS_OK
from benchlib.records.schema import flag

GB = 1e9
PLAN_JSON = "plan.json"  # outputs/<host>/plan.json: every plan made for the host (benchlib.views.planner)
KV_CACHE_BYTES = 2  # llama.cpp and vLLM keep the KV cache in 16-bit unless told otherwise
# Memory a server needs beyond weights and KV cache, (low, high) GB: llama-cpp-python's server (a Python process,
# compute buffers) on a CPU; a CUDA context, cuBLAS workspace and activations on a GPU. Stated defaults, not
# measurements (docs/plan.md): the fit's interval is this range, so a "tight" verdict says the default decides it.
RUNTIME_OVERHEAD_GB = {"cpu": (0.15, 0.6), "gpu": (0.5, 1.5), "soc": (0.5, 1.5)}
FIT_YES, FIT_TIGHT, FIT_NO = "yes", "tight", "no"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Figure:
    """A predicted value with its interval (low ≤ value ≤ high); NaN throughout when it cannot be predicted."""

    value: float
    low: float
    high: float

    @classmethod
    def none(cls) -> "Figure":
        return cls(math.nan, math.nan, math.nan)

    @property
    def known(self) -> bool:
        return not math.isnan(self.value)

    def inverse(self, numerator: float = 1.0) -> "Figure":
        """numerator ÷ this figure: the interval's ends swap."""
        return Figure(numerator / self.value, numerator / self.high, numerator / self.low) if self.known \
            else Figure.none()

    def contains(self, value: float) -> bool:
        return self.known and self.low <= value <= self.high


@dataclass(frozen=True)
class Host:
    """What the plan needs of a host, each figure with where it came from."""

    name: str
    kind: str  # cpu | gpu | soc (unified memory)
    memory_gb: float  # what weights, cache and runtime may use
    memory_source: str
    bandwidth_gbs: float
    bandwidth_source: str
    compute_tflops: float = math.nan  # dense matrix multiply, the precision compute_source names
    compute_source: str = ""
    power_w: float = math.nan
    power_source: str = ""

    @property
    def overhead_gb(self) -> tuple[float, float]:
        return RUNTIME_OVERHEAD_GB.get(self.kind, RUNTIME_OVERHEAD_GB["gpu"])


@dataclass(frozen=True)
class Candidate:
    """A deployment to predict: its weights' size and what one token reads, with where they came from."""

    name: str
    origin: str  # gguf | config.json | catalog
    quantization: str
    params_b: float  # every parameter, billions
    active_params_b: float  # multiplied per token (MoE: the routed experts; PLE: not the per-layer tables)
    weights_gb: float  # held in memory
    read_gb: float  # read per generated token, the usual reading
    read_basis: str
    read_gb_high: float = math.nan  # the larger reading where it is uncertain (all parameters); NaN: read_gb
    kv_bytes_per_token: float = math.nan  # per context token, all layers; NaN when the architecture is unknown
    path: str = ""
    weights_key: str = ""  # what identifies the weights (a GGUF file's name): measured runs of the same weights
    notes: tuple[str, ...] = ()

    @property
    def read_high(self) -> float:
        return self.read_gb if math.isnan(self.read_gb_high) else max(self.read_gb, self.read_gb_high)


@dataclass(frozen=True)
class Efficiency:
    """Measured ÷ ceiling: the median over the points it rests on, its range as the interval, and its basis."""

    value: float
    low: float
    high: float
    n: int
    basis: str

    @classmethod
    def from_ratios(cls, ratios: Iterable[float], basis: str) -> "Efficiency":
        data = np.asarray([r for r in ratios if r is not None and np.isfinite(r) and r > 0], dtype=float)
        if not len(data):
            return cls(math.nan, math.nan, math.nan, 0, basis)
        return cls(float(np.median(data)), float(data.min()), float(data.max()), int(len(data)), basis)

    @property
    def known(self) -> bool:
        return not math.isnan(self.value)

    @property
    def coverage(self) -> float:
        """The chance the next alike run's ratio falls within the range of n: (n − 1)/(n + 1)."""
        return (self.n - 1) / (self.n + 1) if self.n >= 2 else math.nan


@dataclass(frozen=True)
class Point:
    """One measured deployment the calibration may use: its weights, what it reads per token and what it measured."""

    weights_key: str
    read_gb: float
    decode_tps: float
    active_params_b: float = math.nan
    prefill_tps: float = math.nan


@dataclass(frozen=True)
class Calibration:
    """The host's measured points and the published defaults the efficiencies fall back on."""

    points: tuple[Point, ...]
    default_decode: Efficiency
    default_prefill: Efficiency

    def decode(self, host: Host, exclude: str = "") -> Efficiency:
        """EFFICIENCY RULE over the points (the candidate's own weights left out), else the default."""
        mine = [p for p in self.points if not (exclude and p.weights_key == exclude)]
        ratios = [p.decode_tps / (host.bandwidth_gbs / p.read_gb) for p in mine if p.read_gb > 0]
        found = Efficiency.from_ratios(ratios, f"this host's runs{', its own left out' if exclude else ''}")
        return found if found.known else self.default_decode

    def prefill(self, host: Host, exclude: str = "") -> Efficiency:
        mine = [p for p in self.points if not (exclude and p.weights_key == exclude)]
        ratios = [p.prefill_tps / prefill_ceiling(host, p.active_params_b) for p in mine
                  if p.active_params_b > 0 and host.compute_tflops > 0]
        found = Efficiency.from_ratios(ratios, f"this host's runs{', its own left out' if exclude else ''}")
        return found if found.known else self.default_prefill


@dataclass(frozen=True)
class Workload:
    """What the candidates are asked to serve."""

    context_tokens: int = 2048  # what the server allocates per stream (the KV cache the fit counts)
    concurrency: int = 1
    prompt_tokens: int = 512  # the TTFT's prompt, and the context the decode's KV read is taken at


@dataclass
class Prediction:
    candidate: Candidate
    host: Host
    workload: Workload
    need_gb: Figure
    fits: str
    decode_ceiling_tps: float
    decode_tps: Figure
    prefill_tps: Figure
    ttft_s: Figure
    joules_per_token: Figure
    serving_tps: Figure
    decode_efficiency: Efficiency
    prefill_efficiency: Efficiency
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.candidate.name


def relative_error(predicted: float, measured: float) -> float:
    """(predicted − measured) ÷ measured; NaN without a positive measurement."""
    return (predicted - measured) / measured if measured > 0 else math.nan


def kv_bytes_per_token(layers: float, kv_heads: float, key_length: float, value_length: float,
                       bytes_per_value: float = KV_CACHE_BYTES) -> float:
    """KV cache bytes one context token holds across every layer: layers × KV heads × (key + value length) × bytes."""
    return float(layers * kv_heads * (key_length + value_length) * bytes_per_value)


def decode_ceiling(host: Host, read_gb: float) -> float:
    """tok/s if every byte read per token came at the host's full bandwidth."""
    return host.bandwidth_gbs / read_gb if read_gb > 0 else math.nan


def prefill_ceiling(host: Host, active_params_b: float) -> float:
    """Prompt tok/s at the host's dense compute: 2 FLOPs per active weight per token."""
    if not (active_params_b > 0) or not (host.compute_tflops > 0):
        return math.nan
    return host.compute_tflops * 1e12 / (2 * active_params_b * GB)


def memory_need(candidate: Candidate, host: Host, workload: Workload) -> tuple[Figure, str]:
    """(GB needed, fit verdict): weights + KV cache for context × concurrency + the runtime overhead range."""
    kv = candidate.kv_bytes_per_token if not math.isnan(candidate.kv_bytes_per_token) else 0.0
    fixed = candidate.weights_gb + kv * workload.context_tokens * workload.concurrency / GB
    low, high = host.overhead_gb
    need = Figure(fixed + (low + high) / 2, fixed + low, fixed + high)
    if not host.memory_gb > 0:
        return need, UNKNOWN
    verdict = FIT_YES if need.high <= host.memory_gb else FIT_NO if need.low > host.memory_gb else FIT_TIGHT
    return need, verdict


def predict(candidate: Candidate, host: Host, calibration: Calibration, workload: Workload = Workload()) \
        -> Prediction:
    """Every figure of the module docstring for one candidate on one host."""
    notes = list(candidate.notes)
    need, fits = memory_need(candidate, host, workload)
    kv_read = (0.0 if math.isnan(candidate.kv_bytes_per_token)
               else candidate.kv_bytes_per_token * workload.prompt_tokens / GB)
    if math.isnan(candidate.kv_bytes_per_token):
        notes.append("KV cache unknown (no architecture): left out of the fit and the bytes read")
    eff = calibration.decode(host, exclude=candidate.weights_key)
    ceiling = decode_ceiling(host, candidate.read_gb + kv_read)
    decode = Figure(eff.value * ceiling, eff.low * decode_ceiling(host, candidate.read_high + kv_read),
                    eff.high * ceiling)
    peff = calibration.prefill(host, exclude=candidate.weights_key)
    pceiling = prefill_ceiling(host, candidate.active_params_b)
    prefill = Figure(peff.value * pceiling, peff.low * pceiling, peff.high * pceiling)
    if math.isnan(pceiling):
        notes.append("no compute figure for this host: prefill and TTFT not predicted")
    ttft = prefill.inverse(workload.prompt_tokens)
    energy = decode.inverse(host.power_w) if host.power_w > 0 else Figure.none()
    return Prediction(candidate, host, workload, need, fits, ceiling, decode, prefill, ttft, energy,
                      serving(candidate, host, eff, peff, workload.concurrency, kv_read), eff, peff, notes)


def serving(candidate: Candidate, host: Host, eff: Efficiency, peff: Efficiency, streams: int,
            kv_read_gb: float) -> Figure:
    """Aggregate tok/s of `streams` concurrent decodes: streams ÷ max(memory time, compute time) per step."""
    def at(e: float, pe: float, read: float) -> float:
        memory_s = (read + streams * kv_read_gb) / (e * host.bandwidth_gbs)
        compute = pe * prefill_ceiling(host, candidate.active_params_b)  # tokens per second of compute
        compute_s = streams / compute if compute > 0 else 0.0  # NaN compares false
        return streams / max(memory_s, compute_s)
    if not eff.known:
        return Figure.none()
    # an unknown prefill efficiency (NaN) leaves the compute time out: the memory time alone bounds the step
    return Figure(at(eff.value, peff.value, candidate.read_gb), at(eff.low, peff.low, candidate.read_high),
                  at(eff.high, peff.high, candidate.read_gb))


# ---- ranking for a regime ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Quality:
    """Measured graded accuracy of the same weights (Wilson 95 %), and whose run it was."""

    accuracy: float
    low: float
    high: float
    n: int
    measured_as: str


# regime -> (the Prediction figure ranked on, highest first; what the header calls it)
REGIME_AXES = {"workstation": ("decode_tps", "decode tok/s"), "edge": ("tokens_per_joule", "tokens per joule"),
               "serving": ("serving_tps", "aggregate tok/s")}
PLAN_REGIMES = tuple(REGIME_AXES)


@dataclass
class Ranked:
    prediction: Prediction
    rank: int  # 1-based; ineligible candidates come last
    axis: Figure  # the figure ranked on
    axis_words: str
    quality: Quality | None
    eligible: bool
    why_not: str = ""


def axis_figure(prediction: Prediction, regime: str) -> tuple[Figure, str]:
    """The figure a regime ranks on, and its words (edge without a power figure: decode, said so)."""
    key, words = REGIME_AXES[regime]
    if key == "tokens_per_joule":
        if prediction.joules_per_token.known:
            return prediction.joules_per_token.inverse(), words
        return prediction.decode_tps, "decode tok/s (no power figure for tokens per joule)"
    return getattr(prediction, key), words


def rank(predictions: Sequence[Prediction], regime: str, quality: Mapping[str, Quality] | None = None) \
        -> list[Ranked]:
    """Eligible candidates (they fit, and no measured accuracy below the regime's floor) by the regime's
    predicted figure, highest first; the rest after them, each with why."""
    if regime not in REGIME_AXES:
        raise ValueError(f"unknown regime {regime!r} (the plan ranks {', '.join(PLAN_REGIMES)})")
    floor = frontier.REGIMES[regime].min_accuracy or 0.0
    rows = []
    for p in predictions:
        figure, words = axis_figure(p, regime)
        q = (quality or {}).get(p.candidate.weights_key) if p.candidate.weights_key else None
        why = []
        if p.fits == FIT_NO:
            why.append(f"does not fit ({p.need_gb.low:.1f} GB at least, {p.host.memory_gb:.1f} GB here)")
        if q is not None and q.accuracy < floor:
            why.append(f"accuracy {q.accuracy:.0%} < the {regime} floor {floor:.0%}")
        rows.append(Ranked(p, 0, figure, words, q, not why, "; ".join(why)))
    key = (lambda r: (not r.eligible, -(r.axis.value if r.axis.known else -math.inf)))
    rows.sort(key=key)
    for i, row in enumerate(rows, 1):
        row.rank = i
    return rows


def flips(ranked: Sequence[Ranked], floor: float, limit: int = 4) -> list[str]:
    """'Would flip if' sentences: adjacent eligible pairs whose order the efficiency's spread could swap (the
    ratio of their predictions against the spread of measured shares of the ceiling), candidates that fit only
    at the low end of the runtime overhead, and the top one's quality where it is unknown (`floor`: the regime's)."""
    out = []
    eligible = [r for r in ranked if r.eligible and r.axis.known]
    for above, below in zip(eligible, eligible[1:]):
        ratio = above.axis.value / below.axis.value if below.axis.value > 0 else math.inf
        eff = above.prediction.decode_efficiency
        spread = eff.high / eff.low if eff.known and eff.low > 0 else math.nan
        if ratio <= 1.0001:
            out.append(f"#{above.rank} and #{below.rank} are predicted alike: either order")
        elif not math.isnan(spread) and ratio < spread:
            out.append(f"#{above.rank} > #{below.rank} unless #{below.rank} reaches {ratio:.2f}× #{above.rank}'s share "
                       f"of its ceiling (this host's shares span {spread:.2f}×)")
    for r in ranked:
        p = r.prediction
        if p.fits == FIT_TIGHT:
            room = p.host.memory_gb - (p.need_gb.low - p.host.overhead_gb[0])
            out.append(f"{p.name} fits only if the runtime needs under {room:.2f} GB beside weights and cache "
                       f"({p.need_gb.low:.1f}–{p.need_gb.high:.1f} GB of {p.host.memory_gb:.1f})")
    top = next((r for r in ranked if r.eligible), None)
    if top is not None and top.quality is None:
        out.append(f"{top.prediction.name} leaves the top if its graded accuracy, unknown here, is below {floor:.0%}")
    return out[:limit]


def read_plans(root: str | Path) -> list[dict]:
    """Every plan record under a results root (outputs/<host>/plan.json), oldest first per host; unreadable files
    are skipped (as bandwidth_law.read_ladders skips its records)."""
    out: list[dict] = []
    for path in sorted(Path(root).glob(f"*/{PLAN_JSON}")):
        try:
            plans = json.loads(path.read_text(encoding="utf-8")).get("plans") or []
        except (OSError, ValueError, AttributeError):
            continue
        out += [p for p in plans if isinstance(p, dict)]
    return out


# ---- what was measured: the calibration's points and the quality of the same weights -------------------------------

POINT_COLUMNS = ["weights_key", "read_gb", "active_params_b", "decode_tps", "decode_lo", "decode_hi", "n",
                 "prefill_tps", "ttft_s", "systems"]
SPEED_SUITE = "text"


def measured_points(meta: pd.DataFrame, requests: pd.DataFrame, host: str) -> pd.DataFrame:
    """Per weights file measured on `host` (meta: one row per deployment with weights_file and weights_read_gb, as
    benchlib.paper.runs reads them): mean decode and prompt tok/s and mean TTFT of the text suite's measured
    requests (warm-ups and failures left out), the decode mean's 95 % bootstrap interval and n, GB read per token
    and the deployments it pools."""
    meta = meta[(meta["host"] == host) & meta["weights_file"].astype(bool)] if len(meta) else meta
    if not len(meta) or not len(requests):
        return pd.DataFrame(columns=POINT_COLUMNS)
    req = requests[(requests["suite"] == SPEED_SUITE) & (requests["status"] == STATUS_OK)
                   & ~requests["is_warmup"].map(flag) & (requests["host"] == host)]
    rows = []
    for key, group in meta.groupby("weights_file", sort=False):
        mine = req[req["model"].isin(group["model"])]
        decode = pd.to_numeric(mine["decode_tps"], errors="coerce").dropna()
        if not len(decode):
            continue
        low, high = stats.bootstrap_interval(decode)
        prefill = pd.to_numeric(mine.get("prefill_tps", pd.Series(dtype=float)), errors="coerce").dropna()
        ttft = pd.to_numeric(mine["ttft_s"], errors="coerce").dropna()
        rows.append({"weights_key": key, "read_gb": float(group["weights_read_gb"].iloc[0]),
                     "active_params_b": float(pd.to_numeric(group["active_params_b"], errors="coerce").iloc[0]),
                     "decode_tps": float(decode.mean()), "decode_lo": low, "decode_hi": high, "n": len(decode),
                     "prefill_tps": float(prefill.mean()) if len(prefill) else math.nan,
                     "ttft_s": float(ttft.mean()) if len(ttft) else math.nan, "systems": "; ".join(group["system"])})
    return pd.DataFrame(rows, columns=POINT_COLUMNS)


def qualities(meta: pd.DataFrame, summary: pd.DataFrame, regime: str) -> dict[str, Quality]:
    """weights file -> the graded sets' pooled first-pass accuracy (Wilson 95 %) of every run of those weights, on
    any host, over the regime's graded modalities (frontier.Regime.graded)."""
    if not len(summary) or not len(meta):
        return {}
    accuracy = task_accuracy(summary)
    graded = accuracy[(accuracy["basis"] == frontier.GRADED) & (pd.to_numeric(accuracy["scored"]) > 0)]
    graded = graded[graded["modality"].fillna("text").replace("", "text").isin(frontier.REGIMES[regime].graded)]
    out = {}
    for key, group in meta[meta["weights_file"].astype(bool)].groupby("weights_file", sort=False):
        mine = graded[graded["system"].isin(identity.keys(group))]
        scored = int(pd.to_numeric(mine["scored"]).sum())
        if scored:
            passed = int(pd.to_numeric(mine["passed"]).sum())
            low, high = stats.wilson_interval(passed, scored)
            out[key] = Quality(passed / scored, low, high, scored, "; ".join(group["system"]))
    return out
