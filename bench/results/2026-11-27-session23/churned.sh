#!/usr/bin/env bash
# churned.sh BIN ITERS ROUNDS N: churns a mount with ITERS cycles of W2, then
# alternates N-cycle W2 runs on it and on fresh mounts, ROUNDS times.
set -u
BIN=$1; IT=$2; R=$3; N=$4
mountfs() { # dir -> prints daemon pid
  mkdir -p "$1/ram" "$1/mnt"; mount -t tmpfs -o size=8g churnfs-exp "$1/ram"
  "$BIN/churnfs" mkfs "$1/ram/store" >/dev/null
  "$BIN/churnfs" mount "$1/ram/store" "$1/mnt" --background | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p'
}
unmountfs() { fusermount3 -u "$1/mnt"; for _ in $(seq 100); do kill -0 "$2" 2>/dev/null || break; sleep 0.1; done; umount "$1/ram"; rm -rf "$1"; }
A=$(mktemp -d /tmp/churnfs-exp.XXXXXX); pa=$(mountfs "$A"); mkdir "$A/mnt/b"
echo "churn: $(cd "$A/mnt/b" && "$BIN/churnfs-bench" w2 --dir . --iters "$IT" 2>&1 | grep -E '^(rate|last_over_first|tenth[0-9]+|rss_kb_added_after_warm|neg_dentries_added)=' | tr '\n' ' ')"
for r in $(seq "$R"); do
  B=$(mktemp -d /tmp/churnfs-exp.XXXXXX); pb=$(mountfs "$B"); mkdir "$B/mnt/b"
  echo "round $r fresh:   $(cd "$B/mnt/b" && "$BIN/churnfs-bench" w2 --dir . --iters "$N" 2>&1 | grep -E '^rate=' )"
  unmountfs "$B" "$pb"
  mkdir "$A/mnt/c$r"
  echo "round $r churned: $(cd "$A/mnt/c$r" && "$BIN/churnfs-bench" w2 --dir . --iters "$N" 2>&1 | grep -E '^rate=' )"
done
"$BIN/churnfs" stats "$A/mnt" | grep -E '^(commits|icache_inodes|dcache_positive|dcache_negative|kernel_negative_tracked|kernel_negative_invalidated|store_gets|unlinked_unstored) ' | tr '\n' ' '; echo
grep VmRSS /proc/$pa/status
start=$(date +%s.%N); unmountfs "$A" "$pa"; echo "umount+teardown s: $(echo "$(date +%s.%N) - $start" | bc)"
