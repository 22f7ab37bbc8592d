"""The measurement layer: everything that touches a server or a sensor while a run is under way — the lean
HTTP client (wire, http_response, sse), how a request is timed (timing), the protocol backends (backends), request
payloads (payloads), the servers this tool starts itself (servers/), the server's own Prometheus metrics
(prometheus), telemetry (telemetry/: how a window's energy is computed lives in telemetry/windows), the client's
own health (event_loop, client_health), load schedules (workload, prompt_fitting; traces: Mooncake trace files),
provenance, and the deadline and size cap of one-shot requests (bounded: scrapes, probes, tokenizer calls).

May import: config, records.
"""
