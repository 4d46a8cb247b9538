#!/usr/bin/env bash
# usage: w2trace.sh ITERS  -- W2 on a fresh mount with the fuse:fuse_request_send tracepoint on
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s28XXXX)
bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
perf record -q -a -e fuse:fuse_request_send -o /tmp/s28/w2trace.data -- $B/churnfs-bench w2 --dir $S/mnt/bench --iters $1 | grep -E "per_s" | tr '\n' ' '; echo
$B/churnfs stats $S/mnt | grep -E "spread"
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
