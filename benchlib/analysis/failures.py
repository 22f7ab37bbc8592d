"""Whether a suite failed, in words: the share of its measured requests that failed against run.max_error_rate
(default 0.2), the counts by error kind, the first message of the largest kind and the likely fix (FIXES).

A suite whose failed share is above the threshold has failed: `frontier-bench run` exits non-zero, a study marks
the deployment failed (a rerun sends the failed requests again: records.rows.RETRY_KINDS), and the paper neither
ranks nor puts on a frontier a deployment whose graded sets mostly failed (graded_failed).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Iterable

import pandas as pd

from benchlib.config import identity
from benchlib.config.servers import cutting
from benchlib.records.rows import STATUS_FAILED, STATUS_UNSUPPORTED
from benchlib.records.schema import flag
from benchlib.records.secrets import cut

_CUT_BY = ", ".join(f"{p.name}'s" for p in cutting())
_CUT_FIX = " or ".join(p.overlap_setting for p in cutting())

# The likely fix for each error kind, in words a user acts on (a prefix matches a family: http_5 for any 5xx)
FIXES = {
    "stream_cut": "the server ended answers early; a server that cuts a running answer when another arrives "
                  f"({_CUT_BY}, by default) needs one request at a time: run.graded_in_flight: 1, or start it with "
                  f"{_CUT_FIX}",
    "connection_refused": "nothing listens at server.base_url: start the server, or fix the port",
    "connect_timeout": "server.base_url is not reachable from here: check the host and port",
    "connect_error": "server.base_url is not reachable from here: check the host and port",
    "dns_failure": "the host in server.base_url does not resolve",
    "read_timeout": "the server went silent for longer than run.timeout_s: it is overloaded or stuck; send fewer at "
                    "once or raise run.timeout_s",
    "deadline_exceeded": "answers took longer than run.deadline_s: lower run.max_tokens or raise run.deadline_s",
    "http_404": "the path or the model id is wrong: server.base_url ends in /v1, server.model is an id the server "
                "lists (GET /v1/models)",
    "http_400": "the server refused the request (its message says which field: context too long, max_tokens, "
                "an input it does not take)",
    "http_401": "the server wants a key: name the variable that holds it in server.api_key_env",
    "http_403": "the server wants a key: name the variable that holds it in server.api_key_env",
    "http_429": "the server turned requests away: send fewer at once (run.graded_in_flight)",
    "http_503": "the server turned requests away: send fewer at once (run.graded_in_flight)",
    "http_5": "the server failed: its log says why",
    "response_too_large": "the server did not stop at max_tokens",
}
DEFAULT_FIX = "see error_message in requests.csv"
# What the server did to a request, in a word, for a load level's failures (a sweep sends more than a server takes)
WHAT_IT_DID = {"stream_cut": "cut", "http_429": "refused", "http_503": "refused", "connection_refused": "refused",
               "read_timeout": "stalled", "deadline_exceeded": "too slow", "connect_timeout": "not reached"}
GRADED_FAILED = "not ranked: its graded sets failed"


def fix_for(kind: str) -> str:
    return FIXES.get(kind) or next((words for prefix, words in FIXES.items()
                                    if prefix.endswith("_5") and kind.startswith(prefix)), DEFAULT_FIX)


@dataclass
class FailureReport:
    """A suite's failed requests: how many of how many, by kind, the first message of the largest kind."""

    suite: str
    sent: int
    failed: int
    threshold: float
    by_kind: dict[str, int] = field(default_factory=dict)
    first_message: str = ""
    graded_sent: int = 0
    graded_failed: int = 0

    @property
    def share(self) -> float:
        return self.failed / self.sent if self.sent else 0.0

    @property
    def over(self) -> bool:
        return self.sent > 0 and self.share > self.threshold

    def kinds(self) -> str:
        return ", ".join(f"{kind} {n}" for kind, n in sorted(self.by_kind.items(), key=lambda kv: -kv[1]))

    def lines(self) -> list[str]:
        """The same for the terminal, each line short: counts by kind, the first message, the likely fix."""
        largest = max(self.by_kind, key=self.by_kind.get) if self.by_kind else ""
        what = (f"{self.graded_failed} of {self.graded_sent} graded requests failed" if self.graded_sent
                else f"{self.failed} of {self.sent} requests failed")
        return [f"{what} (above run.max_error_rate {self.threshold:.0%}): {cut(self.kinds(), 60)}",
                f"first: {cut(self.first_message, 110)}",
                *textwrap.wrap(f"likely fix: {fix_for(largest)}", 112, subsequent_indent="  ", break_on_hyphens=False)]

    def reason(self) -> str:
        """One line: counts, the largest kind's first message, the likely fix."""
        largest = max(self.by_kind, key=self.by_kind.get) if self.by_kind else ""
        what = (f"{self.graded_failed} of {self.graded_sent} graded requests failed" if self.graded_sent
                else f"{self.failed} of {self.sent} requests failed")
        return (f"{what} (above run.max_error_rate {self.threshold:.0%}): {self.kinds()}; first: "
                f"{cut(self.first_message, 120)} — likely fix: {fix_for(largest)}")


