#!/usr/bin/env bash
# The W7 floor: churnfs-bench-floor, a FUSE server that answers at once.
. "$(dirname "$0")/lib.sh"
BIN=${FLOOR_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/churnfs-target}/release/churnfs-bench-floor}
case "$ACTION" in
  check)
    [ -x "$BIN" ] || die "$BIN missing (cargo build --release -p churnfs-bench)"
    echo "desc=churnfs-bench-floor: answers every request at once, zero TTLs"
    echo "version=fuser 0.18"
    ;;
  up)
    mkdir -p "$MNT"
    start_daemon "$BIN" "$MNT"
    wait_mounted
    echo "mnt=$MNT"
    echo "pid=$(daemon_pid)"
    ;;
  umount) fuse_umount ;;
  down) teardown ;;
  *) unknown_action ;;
esac
