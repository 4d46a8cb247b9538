#!/usr/bin/env bash
set -u
T=$HOME/.cache/churnfs-target/release
w=$(mktemp -d /tmp/churnfs-w3p.XXXXXX); mkdir -p "$w/ram" "$w/mnt"
mount -t tmpfs -o size=2g churnfs-w3p "$w/ram"
"$T/churnfs" mkfs "$w/ram/store" >/dev/null
out=$("$T/churnfs" mount "$w/ram/store" "$w/mnt" --background ${OPTS:-})
pid=$(echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
mkdir "$w/mnt/b"
for p in 2 4 2 4; do
  (cd "$w/mnt/b" && perf stat -a -e context-switches,cpu-migrations,task-clock -x, -o "$w/perf.$p" "$T/churnfs-bench" w3 --dir . --rounds 20 --procs $p | grep truncates_per_s | tr '\n' ' ')
  awk -F, '{printf "%s=%s ", $3, $1}' "$w/perf.$p"; echo
done
fusermount3 -u "$w/mnt"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
umount "$w/ram"; rm -rf "$w"
