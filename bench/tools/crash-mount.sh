#!/usr/bin/env bash
# Mount time after a crash, against the size of the journal fjall replays:
#   bench/tools/crash-mount.sh N [N ...]
# For each N: a fresh store on a tmpfs under /tmp, W1's crash variant with
# N open-unlinked files (the daemon killed with SIGKILL while they are held),
# the remount timed, the journal's size at the crash, the time until the
# orphans are freed, then an unmount and fsck. Prints one key=value line per
# N. Uses the release build; CHURNFS_MOUNT_OPTS adds mount options, W1_BYTES
# the bytes written into each file (default 0; past 2,048 each file holds a
# stored block, so the crash leaves data to reclaim). Root
# only; it unmounts what it mounts and kills only the daemon it started.
set -euo pipefail
: "${CARGO_TARGET_DIR:=$HOME/.cache/churnfs-target}"
BIN=$CARGO_TARGET_DIR/release/churnfs
BENCH=$CARGO_TARGET_DIR/release/churnfs-bench
[ $# -gt 0 ] || { echo "usage: $0 N [N ...]" >&2; exit 2; }
command -v fusermount3 >/dev/null ||
  { echo "$0: fusermount3 is missing (scripts/install-deps.sh installs it)" >&2; exit 2; }

w=$(mktemp -d /tmp/churnfs-crash.XXXXXX)
mkdir -p "$w/ram" "$w/mnt"
cleanup() {
  fusermount3 -u "$w/mnt" 2>/dev/null || true
  umount "$w/ram" 2>/dev/null || true
  rm -rf "$w"
}
trap cleanup EXIT

mount_store() {
  # shellcheck disable=SC2086
  "$BIN" mount "$w/ram/store" "$w/mnt" --background ${CHURNFS_MOUNT_OPTS:-} |
    sed -n 's/.*daemon pid \([0-9]*\).*/\1/p' >"$w/pid"
}

# The hooks W1 calls: kill (and note the journal's size), remount, reclaimed.
cat >"$w/kill.sh" <<EOF
pid=\$(cat "$w/pid")
kill -KILL "\$pid"
while [ -d "/proc/\$pid/fd" ]; do sleep 0.01; done
fusermount3 -u -z "$w/mnt"
du -cb "$w/ram/store/db/"*.jnl | tail -n 1 | cut -f 1 >"$w/journal"
EOF
cat >"$w/remount.sh" <<EOF
$(declare -f mount_store)
w=$w BIN=$BIN CHURNFS_MOUNT_OPTS="${CHURNFS_MOUNT_OPTS:-}" mount_store
EOF
cat >"$w/reclaimed.sh" <<EOF
s=\$("$BIN" stats "$w/mnt") || exit 1
[ "\$(echo "\$s" | awk '\$1 == "recovery_running" { print \$2 }')" = 0 ] &&
  [ "\$(echo "\$s" | awk '\$1 == "unlinked_inodes" { print \$2 }')" = 0 ]
EOF

for n in "$@"; do
  mount -t tmpfs -o size=8g churnfs-crash "$w/ram"
  "$BIN" mkfs "$w/ram/store" >/dev/null
  w=$w mount_store
  mkdir "$w/mnt/b"
  out=$("$BENCH" w1 --dir "$w/mnt/b" --n "$n" --crash --bytes "${W1_BYTES:-0}" \
    --kill-cmd "bash $w/kill.sh" --remount-cmd "bash $w/remount.sh" \
    --reclaimed-cmd "bash $w/reclaimed.sh")
  remount=$(echo "$out" | sed -n 's/^crash_remount_s=//p')
  reclaim=$(echo "$out" | sed -n 's/^crash_reclaim_s=//p')
  pid=$(cat "$w/pid")
  fusermount3 -u "$w/mnt"
  while [ -d "/proc/$pid/fd" ]; do sleep 0.01; done
  fsck=$("$BIN" fsck "$w/ram/store" 2>&1 | tail -n 1)
  case "$fsck" in *": clean "*) fsck=clean ;; *) fsck="NOT CLEAN: $fsck" ;; esac
  echo "n=$n journal_bytes=$(cat "$w/journal") remount_s=$remount reclaim_s=$reclaim fsck=$fsck"
  umount "$w/ram"
done
