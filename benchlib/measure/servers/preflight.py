"""The pre-flight: before any suite sends a request to a server the user started, three questions, answered by the
server itself and printed in a few lines (and kept beside the run, PREFLIGHT_JSON, which each suite's manifest
carries as `preflight`):

    model      is the id the params name one the server lists? Where it lists exactly one under another id (a
               llama-cpp-python server lists the GGUF's path), requests name that one and the line says so; where
               it lists several and not ours, the run stops with the list.
    answers    does one short chat request come back whole? If not, the run stops with the server's own reason.
    overlap    how the server takes requests that overlap: OVERLAP_PROBE of them at once, then the plan's count
               where the first were served together. Served together (their answers interleave), queued (one
               answered after the other), cut (a running answer ended early: llama-cpp-python's server does this by
               default, interrupt_requests) or refused (HTTP 429/503). The graded sets then go out as many at once
               as the server serves whole (run.preflight_in_flight); an explicit run.graded_in_flight wins, with a
               warning where the pre-flight saw that count fail.

An embedded server (started by each suite, one slot) has no pre-flight: its settings are ours.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchlib.config.formatting import fit, gist
from benchlib.config.params import BenchParams
from benchlib.measure.client.backends import ChatRequest, make_backend
from benchlib.measure.http.bounded import fetch, within
from benchlib.measure.http.failures import RequestFailed
from benchlib.measure.pacing import event_loop
from benchlib.records.rows import STATUS_OK, RequestRecord, write_atomic
from benchlib.records.secrets import cut, scrub

PREFLIGHT_JSON = "preflight.json"  # in the deployment's folder (outputs/<host>/<model>/), beside its suites
OVERLAP_PROBE = 2
PROBE_TOKENS = 24  # long enough that two answers overlap in time on any server, short enough for a slow CPU
LIST_TIMEOUT_S = 10.0
ANSWER_TIMEOUT_S = 120.0
LIST_MAX_BYTES = 4 * 2**20
# error kinds that say the server turned a request away rather than cut it
REFUSED_KINDS = ("http_429", "http_503")
TOGETHER, QUEUED, CUTS, REFUSES, NOT_PROBED = "together", "queued", "cuts", "refuses", "not probed"


class PreflightError(RuntimeError):
    """The server cannot be measured as the params say; the message is one line with what to change."""


@dataclass
class Overlap:
    """What the server did with `sent` requests sent at once."""

    sent: int
    outcome: str  # TOGETHER | QUEUED | CUTS | REFUSES
    answered: int
    served_at_once: int  # most answers being generated at one instant
    errors: dict[str, int] = field(default_factory=dict)
    first_error: str = ""  # the first failed request's kind and message (cut at 160 characters), as recorded
    first_reason: str = ""  # its kind and the gist of its message: what a line about the overlap says


@dataclass
class Preflight:
    base_url: str
    model: str  # the params' name (folders, labels)
    listed: list[str] = field(default_factory=list)
    model_id: str = ""  # the id requests name
    model_line: str = ""
    answer_s: float | None = None
    answer: str = ""
    probes: list[Overlap] = field(default_factory=list)
    overlap: str = NOT_PROBED
    takes: int | None = None  # requests the server serves at once without cutting or refusing one
    planned_in_flight: int = 1
    in_flight: int = 1  # what the graded sets use
    why: str = ""
    warnings: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """A few lines for the terminal, each within its width (formatting.fit: a long one wraps under its value)."""
        out = [f"pre-flight · {self.base_url}", f"  model    {self.model_line}",
               f"  answers  one short chat request answered in {self.answer_s:.1f} s"
               if self.answer_s is not None else "  answers  —"]
        if self.probes:
            tried = "; ".join(f"{p.sent} at once: {p.outcome}" + (f" ({p.served_at_once} served together)"
                                                                   if p.outcome == TOGETHER else "")
                              for p in self.probes)
            out.append(f"  overlap  {tried}")
        out.append(f"  graded   {self.in_flight} in flight: {self.why}")
        out += [f"  warning: {w}" for w in self.warnings]
        return [row for line in out for row in fit(line, " " * len("  graded   "))]

    def record(self) -> dict[str, Any]:
        return asdict(self)


def _listed(params: BenchParams, timeout_s: float) -> list[str]:
    """The model ids the server lists (/v1/models; Ollama /api/tags), or PreflightError with the reason."""
    server = params.server
    ollama = server.kind == "ollama"
    url = server.root_url() + "/api/tags" if ollama else server.api_url() + "/models"
    try:
        with httpx.Client(timeout=within(timeout_s, params.run.connect_timeout_s),
                          headers=server.auth_headers()) as client:
            response = fetch(client, "GET", url, deadline_s=timeout_s, max_bytes=LIST_MAX_BYTES)
    except RequestFailed as exc:
        raise PreflightError(f"no answer from {server.base_url} ({exc.kind}: {cut(exc.message, 160)}): is the "
                             f"server running and is server.base_url right?") from None
    except httpx.HTTPError as exc:
        raise PreflightError(f"no answer from {server.base_url} ({type(exc).__name__}: {cut(str(exc), 160)}): is "
                             f"the server running and is server.base_url right?") from None
    if response.status_code in (401, 403):
        raise PreflightError(f"{url} answered HTTP {response.status_code}: the server wants a key; name the "
                             f"environment variable holding it in server.api_key_env")
    if response.status_code != 200:
        raise PreflightError(f"{url} answered HTTP {response.status_code}: is server.base_url the API's root "
                             f"(…/v1 for an OpenAI-compatible server)?")
    try:
        data = response.json()
    except ValueError:
        raise PreflightError(f"{url} did not answer JSON: is server.base_url an OpenAI-compatible API?") from None
    entries = (data or {}).get("models" if ollama else "data") if isinstance(data, dict) else None
    names = [str(e.get("name") or e.get("model") if ollama else e.get("id")) for e in entries or []
             if isinstance(e, dict)]
    return [n for n in names if n and n != "None"]


def _model(params: BenchParams, listed: list[str]) -> tuple[str, str]:
    """(the id requests name, the line that says how it was found)."""
    wanted = params.server.request_model()
    if wanted in listed or (params.server.kind == "ollama" and f"{wanted}:latest" in listed):
        return wanted, f"{wanted} (listed by the server)"
    if len(listed) == 1:
        return listed[0], (f"{_short(listed[0], 44)} (the one model listed; results under "
                           f"'{params.server.model}')")
    shown = ", ".join(cut(n, 60) for n in listed[:8]) + (f" (+{len(listed) - 8} more)" if len(listed) > 8 else "")
    raise PreflightError(f"server.model '{wanted}' is not a model the server lists (it lists: {shown or 'none'}); "
                         f"set server.model to one of them, or server.model_id to the id and keep server.model as "
                         f"the name results go under")


def _short(name: str, width: int = 50) -> str:
    """A long id (a GGUF's path) as its end: the file name is what a person recognises."""
    return name if len(name) <= width else "…" + name[-(width - 1):]


def _probe_request(nonce: str, index: int) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": f"[{nonce}-{index}] Count from 1 to 30, the numbers "
                                                                 f"separated by spaces."}],
                       max_tokens=PROBE_TOKENS, temperature=0.0, seed=1234)


