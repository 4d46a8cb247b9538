#!/usr/bin/env bash
# W3 P=4 alone on a fresh mount; the readers' user and system time (clock ticks) over the run,
# their voluntary and involuntary context switches, and the whole machine's idle ticks.
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s28XXXX)
bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
dpid=$(pgrep -f "churnfs mount $S" | head -1)
snap() { for t in /proc/$dpid/task/*; do c=$(cat $t/comm); case $c in churnfs-dev*) echo "$c $(awk '{print $14, $15}' $t/stat) $(awk '/^voluntary_ctxt/{v=$2} /^nonvoluntary_ctxt/{n=$2} END{print v, n}' $t/status)";; esac; done; }
a=$(snap); ia=$(awk '/^cpu /{print $5}' /proc/stat)
r=$($B/churnfs-bench w3 --dir $S/mnt/bench --rounds 60 --procs 4 | grep -o "p4_truncates_per_s=[0-9]*")
b=$(snap); ib=$(awk '/^cpu /{print $5}' /proc/stat)
echo "$r idle_ticks=$((ib-ia)) $(paste <(echo "$a") <(echo "$b") | awk '{printf "%s utime=%d stime=%d vcs=%d ivcs=%d  ", $1, $7-$2, $8-$3, $9-$4, $10-$5}')"
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
