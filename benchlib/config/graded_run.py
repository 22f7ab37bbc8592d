"""The run settings of the graded sets (params `run:`): how many items of each set a run sends, how many at once,
and the second pass under load. RunSettings (config.params) takes them from GradedRunSettings.

    graded_items       'all' (the default: a real deployment answers every item), a number for every set, or a
                       mapping of set name to number or 'all' ('*' for the sets not named; a set neither named nor
                       covered sends none): the first n of each pool (graded_count)
    graded_in_flight   items sent at once in the first pass; unset: 1 on an embedded server, AUTO_GRADED_IN_FLIGHT
                       on any other, capped at what the pre-flight saw the server serve whole (in_flight)
    graded_concurrency above 1, a second pass of each set with that many in flight (accuracy under load), the first
                       pass then one at a time
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal, Mapping

from pydantic import Field, model_validator

from benchlib.config.sections import Section

# Graded items in flight on a server that is not embedded, unless run.graded_in_flight says: a GPU server batches
# what arrives together, and 16 keeps a small server's queue short
AUTO_GRADED_IN_FLIGHT = 16
ALL_ITEMS = "all"
REST = "*"  # graded_items' key for the sets a mapping does not name
GradedCount = Annotated[int, Field(ge=0, le=100_000)] | Literal["all"]
GradedItems = Annotated[int, Field(ge=1, le=100_000)] | Literal["all"] | dict[str, GradedCount]


class GradedRunSettings(Section):
    graded_items: GradedItems = Field(
        "all", description="Items per graded set (a task with `graded:`), each sent once: the first n of its pool. "
        "'all' (the default: a real deployment answers every item; a GPU server sends them concurrently), a number "
        "for every set, or a mapping of set name to number or 'all' ('*' for the sets not named; a set neither "
        "named nor covered sends none). Sets the precision: the 95 % Wilson half-width at 50 % accuracy is ±35 "
        "points at n=4, ±17 at 30, ±9.6 at 100, ±4.9 at 400. Fewer than the pool is a reduced run: its manifest "
        "says so (graded.reduced) and the paper prints 'reduced: N of M items' (a sequential run.quality plan's: "
        "'sized by its compare plan …')")
    graded_in_flight: int | None = Field(
        None, ge=1, le=4096, description="Graded items in flight in the first pass (each row records it as its "
        "concurrency): null = 1 on an embedded server (one slot on this machine's CPU) and "
        f"{AUTO_GRADED_IN_FLIGHT} on any other (a GPU server batches what arrives together); set it to the server's "
        "parallel slots (llama-server --parallel, OLLAMA_NUM_PARALLEL). With graded_concurrency above 1 the first "
        "pass is the one-at-a-time reference: 1")
    graded_concurrency: int = Field(
        1, ge=1, le=4096, description="Accuracy under load: above 1, each graded set's items are sent a second time "
        "with this many in flight (task '<set>@c<n>'), and the quality suite compares the two passes item by item "
        "(a server that preempts, a quantized KV cache or a batch-dependent kernel shows there); the first pass is "
        "then sent one at a time")

    preflight_in_flight: int | None = Field(
        None, ge=1, le=4096, description="Set by the pre-flight (benchlib.measure.servers.preflight), not by hand: how many "
        "graded items the server serves at once without cutting or refusing one; caps the automatic "
        "graded_in_flight")

    @model_validator(mode="after")
    def _graded_passes(self) -> "GradedRunSettings":
        if self.graded_concurrency > 1 and (self.graded_in_flight or 1) > 1:
            raise ValueError(f"graded_concurrency {self.graded_concurrency} compares the graded sets under load with "
                             f"a first pass sent one at a time: leave graded_in_flight unset (or 1), not "
                             f"{self.graded_in_flight}")
        return self

    def graded_count(self, task: str, pool: int) -> int:
        """How many of a graded set's `pool` items a run sends (the first n)."""
        size = self.graded_items
        if isinstance(size, dict):
            size = size.get(task, size.get(REST, 0))
        return pool if size == ALL_ITEMS else min(int(size), pool)


def in_flight(run: GradedRunSettings, server_kind: str) -> int:
    """Graded items in flight in the first pass: run.graded_in_flight, else 1 on an embedded server and
    AUTO_GRADED_IN_FLIGHT on any other; 1 where a second pass under load compares against it."""
    if run.graded_concurrency > 1:
        return 1
    if run.graded_in_flight is not None:
        return run.graded_in_flight
    auto = 1 if server_kind == "embedded" else AUTO_GRADED_IN_FLIGHT
    return min(auto, run.preflight_in_flight) if run.preflight_in_flight is not None else auto


def unknown_sets(run: GradedRunSettings, tasks: Mapping[str, Any]) -> str:
    """Why a graded_items mapping names a set no task file declares ("" when it names none)."""
    graded = [name for name, task in tasks.items() if task.graded is not None]
    for name in run.graded_items if isinstance(run.graded_items, dict) else ():
        if name != REST and name not in graded:
            close = difflib.get_close_matches(name, graded, n=1)
            hint = f"did you mean '{close[0]}'?" if close else \
                f"graded sets: {', '.join(graded)}; '{REST}' for the rest"
            return f"'{name}' is no graded set ({hint})"
    return ""


def reduced_note(plan: Any) -> str:
    """What the graded items of a run that planned fewer than its pools were (the manifest's `graded`), else "":
    'reduced: 15 of 964 items' for a fixed plan (a subset chosen before any answer: the CPU demo's), 'sized by its
    compare plan against B: at most 84 of 964 items' for a sequential one (it stops when the comparison is decided,
    quality_plan.csv says where), 'sized by its precision plan: …'."""
    if not isinstance(plan, Mapping) or not plan.get("reduced"):
        return ""
    counts = f"{_count(plan.get('items'))} of {_count(plan.get('pool'))} items"
    kind = plan.get("plan") or "fixed"
    if kind == "compare":
        return f"sized by its compare plan against {plan.get('baseline') or 'its baseline'}: at most {counts}"
    if kind == "precision":
        return f"sized by its precision plan: at most {counts}"
    return f"reduced: {counts}"


def _count(value: Any) -> int:
    """A count read from a manifest (a number, or its text); 0 where it is neither."""
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0
