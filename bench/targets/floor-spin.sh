#!/usr/bin/env bash
# The W7 floor with the request-side wake-up avoided: churnfs-bench-floor
# polling /dev/fuse for up to 50 µs after each reply (churnfs's default
# spin_us), so that its first-miss cost compares with churnfs's like for like.
. "$(dirname "$0")/lib.sh"
BIN=${FLOOR_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/churnfs-target}/release/churnfs-bench-floor}
case "$ACTION" in
  check)
    [ -x "$BIN" ] || die "$BIN missing (cargo build --release -p churnfs-bench)"
    echo "desc=churnfs-bench-floor polling 50 µs after each reply, zero TTLs"
    echo "version=fuser 0.18"
    ;;
  up)
    mkdir -p "$MNT"
    start_daemon "$BIN" "$MNT" 50
    wait_mounted
    echo "mnt=$MNT"
    echo "pid=$(daemon_pid)"
    ;;
  umount) fuse_umount ;;
  down) teardown ;;
  *) unknown_action ;;
esac
