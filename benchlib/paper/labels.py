"""Point labels that do not overlap and sit nearest their own point, a checker for both rules, and the short
names printed beside points.

Placement (place_labels): points closer than `merge_px` on screen share one label (their names stacked), since
no label can sit nearest to one of two coinciding points; each label then tries offsets around its point and
keeps the first that overlaps no placed label, covers no other point's marker, stays inside the axes and is
nearer its own point than any other (else the candidate breaking the fewest of these rules). The labels are kept
on the axes (`ax._point_labels`) so label_problems() can check a finished figure."""

from __future__ import annotations

import math
import os
import textwrap
from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.transforms import Bbox

from benchlib.config.identity import Deployment
from benchlib.paper.runs import source_label
from benchlib.paper.settings import THIS_RUN

_OFFSETS = [(8, 8, "left", "bottom"), (8, -8, "left", "top"), (-8, 8, "right", "bottom"), (-8, -8, "right", "top"),
            (10, 0, "left", "center"), (-10, 0, "right", "center"), (0, 10, "center", "bottom"),
            (0, -10, "center", "top"), (24, 26, "left", "bottom"), (24, -26, "left", "top"),
            (-24, 26, "right", "bottom"), (-24, -26, "right", "top"), (0, 34, "center", "bottom"),
            (0, -34, "center", "top"), (40, 46, "left", "bottom"), (-40, -46, "right", "top"),
            (40, -46, "left", "top"), (-40, 46, "right", "bottom"), (60, 0, "left", "center"),
            (-60, 0, "right", "center")]
MARKER_PX = 10.0  # side of the square a marker is taken to cover, in display pixels
MERGE_PX = 9.0


def place_labels(ax: plt.Axes, xs: Sequence[float], ys: Sequence[float], texts: Sequence[str],
                 colors: Sequence[Any] | None = None, fontsize: float = 8.0,
                 obstacles: Sequence[Any] = (), merge_px: float = MERGE_PX) -> list[Any]:
    """Annotate points (see the module docstring); returns one annotation per label (merged points share one).
    When some label cannot keep every rule, its points join the nearest other group's label and all are placed
    again, so a crowded cluster ends up with one stacked label beside it rather than labels on the wrong points."""
    renderer = measuring_renderer(ax)
    pts = ax.transData.transform(np.column_stack([xs, ys])) if len(xs) else np.empty((0, 2))
    groups = _merge(pts, merge_px)
    fixed = [o.get_window_extent(renderer) if hasattr(o, "get_window_extent") else o for o in obstacles]
    while True:
        kept, failed = _place(ax, renderer, pts, groups, xs, ys, texts, colors, fontsize, fixed)
        if not failed or len(groups) < 2:
            break
        for ann, _ in kept:
            ann.remove()
        g = failed[0]
        others = [h for h in range(len(groups)) if h != g]
        h = min(others, key=lambda k: min(np.hypot(*(pts[i] - pts[j])) for i in groups[g] for j in groups[k]))
        groups[min(g, h)] = sorted(groups[g] + groups[h])
        del groups[max(g, h)]
    ax._point_labels = {"xy": np.column_stack([xs, ys]) if len(xs) else np.empty((0, 2)),  # type: ignore[attr-defined]
                        "labels": kept}
    return [ann for ann, _ in kept]


def _place(ax: plt.Axes, renderer: Any, pts: np.ndarray, groups: list[list[int]], xs: Sequence[float],
           ys: Sequence[float], texts: Sequence[str], colors: Sequence[Any] | None, fontsize: float,
           fixed: list[Bbox]) -> tuple[list[tuple[Any, list[int]]], list[int]]:
    """One pass: each group's best offset; returns the annotations and the groups that broke a rule."""
    axes_box = ax.get_window_extent(renderer)
    placed = list(fixed)
    kept: list[tuple[Any, list[int]]] = []
    failed: list[int] = []
    crowd = [sum(1 for q in pts if np.hypot(*(q - pts[g[0]])) < 60) for g in groups]
    for gi in sorted(range(len(groups)), key=lambda k: -crowd[k]):  # crowded points choose first
        group = groups[gi]
        text = joined([str(texts[i]) for i in group])
        shades = {str(colors[i]) for i in group} if colors is not None else set()
        color = colors[group[0]] if colors is not None and len(shades) == 1 else "0.15"
        anchor = max(group, key=lambda i: pts[i][1])  # the top point of a stack
        best, best_key = None, (math.inf, math.inf, math.inf)
        for dx, dy, ha, va in _OFFSETS:
            far = abs(dx) > 15 or abs(dy) > 15
            ann = ax.annotate(text, (xs[anchor], ys[anchor]), xytext=(dx, dy), textcoords="offset points", ha=ha,
                              va=va, fontsize=fontsize, color=color,
                              bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.8},
                              arrowprops=({"arrowstyle": "-", "color": "0.55", "lw": 0.7} if far else None),
                              zorder=5)
            box = ann.get_window_extent(renderer)
            padded = box.expanded(1.1, 1.2)
            clash = sum(overlap(padded, b) for b in placed)
            covered = sum(overlap(padded, _marker(p)) for j, p in enumerate(pts) if j not in group)
            outside = box.width * box.height - overlap(box, axes_box)
            broken = (clash > 0) + (not _nearest_own(box, pts, group))  # the rules label_problems checks
            key = (broken, (covered > 0) + (outside > 1), clash + covered + outside * 3 + (0.5 if far else 0))
            if key < best_key:
                if best is not None:
                    best.remove()
                best, best_key = ann, key
            else:
                ann.remove()
            if key[0] == 0 and key[1] == 0 and key[2] < 1:
                break
        if best_key[0]:
            failed.append(gi)
        placed.append(best.get_window_extent(renderer).expanded(1.1, 1.2))
        kept.append((best, group))
    return kept, failed


