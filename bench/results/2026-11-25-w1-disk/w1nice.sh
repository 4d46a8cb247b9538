#!/usr/bin/env bash
# W1 on churnfs-disk, fresh mount per run; with nice=10 the daemon's background threads
# (fjall:worker, churnfs-commit, churnfs-reclaim) are reniced first. NS: W1 levels.
set -u
cd "$(dirname "$0")/../.."
export PATH=${CARGO_TARGET_DIR:-$HOME/.cache/churnfs-target}/release:$PATH
for r in $(seq ${ROUNDS:-2}); do
  for n in 0 10; do
    st=$(mktemp -d /tmp/churnfs-bench.alt.XXXXXX)
    bash targets/churnfs-disk.sh up "$st" >/dev/null 2>&1 || { echo "up failed"; continue; }
    pid=$(cat $st/pid)
    if [ $n != 0 ]; then for tk in /proc/$pid/task/*; do case "$(cat $tk/comm)" in fjall:worker|churnfs-commit|churnfs-reclaim) renice -n $n -p ${tk##*/} >/dev/null;; esac; done; fi
    mkdir -p $st/mnt/bench
    res=$(churnfs-bench w1 --dir $st/mnt/bench --n ${NS:-1000,200000} --repeat-to 200000 | grep -E "close_us|ratio" | tr '\n' ' ')
    echo "round $r nice=$n: $res"
    bash targets/churnfs-disk.sh umount "$st" >/dev/null 2>&1; bash targets/churnfs-disk.sh down "$st" >/dev/null 2>&1
  done
done
