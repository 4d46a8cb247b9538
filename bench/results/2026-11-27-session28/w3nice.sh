#!/usr/bin/env bash
# usage: w3nice.sh NICE -- W3 P=4 alone on a fresh mount, every daemon thread reniced to NICE first;
# prints the rate and the readers' voluntary / involuntary switches over the run
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s28XXXX)
bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
dpid=$(pgrep -f "churnfs mount $S" | head -1)
for t in /proc/$dpid/task/*; do renice -n $1 -p $(basename $t) >/dev/null; done
snap() { for t in /proc/$dpid/task/*; do case $(cat $t/comm) in churnfs-dev*) awk '/^voluntary_ctxt/{v=$2} /^nonvoluntary_ctxt/{n=$2} END{print v, n}' $t/status;; esac; done | awk '{v+=$1; n+=$2} END{print v, n}'; }
a=$(snap)
r=$($B/churnfs-bench w3 --dir $S/mnt/bench --rounds 60 --procs 4 | grep -o "p4_truncates_per_s=[0-9]*")
b=$(snap)
echo "nice $1 $r readers_vcs_ivcs_delta $(echo $a $b | awk '{print $3-$1, $4-$2}')"
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
