"""`frontier-bench plan`: the host, the candidates and the calibration gathered, the predictions ranked and shown,
kept in outputs/<host>/plan.json, and compared with what was measured (benchlib.analysis.plan holds the model).

    host         --host KEY: a row of the hardware table (benchlib.published.hardware); else this machine: NVML's
                 memory and theoretical bandwidth on a GPU (compute and power from the table row of the same GPU
                 where there is one), or on a CPU the measured read bandwidth (benchlib.measure.capacity.bandwidth's rule),
                 the memory available now (psutil) and the measured compute (benchlib.measure.capacity.compute)
    candidates   GGUF files, config.json files and catalog YAML files named on the command line; without any, the
                 quantization ladder's rungs (outputs/<host>/ladder.json, else the rungs cached on this machine)
                 and the default study's deployments (params/studies/default.yaml)
    calibration  every measured run of a GGUF on this host under outputs/ (its text suite's decode and prompt
                 rates, benchlib.analysis.plan.measured_points over what benchlib.paper.runs read, which the command
                 line passes in), one point per weights (the mean over its runs), and the published defaults
                 (benchlib.published.hardware)
    quality      the graded sets' pooled accuracy (first pass, Wilson 95 %) of every run of the same weights, on
                 any host; "unknown" where none ran

PLAN RECORD: every plan is appended to outputs/<host>/plan.json with its time, host, workload, calibration and
predictions; `--measure K` adds what the top K measured. The paper's predicted-vs-measured table reads them.

This module measures nothing itself and lives outside the measuring layers (benchlib.config.params.MEASURING_LAYERS),
so a change to the plan never changes a run's id."""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd
import psutil
import yaml

from benchlib.analysis import frontier, stats
from benchlib.analysis.candidates import CandidateError, from_config, from_entry, from_gguf
from benchlib.analysis.plan import (
    FIT_NO,
    PLAN_JSON,
    SPEED_SUITE,
    UNKNOWN,
    Calibration,
    Candidate,
    Efficiency,
    Figure,
    Host,
    Point,
    Prediction,
    Ranked,
    Workload,
    flips,
    measured_points,
    predict,
    qualities,
    rank,
    relative_error,
)
from benchlib.config.formatting import WIDTH
from benchlib.config.params import BenchParams, ParamsError, load_params
from benchlib.config.paths import PROJECT_ROOT, cache_dir, ladder_file, outputs_root, slug
from benchlib.measure.capacity import bandwidth, compute
from benchlib.measure.models.quantize import LADDER_TYPES, derived_from, file_sha256
from benchlib.measure.provenance import cpu_model, gpu_info
from benchlib.measure.servers.llama_cpp import EmbeddedServerError, model_path_of
from benchlib.published import hardware, reference
from benchlib.records.rows import STATUS_OK, read_requests, write_atomic
from benchlib.records.run_folder import RunFolder
from benchlib.records.schema import flag
from benchlib.suites import ladder, study

DEFAULT_STUDY = PROJECT_ROOT / "params" / "studies" / "default.yaml"
LADDER_PARAMS = PROJECT_ROOT / "params" / "embedded.yaml"


class PlanError(ValueError):
    """The plan cannot be made as asked (one line)."""


@dataclass
class Entry:
    """A candidate and, where it can be served here, the params that would measure it."""

    candidate: Candidate
    params: BenchParams | None = None
    quality_of: str = ""  # the weights whose graded accuracy is this one's (a rung derived from them), if not its own


# ---- the host ------------------------------------------------------------------------------------------------------

