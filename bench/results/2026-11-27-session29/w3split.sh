#!/usr/bin/env bash
# usage: w3split.sh CALLERS READERS -- W3 P=4 (80 rounds) on a fresh mount; 0.15 s after the
# start the four callers are pinned to the CPUs in CALLERS (e.g. 0,0,0,1) and the readers, in order, to
# READERS (e.g. 0,1 or 1,1; "free": both may run anywhere). A study of where the readers
# should be for a given split of the callers; the daemon never moves other processes.
# OPTS (environment): mount options, e.g. "-o threads=3".
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s29XXXX)
CHURNFS_MOUNT_OPTS="$OPTS" bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
dpid=$(pgrep -f "churnfs mount $S" | head -1)
$B/churnfs-bench w3 --dir $S/mnt/bench --rounds 1 --procs 4 >/dev/null
$B/churnfs-bench w3 --dir $S/mnt/bench --rounds 80 --procs 4 > $S/out.txt &
bpid=$!
sleep 0.15
IFS=, read -ra cc <<<"$1"; k=0
for p in $(pgrep -P $bpid); do taskset -p -c ${cc[$k]} $p >/dev/null; k=$((k+1)); done
nc=$k; k=0
readers=$(for t in /proc/$dpid/task/*; do case $(cat $t/comm) in churnfs-dev*) basename $t;; esac; done)
if [ "$2" = free ]; then for t in $readers; do taskset -p -c 0,1 $t >/dev/null; done
else IFS=, read -ra rc <<<"$2"; k=0; for t in $readers; do taskset -p -c ${rc[$k]} $t >/dev/null; k=$((k+1)); done; fi
wait $bpid
echo "callers $1 readers $2 opts [$OPTS] pinned_callers $nc $(grep -o 'p4_truncates_per_s=[0-9]*' $S/out.txt)"
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
