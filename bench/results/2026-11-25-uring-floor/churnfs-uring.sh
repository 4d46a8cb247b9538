#!/usr/bin/env bash
# churnfs over /dev/fuse and over io_uring (-o uring=1), in one run:
#   bash churnfs-uring.sh BIN_DIR [ROUNDS]
# W3 (K = 20, P = 1, 2, 4) on fresh mounts in turn (store on tmpfs), then
# `churnfs-bench w7-pair` of each against churnfs-bench-floor polling 50 µs
# (first misses in MNT/bench, 20 s), and churnfs over io_uring against the
# floor over io_uring polling 50 µs (churnfs-bench-floor-uring). BIN_DIR
# holds churnfs, churnfs-bench, churnfs-bench-floor and
# churnfs-bench-floor-uring. Root only; turns
# /sys/module/fuse/parameters/enable_uring on for the run and puts back what
# it was; unmounts what it mounts.
set -u
BIN=$(realpath "$1"); R=${2:-3}
cd "$(dirname "$0")/../.."
P=/sys/module/fuse/parameters/enable_uring
OLD=$(cat $P); echo Y > $P
trap 'echo "$OLD" > $P' EXIT
up() { PATH="$BIN:$PATH" CHURNFS_BIN="$BIN/churnfs" CHURNFS_MOUNT_OPTS="$2" bash targets/churnfs-tmpfs.sh up "$1" >/dev/null 2>&1; }
down() { PATH="$BIN:$PATH" bash targets/churnfs-tmpfs.sh umount "$1" >/dev/null 2>&1; bash targets/churnfs-tmpfs.sh down "$1" >/dev/null 2>&1; }
for r in $(seq "$R"); do
  for side in dev uring; do
    st=$(mktemp -d /tmp/churnfs-bench.cu.XXXXXX)
    if [ $side = uring ]; then up "$st" "-o uring=1" || { down "$st"; exit 1; }; else up "$st" "" || { down "$st"; exit 1; }; fi
    d="$st/mnt/bench"; mkdir -p "$d"
    res=$("$BIN/churnfs-bench" w3 --dir "$d" --rounds 20 --procs 1,2,4 2>&1 | grep -E 'truncates_per_s' | tr '\n' ' ')
    echo "w3 round $r churnfs-$side: $res"
    down "$st"
  done
done
for r in $(seq "$R"); do
  f=$(mktemp -d /tmp/churnfs-bench.cu-f.XXXXXX)
  FLOOR_BIN="$BIN/churnfs-bench-floor" bash targets/floor-spin.sh up "$f" >/dev/null 2>&1 || { echo "floor up failed"; exit 1; }
  for side in dev uring; do
    st=$(mktemp -d /tmp/churnfs-bench.cu.XXXXXX)
    if [ $side = uring ]; then up "$st" "-o uring=1" || { down "$st"; exit 1; }; else up "$st" "" || { down "$st"; exit 1; }; fi
    d="$st/mnt/bench"; mkdir -p "$d"
    res=$("$BIN/churnfs-bench" w7-pair --dir "$d" --against "$f/mnt" --secs "${SECS:-20}" | tr '\n' ' ')
    echo "w7 round $r churnfs-$side/floor-spin: $res"
    if [ $side = uring ]; then
      # The same against the floor over io_uring, polling 50 µs.
      u=$(mktemp -d /tmp/churnfs-bench.cu-u.XXXXXX); mkdir -p "$u/mnt"
      setsid "$BIN/churnfs-bench-floor-uring" "$u/mnt" spin=50 >"$u/log" 2>&1 </dev/null &
      for _ in $(seq 200); do mountpoint -q "$u/mnt" && break; sleep 0.05; done
      res=$("$BIN/churnfs-bench" w7-pair --dir "$d" --against "$u/mnt" --secs "${SECS:-20}" | tr '\n' ' ')
      echo "w7 round $r churnfs-uring/floor-uring-spin50: $res"
      umount "$u/mnt"; sleep 0.2; rm -rf "$u"
    fi
    down "$st"
  done
  bash targets/floor-spin.sh umount "$f" >/dev/null 2>&1; bash targets/floor-spin.sh down "$f" >/dev/null 2>&1
done
