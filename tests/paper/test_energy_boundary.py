"""Joules of different boundaries are never ranked or drawn as one: the frontier compares an energy axis within one
boundary, the energy figure puts each boundary on its own axes, the energy table names each row's boundary."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd

from benchlib.analysis import frontier
from benchlib.config.formatting import MISSING
from benchlib.paper.figures import NO_BOUNDARY, energy_groups, fig_energy
from benchlib.paper.format import Table
from benchlib.paper.runs import Runs, load_reference_sets, load_runs
from benchlib.paper.settings import THIS_RUN
from benchlib.paper.systems import SYSTEM_COLUMNS, published_systems
from benchlib.paper.tables import memory_power_table


def mixed_systems() -> pd.DataFrame:
    """The paper's three systems (GPU board, as §3 prints: 'average GPU draw') and two runs of ours: one on a CPU
    package (RAPL) with the best tok/s per W of all, one without an energy sensor."""
    published = published_systems(load_reference_sets())
    ours = pd.DataFrame([
        {"system": "tiny @ cpu-box", "source": THIS_RUN, "host": "cpu-box", "tps_per_w": 5.0, "peak_temp_c": 40.0,
         "context_window_k": 128.0, "tokens_per_joule": 5.0, "energy_boundary": "CPU package",
         "idle_subtracted": False, "energy_note": ""},
        {"system": "tiny @ vm", "source": THIS_RUN, "host": "vm", "tps_per_w": math.nan, "peak_temp_c": 40.0,
         "context_window_k": 128.0, "tokens_per_joule": math.nan, "energy_boundary": "",
         "energy_note": "no energy: no RAPL"}]).reindex(columns=SYSTEM_COLUMNS)
    return pd.concat([published, ours], ignore_index=True)


def test_published_systems_state_the_gpu_board_boundary_their_paper_prints():
    published = published_systems(load_reference_sets())
    assert set(published["energy_boundary"]) == {"GPU board"}
    assert published["idle_subtracted"].eq(False).all()


def test_the_frontier_ranks_tok_per_w_within_one_boundary_only():
    systems = mixed_systems()
    axes = {"tps_per_w": "max", "peak_temp_c": "min", "context_window_k": "max"}
    assert frontier.energy_boundary(systems, axes) == "GPU board"  # three of the four with a value share it
    pareto_frontier = frontier.pareto_frontier(systems, axes)
    marked = pareto_frontier.set_index("system")
    cpu = marked.loc["tiny @ cpu-box"]
    assert not cpu["eligible"] and not cpu["on_frontier"]
    assert cpu["dominated_by"].startswith("not eligible: different energy boundary (CPU package; tps_per_w "
                                          "compared within GPU board)")
    # it would have dominated everything on tok/s per W: nothing GPU-board is marked dominated by it
    assert not pareto_frontier["dominated_by"].str.contains("tiny @ cpu-box (better", regex=False).any()
    assert marked.loc["Qwen3.5-4B @ GB10 DGX Spark", "on_frontier"]
    # without an energy axis the boundary does not matter
    assert frontier.energy_boundary(systems, {"peak_temp_c": "min"}) == ""
    assert frontier.pareto_frontier(systems, {"peak_temp_c": "min"}).set_index("system").loc[
        "tiny @ cpu-box", "eligible"]


def test_the_energy_figure_puts_each_boundary_on_its_own_axes(tmp_path):
    systems = mixed_systems()
    groups = energy_groups(systems)
    assert [name for name, _ in groups] == ["CPU package", "GPU board", NO_BOUNDARY]
    fig = fig_energy({"_systems": Table("_systems", "", systems)}, no_runs(tmp_path))
    try:
        rows = [ax for ax in fig.axes if ax.get_xlabel().startswith("tokens/s per watt")]
        assert len(rows) == 3
        titles = [ax.get_title() for ax in rows]
        assert "energy boundary: CPU package" in titles[0] and "energy boundary: GPU board" in titles[1]
        for ax, (_, group) in zip(rows, groups):  # each axis holds only its own boundary's systems
            assert len(ax.patches) == len(group)
    finally:
        plt.close(fig)


def test_the_energy_table_names_each_rows_boundary_and_warns_on_a_mix():
    table = memory_power_table(mixed_systems())
    shown = table.display.set_index("system")["energy boundary"]
    assert shown["Gemma 4 E2B @ RTX 3090 host"] == "GPU board, idle not subtracted"
    assert shown["tiny @ cpu-box"] == "CPU package, idle not subtracted" and shown["tiny @ vm"] == "—"
    assert "Rows of different boundaries (CPU package, GPU board)" in table.caption
    assert list(table.data["energy_boundary"].iloc[:3]) == ["GPU board"] * 3


def no_runs(tmp_path) -> Runs:
    return load_runs(tmp_path / "no-outputs")


def node_systems() -> pd.DataFrame:
    """Two of our runs on GPU hosts with a BMC: the small model wins at the GPU board, its big idle host loses it
    at the node; a third without a BMC."""
    return pd.DataFrame([
        {"system": "small @ big-host", "source": THIS_RUN, "tokens_per_joule": 2.0, "node_tokens_per_joule": 0.4,
         "gpu_share_of_node": 0.2, "energy_boundary": "GPU board", "energy_note": ""},
        {"system": "large @ lean-host", "source": THIS_RUN, "tokens_per_joule": 1.5, "node_tokens_per_joule": 0.9,
         "gpu_share_of_node": 0.6, "energy_boundary": "GPU board", "energy_note": ""},
        {"system": "mid @ no-bmc", "source": THIS_RUN, "tokens_per_joule": 1.8, "node_tokens_per_joule": math.nan,
         "energy_boundary": "GPU board", "energy_note": ""}]).reindex(columns=SYSTEM_COLUMNS)


def test_node_tokens_per_joule_stand_beside_the_chips_and_a_flip_is_said():
    table = memory_power_table(node_systems())
    shown = table.display.set_index("system")
    node = "tokens per joule (whole node, input power (BMC))"
    assert shown.loc["small @ big-host", node] == "0.40" and shown.loc["small @ big-host", "tokens per joule"] == "2.00"
    assert shown.loc["large @ lean-host", "GPU share of node"] == "60%"
    assert shown.loc["mid @ no-bmc", node] == MISSING
    assert ("Would flip if measured at the node: small @ big-host beats large @ lean-host on tokens per joule at the "
            "GPU board (2 vs 1.5) but not at the whole node (0.4 vs 0.9).") in table.caption
    assert frontier.node_flips(node_systems().iloc[1:]) == []  # no pair with both: nothing to flip


def test_the_energy_figure_gives_the_node_its_own_row(tmp_path):
    systems = node_systems()
    groups = energy_groups(systems)
    assert [name for name, _ in groups] == ["GPU board", "whole node, input power (BMC)"]
    at_node = groups[1][1].set_index("system")
    assert list(at_node.index) == ["small @ big-host", "large @ lean-host"]
    assert at_node.loc["small @ big-host", "tokens_per_joule"] == 0.4  # the node's, never the chip's
    fig = fig_energy({"_systems": Table("_systems", "", systems)}, no_runs(tmp_path))
    try:
        titles = [ax.get_title() for ax in fig.axes if ax.get_xlabel().startswith("tokens per joule")]
        assert "energy boundary: whole node, input power (BMC)" in titles[1]
    finally:
        plt.close(fig)
