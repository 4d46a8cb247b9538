#!/usr/bin/env python3
"""Where a stream of first misses waits: python3 stall.py DIR SECS

Looks up 20,000 new missing names in DIR (past churnfs's default budget of
kernel negative dentries), then new names for SECS seconds, timing each
stat(). Prints the µs per call, the calls that took over 100 µs ("stalls"),
their total by size, and the µs per call without them. Python adds a few µs
to every call; compare builds with each other, not with W7's figures.
"""
import collections
import os
import sys
import time


def bucket(ns):
    ms = ns / 1e6
    for top in (0.5, 1, 2, 5, 10):
        if ms < top:
            return f"<{top}ms"
    return ">=10ms"


def main():
    d, secs = sys.argv[1], float(sys.argv[2])
    now = time.perf_counter_ns
    for i in range(20_000):
        try:
            os.stat(f"{d}/warm-{i}")
        except FileNotFoundError:
            pass
    stalls = []
    t0 = now()
    n = 0
    while now() - t0 < secs * 1e9:
        a = now()
        try:
            os.stat(f"{d}/m-{n}")
        except FileNotFoundError:
            pass
        took = now() - a
        if took > 100_000:
            stalls.append(took)
        n += 1
    elapsed = now() - t0
    stalled = sum(stalls)
    by = collections.defaultdict(lambda: [0, 0.0])
    for s in stalls:
        by[bucket(s)][0] += 1
        by[bucket(s)][1] += s / 1e6
    print(f"calls={n} us_per_call={elapsed / n / 1e3:.2f} stalls={len(stalls)} "
          f"stall_ms={stalled / 1e6:.1f} "
          f"us_per_call_without_stalls={(elapsed - stalled) / (n - len(stalls)) / 1e3:.2f}")
    print("stalls by size (count, ms):",
          {k: (c, round(ms, 1)) for k, (c, ms) in sorted(by.items())})


if __name__ == "__main__":
    main()
