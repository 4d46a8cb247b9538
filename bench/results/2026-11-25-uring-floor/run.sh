#!/usr/bin/env bash
# The FUSE floor over io_uring against the floor over /dev/fuse, in one run:
#   bash run.sh BIN_DIR [ROUNDS] [w7|w3|both]
# BIN_DIR holds churnfs, churnfs-bench, churnfs-bench-floor and
# churnfs-bench-floor-uring. Root only. Turns
# /sys/module/fuse/parameters/enable_uring on for the run and puts back what
# it was; unmounts what it mounts.
#   w7: `churnfs-bench w7-pair` (first misses, alternating 1 s slices, 20 s):
#       the hand-written floor over io_uring (not polling, and polling its
#       completion queue 50 µs), and over /dev/fuse (the control), each
#       against churnfs-bench-floor polling 50 µs (fuser, /dev/fuse; the
#       floor issue 7 is measured against; AGAINST=floor for not polling).
#   w3: W3 (K = 20, P = 1, 2, 4) on fresh mounts in turn: fuser's floor with
#       files (not polling), the hand-written floor with files over /dev/fuse
#       and over io_uring (not polling, polling 50 µs), and churnfs (store on
#       tmpfs).
set -u
BIN=$(realpath "$1"); R=${2:-3}; WHAT=${3:-both}
cd "$(dirname "$0")/../.."
P=/sys/module/fuse/parameters/enable_uring
OLD=$(cat $P); echo Y > $P
trap 'echo "$OLD" > $P' EXIT

up_raw() { # up_raw STATE ARGS... : mounts the hand-written floor on STATE/mnt
  local st=$1; shift; mkdir -p "$st/mnt"
  setsid "$BIN/churnfs-bench-floor-uring" "$st/mnt" "$@" >"$st/log" 2>&1 </dev/null &
  echo $! >"$st/pid"
  for _ in $(seq 200); do mountpoint -q "$st/mnt" && return 0; sleep 0.05; done
  cat "$st/log"; return 1
}
down_raw() {
  local st=$1
  umount "$st/mnt" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$(cat "$st/pid")" 2>/dev/null || break; sleep 0.05; done
  rm -rf "$st"
}

if [ "$WHAT" != w3 ]; then
  for r in $(seq "$R"); do
    f=$(mktemp -d /tmp/churnfs-bench.uf-f.XXXXXX)
    FLOOR_BIN="$BIN/churnfs-bench-floor" bash targets/${AGAINST:-floor-spin}.sh up "$f" >/dev/null 2>&1 || { echo "floor up failed"; exit 1; }
    for side in uring uring-spin50 dev; do
      st=$(mktemp -d /tmp/churnfs-bench.uf-r.XXXXXX)
      case $side in
        uring) up_raw "$st" || exit 1 ;;
        uring-spin50) up_raw "$st" spin=50 || exit 1 ;;
        dev) up_raw "$st" dev || exit 1 ;;
      esac
      res=$("$BIN/churnfs-bench" w7-pair --dir "$st/mnt" --against "$f/mnt" --secs "${SECS:-20}" | tr '\n' ' ')
      echo "w7 round $r $side/${AGAINST:-floor-spin}: $res"
      down_raw "$st"
    done
    bash targets/${AGAINST:-floor-spin}.sh umount "$f" >/dev/null 2>&1; bash targets/${AGAINST:-floor-spin}.sh down "$f" >/dev/null 2>&1
  done
fi

if [ "$WHAT" != w7 ]; then
  for r in $(seq "$R"); do
    for side in fuser-floor raw-dev raw-uring raw-uring-spin50 churnfs; do
      st=$(mktemp -d /tmp/churnfs-bench.uf-w3.XXXXXX)
      case $side in
        fuser-floor) FLOOR_FILES=1 FLOOR_SPIN_US=0 FLOOR_BIN="$BIN/churnfs-bench-floor" bash targets/floor.sh up "$st" >/dev/null 2>&1; d="$st/mnt"; t=floor ;;
        raw-dev) up_raw "$st" files dev || exit 1; d="$st/mnt"; t=raw ;;
        raw-uring) up_raw "$st" files || exit 1; d="$st/mnt"; t=raw ;;
        raw-uring-spin50) up_raw "$st" files spin=50 || exit 1; d="$st/mnt"; t=raw ;;
        churnfs) PATH="$BIN:$PATH" CHURNFS_BIN="$BIN/churnfs" bash targets/churnfs-tmpfs.sh up "$st" >/dev/null 2>&1; d="$st/mnt/bench"; mkdir -p "$d"; t=churnfs-tmpfs ;;
      esac
      res=$("$BIN/churnfs-bench" w3 --dir "$d" --rounds 20 --procs 1,2,4 2>&1 | grep -E 'truncates_per_s' | tr '\n' ' ')
      echo "w3 round $r $side: $res"
      if [ $t = raw ]; then down_raw "$st"; else
        PATH="$BIN:$PATH" bash targets/$t.sh umount "$st" >/dev/null 2>&1; bash targets/$t.sh down "$st" >/dev/null 2>&1; fi
    done
  done
fi
