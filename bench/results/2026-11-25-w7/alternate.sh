#!/usr/bin/env bash
# alternate floor-spin and churnfs-tmpfs (with CHURNFS_OPTS) fresh mounts, w7 --secs 1
set -u
cd /work/main/bench
export PATH=$HOME/.cache/churnfs-target/release:$PATH
for r in $(seq ${ROUNDS:-3}); do
  for t in floor-spin churnfs-tmpfs; do
    st=$(mktemp -d /tmp/churnfs-bench.alt.XXXXXX)
    bash targets/$t.sh up "$st" >/dev/null 2>&1 || { echo "up $t failed"; continue; }
    d="$st/mnt"; [ "$t" = churnfs-tmpfs ] && { mkdir -p "$d/bench"; d="$d/bench"; }
    res=$(churnfs-bench w7 --dir "$d" --secs 1 | grep -E 'fresh_missing_us|first_missing_us' | tr '\n' ' ')
    echo "round $r $t: $res"
    bash targets/$t.sh umount "$st" >/dev/null 2>&1; bash targets/$t.sh down "$st" >/dev/null 2>&1
  done
done
