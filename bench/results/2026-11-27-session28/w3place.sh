#!/usr/bin/env bash
# usage: [OPTS="-o ..."] w3place.sh OUT -- W3 P=4 (60 rounds) on a fresh mount; samples each thread's CPU (psr) every 20 ms
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s28XXXX)
CHURNFS_MOUNT_OPTS="${OPTS:-}" bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
dpid=$(pgrep -f "churnfs mount $S" | head -1)
$B/churnfs-bench w3 --dir $S/mnt/bench --rounds 60 --procs 4 > $1.res &
bp=$!
: > $1
while kill -0 $bp 2>/dev/null; do
  ps -L -o tid=,psr=,stat=,comm= -p $dpid $(pgrep -P $bp | tr '\n' ' ') 2>/dev/null | sed "s/^/$(date +%s%N) /" >> $1
  sleep 0.02
done
wait $bp
grep -E "truncates_per_s" $1.res | tr '\n' ' '; echo
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
