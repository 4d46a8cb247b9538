#!/usr/bin/env bash
# The W7 floor: churnfs-bench-floor, a FUSE server that answers at once.
# floor-spin.sh sets FLOOR_SPIN_US (microseconds it polls after a reply);
# FLOOR_FILES=1 lets files be made, written and truncated in its root (for
# W3 outside the suite; two serving threads).
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
    if [ -n "${FLOOR_FILES:-}" ]; then
      start_daemon "$BIN" "$MNT" "${FLOOR_SPIN_US:-0}" files
    else
      start_daemon "$BIN" "$MNT" ${FLOOR_SPIN_US:+"$FLOOR_SPIN_US"}
    fi
    wait_mounted
    echo "mnt=$MNT"
    echo "pid=$(daemon_pid)"
    ;;
  umount) fuse_umount ;;
  down) teardown ;;
  *) unknown_action ;;
esac
