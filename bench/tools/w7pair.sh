#!/usr/bin/env bash
# W7's first misses, churnfs against the FUSE floor in one run:
#   bench/tools/w7pair.sh BIN_DIR [ROUNDS]
# BIN_DIR holds churnfs, churnfs-bench and churnfs-bench-floor. Each round
# mounts the floor (target floor-spin) and churnfs (target churnfs-tmpfs,
# mount options $OPTS) side by side, fresh, and runs `churnfs-bench w7-pair`
# (alternating slices of new missing names in MNT/$SUBDIR, default bench, and in the floor's
# mount; $SECS seconds in all, default 20), then prints its figures and the
# directory drops churnfs counted. Root only; unmounts what it mounts.
set -u
BIN=$(realpath "$1"); R=${2:-3}
cd "$(dirname "$0")/.."
for round in $(seq "$R"); do
  f=$(mktemp -d /tmp/churnfs-bench.pair-f.XXXXXX); c=$(mktemp -d /tmp/churnfs-bench.pair-c.XXXXXX)
  FLOOR_BIN="$BIN/churnfs-bench-floor" bash targets/floor-spin.sh up "$f" >/dev/null 2>&1 || { echo "floor up failed"; exit 1; }
  if ! PATH="$BIN:$PATH" CHURNFS_BIN="$BIN/churnfs" CHURNFS_MOUNT_OPTS="${OPTS:-}" \
      bash targets/churnfs-tmpfs.sh up "$c" >/dev/null 2>&1; then
    echo "churnfs up failed (options: ${OPTS:-none}; they go to \`churnfs mount\` as written, so \`-o k=v\`)"
    bash targets/churnfs-tmpfs.sh down "$c" >/dev/null 2>&1
    bash targets/floor-spin.sh umount "$f"; bash targets/floor-spin.sh down "$f"; exit 1
  fi
  d="$c/mnt/${SUBDIR-bench}"; mkdir -p "$d"
  r=$("$BIN/churnfs-bench" w7-pair --dir "$d" --against "$f/mnt" --secs "${SECS:-20}" | tr '\n' ' ')
  s=$("$BIN/churnfs" stats "$c/mnt" | grep -E '^kernel_negative_(dir_flushes|invalidated|dropped) ' | tr '\n' ' ')
  echo "round $round [${OPTS:-}]: $r| $s"
  PATH="$BIN:$PATH" bash targets/churnfs-tmpfs.sh umount "$c" >/dev/null 2>&1; bash targets/churnfs-tmpfs.sh down "$c" >/dev/null 2>&1
  bash targets/floor-spin.sh umount "$f" >/dev/null 2>&1; bash targets/floor-spin.sh down "$f" >/dev/null 2>&1
done
