"""Bytes on the wire: the lean streaming HTTP client (wire), reading a response within its limits
(http_response), server-sent events (sse), deadline- and size-capped one-shot requests (bounded: scrapes,
probes, tokenizer calls) and what a failed request is called (failures).

Rooms of measure/ it may import: pacing.
"""
