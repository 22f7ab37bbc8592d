"""Every path the project uses resolves here, from the package location, never from the current directory."""

from __future__ import annotations

import os
import re
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = PROJECT_ROOT / "notebooks"
PARAMS_DIR = PROJECT_ROOT / "params"
TESTDATA_DIR = PROJECT_ROOT / "testdata"
TASKS_DIR = TESTDATA_DIR / "tasks"
PAPER_DIR = PROJECT_ROOT / "paper"
REFERENCE_DIR = PAPER_DIR / "reference"
PAPER_OUT_DIR = PAPER_DIR / "out"


def outputs_root() -> Path:
    """Results root; FRONTIER_BENCH_OUTPUTS moves it (tests use a temp dir)."""
    override = os.environ.get("FRONTIER_BENCH_OUTPUTS")
    return Path(override).resolve() if override else PROJECT_ROOT / "outputs"


def cache_dir() -> Path:
    """Derived artefacts made once per machine (the quantization ladder's GGUFs); FRONTIER_BENCH_CACHE moves it."""
    override = os.environ.get("FRONTIER_BENCH_CACHE")
    return Path(override).resolve() if override else Path.home() / ".cache" / "frontier-bench"


def ladder_file(host: str, root: Path | None = None) -> Path:
    """outputs/<host>/ladder.json: one host's quantization ladder (rungs, their GGUF weights, measured bandwidth)."""
    return (root or outputs_root()) / slug(host) / "ladder.json"


def tasks_dir() -> Path:
    """Task files; FRONTIER_BENCH_TASKS points elsewhere (tests use a temp copy)."""
    override = os.environ.get("FRONTIER_BENCH_TASKS")
    return Path(override).resolve() if override else TASKS_DIR


def slug(text: str) -> str:
    """A file-system-safe name from a host or model label ('Qwen/Qwen3.5-4B' -> 'Qwen_Qwen3.5-4B')."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).strip("._")
    return cleaned or "unnamed"


def run_dir(host: str, model: str, modality: str, root: Path | None = None) -> Path:
    """outputs/<host>/<model>/<modality>/ — the one place a run's files go."""
    return (root or outputs_root()) / slug(host) / slug(model) / slug(modality)


def resolve_data_path(path: str | os.PathLike) -> Path:
    """Media and task paths in data files are relative to testdata/ unless absolute."""
    candidate = Path(path)
    return candidate if candidate.is_absolute() else TESTDATA_DIR / candidate