def this_host(name: str, nvml: Any = None, measure_compute: Callable[[], dict] = compute.measure) -> Host:
    """This machine as the plan sees it (module docstring). A GPU NVML gives no bandwidth for (unified memory, as
    GB10) takes its hardware-table row where there is one; otherwise the CPU's own figures."""
    gpu = gpu_info(nvml)
    first = (gpu.get("gpus") or [{}])[0] if gpu.get("available") else {}
    row = table_row(str(first.get("name") or ""), hardware.load_hardware()) if first else None
    if first.get("memory_bandwidth_gbs"):
        return Host(name=name, kind="gpu", memory_gb=float(first.get("memory_total_gb") or math.nan),
                    memory_source=f"NVML: {first.get('name')} total memory",
                    bandwidth_gbs=float(first["memory_bandwidth_gbs"]),
                    bandwidth_source="NVML theoretical (bus width × memory clock × 2)",
                    compute_tflops=row.compute_tflops if row else math.nan,
                    compute_source=f"hardware table: {row.compute_source}" if row else "",
                    power_w=row.power_w if row else math.nan, power_source=row.power_source if row else "")
    if row is not None:
        return replace(row, name=name, bandwidth_source=f"hardware table, NVML gives none: {row.bandwidth_source}")
    measured = bandwidth.machine_measurement(cpu_model(), os.cpu_count())
    flops = measure_compute()
    return Host(name=name, kind="cpu", memory_gb=psutil.virtual_memory().available / 1e9,
                memory_source="available now (psutil)", bandwidth_gbs=float(measured["read_gbs"]),
                bandwidth_source=("measured read bandwidth" + (", under load" if measured.get("under_load") else "")
                                  + f" ({cpu_model()}, {os.cpu_count()} cores)"),
                compute_tflops=float(flops["tflops"]), compute_source=f"measured: {flops['method']}")


def table_row(nvml_name: str, table: dict[str, Host]) -> Host | None:
    """The hardware table's row for a GPU NVML names: the row whose model word (its first word with a digit: 3090,
    H100, A100, L4, GB10) is a word of the NVML name ('NVIDIA A100-SXM4-80GB', 'NVIDIA H100 80GB HBM3')."""
    words = set(re.split(r"[\s-]+", nvml_name.lower()))
    for row in table.values():
        model = next((w for w in row.name.lower().split() if any(c.isdigit() for c in w)), "")
        if model and model in words:
            return row
    return None


# ---- the candidates ------------------------------------------------------------------------------------------------

def candidates_from(paths: Sequence[str], ref: pd.DataFrame | None = None) -> list[Entry]:
    """Candidates from the files named: .gguf, config.json (any .json), catalog .yaml/.yml."""
    out: list[Entry] = []
    for text in paths:
        path = Path(text)
        if not path.is_file():
            raise PlanError(f"{text}: no such file")
        try:
            if path.suffix == ".gguf":
                out.append(Entry(from_gguf(path), gguf_params(path)))
            elif path.suffix == ".json":
                out.append(Entry(from_config(path)))
            elif path.suffix in (".yaml", ".yml"):
                out += [Entry(c) for c in read_catalog(path, ref)]
            else:
                raise PlanError(f"{text}: a candidate is a .gguf, a config.json or a catalog .yaml")
        except CandidateError as exc:
            raise PlanError(str(exc)) from None
    return out


def read_catalog(path: str | Path, ref: pd.DataFrame | None = None) -> list[Candidate]:
    """Every entry of a catalog YAML (a list, or {candidates: [...]}); an entry naming a seed's model is completed
    from that seed's printed sizes (reference.published_model)."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CandidateError(f"{path}: not a readable catalog ({exc})") from None
    entries = data.get("candidates") if isinstance(data, dict) else data
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise CandidateError(f"{path}: expected a list of entries (or candidates: [...])")
    out = []
    for entry in entries:
        if entry.get("seed"):
            ref = reference.load_reference() if ref is None else ref
            published = reference.published_model(ref, str(entry["seed"]), str(entry.get("model") or ""))
            if published is None:
                raise CandidateError(f"{path}: seed {entry['seed']} prints nothing for model {entry.get('model')!r}")
            entry = {**published, **entry}
        out.append(from_entry(entry))
    return out


def gguf_params(path: Path, base: BenchParams | None = None) -> BenchParams:
    """The embedded server's params serving any GGUF (its own chat template), to measure it with --measure."""
    base = base or load_params(LADDER_PARAMS)
    weights = from_gguf(path)
    server = base.server.model_copy(update={
        "model": slug(path.stem.lower()), "quantization": weights.quantization,
        "active_params_b": round(weights.params_b, 4), "total_params_b": round(weights.params_b, 4),
        "bytes_per_param": round(weights.weights_gb / weights.params_b, 4),
        "embedded": base.server.embedded.model_copy(update={"model_path": str(path), "chat_format": ""})})
    return base.model_copy(update={"server": server, "source": str(path)})


