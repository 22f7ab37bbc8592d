"""A local server with exactly known timing that logs its own send instants: the reference the client is
calibrated against (measure/selfcheck/calibration).

It speaks just enough OpenAI-compatible SSE (`POST …/chat/completions`, one token per chunk, chunked HTTP/1.1 with
keep-alive) for benchlib's own client. The first token leaves `ttft` seconds after the request head is read, then
one every `itl` seconds, each on an absolute deadline of the monotonic clock (no drift). The instant each chunk was
handed to the kernel is logged on time.perf_counter_ns() — the same system-wide CLOCK_MONOTONIC the client stamps
with — under the request's tag (the bracketed text that opens its first message), and served at GET /log.

Standard library only, so `python -m benchlib.measure.selfcheck.stamping_server` starts in a fraction of a second in its own
process (the calibration runs it there, so the server's work does not share the client's interpreter); it prints
"PORT <n>" once listening. The request body's "stamp" object may override {"ttft", "itl", "tokens"}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from typing import Any

DEFAULTS = {"ttft": 0.05, "itl": 0.005, "tokens": 16}
TAG = re.compile(r"\[([^\]]{1,80})\]")


class StampingServer:
    """asyncio HTTP/1.1 server; `log` maps a request's tag to {"received_ns", "sends_ns"}."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.host, self.port = host, port
        self.log: dict[str, dict[str, Any]] = {}
        self._untagged = 0

    async def serve(self, ready: asyncio.Future | None = None) -> None:
        server = await asyncio.start_server(self._handle, self.host, self.port, backlog=1024)
        self.port = server.sockets[0].getsockname()[1]
        if ready is not None:
            ready.set_result(self.port)
        async with server:
            await server.serve_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                received = time.perf_counter_ns()
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
                length = int(headers.get("content-length", 0))
                body = json.loads(await reader.readexactly(length)) if length else {}
                if method == "POST" and path.split("?")[0].endswith("/chat/completions"):
                    await self._stream(body if isinstance(body, dict) else {}, writer, received)
                elif method == "GET" and path == "/log":
                    self._json(writer, self.log)
                else:
                    self._json(writer, {"object": "list", "data": [{"id": "calibration", "object": "model"}]})
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    @staticmethod
    def _json(writer: asyncio.StreamWriter, data: Any) -> None:
        payload = json.dumps(data).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(payload), payload))

    @staticmethod
    def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _tag(self, body: dict) -> str:
        messages = body.get("messages")
        first = messages[0] if isinstance(messages, list) and messages and isinstance(messages[0], dict) else {}
        found = TAG.match(str(first.get("content", "")))
        if found:
            return found.group(1)
        self._untagged += 1
        return f"untagged-{self._untagged}"

    async def _stream(self, body: dict, writer: asyncio.StreamWriter, received: int) -> None:
        spec = {**DEFAULTS, **(body.get("stamp") or {})}
        budget = body.get("max_tokens")
        tokens = min(int(spec["tokens"]), budget) if isinstance(budget, int) and budget > 0 else int(spec["tokens"])
        entry = {"received_ns": received, "sends_ns": []}
        self.log[self._tag(body)] = entry
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        await writer.drain()
        first_at = received + int(float(spec["ttft"]) * 1e9)
        for index in range(tokens):
            delay = (first_at + int(index * float(spec["itl"]) * 1e9) - time.perf_counter_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            chunk = {"object": "chat.completion.chunk",
                     "choices": [{"index": 0, "delta": {"content": "tick "}, "finish_reason": None}]}
            self._chunk(writer, b"data: " + json.dumps(chunk).encode() + b"\n\n")
            await writer.drain()
            entry["sends_ns"].append(time.perf_counter_ns())
        final = [{"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
                 {"object": "chat.completion.chunk", "choices": [],
                  "usage": {"prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": 8 + tokens}}]
        self._chunk(writer, ("".join(f"data: {json.dumps(p)}\n\n" for p in final) + "data: [DONE]\n\n").encode())
        writer.write(b"0\r\n\r\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = StampingServer(port=args.port)

    async def run() -> None:
        ready = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(server.serve(ready))
        print(f"PORT {await ready}", flush=True)
        await task

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
