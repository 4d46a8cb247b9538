#!/usr/bin/env bash
# cpuab.sh BIN_A BIN_B ROUNDS CMD... : daemon CPU seconds (utime+stime) and CMD's KEY lines, mounts alternating
set -u
A=$1; B=$2; R=$3; shift 3
for round in $(seq "$R"); do
  for T in $A $B; do
    w=$(mktemp -d /tmp/churnfs-cab.XXXXXX); mkdir -p "$w/ram" "$w/mnt"
    mount -t tmpfs -o size=8g cab "$w/ram"
    "$T/churnfs" mkfs "$w/ram/store" >/dev/null
    out=$("$T/churnfs" mount "$w/ram/store" "$w/mnt" --background)
    pid=$(echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
    mkdir "$w/mnt/b"
    r=$(cd "$w/mnt/b" && PATH="$T:$PATH" "$@" 2>&1 | grep -E "${KEY:-.}" | tr '\n' ' ')
    cpu=$(awk '{print ($14+$15)/100}' /proc/$pid/stat)
    s=$("$T/churnfs" stats "$w/mnt" 2>/dev/null | grep -E "^(${STATS:-store_gets}) " | tr '\n' ' ')
    echo "round $round [$T]: cpu_s=$cpu $r | $s"
    fusermount3 -u "$w/mnt"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    umount "$w/ram"; rm -rf "$w"
  done
done