def default_candidates(host_name: str) -> list[Entry]:
    """The ladder's rungs and the default study's deployments, each once per weights (module docstring)."""
    entries: dict[str, Entry] = {}
    rungs = ladder_rungs(host_name)
    files = {qtype: path for qtype, path, _ in rungs}
    for qtype, path, params in rungs:
        candidate = from_gguf(path, name=params.server.model)
        of = files[params.server.derived_from].name if params.server.derived_from in files else ""
        entries.setdefault(candidate.weights_key, Entry(candidate, params, of))
    try:
        default = study.load_study(DEFAULT_STUDY)
    except study.StudyError as exc:
        raise PlanError(str(exc)) from None
    for dep in default.deployments:
        file = Path(dep.origin) if Path(dep.origin).is_absolute() else PROJECT_ROOT / dep.origin
        try:
            params = load_params(file)  # the plain params file: its own folders, not the study's demo variant
            path = Path(model_path_of(params.server.embedded))
        except (ParamsError, EmbeddedServerError) as exc:
            raise PlanError(str(exc)) from None
        candidate = from_gguf(path, name=params.server.model)
        entries.setdefault(candidate.weights_key, Entry(candidate, params))
    return list(entries.values())


def ladder_rungs(host_name: str) -> list[tuple[str, Path, BenchParams]]:
    """(type, GGUF, params) of each rung: from outputs/<host>/ladder.json, else the rungs cached on this machine
    (benchlib.measure.models.quantize's names), with the ladder's own params for each (benchlib.suites.ladder)."""
    try:
        base = load_params(LADDER_PARAMS)
        source = Path(model_path_of(base.server.embedded))
    except (ParamsError, EmbeddedServerError) as exc:
        raise PlanError(str(exc)) from None
    source_type = ladder.check_base(base)
    record = _read_json(ladder_file(host_name))
    found = {r["qtype"]: Path(r["path"]) for r in record.get("rungs") or [] if Path(r.get("path", "")).is_file()}
    if not found:
        sha = file_sha256(source)[:16]
        found = {q: cache_dir() / "ladder" / f"{sha}-{q}.gguf" for q in LADDER_TYPES}
        found = {q: p for q, p in found.items() if p.is_file()}
        found[source_type] = source
    out = []
    for qtype in [q for q in LADDER_TYPES if q in found]:
        path = found[qtype]
        weights = from_gguf(path)
        params = ladder.rung_params(base, qtype, path, derived_from(qtype, source_type),
                                    weights.weights_gb / weights.params_b)
        out.append((qtype, path, params))
    return out


# ---- the calibration and the quality ---------------------------------------------------------------------------------

def calibration(points: pd.DataFrame, ref: pd.DataFrame | None = None) -> Calibration:
    """The measured points and the published defaults (benchlib.published.hardware)."""
    ref = reference.load_reference() if ref is None else ref
    return Calibration(
        points=tuple(Point(r.weights_key, r.read_gb, r.decode_tps, r.active_params_b, r.prefill_tps)
                     for r in points.itertuples()),
        default_decode=hardware.published_decode_efficiency(ref),
        default_prefill=hardware.published_prefill_efficiency(ref))


# ---- one plan -----------------------------------------------------------------------------------------------------

