"""A stand-in for macOS's `powermetrics -f plist`, for tests on any OS: prints recorded plist samples in turn,
each followed by the NUL byte that separates powermetrics' plist samples, every INTERVAL_MS, until killed.

    python fake_powermetrics.py INTERVAL_MS SAMPLE.plist [SAMPLE.plist ...]
    python fake_powermetrics.py --deny      behave like powermetrics run without root (stderr, exit 1)
"""

import sys
import time
from pathlib import Path

if __name__ == "__main__":
    if sys.argv[1] == "--deny":
        sys.stderr.write("powermetrics must be invoked as the superuser\n")
        sys.exit(1)
    interval = int(sys.argv[1]) / 1000.0
    samples = [Path(p).read_bytes() for p in sys.argv[2:]]
    out = sys.stdout.buffer
    k = 0
    while True:
        time.sleep(interval)
        out.write(samples[k % len(samples)] + b"\x00")
        out.flush()
        k += 1
