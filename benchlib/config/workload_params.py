"""The load workloads' params (sweep.workloads; benchlib.suites.load.workloads runs them): multi-turn conversations,
k shared prefixes × m suffixes, and a Mooncake trace replay. Each is off unless enabled."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from benchlib.config.sections import Section

WORKLOADS_HELP = "Multi-turn, shared-prefix and trace-replay workloads (off unless enabled)"
# sweep.nodes (benchlib.suites.load.fleet_levels sends with it): a fleet study's load levels from several Ray nodes
MAX_CLIENT_NODES = 64
CLIENT_NODES_HELP = ("Client nodes each rate and concurrency level is sent from (a fleet study on Ray, --ray): the "
                     "level's requests split over worker actors on that many nodes, start instants aligned by "
                     "measured clock offsets; 1 sends from the deployment's own process")


class MultiTurnParams(Section):
    """Multi-turn conversations (load notebook, workloads): each turn sends the whole history — every earlier user
    message and the model's own answers — plus a new user message, after a think time."""

    enabled: bool = Field(False, description="Run the multi-turn workload")
    sessions: int = Field(4, ge=1, le=100_000, description="Conversations")
    turns: int = Field(3, ge=1, le=1000, description="Turns per conversation")
    max_concurrency: int = Field(2, ge=1, le=100_000, description="Conversations in flight at once")
    user_tokens: int = Field(32, ge=1, le=1_048_576, description="Server tokens of each new user message")
    output_tokens: int = Field(16, ge=1, le=1_048_576, description="Completion budget of each turn")
    think_time_s: float = Field(0.0, ge=0, le=3600, description="Mean pause between an answer and the next turn")
    think: Literal["fixed", "exponential"] = Field("exponential", description="fixed: every pause think_time_s; "
                                                   "exponential: drawn with that mean (seeded)")


class SharedPrefixParams(Section):
    """k prefixes × m suffixes: every prompt is one of `prefixes` shared texts, then a suffix of its own."""

    enabled: bool = Field(False, description="Run the shared-prefix workload")
    prefixes: int = Field(2, ge=1, le=10_000, description="Distinct shared prefixes (k)")
    suffixes: int = Field(4, ge=1, le=100_000, description="Requests per prefix (m)")
    prefix_tokens: int = Field(256, ge=1, le=1_048_576, description="Server tokens of each prefix")
    suffix_tokens: int = Field(32, ge=1, le=1_048_576, description="Server tokens after the prefix (the chat "
                                                                   "template's among them)")
    output_tokens: int = Field(16, ge=1, le=1_048_576, description="Completion budget of each request")
    max_concurrency: int = Field(1, ge=1, le=100_000, description="Requests in flight at once")
    order: Literal["interleaved", "grouped"] = Field("interleaved", description="interleaved: seeded shuffle of "
                                                     "all k × m; grouped: each prefix's requests together")


class TraceParams(Section):
    """Replay of a Mooncake-format JSONL trace (benchlib.measure.traffic.traces), open loop at its own timestamps."""

    enabled: bool = Field(False, description="Run the trace replay")
    path: str = Field("testdata/traces/synthetic_mooncake.jsonl", min_length=1,
                      description="The trace; a relative path is taken from the project root")
    time_scale: float = Field(1.0, gt=0, le=1000, description="Send offset = trace offset × this (0.5: twice as fast)")
    length_scale: float = Field(1.0, gt=0, le=100, description="Prompt lengths and the block size × this")
    block_tokens: int = Field(512, ge=1, le=1_048_576, description="Tokens a hash id stands for (Mooncake: 512)")
    max_requests: int | None = Field(None, ge=1, le=10_000_000, description="The trace's first n requests only")
    max_output_tokens: int = Field(64, ge=1, le=1_048_576, description="Cap on each request's output_length")
    max_concurrency: int = Field(64, ge=1, le=100_000, description="Cap on requests in flight")


class WorkloadParams(Section):
    """Workloads that look like traffic (load notebook, after the rate sweep); each off unless enabled."""

    seed: int = Field(0, description="Seeds think times, the shared-prefix order and the filler text")
    multiturn: MultiTurnParams = Field(default_factory=MultiTurnParams, description="Multi-turn conversations")
    shared_prefix: SharedPrefixParams = Field(default_factory=SharedPrefixParams, description="k prefixes × m "
                                                                                              "suffixes")
    trace: TraceParams = Field(default_factory=TraceParams, description="Mooncake trace replay")

    def enabled(self) -> bool:
        return self.multiturn.enabled or self.shared_prefix.enabled or self.trace.enabled
