#!/usr/bin/env bash
# usage: w3slice.sh SLICE_NS [WHO] -- W3 P=4 alone on a fresh mount, after a warm-up run the
# readers (WHO=readers, default) or every daemon thread (WHO=all) get SCHED_BATCH with a
# scheduler slice of SLICE_NS (0: the default); prints the rate and the readers' switches
B=$HOME/.cache/churnfs-target/release
H=$(dirname "$0")
S=$(mktemp -d /tmp/churnfs-bench.s29XXXX)
bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
dpid=$(pgrep -f "churnfs mount $S" | head -1)
$B/churnfs-bench w3 --dir $S/mnt/bench --rounds 1 --procs 4 >/dev/null
tids=$(for t in /proc/$dpid/task/*; do case $(cat $t/comm) in churnfs-dev*) basename $t;; *) [ "${2:-readers}" = all ] && basename $t;; esac; done)
python3 $H/setslice.py $1 $tids
snap() { for t in /proc/$dpid/task/*; do case $(cat $t/comm) in churnfs-dev*) awk '/^voluntary_ctxt/{v=$2} /^nonvoluntary_ctxt/{n=$2} END{print v, n}' $t/status;; esac; done | awk '{v+=$1; n+=$2} END{print v, n}'; }
a=$(snap)
r=$($B/churnfs-bench w3 --dir $S/mnt/bench --rounds 60 --procs 4 | grep -o "p4_truncates_per_s=[0-9]*")
b=$(snap)
echo "slice $1 ${2:-readers} $r readers_vcs_ivcs $(echo $a $b | awk '{print $3-$1, $4-$2}')"
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
