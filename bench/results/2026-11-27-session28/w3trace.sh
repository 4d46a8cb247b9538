#!/usr/bin/env bash
# usage: w3trace.sh BIN_DIR  -- W3 (60 rounds, P=1,2,4) on a fresh mount with fuse:fuse_request_send recorded
B=$1
S=$(mktemp -d /tmp/churnfs-bench.s28XXXX)
CHURNFS_BIN=$B/churnfs bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
perf record -q -a -e fuse:fuse_request_send -o /tmp/s28/w3trace.data -- $B/churnfs-bench w3 --dir $S/mnt/bench --rounds 60 --procs 1,2,4 | grep -E "truncates_per_s" | tr '\n' ' '; echo
$B/churnfs stats $S/mnt | grep -E "spread|kernel_negative_inval|dir_flushes"
CHURNFS_BIN=$B/churnfs bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
