#!/usr/bin/env bash
# Where each daemon's kernel time per answer goes during W7's first misses:
#   bash kpaths.sh [BIN]       (root; OPTS="-o ..." for churnfs's mount options)
# `perf record -g` (10 kHz) of both daemons during 10 s of `churnfs-bench w7-pair`,
# then the samples under a few kernel functions divided by the misses each answered
# (the writev(2) and write(2) calls each daemon made, counted by `perf stat` alongside).
set -u
. "$(dirname "$0")/common.sh"
up
perf record -q -g -F 10000 -p "$FP" -o "$F/perf.data" 2>/dev/null & P1=$!
perf record -q -g -F 10000 -p "$CP" -o "$C/perf.data" 2>/dev/null & P2=$!
perf stat -x, -e syscalls:sys_enter_writev,syscalls:sys_enter_write -p "$FP" -o "$F/count" & P3=$!
perf stat -x, -e syscalls:sys_enter_writev,syscalls:sys_enter_write -p "$CP" -o "$C/count" & P4=$!
sleep 0.3
"$BIN/churnfs-bench" w7-pair --dir "$D" --against "$F/mnt" --secs 10 >"$C/pair.out"
kill -INT $P1 $P2 $P3 $P4; wait $P1 $P2 $P3 $P4 2>/dev/null
echo "[${OPTS:-defaults}] $(tr '\n' ' ' <"$C/pair.out")"
for side in floor churnfs; do
  if [ $side = floor ]; then d=$F; else d=$C; fi
  # Answers: writev (fuser) or write (churnfs's readers since session 18; the
  # side thread's notifications are a few hundred of them, left in).
  data="$d/perf.data"; n=$(grep -E 'sys_enter_writev?,' "$d/count" | cut -d, -f1 | awk '{t+=$1} END {print t}')
  perf report -i "$data" --children --sort sym -g none 2>/dev/null |
    grep -E '\] (do_writev|ksys_write|__wake_up|fuse_copy_args|fuse_dev_do_read)$' |
    awk -v n="$n" -v s=$side -v tot="$(perf report -i "$data" --no-children --sort comm -g none -n 2>/dev/null | grep '%' | grep -v '^#' | awk '{t+=$2} END {print t}')" \
      '{gsub("%","",$1); printf "  %-7s %-16s %.2f µs per answer (%d answers)\n", s, $4, $1*tot/100/10000*1e6/n, n}'
done
down
