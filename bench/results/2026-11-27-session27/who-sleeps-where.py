"""Per 100 ms window of `perf script -F cpu,time,event,trace,comm,tid` output
(sched_switch events): the threads that switched out most, with their state
(S asleep, R preempted) and CPU. Usage: who-sleeps-where.py sched.txt FROM TO
(window numbers, tenths of a second from the first event)."""
import collections
import re
import sys

rx = re.compile(r'^\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)$')
t0 = None
win = collections.defaultdict(collections.Counter)
for line in open(sys.argv[1]):
    m = rx.match(line)
    if not m:
        continue
    comm, tid, cpu, t, e, rest = m.groups()
    t = float(t)
    if t0 is None:
        t0 = t
    if e == 'sched_switch':
        p = re.search(r'prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+)', rest)
        win[int((t - t0) * 10)][(p.group(1), p.group(2), p.group(3), cpu)] += 1
lo, hi = int(sys.argv[2]), int(sys.argv[3])
for w in sorted(win):
    if lo <= w <= hi:
        top = win[w].most_common(8)
        print(w / 10, [(f"{a}:{b}:{s}:cpu{c}", n) for (a, b, s, c), n in top])
