"""Figure style shared by every paper figure: palettes, one colour per system, the theme, and notes for
empty panels."""

from __future__ import annotations

import textwrap
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from benchlib.paper.settings import NO_RUNS, THIS_RUN

PUBLISHED_PALETTE = sns.color_palette("deep", 10)


RUN_PALETTE = sns.color_palette("dark", 10)[3:] + sns.color_palette("dark", 3)


def system_colors(systems: pd.DataFrame) -> dict[str, Any]:
    colors: dict[str, Any] = {}
    pub = [s for s, src in zip(systems["system"], systems["source"]) if src != THIS_RUN]
    ours = [s for s, src in zip(systems["system"], systems["source"]) if src == THIS_RUN]
    for i, name in enumerate(dict.fromkeys(pub)):
        colors[name] = PUBLISHED_PALETTE[i % len(PUBLISHED_PALETTE)]
    for i, name in enumerate(dict.fromkeys(ours)):
        colors[name] = RUN_PALETTE[i % len(RUN_PALETTE)]
    return colors


def theme() -> None:
    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.95)
    plt.rcParams.update({"axes.titleweight": "bold", "figure.titleweight": "bold", "svg.fonttype": "none"})


def no_runs_note(ax: plt.Axes, text: str = f"this run: {NO_RUNS} in outputs/", loc: str = "lower right") -> None:
    anchor = {"lower right": (0.98, 0.02, "right", "bottom"), "upper right": (0.98, 0.98, "right", "top"),
              "center": (0.5, 0.5, "center", "center")}[loc]
    ax.text(anchor[0], anchor[1], text, transform=ax.transAxes, ha=anchor[2], va=anchor[3], fontsize=9,
            style="italic", color="0.35", bbox={"boxstyle": "round,pad=0.35", "fc": "white", "ec": "0.75"})


def wrap(text: str, width: int = 60) -> str:
    return "\n".join(textwrap.wrap(str(text), width)) or str(text)


def empty_figure(title: str, note: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(10, 2.5))
    ax.set_axis_off()
    ax.set_title(title)
    no_runs_note(ax, note, "center")
    return fig


def short_task_labels(labels: list[str]) -> tuple[dict[str, str], list[str]]:
    """Each task label → its name before the parenthesis ('Arithmetic (reasoning-gym basic_arithmetic; 2 one-digit
    terms, + and −)' → 'Arithmetic'), unless two would then read the same; and the key lines for those cut
    ('Arithmetic: reasoning-gym basic_arithmetic; 2 one-digit terms, + and −'): a long name squeezes a figure's
    panels into slivers."""
    cut = {label: label.split(" (")[0] for label in labels}
    short = {label: name if list(cut.values()).count(name) == 1 else label for label, name in cut.items()}
    key = [f"{name}: {label[len(name):].strip().removeprefix('(').removesuffix(')')}"
           for label, name in short.items() if name != label]
    return short, key
