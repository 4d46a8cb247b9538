#!/usr/bin/env bash
# usage: w3mig.sh [OPTS] -- W3 P=4 alone on a fresh mount under perf stat -a: the machine's
# CPU migrations and context switches over the run, and the readers' switches
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s29XXXX)
CHURNFS_MOUNT_OPTS="$1" bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
dpid=$(pgrep -f "churnfs mount $S" | head -1)
snap() { for t in /proc/$dpid/task/*; do case $(cat $t/comm) in churnfs-dev*) awk '/^voluntary_ctxt/{v=$2} /^nonvoluntary_ctxt/{n=$2} END{print v, n}' $t/status;; esac; done | awk '{v+=$1; n+=$2} END{print v, n}'; }
a=$(snap)
perf stat -a -x, -e cpu-migrations,context-switches -o $S/perf.csv $B/churnfs-bench w3 --dir $S/mnt/bench --rounds 60 --procs 4 > $S/out.txt
b=$(snap)
r=$(grep -o "p4_truncates_per_s=[0-9]*" $S/out.txt)
m=$(awk -F, '/cpu-migrations/{print $1}' $S/perf.csv); c=$(awk -F, '/context-switches/{print $1}' $S/perf.csv)
echo "$r migrations=$m switches=$c readers_vcs_ivcs $(echo $a $b | awk '{print $3-$1, $4-$2}')"
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
