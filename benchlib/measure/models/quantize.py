"""A quantization ladder of one GGUF model, made on this machine with llama.cpp's own quantizer
(llama-cpp-python's `llama_model_quantize`, requantization allowed), cached once per source file and type.

Types above the source's precision are re-encodings of the source's values: they carry only its information
(`derived_from`), so their speed and size are real but their accuracy is the source's, not that precision's.

llama.cpp prints one line per tensor while it quantizes; the quantizer therefore runs in a child process
(`python -m benchlib.measure.models.quantize SRC DST TYPE`) whose output goes to a log beside the cache, quoted on failure."""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# Ladder rung -> llama.cpp LLAMA_FTYPE_MOSTLY_<NAME>, ordered by bits per weight.
LADDER_TYPES: dict[str, str] = {
    "q2_k": "Q2_K", "q3_k_m": "Q3_K_M", "q4_0": "Q4_0", "q4_k_m": "Q4_K_M", "q5_k_m": "Q5_K_M", "q8_0": "Q8_0",
    "f16": "F16",
}
BITS_ORDER = list(LADDER_TYPES)  # nominal precision order, low to high
QUANTIZE_TIMEOUT_S = 600


class QuantizeError(RuntimeError):
    """A rung could not be made; the message carries the quantizer's log tail."""


@dataclass
class Rung:
    qtype: str
    path: Path
    derived_from: str  # '' for the source itself and types below it; the source type for types above it
    made: bool  # False when it came from the cache (or is the source)


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def check_type(qtype: str) -> str:
    key = qtype.strip().lower()
    if key not in LADDER_TYPES:
        raise ValueError(f"unknown quantization type {qtype!r}; the ladder knows {', '.join(LADDER_TYPES)}")
    return key


def derived_from(qtype: str, source_type: str) -> str:
    """The source type when `qtype` is more precise than the source (it carries only the source's information)."""
    return source_type if BITS_ORDER.index(qtype) > BITS_ORDER.index(source_type) else ""


def make_rung(source: Path, source_type: str, qtype: str, cache_dir: Path, source_sha: str | None = None) -> Rung:
    """The GGUF for `qtype`: the source itself for its own type, else cached under `cache_dir` by the source's
    sha256 and the type, quantized (atomically: a temp file renamed) when not there yet."""
    qtype, source_type = check_type(qtype), check_type(source_type)
    if qtype == source_type:
        return Rung(qtype, source, "", made=False)
    sha = source_sha or file_sha256(source)
    target = cache_dir / f"{sha[:16]}-{qtype}.gguf"
    rung = Rung(qtype, target, derived_from(qtype, source_type), made=False)
    if target.is_file():
        return rung
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    log = target.with_suffix(".log")
    try:
        with open(log, "wb") as out:
            done = subprocess.run([sys.executable, "-m", "benchlib.measure.models.quantize", str(source), str(tmp), qtype],
                                  stdout=out, stderr=subprocess.STDOUT, timeout=QUANTIZE_TIMEOUT_S, check=False)
        if done.returncode != 0 or not tmp.is_file():
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
            raise QuantizeError(f"quantizing {source.name} to {qtype} failed (exit {done.returncode}): "
                                + " | ".join(tail))
        os.replace(tmp, target)
    except subprocess.TimeoutExpired:
        raise QuantizeError(f"quantizing {source.name} to {qtype} took over {QUANTIZE_TIMEOUT_S} s") from None
    finally:
        tmp.unlink(missing_ok=True)
    rung.made = True
    return rung


def _quantize(source: str, target: str, qtype: str) -> int:
    """The child process: one llama_model_quantize call; returns its status (0 = success)."""
    import llama_cpp  # the child's only job; the parent never loads llama.cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{LADDER_TYPES[check_type(qtype)]}")
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    return int(llama_cpp.llama_model_quantize(source.encode(), target.encode(), ctypes.byref(params)))


if __name__ == "__main__":
    sys.exit(_quantize(*sys.argv[1:4]))
