"""Per-request cross-checks that make runtime artefacts visible: pure functions over records and DataFrames.

The field reports behind this project lost days to numbers the server faked without saying so: Ollama's prompt
cache inflated prefill about 5x, `OLLAMA_KEEP_ALIVE=0` turned every request into a cold load, a client counted
stream chunks instead of tokens. Each rule below flags such a request instead of letting it into a mean:

rate_mismatch   the client's decode rate, (completion_tokens - 1) / (t_last - t_first), and the server's own
                (llama.cpp `timings.predicted_n / predicted_ms`, Ollama `eval_count / eval_duration`, the
                embedded server's log) are more than `rate_tolerance` (10 %) apart. decode_ratio = client / server.
                Answers shorter than `min_decode_tokens` (16) get a ratio but no flag: a rate over a few intervals
                is noise, and llama-server counts the first token in predicted_n while predicted_ms starts when it
                is sampled, so its rate sits n / (n - 1) above the client's (11 % at 10 tokens, 1.6 % at 64).
cache_suspect   the server reports that at least `cache_share` (run.cache_suspect_share, 0.5) of the prompt came
                from its cache (`usage.prompt_tokens_details.cached_tokens`, llama.cpp `cache_n`, Ollama
                `prompt_eval_cached_count`, the embedded log's prefix-match hit; any cached token counts when the
                prompt size is unknown). A shared chat-template prefix (the embedded server reuses ~10 template
                tokens on every request, 10–30 % of these prompts) is normal and stays unflagged; a repeated
                prompt shows a share near 1. Set the share to 0 to flag any cached token. Or the
                request's prefill rate is more than `prefill_factor` (3x) the median of its group: same run, host,
                model, suite, task and concurrency, warm-ups excluded, at least `min_group` (3) measured rates.
                Both the client's prefill (prompt_tokens / TTFT) and the server's own are tested; the 5x Ollama
                artefact shows in either. A repeat of a prompt the server has seen looks exactly like this.
                Warm-ups are never flagged (they exist to absorb first-request effects).
cold            the server's load time (Ollama `load_duration`) is above `cold_load_s` (run.cold_load_s, 1 s):
                the model was (re)loaded for this request, so its TTFT and e2e measure a load, not inference.
client_stalled  the client's own event loop woke more than `client_stall_ms` (20 ms) late while the request was in
                flight (record.client_stall_ms, from the session's event_loop.LoopLagSampler; idle ≈ 0.1–1 ms; beside
                vLLM on 2 cores p50 21 ms, the client starved of CPU) AND that hold-up merged deltas: two of them
                share one read's stamp (an inter-delta interval of exactly 0). Kernel receive stamps keep a late
                read's timing right as long as each delta comes in its own read, so a hold-up alone changes
                nothing (2 of 86 requests behind vLLM had a merged read); merged ones carry the last segment's
                arrival, so TTFT / ITL may be late by up to the stall — seen once in CI as a 1.97 s TTFT (all 16
                deltas in one read) beside vLLM's own 0.77 s.

`flag_record` applies the single-request rules while a run is going (each row is written as it finishes);
`flag_requests` applies all rules, including the group-median prefill rule, to a finished requests table and
adds `cached_share`, `prefill_ratio`, `server_prefill_ratio`, `prefill_outlier` and a readable `flags` column;
`flag_counts` gives per-task counts for the summary.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from benchlib.records.schema import finite, flag, json_value, number

RATE_TOLERANCE = 0.10
PREFILL_FACTOR = 3.0
COLD_LOAD_S = 1.0
CLIENT_STALL_MS = 20.0
CACHE_SHARE = 0.5
MIN_GROUP = 3
MIN_DECODE_TOKENS = 16
# Requests whose prefill rates are comparable: same run, deployment, task and concurrency level. A context-length
# sweep must put the length in `task` (or pass group_by with `variant`), since longer prompts prefill faster.
PREFILL_GROUP_KEYS = ("run_id", "host", "model", "suite", "task", "concurrency")
# The keys analysis.summarize_requests groups by, so flag_counts merges into summary.csv one-to-one.
SUMMARY_KEYS = ("host", "model", "suite", "modality", "task")
COUNT_COLUMNS = (  # each line's comment is its columns' meaning (docs/columns.md is written from them)
    "n_flag_checked",  # the task's measured ok requests the flags were checked on
    # how many were flagged: rate_mismatch, cache_suspect (or a prefill rate above 3 × its task's median), cold,
    # client_stalled
    "n_rate_mismatch", "n_cache_suspect", "n_cold", "n_client_stalled",
    # client ÷ server decode rate over the requests that had both: how many, the median, the lowest, the highest
    "n_decode_ratio", "decode_ratio_median", "decode_ratio_min", "decode_ratio_max",
)


# ---- scalar rules -------------------------------------------------------------------------------------------
def decode_ratio(client_tps: Any, server_tps: Any) -> float | None:
    """Client decode tok/s divided by the server's own; None unless both are positive numbers."""
    client, server = finite(client_tps), finite(server_tps)
    if client is None or server is None or client <= 0 or server <= 0:
        return None
    return client / server


