#!/usr/bin/env bash
# A/B of two churnfs builds on one workload, mounts alternating:
#   bench/tools/ab.sh BIN_DIR_A BIN_DIR_B ROUNDS CMD...
# Each BIN_DIR holds a `churnfs` and a `churnfs-bench`. Every round mounts a
# fresh store on a tmpfs under /tmp with A, then with B (options: $OPTS),
# runs CMD in MNT/b with that BIN_DIR first on PATH, prints the lines of
# CMD's output matching $KEY, and the commit and truncate stats the daemon
# counted. $OPTS_A and $OPTS_B, when set, replace $OPTS for that side (to
# compare two option sets of one build, give the same BIN_DIR twice).
# $STATS, when set, is the |-separated list of `churnfs stats` counters to
# print after each run instead of the commit and truncate ones.
# Root only; it unmounts what it mounts.
set -u
A=$1; B=$2; R=$3; shift 3
for round in $(seq "$R"); do
  for side in A B; do
    if [ "$side" = A ]; then T=$A; O=${OPTS_A:-${OPTS:-}}; else T=$B; O=${OPTS_B:-${OPTS:-}}; fi
    w=$(mktemp -d /tmp/churnfs-ab.XXXXXX); mkdir -p "$w/ram" "$w/mnt"
    mount -t tmpfs -o size=8g churnfs-ab "$w/ram"
    "$T/churnfs" mkfs "$w/ram/store" >/dev/null
    out=$("$T/churnfs" mount "$w/ram/store" "$w/mnt" --background $O)
    pid=$(echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
    mkdir "$w/mnt/b"
    r=$(cd "$w/mnt/b" && PATH="$T:$PATH" "$@" 2>&1 | grep -E "${KEY:-.}" | tr '\n' ' ')
    s=$("$T/churnfs" stats "$w/mnt" 2>/dev/null \
      | grep -E "^(${STATS:-commits|commit_max_us|commit_locked_max_us|commit_apply_max_us|truncate_batches|truncate_batch_max_us|worker_spin_hits|worker_spin_misses}) " \
      | tr '\n' ' ')
    echo "round $round [$side $T $O]: $r | $s"
    fusermount3 -u "$w/mnt"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    umount "$w/ram"; rm -rf "$w"
  done
done
