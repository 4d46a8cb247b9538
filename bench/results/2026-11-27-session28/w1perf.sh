#!/usr/bin/env bash
# usage: w1perf.sh N REPEAT_TO TAG [OPTS]
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s28XXXX)
CHURNFS_MOUNT_OPTS="$4" bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
perf record -q -a -g -F 2999 -o /tmp/s28/perf-$3.data -- $B/churnfs-bench w1 --dir $S/mnt/bench --n $1 --repeat-to $2 2>/dev/null | grep -E "close_us|open_per" | tr '\n' ' '; echo
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