@dataclass
class Plan:
    host: Host
    workload: Workload
    regime: str
    calibration: Calibration
    entries: list[Entry]
    ranked: list[Ranked]
    points: pd.DataFrame
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))

    @property
    def id(self) -> str:
        return time.strftime("%Y%m%dT%H%M%S", time.strptime(self.created[:19], "%Y-%m-%dT%H:%M:%S"))

    def entry(self, name: str) -> Entry:
        return next(e for e in self.entries if e.candidate.name == name)

    def measured(self, name: str) -> pd.Series | None:
        """This candidate's own measured point on the host, if any (its prediction never used it)."""
        key = self.entry(name).candidate.weights_key
        hit = self.points[self.points["weights_key"] == key] if key and len(self.points) else self.points.iloc[0:0]
        return hit.iloc[0] if len(hit) else None


def make_plan(host: Host, entries: list[Entry], workload: Workload, regime: str, runs: Any,
              ref: pd.DataFrame | None = None) -> Plan:
    """`runs`: what is measured under the results root (benchlib.paper.runs.load_runs, which the command line
    passes: its meta, requests and summary frames)."""
    points = measured_points(runs.meta, runs.requests, host.name)
    cal = calibration(points, ref)
    predictions = [predict(e.candidate, host, cal, workload) for e in entries]
    measured = qualities(runs.meta, runs.summary, regime)
    # a rung derived from other weights carries only their information: their accuracy is its own
    measured.update({e.candidate.weights_key: measured[e.quality_of] for e in entries
                     if e.quality_of in measured and e.candidate.weights_key not in measured})
    return Plan(host, workload, regime, cal, entries, rank(predictions, regime, measured), points)


# ---- the record ----------------------------------------------------------------------------------------------------

def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def plan_file(host_name: str, root: Path | None = None) -> Path:
    return (root or outputs_root()) / slug(host_name) / PLAN_JSON


def _figure(f: Figure) -> dict[str, float]:
    return {"value": f.value, "low": f.low, "high": f.high}


def _efficiency(e: Efficiency) -> dict[str, Any]:
    return {"value": e.value, "low": e.low, "high": e.high, "n": e.n, "basis": e.basis, "coverage": e.coverage}


def record(plan: Plan) -> dict[str, Any]:
    """The plan as kept in plan.json (PLAN RECORD)."""
    rows = []
    for r in plan.ranked:
        p: Prediction = r.prediction
        rows.append({"rank": r.rank, "name": p.name, "eligible": r.eligible, "why_not": r.why_not,
                     "candidate": {k: v for k, v in asdict(p.candidate).items()},
                     "need_gb": _figure(p.need_gb), "fits": p.fits, "decode_ceiling_tps": p.decode_ceiling_tps,
                     "decode_tps": _figure(p.decode_tps), "prefill_tps": _figure(p.prefill_tps),
                     "ttft_s": _figure(p.ttft_s), "joules_per_token": _figure(p.joules_per_token),
                     "serving_tps": _figure(p.serving_tps), "decode_efficiency": _efficiency(p.decode_efficiency),
                     "prefill_efficiency": _efficiency(p.prefill_efficiency), "notes": p.notes,
                     "quality": asdict(r.quality) if r.quality else None})
    return {"id": plan.id, "created": plan.created, "created_unix": time.time(), "regime": plan.regime,
            "host": asdict(plan.host), "workload": asdict(plan.workload),
            "points": plan.points.to_dict("records"), "predictions": rows, "measured": []}


def save(plan: Plan, root: Path | None = None) -> Path:
    """Append the plan to outputs/<host>/plan.json."""
    path = plan_file(plan.host.name, root)
    data = _read_json(path)
    plans = [p for p in data.get("plans") or [] if isinstance(p, dict)]
    plans.append(record(plan))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"plans": plans}, indent=1, default=_plain))
    return path


