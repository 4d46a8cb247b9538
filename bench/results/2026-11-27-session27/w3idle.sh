#!/usr/bin/env bash
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s27XXXX)
CHURNFS_MOUNT_OPTS="$2" bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
python3 /tmp/s27/cpuidle.py 6 > /tmp/s27/idle.txt &
P=$!
sleep 0.3
$B/churnfs-bench w3 --dir $S/mnt/bench --rounds $1 --procs 1,2 | grep -E "per_s|worker_secs" | tr '\n' ' '; echo
wait $P
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
cat /tmp/s27/idle.txt
