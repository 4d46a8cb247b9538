#!/usr/bin/env bash
# W3 (K = 20, P = 1, 2, 4) on fresh mounts, in turn: the FUSE floor with files
# (churnfs-bench-floor ... files: sizes in memory, two threads), polling 50 µs
# after each reply and not polling, then churnfs (store on tmpfs):
#   bash w3floor.sh BIN_DIR [ROUNDS]   (BIN_DIR holds churnfs, churnfs-bench,
#   churnfs-bench-floor). Root only; unmounts what it mounts.
set -u
BIN=$(realpath "$1"); R=${2:-3}
cd "$(dirname "$0")/../.."
for r in $(seq "$R"); do
  for side in floor-spin50 floor-spin0 churnfs; do
    st=$(mktemp -d /tmp/churnfs-bench.w3f.XXXXXX)
    case $side in
      floor-spin50) FLOOR_FILES=1 FLOOR_SPIN_US=50 FLOOR_BIN="$BIN/churnfs-bench-floor" bash targets/floor.sh up "$st" >/dev/null 2>&1; d="$st/mnt"; t=floor ;;
      floor-spin0) FLOOR_FILES=1 FLOOR_SPIN_US=0 FLOOR_BIN="$BIN/churnfs-bench-floor" bash targets/floor.sh up "$st" >/dev/null 2>&1; d="$st/mnt"; t=floor ;;
      churnfs) PATH="$BIN:$PATH" CHURNFS_BIN="$BIN/churnfs" bash targets/churnfs-tmpfs.sh up "$st" >/dev/null 2>&1; d="$st/mnt/bench"; mkdir -p "$d"; t=churnfs-tmpfs ;;
    esac
    res=$("$BIN/churnfs-bench" w3 --dir "$d" --rounds 20 --procs 1,2,4 2>&1 | grep -E 'truncates_per_s' | tr '\n' ' ')
    echo "round $r $side: $res"
    PATH="$BIN:$PATH" bash targets/$t.sh umount "$st" >/dev/null 2>&1; bash targets/$t.sh down "$st" >/dev/null 2>&1
  done
done
