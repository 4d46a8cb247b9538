#!/usr/bin/env bash
# How long each daemon takes from reading a W7 first miss to writing its answer:
#   bash handler.sh [BIN]      (root; OPTS="-o ..." for churnfs's mount options)
# Runs `churnfs-bench w7-pair` for 4 s and traces, for 1.5 s in the middle, the end of
# every read(2) and the start of every writev(2) or write(2) (churnfs's readers answer
# with write since session 18) of both daemons' threads (ftrace syscall events); prints
# per thread the answers seen and the read-to-answer time
# (ftrace prints microseconds, so the mean of those under 50 µs is the figure to read).
set -u
. "$(dirname "$0")/common.sh"
up
filt=$(for t in $(ls /proc/"$FP"/task /proc/"$CP"/task | grep -E '^[0-9]+$'); do printf 'common_pid == %s || ' "$t"; done | sed 's/ || $//')
for e in syscalls/sys_exit_read syscalls/sys_enter_writev syscalls/sys_enter_write; do echo "$filt" >/sys/kernel/tracing/events/$e/filter; done
traced_pair syscalls/sys_exit_read syscalls/sys_enter_writev syscalls/sys_enter_write
python3 - "$C/trace" "$FP" "$CP" <<'PY'
import os, re, statistics, sys
trace, fp, cp = sys.argv[1:]
who = {t: 'floor' for t in os.listdir(f'/proc/{fp}/task')}
who.update({t: 'churnfs' for t in os.listdir(f'/proc/{cp}/task')})
last, lat = {}, {}
for l in open(trace):
    m = re.match(r'\s*\S+-(\d+)\s+\[\d+\]\s+\S+\s+([\d.]+): (sys_\w+)', l)
    if not m:
        continue
    tid, ts, ev = m.groups()
    if ev.startswith('sys_read'):
        last[tid] = float(ts)
    elif tid in last:
        lat.setdefault(tid, []).append((float(ts) - last.pop(tid)) * 1e6)
for tid, v in sorted(lat.items(), key=lambda x: -len(x[1])):
    if len(v) > 1000:
        u = [x for x in v if x < 50]
        print(f'  {who.get(tid, "?")} thread {tid}: {len(v)} answers, read-to-answer mean {statistics.mean(u):.2f} µs')
PY
down
