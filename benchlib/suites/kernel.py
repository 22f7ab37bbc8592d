"""The Jupyter kernel every notebook runs in (suites, explorer, paper), as papermill's kernel manager class:
kernel traffic encrypted (CurveZMQ) where pyzmq supports it, and a client that never waits on one poll forever.

Why the client polls in slices: zmq.asyncio wakes a waiting poll from the socket's edge-triggered file descriptor.
When that edge is consumed while a poll waits (a send on the same socket, a read of ZMQ_EVENTS, a busy machine
reordering the two), the message sits readable in the socket and the poll never wakes: papermill then waits on an
execute_reply that has already arrived, with the kernel idle. A new poll reads ZMQ_EVENTS before it waits, so a
poll renewed every POLL_SLICE_S finds such a message within one slice. A caller's own timeout is kept (Empty at
its end); only the longest single wait changes. bench/results/2026-11-26-notebook-kernel.md has how often the hang
struck without this.
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Any

import zmq
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.manager import AsyncKernelManager
from traitlets import Type

POLL_SLICE_S = 0.5


class SlicedPollChannel(AsyncZMQSocketChannel):
    """A shell/iopub/stdin/control channel whose get_msg renews its poll every POLL_SLICE_S."""

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:  # type: ignore[override]
        assert self.socket is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = POLL_SLICE_S if deadline is None else max(0.0, min(POLL_SLICE_S, deadline - time.monotonic()))
            if await self.socket.poll(int(left * 1000)):
                return await self._recv()
            if deadline is not None and time.monotonic() >= deadline:
                raise Empty


class SlicedPollClient(AsyncKernelClient):
    """The async kernel client with SlicedPollChannel on every ZMQ channel (the heartbeat keeps its own)."""

    shell_channel_class = Type(SlicedPollChannel)  # type: ignore[assignment]
    iopub_channel_class = Type(SlicedPollChannel)  # type: ignore[assignment]
    stdin_channel_class = Type(SlicedPollChannel)  # type: ignore[assignment]
    control_channel_class = Type(SlicedPollChannel)  # type: ignore[assignment]


class KernelManager(AsyncKernelManager):
    """The kernel manager papermill is given: SlicedPollClient as its client, encryption where available."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.client_class = f"{SlicedPollClient.__module__}.{SlicedPollClient.__qualname__}"
        # Encrypted kernel traffic leaves the kernel nothing to warn about, so the terminal shows only the run's
        # own output.
        if zmq.has("curve") and "transport_encryption" in self.trait_names():
            self.transport_encryption = "required"