def add_measured(host_name: str, plan_id: str, measured: list[dict[str, Any]], root: Path | None = None) -> None:
    """What --measure measured, beside the plan that predicted it."""
    path = plan_file(host_name, root)
    data = _read_json(path)
    for entry in data.get("plans") or []:
        if entry.get("id") == plan_id:
            entry["measured"] = [*entry.get("measured", []), *measured]
    write_atomic(path, json.dumps(data, indent=1, default=_plain))


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers, anything else json cannot write as text."""
    return value.item() if hasattr(value, "item") else str(value)


# ---- the table -------------------------------------------------------------------------------------------------------

def compact(value: float) -> str:
    """Three significant digits (whole numbers from 100, two below 1), ten thousands as k and millions as M: a
    column stays narrow for any model."""
    if value is None or not math.isfinite(value):
        return "–"
    for limit, scale, suffix in ((1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if abs(value) >= limit:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}" if abs(value) >= 1 else f"{value:.2g}"


def span(f: Figure, scale: float = 1.0) -> str:
    """'31.2 [24.1–33]', '–' without a value."""
    if not f.known:
        return "–"
    return f"{compact(f.value * scale)} [{compact(f.low * scale)}–{compact(f.high * scale)}]"


def table_lines(plan: Plan, limit: int = 12) -> list[str]:
    """The plan on one screen (≤ 30 lines of ≤ WIDTH): the host and its sources, the calibration, one row per
    candidate, the median error where candidates were measured here, what would flip the order. Prefill tok/s
    is the prompt ÷ the TTFT shown (plan.json keeps it)."""
    h, w = plan.host, plan.workload
    power = f"{compact(h.power_w)} W" if h.power_w > 0 else "no power figure"
    lines = [f"plan · {h.name} ({h.kind}) · {compact(h.bandwidth_gbs)} GB/s · {compact(h.compute_tflops)} TFLOPS · "
             f"{compact(h.memory_gb)} GB · {power}",
             f"  bandwidth: {h.bandwidth_source} · memory: {h.memory_source}",
             f"  compute: {h.compute_source or 'unknown'}" + (f" · power: {h.power_source}" if h.power_source else "")]
    first = plan.ranked[0] if plan.ranked else None
    lines.append(f"regime {plan.regime}: ranked on {first.axis_words if first else '–'} · context "
                 f"{w.context_tokens} × {w.concurrency} stream(s) · TTFT at {w.prompt_tokens} prompt tokens")
    if first:
        d, f = first.prediction.decode_efficiency, first.prediction.prefill_efficiency
        basis = d.basis if d.basis == f.basis else f"{d.basis}; prefill: {f.basis}"
        lines.append(f"efficiency = measured ÷ ceiling: decode {_eff(d)} · prefill {_eff(f)} ({basis})")
    energy = any(r.prediction.joules_per_token.known for r in plan.ranked)
    measured = any(plan.measured(r.prediction.name) is not None for r in plan.ranked)
    aggregate = plan.regime == "serving"  # what it ranks on is neither decode nor energy: shown too
    head = ["#", "candidate", "need GB", "fits", "decode tok/s", "TTFT s"] + ["aggregate tok/s"] * aggregate \
        + ["J/token"] * energy + ["measured"] * measured + ["quality"]
    rows, errors = [head], []
    for r in plan.ranked[:limit]:
        p = r.prediction
        mine = plan.measured(p.name)
        seen = ""
        if mine is not None:
            errors.append(relative_error(p.decode_tps.value, mine["decode_tps"]))
            seen = f"{compact(mine['decode_tps'])} ({errors[-1]:+.0%})"
        quality = f"{r.quality.accuracy:.0%} [{r.quality.low:.0%}–{r.quality.high:.0%}]" if r.quality else UNKNOWN
        rows.append([str(r.rank) if r.eligible else "–", p.name[:26], compact(p.need_gb.value), p.fits,
                     span(p.decode_tps), span(p.ttft_s)] + [span(p.serving_tps)] * aggregate
                    + [span(p.joules_per_token)] * energy + [seen] * measured
                    + [quality + ("" if r.eligible or p.fits == FIT_NO else " < floor")])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    right = {0, 2}  # the rank and the GB needed, numbers that line up on the right
    lines.append("")
    lines += [" ".join(cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in
                       enumerate(zip(row, widths))).rstrip() for row in rows]
    if len(plan.ranked) > limit:
        lines.append(f"   … {len(plan.ranked) - limit} more in plan.json")
    lines.append("")
    if errors:
        lines.append(f"median |decode error| of the {len(errors)} measured here, each predicted with its own runs "
                     f"left out: {pd.Series(errors).abs().median():.0%}")
    lines += [f"would flip: {line}" for line in flips(plan.ranked, _floor(plan.regime))]
    return [line if len(line) <= WIDTH else line[:WIDTH - 1] + "…" for line in lines]


def _floor(regime: str) -> float:
    return frontier.REGIMES[regime].min_accuracy or 0.0


def _eff(e: Efficiency) -> str:
    return f"{e.value:.2f} [{e.low:.2f}–{e.high:.2f}] n={e.n}" if e.known else "unknown"


def saved_line(path: Path, plan_id: str, shown: str) -> str:
    """'saved: plan <id> in <path>', the path's start elided to keep the line within WIDTH."""
    head = f"saved: plan {plan_id} in "
    room = WIDTH - len(head)
    return head + (shown if len(shown) <= room else "…" + shown[-(room - 1):])


