#!/usr/bin/env bash
# stall.py on a fresh churnfs mount (target churnfs-tmpfs, options $OPTS) in MNT/bench:
#   bash stalls.sh BIN_DIR [SECS]   (BIN_DIR holds churnfs). Root only; unmounts what it mounts.
set -u
BIN=$(realpath "$1"); here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
st=$(mktemp -d /tmp/churnfs-bench.stall.XXXXXX)
PATH="$BIN:$PATH" CHURNFS_BIN="$BIN/churnfs" CHURNFS_MOUNT_OPTS="${OPTS:-}" bash targets/churnfs-tmpfs.sh up "$st" >/dev/null 2>&1 || { echo "up failed"; exit 1; }
mkdir -p "$st/mnt/bench"
python3 "$here/stall.py" "$st/mnt/bench" "${2:-5}" | tr '\n' ' '
"$BIN/churnfs" stats "$st/mnt" | grep -E '^kernel_negative_dir_flushes ' | tr '\n' ' '; echo
PATH="$BIN:$PATH" bash targets/churnfs-tmpfs.sh umount "$st" >/dev/null 2>&1; bash targets/churnfs-tmpfs.sh down "$st" >/dev/null 2>&1
