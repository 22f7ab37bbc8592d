"""Point labels that do not overlap: a greedy placer that tries offsets around each point and keeps the
least-overlapping one, plus the short names printed beside points.

Imports: nothing from benchlib."""

from __future__ import annotations

import math
from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.transforms import Bbox

from benchlib.paper.runs import source_label
from benchlib.paper.settings import THIS_RUN

_OFFSETS = [(8, 8, "left", "bottom"), (8, -8, "left", "top"), (-8, 8, "right", "bottom"), (-8, -8, "right", "top"),
            (0, 12, "center", "bottom"), (0, -12, "center", "top"), (14, 0, "left", "center"),
            (-14, 0, "right", "center"), (24, 26, "left", "bottom"), (24, -26, "left", "top"),
            (-24, 26, "right", "bottom"), (-24, -26, "right", "top"), (0, 34, "center", "bottom"),
            (0, -34, "center", "top"), (40, 46, "left", "bottom"), (-40, -46, "right", "top"),
            (40, -46, "left", "top"), (-40, 46, "right", "bottom"), (60, 0, "left", "center"),
            (-60, 0, "right", "center")]


def place_labels(ax: plt.Axes, xs: Sequence[float], ys: Sequence[float], texts: Sequence[str],
                 colors: Sequence[Any] | None = None, fontsize: float = 8.0,
                 obstacles: Sequence[Any] = ()) -> list[Any]:
    """Annotate points choosing, for each, the first offset whose label box overlaps no placed label, no
    marker and stays inside the axes (else the least-overlapping one), with a leader line when moved far."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    pts = ax.transData.transform(np.column_stack([xs, ys])) if len(xs) else np.empty((0, 2))
    marker = [Bbox.from_bounds(px - 5, py - 5, 10, 10) for px, py in pts]
    placed: list[Bbox] = [o.get_window_extent(renderer) if hasattr(o, "get_window_extent") else o for o in obstacles]
    out: list[Any] = [None] * len(texts)
    crowd = [sum(1 for q in pts if np.hypot(*(q - p)) < 60) for p in pts]
    for i in sorted(range(len(texts)), key=lambda k: -crowd[k]):  # crowded points choose first
        text = texts[i]
        best, best_score, best_box = None, math.inf, None
        for dx, dy, ha, va in _OFFSETS:
            far = abs(dx) > 15 or abs(dy) > 15
            ann = ax.annotate(text, (xs[i], ys[i]), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                              fontsize=fontsize, color=(colors[i] if colors is not None else "0.15"),
                              bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.8},
                              arrowprops=({"arrowstyle": "-", "color": "0.55", "lw": 0.7} if far else None),
                              zorder=5)
            box = ann.get_window_extent(renderer).expanded(1.1, 1.2)
            score = sum(overlap(box, b) for b in placed)
            score += sum(overlap(box, m) for j, m in enumerate(marker) if j != i)
            outside = box.width * box.height - overlap(box, axes_box)
            score += outside * 3 + (0.5 if far else 0)
            if score < best_score:
                if best is not None:
                    best.remove()
                best, best_score, best_box = ann, score, box
            else:
                ann.remove()
            if score < 1:
                break
        placed.append(best_box)
        out[i] = best
    return out


def overlap(a: Bbox, b: Bbox) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def short(system: str) -> str:
    return system.split(" @ ")[0]


def short_model(model: str) -> str:
    return str(model).replace("Gemma 4 ", "").replace(" Multimodal", "")


def point_label(row: Any) -> str:
    quant = str(row.quantization).split(" ")[0]
    quant = "" if quant in ("ollama", "") or quant.lower() in str(row.model).lower() else f" {quant}"
    tag = "this run" if row.source == THIS_RUN else source_label(row.source).replace("seed ", "")
    return f"{short_model(row.model)}{quant} · {row.host} ({tag})"
