"""Load sweeps (the load notebook): concurrency levels and prompt lengths, each level with a client self-check.

Concurrency sweep — for each level in params.sweep.concurrency, max(requests_per_level, level) requests with at
most `level` in flight (Session.execute's gate), task "concurrency", variant "c<level>", concurrency=<level>.
Per level: aggregate output tok/s = completion tokens of the ok requests ÷ the level's wall span (first wire
start → last end), per-request decode tok/s, TTFT / e2e p50/p90/p99, failures, and the saturation knee:

    KNEE RULE: the knee is the first level L whose next level N adds less than 10 % aggregate throughput
    (thr_N < 1.10 × thr_L) while p50 TTFT or p50 e2e grows at least 1.5× (max of both ratios ≥ 1.5). Levels
    above it are `saturated`. No such pair → no knee within the sweep (throughput still scaling).

Context sweep — for each length in params.sweep.context_lengths (clipped to the context window minus the
completion budget and a 64-token margin), a prompt whose *server-counted* length is the target: text is fitted
with the server's tokenizer endpoint (llama-cpp-python POST /extras/tokenize {"input"} → {"tokens"};
llama.cpp POST /tokenize {"content"} → {"tokens"}; vLLM POST /tokenize {"model", "prompt"} → {"count",
"tokens"}), plus the chat template's own tokens measured by one calibration request; without a tokenizer, a
chars-per-token model calibrated from the server's prompt_tokens (refitted after every length). The server's
reported prompt_tokens is recorded beside the target (token_error, exact). TTFT and prefill tok/s per length.

Client self-check — every level records the client's own health: event-loop lag (a coroutine on the client's
loop sleeps 10 ms and records how late it wakes; p50/p99/max), client CPU per request (process CPU over the
level ÷ requests) and its share of one core; a level is `client_bound` when loop lag p99 > 5 ms or the client
used > 50 % of one core: then the client, not the server, may have set the pace and the figures of that level
carry client delay.

Rate sweep — open-loop serving (params sweep.rate, sweep.slo): a synchronous level, a throughput level at
sweep.rate.max_concurrency, then `points` open-loop rates between them (constant, Poisson or gamma arrivals,
seeded), or the given sweep.rate.rates. Each request has a drawn server-counted prompt length and output
budget, optionally a shared prefix. Per level: offered, sent and achieved rates and output tok/s in a
steady-state window (ramp-up and drain left out), TTFT/TPOT/ITL/e2e p50 and p99, goodput under the SLOs, the
scheduler's lag; the highest rate that meets the SLOs. Rules: benchlib.analysis.serving.

Workloads — after the rate sweep, each off unless enabled (params sweep.workloads; params/studies/traffic.yaml turns
them on): multi-turn conversations (task "multiturn", variant "t<turn>", repeat = the conversation), every turn
carrying the whole history with the model's own answers, think time between turns, up to max_concurrency
conversations at once; shared prefixes (task "prefix": k run-unique prefix texts × m suffixes, seeded interleaved
order); a Mooncake JSONL trace replayed open loop at its scaled timestamps (task "trace", repeat = its line; prompts
built from the hash_ids' blocks, benchlib.measure.traffic.traces). Seeded and resumable like the rate sweep. Per
workload: TTFT/ITL/e2e p50 and p99, goodput under sweep.slo, cache-hit share (cached ÷ prompt tokens the server
reported, and vLLM's prefix-cache counters from /metrics), energy from the workload's window; per turn, TTFT median
with its bootstrap interval (turn 1 against the later, cached turns); per replayed request, planned vs actual send
offset.

Outputs (outputs/<host>/<model>/load/): requests.csv (one row per request, suite "load"), sweep_concurrency.csv
and sweep_context.csv (per level, written atomically), summary.csv (per task, with max_concurrency_ok /
max_context_ok: the largest level / length that ran with no failures), figures load_concurrency.png and
load_context.png; sweep_rate.csv, rate_plan.json and load_rate.png; sweep_workloads.csv, workload_turns.csv,
workload_replay.csv and workload_plan.json.

Modules here: concurrency (the concurrency sweep), context (the prompt-length sweep), rate (the rate sweep),
workloads (multi-turn, shared prefix, trace replay), suite (run_load: the sweeps and workloads on one server
start, then the suite summary). What the sweeps share sits in common (the client health of levels a resumed run
wrote, a level row's identity, a simple chat request, the calibration request), and a level sent from several Ray
nodes in fleet_levels; a sweep imports those, never another sweep. What they build on lives in its layer:
measure.selfcheck.client_health, measure.traffic (prompt_fitting, workload, traces); analysis.load_levels,
analysis.serving; the notebook's figures and tables in views.load_display.
"""

from benchlib.suites.load.concurrency import run_concurrency_sweep
from benchlib.suites.load.context import run_context_sweep
from benchlib.suites.load.rate import run_rate_sweep
from benchlib.suites.load.suite import LoadResult, run_load
from benchlib.suites.load.workloads import run_workloads

__all__ = ["LoadResult", "run_concurrency_sweep", "run_context_sweep", "run_load", "run_rate_sweep", "run_workloads"]