def failure_report(requests: pd.DataFrame, suite: str, threshold: float,
                   graded_sets: Iterable[str] = ()) -> FailureReport:
    """The failure report of one suite's rows (warm-ups and unsupported rows left out); `graded_sets` names the
    graded sets (the manifest's `graded.sets`), whose rows are counted apart ('<set>@c<n>' passes included)."""
    rows = requests
    if "is_warmup" in rows:
        rows = rows[~rows["is_warmup"].map(flag)]
    if "status" in rows:
        rows = rows[rows["status"] != STATUS_UNSUPPORTED]
    failed = rows[rows["status"] == STATUS_FAILED] if "status" in rows else rows.iloc[0:0]
    kinds = failed.get("error_kind", pd.Series(dtype=object)).fillna("").astype(str).replace("", "unknown")
    counts = kinds.value_counts()
    largest = counts.index[0] if len(counts) else ""
    first = ""
    if largest:
        messages = failed.loc[kinds == largest, "error_message"] if "error_message" in failed else pd.Series()
        first = f"{largest}: {str(messages.iloc[0]) if len(messages) else ''}"
    sets = set(graded_sets)
    graded = rows["task"].astype(str).str.split("@").str[0].isin(sets) if "task" in rows \
        else pd.Series(False, index=rows.index)
    graded_rows = rows[graded]
    return FailureReport(suite=suite, sent=len(rows), failed=len(failed), threshold=threshold,
                         by_kind={str(k): int(v) for k, v in counts.items()}, first_message=first,
                         graded_sent=len(graded_rows),
                         graded_failed=int((graded_rows["status"] == STATUS_FAILED).sum()) if len(graded_rows) else 0)


OUTCOME_COLUMNS = ["host", "model", "system", "graded_sent", "graded_answered", "graded_scored", "graded_failed",
                   "graded_failures"]


def graded_outcome(requests: pd.DataFrame, graded_sets: Iterable[str]) -> pd.DataFrame:
    """Per deployment (host, model; system its key, config.identity): its graded requests sent, answered, scored and failed (with the kinds), warm-ups
    left out — the counts a reader is shown, and what decides whether a deployment is ranked (not_ranked)."""
    sets = set(graded_sets)
    if not len(requests) or "task" not in requests:
        return pd.DataFrame(columns=OUTCOME_COLUMNS)
    rows = requests[requests["task"].astype(str).str.split("@").str[0].isin(sets)]
    if "is_warmup" in rows:
        rows = rows[~rows["is_warmup"].map(flag)]
    out = []
    for (host, model), group in rows.groupby(["host", "model"], sort=False):
        failed = group[group["status"] == STATUS_FAILED]
        kinds = failed.get("error_kind", pd.Series(dtype=object)).fillna("").astype(str).replace("", "unknown")
        scored = group["passed"].notna() if "passed" in group else pd.Series(False, index=group.index)
        out.append({"host": host, "model": model, "system": identity.keys(group).iloc[0],
                    "graded_sent": len(group), "graded_answered": int((group["status"] == "ok").sum()),
                    "graded_scored": int(scored.sum()), "graded_failed": len(failed),
                    "graded_failures": ", ".join(f"{k} {n}" for k, n in kinds.value_counts().items())})
    return pd.DataFrame(out, columns=OUTCOME_COLUMNS)


def not_ranked(outcome: pd.Series | dict, threshold: float) -> str:
    """Why a deployment is neither ranked nor on a frontier ("" when it is): its graded sets failed above the run's
    threshold — nothing is ranked on answers it did not get."""
    sent, failed = int(outcome.get("graded_sent") or 0), int(outcome.get("graded_failed") or 0)
    if not sent or failed / sent <= threshold:
        return ""
    return (f"{GRADED_FAILED}: {failed} of {sent} sent failed ({outcome.get('graded_failures')}); "
            f"{int(outcome.get('graded_answered') or 0)} answered")