# ---- --measure K ---------------------------------------------------------------------------------------------------

def measure_top(plan: Plan, k: int, run_suites: study.SuiteRunner, progress: Callable[[str], None] = print) \
        -> list[dict[str, Any]]:
    """Run the text suite on the first k rows of the ranking that fit and can be served here (eligible ones first;
    a study, one after another, each in its own folder: server.variant plan-<plan id>), and what each measured
    beside its prediction."""
    chosen = [r for r in plan.ranked if r.prediction.fits != FIT_NO
              and plan.entry(r.prediction.name).params is not None][:k]
    if not chosen:
        raise PlanError("no candidate of this plan can be served here (a GGUF on this machine)")
    deployments = []
    for r in chosen:
        params = plan.entry(r.prediction.name).params
        variant = f"plan-{plan.id}"
        params = params.model_copy(update={"server": params.server.model_copy(update={"variant": variant})})
        deployments.append(study.Deployment(params=params, notebooks=[SPEED_SUITE],
                                            origin=f"plan {plan.id}: {r.prediction.name}"))
    run = study.Study(name=f"plan-{slug(plan.host.name)}-{plan.id}", source=f"plan {plan.id}",
                      deployments=deployments, settle=study.SettleSpec(), paper=False)
    outcome = study.run_study(run, run_suites, progress=progress)
    out = []
    for r, dep in zip(chosen, deployments):
        folder = dep.params.suite_dir(SPEED_SUITE, outputs_root())
        found = _speed(folder)
        p = r.prediction
        out.append({"name": p.name, "weights_key": p.candidate.weights_key, "folder": str(folder),
                    "failed": outcome.failed.get(dep.label, ""), "measured_unix": time.time(), **found,
                    "predicted_decode": _figure(p.decode_tps), "decode_error": relative_error(p.decode_tps.value,
                                                                                             found["decode_tps"]),
                    # the TTFT predicted at the prompt length the suite sent, so the two are comparable
                    "predicted_ttft_s": _figure(ttft := p.prefill_tps.inverse(found["prompt_tokens"])),
                    "ttft_error": relative_error(ttft.value, found["ttft_s"])})
    add_measured(plan.host.name, plan.id, out)
    return out


