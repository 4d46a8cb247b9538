#!/usr/bin/env bash
# usage: w3probe.sh ACTION -- W3 P=4 (400 rounds) on a fresh mount; every 0.5 s: the CPU of each
# caller and reader, and the readers' context switches per second (about one per request).
# At 4 s, ACTION: none | light (both readers to the CPU with fewer callers, unless split 2/2)
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s29XXXX)
bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
dpid=$(pgrep -f "churnfs mount $S" | head -1)
$B/churnfs-bench w3 --dir $S/mnt/bench --rounds 400 --procs 4 > $S/out.txt &
bpid=$!
sleep 0.3
readers() { for t in /proc/$dpid/task/*; do case $(cat $t/comm) in churnfs-dev*) basename $t;; esac; done; }
sw() { for t in $(readers); do awk '/^voluntary_ctxt/{v=$2} /^nonvoluntary_ctxt/{n=$2} END{print v, n}' /proc/$dpid/task/$t/status; done | awk '{v+=$1; n+=$2} END{print v, n}'; }
cpus() { for p in $(pgrep -P $bpid); do awk '{print $39}' /proc/$p/stat; done | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}'; }
prev=$(sw); i=0
while kill -0 $bpid 2>/dev/null && [ $i -lt 24 ]; do
  sleep 0.5; i=$((i+1)); now=$(sw)
  rcpu=$(for t in $(readers); do awk '{print $39}' /proc/$dpid/task/$t/stat; done | tr '\n' ',')
  echo "t=$(echo "$i*0.5" | bc) callers[$(cpus)] readers[$rcpu] $(echo $prev $now | awk '{printf "vcs/s %d ivcs/s %d", ($3-$1)*2, ($4-$2)*2}')"
  prev=$now
  if [ $i -eq 8 ] && [ "$1" = light ]; then
    c0=$(for p in $(pgrep -P $bpid); do awk '{print $39}' /proc/$p/stat; done | grep -c '^0$')
    tgt=$([ $c0 -ge 2 ] && echo 1 || echo 0); [ $c0 -eq 2 ] && tgt=none
    [ $tgt != none ] && for t in $(readers); do taskset -p -c $tgt $t >/dev/null; done
    echo "action: readers to CPU $tgt"
  fi
done
wait $bpid; grep -o "p4_truncates_per_s=[0-9]*" $S/out.txt
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