async def _send(params: BenchParams, count: int) -> list[RequestRecord]:
    """`count` short chat requests at once, through the client the suites use (same wire, same failure kinds)."""
    # the first answer may load the model (Ollama, a server that sleeps): the pre-flight waits longer than a request
    run = params.run.model_copy(update={"timeout_s": max(params.run.timeout_s, ANSWER_TIMEOUT_S), "retries_429": 0})
    backend = make_backend(params.server, run, count)
    nonce = uuid.uuid4().hex[:8]
    records = [RequestRecord(task="preflight", concurrency=count) for _ in range(count)]
    try:
        await asyncio.gather(*(backend.execute(_probe_request(nonce, i), r) for i, r in enumerate(records)))
    finally:
        await backend.aclose()
    return records


def served_at_once(records: list[RequestRecord]) -> int:
    """The most answers being generated at one instant: each answered request spans first token → last token."""
    spans = []
    for r in records:
        if r.status == STATUS_OK and r.ttft_s is not None and r.e2e_s is not None:
            spans.append((r.start_ns + r.ttft_s * 1e9, r.start_ns + r.e2e_s * 1e9))
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def judge(records: list[RequestRecord]) -> Overlap:
    """What a server did with requests sent at once (see the module docstring)."""
    errors: dict[str, int] = {}
    first = reason = ""
    for r in records:
        if r.status != STATUS_OK:
            errors[r.error_kind] = errors.get(r.error_kind, 0) + 1
            if not first:
                first = f"{r.error_kind}: {cut(r.error_message, 160)}"
                reason = f"{r.error_kind}: {gist(r.error_message)}"
        elif not r.finish_reason:
            errors["no_finish_reason"] = errors.get("no_finish_reason", 0) + 1
    answered = sum(1 for r in records if r.status == STATUS_OK and r.finish_reason)
    together = served_at_once(records)
    if errors and all(kind in REFUSED_KINDS for kind in errors):
        outcome = REFUSES
    elif errors:
        outcome = CUTS
    else:
        outcome = TOGETHER if together > 1 else QUEUED
    return Overlap(sent=len(records), outcome=outcome, answered=answered, served_at_once=together, errors=errors,
                   first_error=first, first_reason=reason)


def planned_in_flight(params: BenchParams, notebooks: list[str]) -> int:
    """The most graded requests the plan would have in flight at once (1 where no graded set is sent)."""
    if "quality" not in notebooks and "text" not in notebooks:
        return 1
    return max(params.graded_in_flight(), params.run.graded_concurrency)


