"""Notebook parameters of paper/assemble.ipynb (Settings), the names of the reference sets, regimes and threshold
presets they accept, the axis labels and formats of the figures, the task order the paper prints, and how a
results root is written for a reader (shown_path). The tables and figures themselves: benchlib.paper.catalog."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from benchlib.analysis import decisions, frontier
from benchlib.config import metrics
from benchlib.config.paths import PAPER_OUT_DIR, PROJECT_ROOT, outputs_root
from benchlib.published import reference
from benchlib.records import store

THIS_RUN = "this run"


NO_RUNS = "no runs yet"


# Parameter names of paper/assemble.ipynb -> seed prefixes of benchlib.published.reference.REFERENCE_FILES.
REFERENCE_SETS = {"paper_000": "000", "heros_001": "001", "bandwidth_002": "002", "quant_004": "004"}


DEFAULT_REGIMES = ("workstation", "edge", "audio", "serving", "all")


THRESHOLD_PRESETS = {"heros_swap": decisions.HEROS_SWAP_THRESHOLDS, "heros_phase1": decisions.HEROS_PHASE1_THRESHOLDS}


ALL_REGIME = frontier.ALL_REGIME


# Paper task order (000 §4-5, §9); tasks the paper lacks follow in task-file order.
PAPER_TASKS = ["basic_qa", "reasoning", "coding", "multilingual", "summarization", "image_description",
               "color_identification", "transcription", "audio_qa", "video_analysis"]


PAPER_TASK_TITLES = {v: k for k, v in reference.PAPER_TASK_IDS.items()}
PAPER_TASK_TITLES["video_analysis"] = "Video description"


# Labels and formats of every axis come from the metric registry (benchlib.config.metrics); quality axes included.
_QUALITY_AXES = {r.quality_axis: r.key for r in [*frontier.REGIMES.values(), frontier.ALL_REGIME] if r.quality_axis}
AXIS_LABELS = {name: m.label + (f" ({m.unit})" if m.unit else "") for name, m in metrics.METRICS.items()}
AXIS_LABELS.update({axis: f"accuracy over {key} tasks (share)" for axis, key in _QUALITY_AXES.items()})
AXIS_FORMATS = {name: metrics.metric(name).fmt for name in [*metrics.METRICS, *_QUALITY_AXES]}


@dataclass
class Settings:
    """Resolved notebook parameters."""

    outputs_dir: Path | str  # a folder, or a results-store URL (benchlib.records.store)
    out_dir: Path
    more_roots: list[str] = field(default_factory=list)
    reference_sets: list[str] = field(default_factory=lambda: list(REFERENCE_SETS))
    regimes: list[str] = field(default_factory=lambda: list(DEFAULT_REGIMES))
    thresholds: str = "heros_swap"
    figure_formats: list[str] = field(default_factory=lambda: ["png", "svg"])
    dpi: int = 130

    @classmethod
    def from_parameters(cls, outputs_dir: str = "", reference_sets: Sequence[str] | None = None, out_dir: str = "",
                        regimes: Sequence[str] | None = None, thresholds: str = "heros_swap",
                        figure_formats: Sequence[str] | None = None, dpi: int = 130,
                        more_roots: Sequence[str] | None = None) -> "Settings":
        """Empty outputs_dir -> outputs_root(); empty out_dir -> paper/out; names are checked here. outputs_dir
        and more_roots may be folders or results-store URLs; the paper reads them all."""
        sets = list(reference_sets if reference_sets is not None else REFERENCE_SETS)
        for name in sets:
            seed_prefix(name)
        keys = list(regimes if regimes is not None else DEFAULT_REGIMES)
        unknown = [k for k in keys if k not in frontier.REGIMES and k != "all"]
        if unknown:
            raise ValueError(f"regimes: unknown {unknown} (known: {', '.join(list(frontier.REGIMES) + ['all'])})")
        if thresholds not in THRESHOLD_PRESETS:
            raise ValueError(f"thresholds: unknown preset {thresholds!r} (known: {', '.join(THRESHOLD_PRESETS)})")
        formats = [f.lower().lstrip(".") for f in (figure_formats or ["png", "svg"])]
        return cls(outputs_dir=_root(outputs_dir) if outputs_dir else outputs_root(),
                   out_dir=Path(out_dir).expanduser().resolve() if out_dir else PAPER_OUT_DIR,
                   reference_sets=sets, regimes=keys, thresholds=thresholds, figure_formats=formats, dpi=int(dpi),
                   more_roots=[str(_root(r)) for r in (more_roots or []) if str(r).strip()])

    @property
    def roots(self) -> list[Path | str]:
        """Every results root the paper reads, outputs_dir first."""
        return [self.outputs_dir, *self.more_roots]

    def describe(self) -> str:
        return (f"outputs: {', '.join(shown_path(r) for r in self.roots)} · out: {shown_path(self.out_dir)} · reference: "
                f"{', '.join(self.reference_sets)} · regimes: {', '.join(self.regimes)} · "
                f"thresholds: {self.thresholds}")

    def regime_objects(self) -> dict[str, frontier.Regime]:
        return {k: (ALL_REGIME if k == "all" else frontier.REGIMES[k]) for k in self.regimes}


def seed_prefix(name: str) -> str:
    if name in REFERENCE_SETS:
        return REFERENCE_SETS[name]
    if name in reference.REFERENCE_FILES:
        return name
    raise ValueError(f"reference_sets: unknown set {name!r} (known: {', '.join(REFERENCE_SETS)})")


def _root(text: str | Path) -> Path | str:
    """A results root as given: a URL stays a string, a folder becomes an absolute path."""
    return str(text).strip() if store.is_url(text) else Path(text).expanduser().resolve()


def shown_path(path: Path | str) -> str:
    """A results root or output path as a reader should see it: relative to the project where it lies inside it,
    a store URL as it is."""
    if store.is_url(path):
        return str(path)
    try:
        return str(Path(path).resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)