def _speed(folder: Path) -> dict[str, Any]:
    """Mean decode tok/s (95 % bootstrap interval) and mean TTFT of a text suite's measured requests."""
    path = RunFolder(folder).requests_path
    if not path.is_file():
        return {"decode_tps": math.nan, "decode_lo": math.nan, "decode_hi": math.nan, "n": 0, "ttft_s": math.nan,
                "prompt_tokens": math.nan}
    req = read_requests(path)
    req = req[(req["status"] == STATUS_OK) & ~req["is_warmup"].map(flag)]
    decode = pd.to_numeric(req["decode_tps"], errors="coerce").dropna()
    low, high = stats.bootstrap_interval(decode)
    return {"decode_tps": float(decode.mean()) if len(decode) else math.nan, "decode_lo": low, "decode_hi": high,
            "n": int(len(decode)), "ttft_s": float(pd.to_numeric(req["ttft_s"], errors="coerce").mean()),
            "prompt_tokens": float(pd.to_numeric(req.get("prompt_tokens"), errors="coerce").mean())}


def measured_lines(measured: list[dict[str, Any]]) -> list[str]:
    """Predicted beside measured with the error, one line each: decode tok/s, and TTFT at the prompt length the
    suite sent (its mean)."""
    lines = [f"{'candidate':<27}{'decode: predicted':<19}{'measured [95% CI]':<25}{'error':<7}"
             f"{'TTFT s: predicted':<19}{'measured':<9}error"]
    for m in measured:
        if not m["n"]:
            lines.append(f"{m['name'][:26]:<27}not measured: {m['failed'] or 'no request succeeded'}"[:WIDTH])
            continue
        got = f"{compact(m['decode_tps'])} [{compact(m['decode_lo'])}–{compact(m['decode_hi'])}] n={m['n']}"
        decode, ttft = (Figure(f["value"], f["low"], f["high"]) for f in (m["predicted_decode"], m["predicted_ttft_s"]))
        lines.append(f"{m['name'][:26]:<27}{span(decode):<19}{got:<25}{m['decode_error']:<+7.0%}"
                     f"{span(ttft):<19}{compact(m['ttft_s']):<9}{m['ttft_error']:+.0%}")
    return lines


# ---- the seeds' check ----------------------------------------------------------------------------------------------

def seed_lines(ref: pd.DataFrame | None = None) -> list[str]:
    """The seeds' check on one screen: each deployment's bytes per token, ceiling and prediction beside the paper."""
    checks = hardware.seed_checks(ref)
    eff = checks[0]["prediction"].decode_efficiency
    lines = ["the seeds' check: published sizes (000 §2) and bandwidth (000 §3) with the default efficiency",
             f"  decode efficiency {_eff(eff)}", "",
             f"{'host':<10}{'deployment':<19}{'GB read/token':<16}{'ceiling tok/s':<15}{'predicted tok/s':<19}"
             f"{'000 §6 avg':<18}000 §4 text median"]
    for c in checks:
        cand, p = c["candidate"], c["prediction"]
        wide = cand.read_high > cand.read_gb
        read = f"{compact(cand.read_gb)}–{compact(cand.read_high)}" if wide else compact(cand.read_gb)
        ceiling = (f"{compact(p.decode_ceiling_tps)}–{compact(p.host.bandwidth_gbs / cand.read_high)}" if wide
                   else compact(p.decode_ceiling_tps))
        average = f"{compact(c['measured_tps'])} ({c['error']:+.0%})"
        lines.append(f"{c['host']:<10}{cand.name:<19}{read:<16}{ceiling:<15}{span(p.decode_tps):<19}{average:<18}"
                     f"{compact(c['task_median_tps'])} ({c['task_median_error']:+.0%})")
    return lines + ["", "(error) = (predicted − paper) ÷ paper. GB read/token: active parameters × 2 B (BF16), up to "
                        "all parameters × 2 B", "where the seed prints both (E2B: 2.3 B active of 5.1 B, per-layer "
                        "embeddings). §6 averages §4's tasks, short", "answers (TTFT-bound) included; §4's median text "
                        "task is nearer a decode rate. docs/plan.md: what the gap teaches."]
