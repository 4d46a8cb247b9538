#!/usr/bin/env bash
# The W7 floor: churnfs-bench-floor, a FUSE server that answers at once.
# floor-spin.sh sets FLOOR_SPIN_US (microseconds it polls after a reply).
. "$(dirname "$0")/lib.sh"
BIN=${FLOOR_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/churnfs-target}/release/churnfs-bench-floor}
case "$ACTION" in
  check)
    [ -x "$BIN" ] || die "$BIN missing (cargo build --release -p churnfs-bench)"
    echo "desc=${FLOOR_DESC:-churnfs-bench-floor: answers every request at once, zero TTLs}"
    echo "version=fuser 0.18"
    ;;
  up)
    mkdir -p "$MNT"
    start_daemon "$BIN" "$MNT" ${FLOOR_SPIN_US:+"$FLOOR_SPIN_US"}
    wait_mounted
    echo "mnt=$MNT"
    echo "pid=$(daemon_pid)"
    ;;
  umount) fuse_umount ;;
  down) teardown ;;
  *) unknown_action ;;
esac
