"""How speed and latency are judged and sized (params `run:`): the equivalence margin of the speed verdicts, and
the latency plan that sizes a task's requests to a precision.

    equivalence_margin  two deployments are "equivalent" on a speed metric when the 90 % interval of their ratio
                        lies within [1 / (1 + m), 1 + m] (two one-sided tests; analysis.speed_verdicts). Default
                        EQUIVALENCE_MARGIN: ±10 %, about the run-to-run spread of one deployment's mean decode rate
                        on a busy 2-core host; name a smaller one where you must tell 5 % apart
    latency             plan: fixed   every task sends run.repeats requests (the default)
                        plan: precision   each non-graded task keeps sending, in looks, until the 95 % interval of
                                      its `percentile` of `metric` (distribution-free, from order statistics) is
                                      within ±`relative` of the estimate on both sides, or `max_requests` is reached
                                      (suites/latency_looks; the stopping reason is recorded in latency_plan.csv and
                                      printed in the paper)
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from benchlib.config.metrics import PERCENTILES
from benchlib.config.sections import Section

EQUIVALENCE_MARGIN = 0.10


class LatencyPlan(Section):
    plan: Literal["fixed", "precision"] = Field(
        "fixed", description="fixed: run.repeats requests a task; precision: until the percentile is known to "
        "±relative (or max_requests)")
    metric: Literal["ttft_s", "e2e_s", "tpot_s", "decode_tps", "ttfo_s"] = Field(
        "ttft_s", description="precision: the per-request metric whose percentile is sized")
    percentile: str = Field("p90", description="precision: the percentile sized, p50, p90, p95 or p99 (its "
                            "interval needs 6, 36, 72, 368 requests)")
    relative: float = Field(0.10, gt=0, lt=1, description="precision: the interval's larger side ÷ the estimate "
                            "to reach")
    max_requests: int = Field(400, ge=1, le=1_000_000, description="precision: the most requests a task sends")
    growth: float = Field(1.5, gt=1, le=10, description="precision: each look sends this many times the requests "
                          "so far (fewer looks than one request at a time)")
    budget_s: float | None = Field(None, gt=0, description="precision: stop at the first look after this many "
                                   "seconds of a task")

    @field_validator("percentile")
    @classmethod
    def _named(cls, value: str) -> str:
        if value not in PERCENTILES:
            raise ValueError(f"percentile must be one of {', '.join(PERCENTILES)}, not {value!r}")
        return value

    @property
    def sized(self) -> bool:
        return self.plan == "precision"

    @property
    def quantile(self) -> float:
        return PERCENTILES[self.percentile]


class SpeedRunSettings(Section):
    """The run settings of the speed verdicts and the latency plan; RunSettings (config.params) takes them."""

    latency: LatencyPlan = Field(default_factory=LatencyPlan, description="How many requests a task sends: "
                                 "run.repeats, or until a latency percentile is known to a precision")
    equivalence_margin: float = Field(EQUIVALENCE_MARGIN, gt=0, lt=1, description="Speed verdicts: two deployments "
                                      "are 'equivalent' when the 90 % interval of their ratio lies within ±this "
                                      "(analysis/speed_verdicts.py)")
