#!/usr/bin/env bash
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s27XXXX)
CHURNFS_MOUNT_OPTS="$2" bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
echo daemon $(cat $S/pid)
perf record -q -e sched:sched_switch,sched:sched_wakeup,sched:sched_migrate_task -a -o /tmp/s27/sched.data -- $B/churnfs-bench w3 --dir $S/mnt/bench --rounds $1 --procs 1,2 2>/dev/null | grep -E "truncates_per_s" | tr '\n' ' '; echo
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