def is_rate_mismatch(ratio: Any, tolerance: float = RATE_TOLERANCE) -> bool:
    """|ratio - 1| > tolerance (strictly: a ratio of exactly 0.9 or 1.1 passes)."""
    value = finite(ratio)
    return value is not None and abs(value - 1.0) > tolerance + 1e-12


def has_cached_prompt(cached_tokens: Any, prompt_tokens: Any = None, cache_share: float = CACHE_SHARE) -> bool:
    """At least `cache_share` of the prompt came from the server's cache (any cached token if size unknown)."""
    value = finite(cached_tokens)
    if value is None or value <= 0:
        return False
    prompt = finite(prompt_tokens)
    return prompt is None or prompt <= 0 or value / prompt >= cache_share - 1e-12


def is_cold(load_s: Any, cold_load_s: float = COLD_LOAD_S) -> bool:
    """Server load time strictly above the bound."""
    value = finite(load_s)
    return value is not None and value > cold_load_s


def is_client_stall(stall_ms: Any, itl_s: Any, client_stall_ms: float = CLIENT_STALL_MS) -> bool:
    """The client's loop was held up strictly longer than the bound while the request was in flight, and deltas
    were read together (an interval of exactly 0 between two of them: one read's stamp)."""
    value = finite(stall_ms)
    if value is None or value <= client_stall_ms:
        return False
    gaps = json_value(itl_s)
    return isinstance(gaps, list) and any(finite(g) == 0.0 for g in gaps)


def _enough_tokens(completion_tokens: Any, min_decode_tokens: int) -> bool:
    """Unknown counts are checked; known ones must reach the minimum."""
    value = finite(completion_tokens)
    return value is None or value >= min_decode_tokens


def flag_record(record: Any, *, cold_load_s: float = COLD_LOAD_S, rate_tolerance: float = RATE_TOLERANCE,
                min_decode_tokens: int = MIN_DECODE_TOKENS, cache_share: float = CACHE_SHARE) -> Any:
    """Set decode_ratio, rate_mismatch, cache_suspect, cold and client_stalled on one RequestRecord (or any
    object with those attributes), as the request finishes. The group-median prefill rule needs the whole run:
    flag_requests."""
    ratio = decode_ratio(getattr(record, "decode_tps", None), getattr(record, "server_decode_tps", None))
    record.decode_ratio = ratio
    record.rate_mismatch = is_rate_mismatch(ratio, rate_tolerance) and \
        _enough_tokens(getattr(record, "completion_tokens", None), min_decode_tokens)
    record.cache_suspect = has_cached_prompt(getattr(record, "cached_tokens", None),
                                             getattr(record, "prompt_tokens", None), cache_share) and not \
        flag(getattr(record, "is_warmup", False))
    record.cold = is_cold(getattr(record, "server_load_s", None), cold_load_s)
    record.client_stalled = is_client_stall(getattr(record, "client_stall_ms", None), getattr(record, "itl_s", None))
    return record