def _decide(pf: Preflight, params: BenchParams) -> None:
    """takes, in_flight, why and warnings from the probes."""
    last = pf.probes[-1] if pf.probes else None
    # what it takes, from what was sent, never from timing: the most sent at once that all came back whole (served
    # together, or queued beyond its slots), 1 where a second one waited for the first
    if last is None:
        pf.takes = None
    elif any(p.outcome in (CUTS, REFUSES) for p in pf.probes):
        pf.takes = max((p.sent for p in pf.probes if p.outcome == TOGETHER), default=1)
    else:
        pf.takes = last.sent if last.outcome == TOGETHER else 1
    bad = next((p for p in pf.probes if p.outcome in (CUTS, REFUSES)), None)
    pf.overlap = bad.outcome if bad else (last.outcome if last else NOT_PROBED)
    explicit = params.run.graded_in_flight
    if pf.planned_in_flight <= 1:
        pf.in_flight, pf.why = 1, "the plan sends one at a time"
    elif explicit is not None and params.run.graded_concurrency <= 1:
        pf.in_flight, pf.why = explicit, "run.graded_in_flight, as the params set it"
    else:
        pf.in_flight = max(1, min(pf.planned_in_flight, pf.takes or 1))
        if pf.overlap == CUTS:
            pf.why = (f"this server cuts a running answer when another arrives ({bad.first_reason}): "
                      f"{'one at a time' if pf.in_flight == 1 else f'{pf.in_flight} at a time'}")
        elif pf.overlap == REFUSES:
            pf.why = (f"this server turns requests away when {bad.sent} arrive at once ({bad.first_reason}): "
                      f"{pf.in_flight} at a time")
        elif pf.overlap == QUEUED:
            pf.why = "this server answers one request at a time (the second waited for the first): one at a time"
        else:
            pf.why = (f"this server answered {pf.takes} sent at once whole ({last.served_at_once} generated together)"
                      + ("" if pf.in_flight == pf.planned_in_flight else f": the plan's {pf.planned_in_flight} "
                                                                         f"capped at that"))
    if bad is not None and (explicit or 0) > (pf.takes or 1) and params.run.graded_concurrency <= 1:
        pf.warnings.append(f"run.graded_in_flight {explicit} is more than this server served whole ({pf.takes}; "
                           f"it {bad.outcome} at {bad.sent}): expect failed requests")
    if params.run.graded_concurrency > (pf.takes or 1) and bad is not None:
        pf.warnings.append(f"run.graded_concurrency {params.run.graded_concurrency}: this server {bad.outcome} at "
                           f"{bad.sent} at once, so the pass under load will have failed requests")


def check(params: BenchParams, notebooks: list[str]) -> Preflight:
    """The pre-flight of a user's server (see the module docstring); PreflightError stops the run."""
    pf = Preflight(base_url=params.server.base_url, model=params.server.model)
    pf.listed = _listed(params, LIST_TIMEOUT_S)
    pf.model_id, pf.model_line = _model(params, pf.listed)
    probe_params = with_model(params, pf.model_id)
    started = time.monotonic()
    (one,) = event_loop.run(_send(probe_params, 1))
    if one.status != STATUS_OK:
        raise PreflightError(f"a short chat request to {params.server.base_url} failed ({one.error_kind}: "
                             f"{cut(one.error_message, 200)})")
    pf.answer_s = time.monotonic() - started
    pf.answer = cut(one.response_text.strip(), 80)
    pf.planned_in_flight = planned_in_flight(params, notebooks)
    if pf.planned_in_flight > 1 or "load" in notebooks:
        pf.probes.append(judge(event_loop.run(_send(probe_params, OVERLAP_PROBE))))
        if pf.probes[-1].outcome == TOGETHER and pf.planned_in_flight > OVERLAP_PROBE:
            pf.probes.append(judge(event_loop.run(_send(probe_params, pf.planned_in_flight))))
    _decide(pf, params)
    return scrubbed(pf, params.server.secret())


def scrubbed(pf: Preflight, secret: str) -> Preflight:
    """The findings with the key's value taken out of every string a server gave back (its answer, its errors): they
    are printed and written."""
    clean = scrub(pf.record(), secret)
    clean["probes"] = [Overlap(**probe) for probe in clean["probes"]]
    return Preflight(**clean)


def with_model(params: BenchParams, model_id: str) -> BenchParams:
    if model_id == params.server.request_model():
        return params
    copy = params.model_copy(deep=True)
    copy.server.model_id = model_id if model_id != params.server.model else ""
    return copy


def apply(params: BenchParams, pf: Preflight) -> BenchParams:
    """The params the suites run with: the id the server lists, and the graded in-flight the server takes."""
    out = with_model(params, pf.model_id)
    if params.run.graded_in_flight is None and pf.in_flight < pf.planned_in_flight:  # only a cap changes the run
        out = out.model_copy(deep=True)
        out.run.preflight_in_flight = pf.in_flight
    return out


def save(pf: Preflight, folder: Path) -> Path:
    """preflight.json in the deployment's folder, written whole."""
    path = folder / PREFLIGHT_JSON
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(pf.record(), indent=2, default=str))  # scrubbed by check()
    return path


def read(folder: Path) -> dict[str, Any] | None:
    """The deployment folder's pre-flight record, where one was taken."""
    try:
        data = json.loads((folder / PREFLIGHT_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
