#!/usr/bin/env bash
# w3prio.sh BIN_DIR ROUNDS MODE...: W3 (P = 1, 2, 4) on fresh mounts, modes
# alternating: none, nice (readers at nice -10), fifo (SCHED_FIFO 1), batch
# (SCHED_BATCH), cpu1 / cpu0 (every reader on that CPU). Root only.
set -u
BIN=$1; R=$2; shift 2
for round in $(seq "$R"); do
  for mode in "$@"; do
    w=$(mktemp -d /tmp/churnfs-pr.XXXXXX); mkdir -p "$w/ram" "$w/mnt"
    mount -t tmpfs -o size=8g churnfs-pr "$w/ram"
    "$BIN/churnfs" mkfs "$w/ram/store" >/dev/null
    out=$("$BIN/churnfs" mount "$w/ram/store" "$w/mnt" --background ${OPTS:-})
    pid=$(echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
    for t in /proc/$pid/task/*; do
      n=$(cat $t/comm); tid=${t##*/}
      case "$n" in churnfs-dev*)
        case $mode in
          nice) renice -n -10 -p $tid >/dev/null;;
          fifo) chrt -f -p 1 $tid;;
          batch) chrt -b -p 0 $tid;;
          cpu1) taskset -p -c 1 $tid >/dev/null;;
          cpu0) taskset -p -c 0 $tid >/dev/null;;
        esac;;
      esac
    done
    mkdir "$w/mnt/b"
    r=$(cd "$w/mnt/b" && "$BIN/churnfs-bench" w3 --dir . --rounds 20 --procs ${PROCS:-1,2,4} 2>&1 | grep -E "truncates_per_s" | tr '\n' ' ')
    echo "round $round [$mode]: $r"
    fusermount3 -u "$w/mnt"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    umount "$w/ram"; rm -rf "$w"
  done
done