# ---- table rules --------------------------------------------------------------------------------------------
def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    if name not in frame:
        return pd.Series(np.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[name], errors="coerce").astype(float)


def _flag_column(frame: pd.DataFrame, name: str, default: bool = False) -> pd.Series:
    if name not in frame:
        return pd.Series(default, index=frame.index, dtype=bool)
    return frame[name].map(flag).astype(bool)


def _stalled(frame: pd.DataFrame) -> pd.Series:
    """is_client_stall row by row (False where the columns are missing)."""
    itl = frame["itl_s"] if "itl_s" in frame else pd.Series(None, index=frame.index, dtype=object)
    return pd.Series([is_client_stall(stall, gaps) for stall, gaps in zip(_column(frame, "client_stall_ms"), itl)],
                     index=frame.index, dtype=bool)


def _group_ratio(values: pd.Series, eligible: pd.Series, frame: pd.DataFrame, keys: Sequence[str],
                 min_group: int) -> pd.Series:
    """value / median(value over eligible rows of its group); NaN where the group has < min_group rates."""
    usable = values.where(eligible & (values > 0))
    if keys:
        grouped = usable.groupby([frame[k].astype(str) for k in keys], dropna=False, sort=False)
        median = grouped.transform("median")
        count = grouped.transform("count")
    else:
        median = pd.Series(usable.median(), index=frame.index)
        count = pd.Series(usable.count(), index=frame.index)
    ratio = values / median
    return ratio.where((count >= min_group) & (median > 0) & (values > 0))


def flag_requests(requests: pd.DataFrame, *, cold_load_s: float = COLD_LOAD_S,
                  rate_tolerance: float = RATE_TOLERANCE, prefill_factor: float = PREFILL_FACTOR,
                  group_by: Sequence[str] = PREFILL_GROUP_KEYS, min_group: int = MIN_GROUP,
                  min_decode_tokens: int = MIN_DECODE_TOKENS, cache_share: float = CACHE_SHARE) -> pd.DataFrame:
    """A copy of `requests` with the flag columns added or recomputed (see the module docstring).

    Columns: decode_ratio, rate_mismatch, cached_share (cached / prompt tokens), prefill_ratio and
    server_prefill_ratio (rate / its group median), prefill_outlier, cache_suspect, cold, client_stalled, and
    `flags`: one readable line of reasons ('' when the request is clean). Missing input columns count as missing
    values.
    """
    frame = requests.copy()
    if frame.empty:
        for name in ("decode_ratio", "cached_share", "prefill_ratio", "server_prefill_ratio"):
            frame[name] = pd.Series(dtype=float)
        for name in ("rate_mismatch", "prefill_outlier", "cache_suspect", "cold", "client_stalled"):
            frame[name] = pd.Series(dtype=bool)
        frame["flags"] = pd.Series(dtype=str)
        return frame
    warm = _flag_column(frame, "is_warmup")
    ok = frame["status"].astype(str).eq("ok") if "status" in frame else pd.Series(True, index=frame.index)
    client, server = _column(frame, "decode_tps"), _column(frame, "server_decode_tps")
    ratio = (client / server).where((client > 0) & (server > 0))
    frame["decode_ratio"] = ratio
    tokens = _column(frame, "completion_tokens")
    enough = tokens.isna() | (tokens >= min_decode_tokens)
    frame["rate_mismatch"] = (((ratio - 1.0).abs() > rate_tolerance + 1e-12) & enough).fillna(False).astype(bool)

    cached, prompt = _column(frame, "cached_tokens"), _column(frame, "prompt_tokens")
    frame["cached_share"] = (cached / prompt).where((prompt > 0) & cached.notna())
    keys = [k for k in group_by if k in frame.columns]
    eligible = ok & ~warm
    frame["prefill_ratio"] = _group_ratio(_column(frame, "prefill_tps"), eligible, frame, keys, min_group)
    frame["server_prefill_ratio"] = _group_ratio(_column(frame, "server_prefill_tps"), eligible, frame, keys,
                                                 min_group)
    outlier = (frame["prefill_ratio"] > prefill_factor) | (frame["server_prefill_ratio"] > prefill_factor)
    frame["prefill_outlier"] = (outlier.fillna(False) & ~warm).astype(bool)
    share_known = prompt > 0
    cached_hit = (cached > 0) & (~share_known | (frame["cached_share"] >= cache_share - 1e-12))
    frame["cache_suspect"] = ((cached_hit.fillna(False) | frame["prefill_outlier"]) & ~warm).astype(bool)
    load = _column(frame, "server_load_s")
    frame["cold"] = (load > cold_load_s).fillna(False).astype(bool)
    frame["client_stalled"] = _stalled(frame)
    frame["flags"] = [_reasons(row, cold_load_s, prefill_factor) for row in frame.to_dict("records")]
    return frame