def measuring_renderer(ax: plt.Axes) -> Any:
    """The figure's renderer to measure text with, its figure left undrawn: a label's box needs the axes' final
    position and view limits (autoscaling is lazy: resolve them) and font metrics, not a drawn canvas, and a full
    draw per labelled panel was most of a labelled figure's cost."""
    ax.get_xlim(), ax.get_ylim()  # resolves a pending autoscale into the view limits transData reads
    canvas = ax.figure.canvas
    return (canvas if hasattr(canvas, "get_renderer") else FigureCanvasAgg(ax.figure)).get_renderer()


def label_problems(ax: plt.Axes) -> list[str]:
    """Rules of place_labels checked on a drawn figure: every pair of point labels that overlaps, and every label
    whose box is nearer another point than its own (points merged into one label count as its own)."""
    info = getattr(ax, "_point_labels", None)
    if not info:
        return []
    canvas = ax.figure.canvas
    if not hasattr(canvas, "get_renderer"):  # a closed figure: draw it on a fresh Agg canvas
        canvas = FigureCanvasAgg(ax.figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    pts = ax.transData.transform(info["xy"]) if len(info["xy"]) else np.empty((0, 2))
    boxes = [(ann.get_text().replace("\n", " / "), ann.get_window_extent(renderer), group)
             for ann, group in info["labels"]]
    problems = []
    for a in range(len(boxes)):
        for b in range(a + 1, len(boxes)):
            if overlap(boxes[a][1], boxes[b][1]) > 1.0:
                problems.append(f"labels overlap: {boxes[a][0]!r} and {boxes[b][0]!r}")
    for text, box, group in boxes:
        if not _nearest_own(box, pts, group):
            problems.append(f"label nearer another point than its own: {text!r}")
    return problems


def joined(texts: Sequence[str], width: int = 44) -> str:
    """One label for several points: a shared head (up to a '-', ' ' or '·') and tail (from a space) written once,
    'gemma3-270m-{q2_k, q8_0} [this run]' when the names differ in one word; others are stacked one per line."""
    names = list(dict.fromkeys(texts))
    if len(names) == 1:
        return names[0]
    head = os.path.commonprefix(names)
    head = head[:max(head.rfind(c) for c in "- ·") + 1]
    tail = os.path.commonprefix([n[len(head):][::-1] for n in names])[::-1]
    tail = tail[tail.find(" "):] if " " in tail else ""
    middles = [n[len(head):len(n) - len(tail)] for n in names]
    if (head or tail) and all(m and " " not in m for m in middles):  # only single words between head and tail
        return "\n".join(textwrap.wrap(head + "{" + ", ".join(middles) + "}" + tail, width))
    return "\n".join(names)


def _merge(pts: np.ndarray, merge_px: float) -> list[list[int]]:
    """Groups of points chained by screen distances under merge_px (single linkage), in input order."""
    parent = list(range(len(pts)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(pts)):
        for j in range(i + 1, len(pts)):
            if np.all(np.isfinite(pts[[i, j]])) and np.hypot(*(pts[i] - pts[j])) < merge_px:
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(len(pts)):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


def _marker(p: np.ndarray) -> Bbox:
    return Bbox.from_bounds(p[0] - MARKER_PX / 2, p[1] - MARKER_PX / 2, MARKER_PX, MARKER_PX)


def _distance(box: Bbox, p: np.ndarray) -> float:
    dx = max(box.x0 - p[0], 0.0, p[0] - box.x1)
    dy = max(box.y0 - p[1], 0.0, p[1] - box.y1)
    return math.hypot(dx, dy)


def _nearest_own(box: Bbox, pts: np.ndarray, group: Sequence[int]) -> bool:
    own = min(_distance(box, pts[i]) for i in group)
    others = [_distance(box, p) for j, p in enumerate(pts) if j not in group and np.all(np.isfinite(p))]
    return not others or own < min(others)


def overlap(a: Bbox, b: Bbox) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def short(system: str) -> str:
    return Deployment.model_of(system)


def short_model(model: str) -> str:
    return str(model).replace("Gemma 4 ", "").replace(" Multimodal", "")


def point_label(row: Any) -> str:
    quant = str(row.quantization).split(" ")[0]
    quant = "" if quant in ("ollama", "") or quant.lower() in str(row.model).lower() else f" {quant}"
    tag = "this run" if row.source == THIS_RUN else source_label(row.source).replace("seed ", "")
    return f"{short_model(row.model)}{quant} · {row.host} ({tag})"
