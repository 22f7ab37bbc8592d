"""What a joule covers: the energy boundary of each energy source, carried beside every energy figure.

NVML's counter and its power samples (or DCGM's, from the server's host) cover the GPU board — the card, its memory
and its VRMs, not the host; RAPL covers the CPU package (the top-level intel-rapl:N domains telemetry.host sums;
their DRAM sub-domains are not added; a machine whose only domain is psys reports the platform); powermetrics
covers Apple silicon's CPU, GPU and ANE (not DRAM, display or the rest of the board); an hwmon rail set covers what
its rails feed (a Jetson's known input rail, VDD_IN / POM_5V_IN: the whole board; rails named in
telemetry.hwmon_rails: those rails); a BMC (telemetry.bmc: Redfish or IPMI) covers the whole node at its power
supplies' input, and is recorded beside the chip-level figure, never instead of it (the node_* window columns). Two
figures with different boundaries are not comparable: the frontier and the paper's energy figure compare within one
boundary only.

Every energy figure (energy_j, tokens_per_joule, tps_per_w) is gross: idle was not subtracted (`idle_subtracted`
false); net_energy_j is the same energy less the idle window's power × duration.
"""

from __future__ import annotations

from typing import Any

GPU_BOARD = "GPU board"
CPU_PACKAGE = "CPU package"
PLATFORM_PSYS = "platform (RAPL psys)"
SOC_PACKAGE = "SoC CPU+GPU+ANE"
WHOLE_BOARD = "whole board"
RAIL_SET = "rail set: "
WALL = "wall"
NODE_INPUT = "whole node, input power (BMC)"  # telemetry.bmc: what the BMC measures at the node's power supplies
DIFFERENT = "different energy boundary"
BOARD_RAILS = ("VDD_IN", "POM_5V_IN")  # telemetry.soc.KNOWN_BOARD_RAILS: the rails that feed the whole board


def rapl_boundary(rapl: Any) -> str:
    """CPU package, or the platform when the only RAPL domain summed is psys."""
    names = [getattr(path, "parent", None) for path, _ in getattr(rapl, "domains", None) or []]
    names = [_read(parent / "name") if parent is not None else "" for parent in names]
    return PLATFORM_PSYS if names and all(n == "psys" for n in names) else CPU_PACKAGE


def hwmon_boundary(soc: Any) -> str:
    """'whole board' for a known board input rail alone, else 'rail set: <chip/label+…>'."""
    rails = [name for name, _ in getattr(soc, "rails", None) or []]
    scope = str(getattr(soc, "scope", "") or "+".join(rails))
    labels = [r.split("/", 1)[-1] for r in (rails or scope.split("+"))]
    if labels and all(label in BOARD_RAILS for label in labels):
        return WHOLE_BOARD
    return f"{RAIL_SET}{scope}" if scope else f"{RAIL_SET}hwmon rails"


def window_boundary(energy_source: str, gpus: bool, soc: Any = None, rapl: Any = None) -> str:
    """The boundary of a window's energy_j from where it came (its energy_source), "" when it has none."""
    if not energy_source:
        return ""
    if gpus:
        return GPU_BOARD
    if energy_source == "powermetrics":
        return SOC_PACKAGE
    if energy_source == "hwmon":
        return hwmon_boundary(soc)
    if energy_source == "rapl":
        return rapl_boundary(rapl)
    return energy_source


def published_boundary(power_text: str) -> str:
    """The boundary a published power figure states in its own words ('average GPU draw' → GPU board)."""
    text = str(power_text or "").lower()
    if "wall" in text or "outlet" in text:
        return WALL
    if "gpu" in text:
        return GPU_BOARD
    if "package" in text or "cpu" in text:
        return CPU_PACKAGE
    if "system" in text or "board" in text:
        return WHOLE_BOARD
    return ""


def _read(path: Any) -> str:
    try:
        return path.read_text().strip()
    except (OSError, AttributeError):
        return ""
