#!/usr/bin/env bash
# usage: w3pre.sh MODE -- W3 P=4 alone (60 rounds) on a fresh mount. MODE default: default
# options. MODE pinned: -o spread_readers=0 and the two readers kept to CPU 0 and CPU 1 from
# outside before the run starts (so they are in place when the callers begin, and stay).
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s29XXXX)
[ "$1" = pinned ] && o="-o spread_readers=0" || o=""
CHURNFS_MOUNT_OPTS="$o" bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
dpid=$(pgrep -f "churnfs mount $S" | head -1)
$B/churnfs-bench w3 --dir $S/mnt/bench --rounds 1 --procs 4 >/dev/null
if [ "$1" = pinned ]; then k=0; for t in /proc/$dpid/task/*; do case $(cat $t/comm) in churnfs-dev*) taskset -p -c $k $(basename $t) >/dev/null; k=$((k+1));; esac; done; fi
sleep 0.05
echo "$1 $($B/churnfs-bench w3 --dir $S/mnt/bench --rounds 60 --procs 4 | grep -o 'p4_truncates_per_s=[0-9]*')"
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