def _reasons(row: dict[str, Any], cold_load_s: float, prefill_factor: float) -> str:
    reasons = []
    if row.get("rate_mismatch"):
        reasons.append(f"decode client/server {row['decode_ratio']:.2f}")
    cached = finite(row.get("cached_tokens"))
    if row.get("cache_suspect") and cached and cached > 0:
        prompt = finite(row.get("prompt_tokens"))
        reasons.append(f"{cached:.0f}{f' of {prompt:.0f}' if prompt else ''} prompt tokens cached")
    if row.get("prefill_outlier"):
        for column, label in (("prefill_ratio", "client"), ("server_prefill_ratio", "server")):
            value = finite(row.get(column))
            if value is not None and value > prefill_factor:
                reasons.append(f"{label} prefill {value:.1f}x group median")
    if row.get("cold"):
        reasons.append(f"load {finite(row.get('server_load_s')):.2f} s > {cold_load_s:g} s")
    if row.get("client_stalled"):
        reasons.append(f"client loop held up {finite(row.get('client_stall_ms')):.0f} ms (stamps may be late)")
    return "; ".join(reasons)


def flag_counts(requests: pd.DataFrame, by: Sequence[str] | None = None, **flag_options: Any) -> pd.DataFrame:
    """Per-group counts for summary.csv: n_flag_checked (measured requests), n_rate_mismatch, n_cache_suspect,
    n_cold, n_client_stalled, n_decode_ratio (requests with both rates) and decode_ratio_median/_min/_max.
    Warm-ups are excluded.

    Default groups are analysis.summarize_requests' keys (host, model, suite, modality, task — those present),
    so `summary.merge(flag_counts(requests), how="left")` adds the columns row for row. A table that has not
    been through flag_requests yet (no prefill_outlier column) is flagged first, with `flag_options`.
    """
    frame = requests if "prefill_outlier" in requests.columns else flag_requests(requests, **flag_options)
    keys = [k for k in (SUMMARY_KEYS if by is None else by) if k in frame.columns]
    if frame.empty:
        return pd.DataFrame(columns=keys + list(COUNT_COLUMNS))
    measured = frame[~_flag_column(frame, "is_warmup")]
    rows = []
    groups: Iterable = measured.groupby(keys, dropna=False, sort=False) if keys else [((), measured)]
    for values, group in groups:
        values = values if isinstance(values, tuple) else (values,)
        ratio = _column(group, "decode_ratio").dropna()
        rows.append({
            **dict(zip(keys, values)),
            "n_flag_checked": int(len(group)),
            "n_rate_mismatch": int(_flag_column(group, "rate_mismatch").sum()),
            "n_cache_suspect": int(_flag_column(group, "cache_suspect").sum()),
            "n_cold": int(_flag_column(group, "cold").sum()),
            "n_client_stalled": int(_flag_column(group, "client_stalled").sum()),
            "n_decode_ratio": int(len(ratio)),
            "decode_ratio_median": float(ratio.median()) if len(ratio) else np.nan,
            "decode_ratio_min": float(ratio.min()) if len(ratio) else np.nan,
            "decode_ratio_max": float(ratio.max()) if len(ratio) else np.nan,
        })
    return pd.DataFrame(rows, columns=keys + list(COUNT_COLUMNS))


