#!/usr/bin/env bash
# usage: w3perf.sh TAG -- W3 P=4 alone on a fresh mount under perf record -a -g
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s28XXXX)
bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
perf record -q -a -g -F 999 -o /tmp/s28/w3p-$1.data -- $B/churnfs-bench w3 --dir $S/mnt/bench --rounds 60 --procs 4 | grep -o "p4_truncates_per_s=[0-9]*"
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
