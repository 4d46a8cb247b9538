#!/usr/bin/env bash
# W3 at P=2 and P=4 under perf on one churnfs mount (release build, store on
# a tmpfs under /tmp). Root only; unmounts what it mounts.
#   perf.sh stat     perf stat -a around P=2, P=4, P=2, P=4
#   perf.sh record   perf record -a -g around one P=2 and one P=4
#                    (/tmp/perf.2.data, /tmp/perf.4.data)
set -u
mode=${1:-stat}
T=${CARGO_TARGET_DIR:-$HOME/.cache/churnfs-target}/release
w=$(mktemp -d /tmp/churnfs-w3p.XXXXXX); mkdir -p "$w/ram" "$w/mnt"
mount -t tmpfs -o size=2g churnfs-w3p "$w/ram"
"$T/churnfs" mkfs "$w/ram/store" >/dev/null
out=$("$T/churnfs" mount "$w/ram/store" "$w/mnt" --background ${OPTS:-})
pid=$(echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
mkdir "$w/mnt/b"
run() { (cd "$w/mnt/b" && "$@" "$T/churnfs-bench" w3 --dir . --rounds 20 --procs "$p" | grep truncates_per_s | tr '\n' ' '); }
if [ "$mode" = record ]; then
  for p in 2 4; do run perf record -a -g -o "/tmp/perf.$p.data"; echo; done
else
  for p in 2 4 2 4; do
    run perf stat -a -e context-switches,cpu-migrations,task-clock -x, -o "$w/perf.$p"
    awk -F, '/^[0-9]/{printf "%s=%s ", $3, $1}' "$w/perf.$p"; echo
  done
fi
fusermount3 -u "$w/mnt"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
umount "$w/ram"; rm -rf "$w"