SERVER_CHECK_COLUMNS = (  # each line's comment is its columns' meaning (docs/columns.md is written from them)
    "client_ttft_mean_s",  # the client's mean TTFT over the window's answered requests, s
    "ttft_client_minus_server_ms",  # client mean TTFT − the server's: what the network and the client add, ms
    "client_requests",  # requests that started and ended inside the window
    "client_stalled_requests",  # of them, those whose stamps a client hold-up may have made late
    "client_completion_tokens",  # their completion_tokens, summed
    "token_delta_mismatch",  # the server's generation-token delta and that sum disagree
)


def check_server_metrics(windows: pd.DataFrame, requests: pd.DataFrame, slack_s: float = 0.0) -> pd.DataFrame:
    """The server's /metrics windows (benchlib.measure.servers.prometheus) beside the client's view of the same requests.

    For each window, the requests that started and ended inside it (start_ns/e2e_s; the scrapes bracket the
    window's requests, so no slack is needed, and a request failing within milliseconds of the next window's
    start is not counted here): client_ttft_mean_s over those answered (status ok) and
    ttft_client_minus_server_ms = client mean TTFT − the server's (histogram delta) mean: what the network and
    the client add (client_stalled_requests counts those whose own stamps a client hold-up may have made late:
    `client_stalled`; one such request can move the mean by its stall). client_completion_tokens sums the
    usage the requests reported (none for a request the server refused), warm-ups and failures included since
    the server counted them too; token_delta_mismatch is True when the server's generation-token delta differs
    from it (usage the client lost, a server counting differently), None when the server has no count.
    """
    out = windows.copy()
    for column in SERVER_CHECK_COLUMNS:
        out[column] = None
    if out.empty or requests is None or requests.empty:
        return out
    start = _column(requests, "start_ns")
    end = start + _column(requests, "e2e_s").fillna(0) * 1e9
    ttft, tokens = _column(requests, "ttft_s"), _column(requests, "completion_tokens")
    ok = requests["status"].eq("ok") if "status" in requests.columns else pd.Series(True, index=requests.index)
    stalled = _stalled(requests)
    for i, w in out.iterrows():
        t0, t1 = number(w.get("t_start_ns")), number(w.get("t_end_ns"))
        if np.isnan(t0) or np.isnan(t1):
            continue
        inside = (start > 0) & (start >= t0 - slack_s * 1e9) & (end <= t1 + slack_s * 1e9)
        out.at[i, "client_requests"] = int(inside.sum())
        out.at[i, "client_stalled_requests"] = int((inside & stalled).sum())
        answered = ttft[inside & ok].dropna()
        if len(answered):
            out.at[i, "client_ttft_mean_s"] = float(answered.mean())
            server = number(w.get("server_ttft_mean_s"))
            if not np.isnan(server):
                out.at[i, "ttft_client_minus_server_ms"] = (float(answered.mean()) - server) * 1e3
        counted = tokens[inside]
        if inside.any():
            out.at[i, "client_completion_tokens"] = int(counted.fillna(0).sum())
            server_tokens = number(w.get("server_generation_tokens"))
            if not np.isnan(server_tokens):
                out.at[i, "token_delta_mismatch"] = int(round(server_tokens)) != int(counted.fillna(0).sum())
    return out
