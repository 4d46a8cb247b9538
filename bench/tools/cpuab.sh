#!/usr/bin/env bash
# A/B of the daemon's CPU time, two churnfs builds, mounts alternating:
#   bench/tools/cpuab.sh BIN_DIR_A BIN_DIR_B ROUNDS CMD...
# As ab.sh (a fresh store on a tmpfs under /tmp each round, CMD run in MNT/b
# with that BIN_DIR first on PATH, $KEY picks CMD's lines), and prints the
# daemon's user + system CPU seconds for the run: what a change costs in
# CPU where the caller's rate does not show it. Root only; it unmounts what
# it mounts.
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
