#!/usr/bin/env bash
# The inodes the kernel holds for a mount, with and without their bound
# (kernel_inodes_max, FUSE_NOTIFY_PRUNE): creates FILES empty files in
# directories of 10,000, lists them all (LIST: `ls -lR`, or `find -ls`), then reads the
# mount's stats, the daemon's RSS and the kernel's fuse_inode and dentry
# slabs. Each setting runs RUNS times, alternating, on fresh stores under
# /tmp; prints one Markdown row per run. Needs root (drop_caches, slabinfo)
# and the release build (cargo build --release -p churnfs).
#
#   bench/tools/kernel-inodes.sh [FILES=300000] [RUNS=2] [LIST=ls|find]
set -euo pipefail
FILES=${1:-300000}
RUNS=${2:-2}
LIST=${3:-ls}
B=${CHURNFS:-${CARGO_TARGET_DIR:-$HOME/.cache/churnfs-target}/release/churnfs}
DIRS=$(( (FILES + 9999) / 10000 ))

one() {
  local opts=$1 s m out pid t0 t1 t2
  s=$(mktemp -d /tmp/churnfs-kin.XXXXXX)
  m=$(mktemp -d /tmp/churnfs-kinm.XXXXXX)
  "$B" mkfs "$s/store" >/dev/null
  out=$("$B" mount "$s/store" "$m" --background -o "$opts")
  pid=$(echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
  t0=$(date +%s.%N)
  for d in $(seq 1 "$DIRS"); do
    mkdir "$m/d$d"
    (cd "$m/d$d" && seq 1 10000 | xargs touch)
  done
  t1=$(date +%s.%N)
  if [ "$LIST" = find ]; then find "$m" -ls >/dev/null; else ls -lR "$m" >/dev/null; fi
  t2=$(date +%s.%N)
  sleep 2
  local rss known prunes fi de
  rss=$(awk '/VmRSS/ {print int($2/1024)}' "/proc/$pid/status")
  known=$("$B" stats "$m" | awk '$1=="kernel_known_inodes" {print $2}')
  prunes=$("$B" stats "$m" | awk '$1=="kernel_prune_inodes" {print $2}')
  fi=$(awk '$1=="fuse_inode" {print $2}' /proc/slabinfo)
  de=$(awk '$1=="dentry" {print $2}' /proc/slabinfo)
  printf '| %s | %.1f | %.1f | %s | %s | %s | %s | %s |\n' "$opts" \
    "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)" "$known" "$prunes" "$fi" "$de" "$rss"
  umount "$m"
  rm -rf "$s" "$m"
}

echo "| options | create s | $LIST s | kernel_known_inodes | inodes pruned | fuse_inode slab | dentry slab | daemon RSS MiB |"
echo "|---|---|---|---|---|---|---|---|"
for _ in $(seq 1 "$RUNS"); do
  for o in kernel_inodes_max=100000 kernel_inodes_max=0; do
    sync
    echo 3 > /proc/sys/vm/drop_caches
    one "$o"
  done
done
