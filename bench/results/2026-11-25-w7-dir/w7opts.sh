#!/usr/bin/env bash
# W7 (--secs $SECS, default 1) on fresh mounts: floor-spin, then churnfs-tmpfs with each of the
# mount option sets in OPTSETS ("|"-separated), ROUNDS times. Root only; unmounts what it mounts.
set -u
cd "$(dirname "$0")/../.."
export PATH=${CARGO_TARGET_DIR:-$HOME/.cache/churnfs-target}/release:$PATH
IFS='|' read -ra sets <<< "$OPTSETS"
for r in $(seq ${ROUNDS:-3}); do
  for o in floor "${sets[@]}"; do
    t=churnfs-tmpfs; [ "$o" = floor ] && t=floor-spin
    st=$(mktemp -d /tmp/churnfs-bench.alt.XXXXXX)
    CHURNFS_MOUNT_OPTS="$o" bash targets/$t.sh up "$st" >/dev/null 2>&1 || { echo "up $t failed"; continue; }
    d="$st/mnt"; [ "$t" = churnfs-tmpfs ] && { mkdir -p "$d/bench"; d="$d/bench"; }
    res=$(churnfs-bench w7 --dir "$d" --secs ${SECS:-1} | grep -E 'fresh_missing_us|first_missing_us' | tr '\n' ' ')
    s=""; [ "$t" = churnfs-tmpfs ] && s=$(churnfs stats "$st/mnt" | grep -E '^kernel_negative_(dir_flushes|invalidated) ' | tr '\n' ' ')
    echo "round $r [$o]: $res| $s"
    bash targets/$t.sh umount "$st" >/dev/null 2>&1; bash targets/$t.sh down "$st" >/dev/null 2>&1
  done
done
