"""One-shot HTTP requests with an overall deadline and a size cap: the server's /metrics scrapes, the provenance
probes and the tokenizer calls. httpx bounds each read, not the whole exchange, so a server that drips a byte
at a time, or streams without end, would hold a plain `client.get` for ever and fill memory; here the body is
read piece by piece and given up once it passes `max_bytes` (response_too_large) or runs past `deadline_s`
(deadline_exceeded), with the same RequestFailed every request path raises. Each read waits at most the
deadline, so a request ends within twice its deadline at the latest; the connection is waited for no longer
than the client's own connect timeout when that is shorter."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import httpx

from benchlib.measure.http.failures import RequestFailed
from benchlib.records.secrets import redact_url


@dataclass(frozen=True)
class Fetched:
    """A whole response read within its bounds."""

    status_code: int
    headers: httpx.Headers
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


def within(total_s: float, connect_s: float | None) -> httpx.Timeout:
    """A timeout of `total_s`, the wait for a connection held to `connect_s` when that is shorter (a run's connect
    timeout: a host that takes no connection has already cost each request that long)."""
    return httpx.Timeout(total_s, connect=min(total_s, connect_s) if connect_s else total_s)


def fetch(client: httpx.Client, method: str, url: str, *, deadline_s: float, max_bytes: int,
          json_body: Any = None) -> Fetched:
    """`method url` through `client`, its body read whole within `deadline_s` and `max_bytes` (decoded bytes).
    Raises RequestFailed (deadline_exceeded, response_too_large) or httpx.HTTPError."""
    end = time.monotonic() + deadline_s
    # a client made with a shorter connect bound (the run's) keeps it
    with client.stream(method, url, json=json_body, timeout=within(deadline_s, client.timeout.connect)) as response:
        body = bytearray()
        for piece in response.iter_bytes():
            body += piece
            if len(body) > max_bytes:
                raise RequestFailed("response_too_large", f"{redact_url(str(response.url))}: the answer passed "
                                    f"{max_bytes} bytes; the rest was not read", response.status_code)
            if time.monotonic() > end:
                raise RequestFailed("deadline_exceeded", f"{redact_url(str(response.url))}: no complete answer "
                                    f"within {deadline_s:g} s", response.status_code)
        return Fetched(response.status_code, response.headers, bytes(body))
