"""The kernel client notebooks run with (benchlib/suites/kernel.py): a message whose wake-up was consumed before the
waiting poll saw it is still received. The lost wake-up is made on purpose — the reply lands while a poll waits,
and ZMQ_EVENTS is read before the event loop runs again, which is what a send on the same socket or a busy
machine does — and the library's own channel, the control, is shown to miss it."""

from __future__ import annotations

import asyncio
import time
from queue import Empty

import pytest
import zmq
import zmq.asyncio
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session
from traitlets.utils.importstring import import_item

from benchlib.suites import kernel
from benchlib.suites.kernel import KernelManager, SlicedPollChannel, SlicedPollClient
from benchlib.suites.notebooks import KERNEL_MANAGER


async def _reply_after_a_lost_wakeup(channel_class, wait_s: float):
    """Whether `channel_class.get_msg()` returns a reply sent while it waited, whose wake-up was consumed."""
    session = Session(key=b"k")
    ctx = zmq.asyncio.Context()
    kernel_side = zmq.Context()
    router = kernel_side.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(f"tcp://127.0.0.1:{port}")
    try:
        await dealer.send(b"hello")
        ident = router.recv_multipart()[0]  # the kernel learns who asks
        channel = channel_class(dealer, session)
        waiting = asyncio.ensure_future(channel.get_msg())
        await asyncio.sleep(0.2)  # the poll is registered and waits: nothing was there when it looked
        assert not waiting.done()
        session.send(router, "execute_reply", {"status": "ok"}, ident=ident)
        shadow = zmq.Socket.shadow(dealer.underlying)
        deadline = time.monotonic() + 30
        # Reading ZMQ_EVENTS consumes the edge the waiting poll would have woken on; the loop does not run meanwhile.
        while not shadow.get(zmq.EVENTS) & zmq.POLLIN:
            assert time.monotonic() < deadline, "the reply never reached the client socket"
            time.sleep(0.005)
        done, _ = await asyncio.wait({waiting}, timeout=wait_s)
        if not done:
            waiting.cancel()
            return None
        return waiting.result()
    finally:
        dealer.close(linger=0)
        router.close(linger=0)
        kernel_side.term()
        ctx.term()


def test_a_reply_whose_wakeup_was_lost_is_still_received():
    # the control: jupyter_client's channel waits on one poll and misses the reply for good
    assert asyncio.run(_reply_after_a_lost_wakeup(AsyncZMQSocketChannel, 3 * kernel.POLL_SLICE_S)) is None
    # ours renews its poll, which reads ZMQ_EVENTS first: the reply arrives within a slice (generous on a busy box)
    reply = asyncio.run(_reply_after_a_lost_wakeup(SlicedPollChannel, 60))
    assert reply is not None and reply["msg_type"] == "execute_reply" and reply["content"] == {"status": "ok"}


def test_a_timeout_the_caller_asked_for_is_kept():
    async def wait_for_nothing():
        ctx = zmq.asyncio.Context()
        dealer = ctx.socket(zmq.DEALER)
        try:
            channel = SlicedPollChannel(dealer, Session(key=b"k"))
            start = time.monotonic()
            with pytest.raises(Empty):
                await channel.get_msg(timeout=1.2)  # longer than a slice: Empty only at its end
            return time.monotonic() - start
        finally:
            dealer.close(linger=0)
            ctx.term()

    assert asyncio.run(wait_for_nothing()) >= 1.2


def test_papermill_gets_the_sliced_client_and_encryption_where_pyzmq_has_it():
    assert import_item(KERNEL_MANAGER) is KernelManager  # the name execute_notebook hands papermill
    manager = KernelManager(kernel_name="python3")
    assert manager.client_factory is SlicedPollClient
    client = manager.client()
    assert all(isinstance(getattr(client, name), SlicedPollChannel)
               for name in ("shell_channel", "iopub_channel", "stdin_channel", "control_channel"))
    client.stop_channels()
    if zmq.has("curve"):
        assert manager.transport_encryption == "required"
