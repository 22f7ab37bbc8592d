"""The quantization ladder study: one embedded model at several quantizations, each run as its own deployment.

`frontier-bench ladder [PARAMS]` (`make ladder`): from the embedded params (default params/embedded.yaml), make each
rung's GGUF with llama.cpp's quantizer (benchlib.measure.models.quantize, cached per source hash and type), read the bytes each
reads per token from its tensor table (benchlib.analysis.weights), measure the host's memory bandwidth (benchlib.measure.capacity.bandwidth),
write outputs/<host>/ladder.json, then run the suites on each rung (its own model name, e.g. gemma3-270m-q2_k,
and output folder) and the paper, whose ladder table and figure fit the bandwidth law (benchlib.analysis.bandwidth_law).

Rungs more precise than the source carry `server.derived_from`; the accuracy suites are run only on the source and
the rungs below it (what quantizing costs), the speed suite on every rung."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchlib.analysis.weights import read_cached
from benchlib.config.params import BenchParams
from benchlib.config.paths import cache_dir, ladder_file
from benchlib.measure.capacity import bandwidth
from benchlib.measure.models.quantize import LADDER_TYPES, check_type, file_sha256, make_rung
from benchlib.measure.provenance import cpu_model
from benchlib.measure.servers.llama_cpp import model_path_of
from benchlib.records.rows import write_atomic

DEFAULT_TYPES = list(LADDER_TYPES)
SPEED_SUITES = ["text"]
ACCURACY_SUITES = ["quality"]


class LadderError(ValueError):
    """The ladder cannot run with these params (one line)."""


def rung_model(base_model: str, source_type: str, qtype: str) -> str:
    """The rung's model name: the source's with its type swapped ('gemma3-270m-q4_k_m' -> 'gemma3-270m-q2_k')."""
    if qtype == source_type:
        return base_model
    if base_model.lower().endswith(source_type):
        return base_model[: -len(source_type)] + qtype
    return f"{base_model}-{qtype}"


def rung_params(base: BenchParams, qtype: str, path: Path, derived: str, bytes_per_param: float) -> BenchParams:
    """The base params with the rung's model, file, quantization and provenance; the source rung is the base
    itself, unchanged (so it shares the folders of a plain run of the file, `make run PARAMS=…`, and resumes there;
    a study that changes the file's settings writes elsewhere: benchlib.config.variant)."""
    source_type = check_type(base.server.quantization)
    if qtype == source_type:
        return base
    server = base.server.model_copy(update={
        "model": rung_model(base.server.model, source_type, qtype), "quantization": qtype,
        "bytes_per_param": round(bytes_per_param, 4), "derived_from": derived,
        "embedded": base.server.embedded.model_copy(update={"model_path": str(path)})})
    return base.model_copy(update={"server": server})


def check_base(params: BenchParams) -> str:
    if params.server.kind != "embedded":
        raise LadderError(f"{params.source}: the ladder quantizes the embedded server's GGUF; server.kind is "
                          f"{params.server.kind!r}")
    try:
        return check_type(params.server.quantization)
    except ValueError as exc:
        raise LadderError(f"{params.source}: server.quantization: {exc}") from None


def prepare(params: BenchParams, types: list[str], progress=print) -> list[tuple[str, BenchParams]]:
    """Make (or find) every rung, read its weights, measure bandwidth, write ladder.json; the (type, params)
    of each rung, in precision order."""
    source_type = check_base(params)
    types = sorted({check_type(t) for t in types} | {source_type}, key=DEFAULT_TYPES.index)
    source = Path(model_path_of(params.server.embedded))
    cache = cache_dir() / "ladder"
    started = time.monotonic()
    progress(f"ladder source {source.name} ({source_type}); hashing…")
    sha = file_sha256(source)
    rungs: list[dict[str, Any]] = []
    out: list[tuple[str, BenchParams]] = []
    for qtype in types:
        rung = make_rung(source, source_type, qtype, cache, sha)
        weights = read_cached(rung.path, cache / "weights.json")
        rung_p = rung_params(params, qtype, rung.path, rung.derived_from, weights.tensor_bytes / weights.n_params)
        progress(f"  {qtype:7s} {'made' if rung.made else 'cached' if qtype != source_type else 'source'}: "
                 f"{weights.size_bytes / 1e6:.0f} MB, {weights.read_per_token_gb:.3f} GB read per token"
                 + (f" (derived from {rung.derived_from})" if rung.derived_from else ""))
        rungs.append({"qtype": qtype, "model": rung_p.server.model, "path": str(rung.path),
                      "derived_from": rung.derived_from, "weights": asdict(weights)})
        out.append((qtype, rung_p))
    progress("measuring the host's memory bandwidth…")
    measured = bandwidth.remeasure(cpu_model(), os.cpu_count())  # kept in the machine's record with its load
    progress(f"  read {measured['read_gbs']:.1f} GB/s, copy {measured['copy_gbs']:.1f} GB/s "
             f"({measured['threads']} threads)")
    record = {"host": params.host.name, "source": {"path": str(source), "sha256": sha, "qtype": source_type},
              "params_file": params.source, "bandwidth": measured, "rungs": rungs,
              "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "prepare_s": round(time.monotonic() - started, 1)}
    write_atomic(ladder_file(params.host.name), json.dumps(record, indent=1))
    return out


def suites_for(rung: BenchParams) -> list[str]:
    """Speed on every rung; accuracy only where it is that precision's own (not derived_from)."""
    wanted = SPEED_SUITES + ([] if rung.server.derived_from else ACCURACY_SUITES)
    return [s for s in wanted if s in rung.run.notebooks]
