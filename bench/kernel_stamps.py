"""Whether this host stamps received segments before a process asks, and how long a client's first connection
waits for the kernel's receive stamps (benchlib.measure.http.wire.kernel_stamps_on).

    python bench/kernel_stamps.py              # 5 fresh processes, one after another
    python bench/kernel_stamps.py --processes 20 --pause 2

Linux stamps a received segment only while some socket on the host asks for stamps, and turns stamping on late: a
deferred work item runs after the first socket asks. Each fresh process first checks, without asking for stamps
itself, whether a segment queued on loopback arrived stamped ("host stamping on before this process asked"). Then
it runs the client's own wait and prints how many loopback probes it took and how long. A host where stamping was
off and the wait took more than one probe is one where, before the fix, a new connection's first reads could come
without stamps.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE = """
import json, socket, sys, time
sys.path.insert(0, sys.argv[1])
from benchlib.measure.http import wire

def queued_segment_stamped() -> bool:
    with socket.create_server(("127.0.0.1", 0)) as listener, socket.create_connection(listener.getsockname()) as c:
        s, _ = listener.accept()
        with s:
            s.send(b".")
            time.sleep(0.05)  # queued, and stamped or not, before this process asks for stamps
            c.setsockopt(socket.SOL_SOCKET, wire.SO_TIMESTAMPNS, 1)
            _, ancillary, _, _ = c.recvmsg(16, wire.ANC_SIZE)
    return any(kind == wire.SO_TIMESTAMPNS for _, kind, _ in ancillary)

before = queued_segment_stamped()
probe = wire.kernel_stamps_on()
print(json.dumps({"host_on_before": before, "probes": probe.probes, "waited_ms": probe.waited_ns / 1e6,
                  "stamped": probe.stamped}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=5, help="fresh processes, one after another")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between them")
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        sys.exit("kernel receive stamps are Linux's")
    for index in range(args.processes):
        done = subprocess.run([sys.executable, "-c", ONE, str(ROOT)], capture_output=True, text=True, timeout=60)
        if done.returncode:
            sys.exit(done.stderr.strip().splitlines()[-1])
        one = json.loads(done.stdout)
        print(f"process {index + 1}: host stamping on before it asked: {one['host_on_before']!s:5}  "
              f"probes {one['probes']}  waited {one['waited_ms']:.2f} ms  stamped {one['stamped']}")
        time.sleep(args.pause)


if __name__ == "__main__":
    main()
