#!/usr/bin/env bash
# W7 (--secs $SECS, default 1) on fresh mounts, alternating floor-spin, churnfs build A and
# churnfs build B: bash alternate.sh A_BIN_DIR B_BIN_DIR (each holds churnfs
# and churnfs-bench; ROUNDS, default 5). Root only; unmounts what it mounts.
set -u
A=$1; B=$2
cd "$(dirname "$0")/../.."
for r in $(seq "${ROUNDS:-5}"); do
  for side in floor A B; do
    case $side in floor) t=floor-spin; bin=$A ;; A) t=churnfs-tmpfs; bin=$A ;; B) t=churnfs-tmpfs; bin=$B ;; esac
    st=$(mktemp -d /tmp/churnfs-bench.alt.XXXXXX)
    PATH="$bin:$PATH" CHURNFS_BIN="$bin/churnfs" bash targets/$t.sh up "$st" >/dev/null 2>&1 || { echo "up $t failed"; continue; }
    d="$st/mnt"; [ "$t" = churnfs-tmpfs ] && { mkdir -p "$d/bench"; d="$d/bench"; }
    res=$(PATH="$bin:$PATH" churnfs-bench w7 --dir "$d" --secs "${SECS:-1}" | grep -E 'fresh_missing_us|first_missing_us' | tr '\n' ' ')
    s=""
    [ "$t" = churnfs-tmpfs ] && s=$("$bin/churnfs" stats "$st/mnt" | grep -E '^kernel_negative_(invalidated|dir_flushes|dropped) ' | tr '\n' ' ')
    echo "round $r $side: $res| $s"
    PATH="$bin:$PATH" bash targets/$t.sh umount "$st" >/dev/null 2>&1; bash targets/$t.sh down "$st" >/dev/null 2>&1
  done
done
