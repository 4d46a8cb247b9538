#!/usr/bin/env bash
# Whether each daemon's answer wakes the caller on its own CPU or on the other:
#   bash wakes.sh [BIN]        (root; OPTS="-o ..." for churnfs's mount options)
# ftrace sched_waking of churnfs-bench for 1.5 s of a 4 s `churnfs-bench w7-pair`.
set -u
. "$(dirname "$0")/common.sh"
up
echo 'comm == "churnfs-bench"' >/sys/kernel/tracing/events/sched/sched_waking/filter
traced_pair sched/sched_waking
python3 - "$C/trace" "$FP" "$CP" <<'PY'
import collections, os, re, sys
trace, fp, cp = sys.argv[1:]
who = {t: 'floor' for t in os.listdir(f'/proc/{fp}/task')}
who.update({t: 'churnfs' for t in os.listdir(f'/proc/{cp}/task')})
c = collections.Counter()
for l in open(trace):
    m = re.match(r'\s*\S+-(\d+)\s+\[(\d+)\].*sched_waking: .*target_cpu=(\d+)', l)
    if m and m.group(1) in who:
        c[(who[m.group(1)], 'same CPU' if m.group(2) == m.group(3) else 'other CPU')] += 1
for k, v in sorted(c.items()):
    print(f'  {k[0]} woke the caller on the {k[1]}: {v}')
PY
down
