#!/usr/bin/env bash
# usage: w3seq.sh ROUNDS PROCS [OPTS]
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s27XXXX)
CHURNFS_MOUNT_OPTS="$3" bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
$B/churnfs-bench w3 --dir $S/mnt/bench --rounds $1 --procs $2 | grep -E "per_s|worker_secs" | tr '\n' ' '; echo
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
