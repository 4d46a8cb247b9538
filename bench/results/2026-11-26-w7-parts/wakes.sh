#!/usr/bin/env bash
# Whether each daemon's answer wakes the caller on its own CPU or on the other:
#   bash wakes.sh [BIN]        (root; OPTS="-o ..." for churnfs's mount options)
# ftrace sched_waking of churnfs-bench for 1.5 s of a 4 s `churnfs-bench w7-pair`.
set -u
. "$(dirname "$0")/common.sh"
up
T=/sys/kernel/tracing
echo 0 >$T/tracing_on; echo >$T/trace; echo 16384 >$T/buffer_size_kb
echo 'comm == "churnfs-bench"' >$T/events/sched/sched_waking/filter; echo 1 >$T/events/sched/sched_waking/enable
"$BIN/churnfs-bench" w7-pair --dir "$D" --against "$F/mnt" --secs 4 >"$C/pair.out" &
W=$!
sleep 2.2; echo 1 >$T/tracing_on; sleep 1.5; echo 0 >$T/tracing_on
wait $W
echo 0 >$T/events/sched/sched_waking/enable; echo 0 >$T/events/sched/sched_waking/filter
cp $T/trace "$C/trace"; echo >$T/trace
echo "[${OPTS:-defaults}] $(tr '\n' ' ' <"$C/pair.out")"
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
