#!/usr/bin/env python3
"""Per-span timings from services' logs written with `telemetry.span_timings`.

    BENCH_SPANS=1 BENCH_LOG=info target/release/dialectic-bench --ladder 1 --latencies 1000 --no-bounds
    python3 bench/spans.py /tmp/dialectic-bench-<database>     # the rung's "logs" in the JSON

Prints, per service log and span name, how many spans closed and their total
time (busy + idle) and busy time: where an attempt or a planner unit waits.
"""

import glob
import os
import re
import statistics
import sys

UNIT_MS = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1000.0}
CLOSE = re.compile(r"(\w+)(?:\{[^}]*\})?: close time\.busy=(\S+) time\.idle=(\S+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def ms(value):
    number, unit = re.match(r"([\d.]+)(ns|µs|us|ms|s)$", value).groups()
    return float(number) * UNIT_MS[unit]


def spans(path):
    found = {}
    with open(path, errors="replace") as log:
        for line in log:
            match = CLOSE.search(ANSI.sub("", line))
            if match:
                name, busy, idle = match.group(1), ms(match.group(2)), ms(match.group(3))
                found.setdefault(name, []).append((busy + idle, busy))
    return found


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.log"))):
        found = spans(path)
        if not found:
            continue
        print(os.path.basename(path))
        for name, times in sorted(found.items(), key=lambda kv: -sum(t for t, _ in kv[1])):
            total = [t for t, _ in times]
            busy = [b for _, b in times]
            print(f"  {name:12} n={len(times):5}  total p50 {statistics.median(total):8.2f}"
                  f"  mean {statistics.mean(total):8.2f}  max {max(total):8.2f}"
                  f"  busy p50 {statistics.median(busy):6.2f} ms")


if __name__ == "__main__":
    main()
