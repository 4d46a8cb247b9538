#!/usr/bin/env bash
# where.sh BIN OPTS: runs w2 400k on a fresh mount and samples which CPU each thread last ran on.
set -u
BIN=$1; O=$2
w=$(mktemp -d /tmp/churnfs-exp.XXXXXX); mkdir -p "$w/ram" "$w/mnt"
mount -t tmpfs -o size=8g churnfs-exp "$w/ram"
"$BIN/churnfs" mkfs "$w/ram/store" >/dev/null
out=$("$BIN/churnfs" mount "$w/ram/store" "$w/mnt" --background $O)
pid=$(echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
mkdir "$w/mnt/b"
(cd "$w/mnt/b" && "$BIN/churnfs-bench" w2 --dir . --iters 400000 > "$w/out" 2>&1) &
bp=$!
sleep 3
cp=$(pgrep -f "churnfs-bench w2 --dir . --iters 400000" | head -1)
for i in $(seq 200); do
  line=""
  for t in /proc/$pid/task/*; do c=$(cat $t/comm); case $c in churnfs-dev0|churnfs-dev1|churnfs-awake) line="$line $c=$(awk '{print $39}' $t/stat)";; esac; done
  line="$line caller=$(awk '{print $39}' /proc/$cp/stat 2>/dev/null)"
  echo "$line"
  sleep 0.01
done | sort | uniq -c | sort -rn | head
wait $bp; grep rate= "$w/out"
fusermount3 -u "$w/mnt"; for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
umount "$w/ram"; rm -rf "$w"
