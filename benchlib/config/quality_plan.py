"""The quality plan (params `run.quality`): how many graded items a deployment answers, and when it may stop.

    plan: fixed       every item run.graded_items allows (the first n of each pool), chosen before any answer
    plan: precision   stop when the pooled accuracy's Wilson 95 % interval is within ±half_width
    plan: compare     stop when the paired comparison with `baseline` (another deployment of the study, named
                      by its model folder — server.model, +variant for a grid point — or by its full name) is
                      decided at level `alpha`, group-sequentially (alpha spent over the looks)

The graded sets are sent look by look: at each fraction of `looks` every set has sent that share of its planned
items (run.graded_items, capped by its pool), and the rule (benchlib.analysis.sequential) is asked between two
looks; `budget_s` (wall time of the graded sets) stops it too. The plan never sends more than run.graded_items of
a set: raise that to the pool's size to let the plan use the whole pool.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from benchlib.config.sections import Section

PLANS = ("fixed", "precision", "compare")
# Looks of one plan: each look's boundary is a numerical integration (benchlib.analysis.sequential.boundaries),
# asked again at every look, and past a hundred looks the boundaries are those of continuous monitoring already
# (bench/results/2026-11-29-imports.md), so a plan gains nothing from more.
MAX_LOOKS = 100


class QualityPlan(Section):
    plan: Literal["fixed", "precision", "compare"] = Field(
        "fixed", description="fixed: the planned items; precision: until the interval is narrow enough; "
        "compare: until the paired comparison with `baseline` is decided (alpha spent over the looks)")
    half_width: float = Field(0.05, gt=0, lt=0.5, description="precision: the Wilson 95 % half-width to reach")
    baseline: str = Field("", description="compare: the deployment compared with, one of the study's (its model "
                          "folder, server.model[+variant], or its full name); it runs first")
    alpha: float = Field(0.01, gt=0, lt=0.5, description="compare: the false-verdict rate the whole sequence of "
                         "looks keeps (two-sided)")
    looks: list[float] = Field(default_factory=lambda: [0.25, 0.5, 0.75, 1.0], description="compare and "
                               "precision: the shares of the planned items at which the rule is asked")
    budget_s: float | None = Field(None, gt=0, description="Stop at the first look after this many seconds of "
                                   "graded sets")

    @model_validator(mode="after")
    def _consistent(self) -> "QualityPlan":
        if self.plan == "compare" and not self.baseline:
            raise ValueError("plan compare needs `baseline`: the deployment of the study to compare with")
        if any(not 0 < f <= 1 for f in self.looks) or sorted(set(self.looks)) != list(self.looks) or not self.looks:
            raise ValueError(f"looks must be increasing shares in (0, 1]: {str(self.looks)[:80]}")
        if len(self.looks) > MAX_LOOKS:
            raise ValueError(f"looks: {len(self.looks)} shares, at most {MAX_LOOKS} (each look's boundary is a "
                             f"numerical integration, and a plan gains nothing from more)")
        return self

    @property
    def sequential(self) -> bool:
        return self.plan != "fixed"
