"""When each request leaves: the asyncio loop that paces sends on the monotonic clock (event_loop) and the
separate sending process that keeps pacing off the loop's stalls (send_process).

Rooms of measure/ it may import: nothing.
"""
