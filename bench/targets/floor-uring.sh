#!/usr/bin/env bash
# The W7 floor over FUSE-over-io_uring: churnfs-bench-floor-uring (the same
# answers as churnfs-bench-floor, written against the kernel protocol),
# polling its completion queues 50 µs after its replies as churnfs does.
# Turns the fuse module's enable_uring on at `up` and puts it back at
# `down`. FLOOR_FILES=1 lets files be made in its root (W3 outside the suite).
. "$(dirname "$0")/lib.sh"
BIN=${FLOOR_URING_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/churnfs-target}/release/churnfs-bench-floor-uring}
PARAM=/sys/module/fuse/parameters/enable_uring
case "$ACTION" in
  check)
    [ -x "$BIN" ] || die "$BIN missing (cargo build --release -p churnfs-bench)"
    [ -w "$PARAM" ] || die "$PARAM missing or read-only: no FUSE over io_uring here (Linux 6.14+, root)"
    echo "desc=churnfs-bench-floor-uring: answers every request at once over io_uring, polling 50 µs, zero TTLs"
    echo "version=hand-written, FUSE ABI 7.40 with the 6.18 ring layout"
    ;;
  up)
    mkdir -p "$MNT"
    [ -s "$STATE/enable_uring.old" ] || cat "$PARAM" >"$STATE/enable_uring.old"
    echo Y >"$PARAM"
    start_daemon "$BIN" "$MNT" spin=50 ${FLOOR_FILES:+files}
    wait_mounted
    echo "mnt=$MNT"
    echo "pid=$(daemon_pid)"
    ;;
  umount) fuse_umount ;;
  down)
    old=$(cat "$STATE/enable_uring.old" 2>/dev/null || true)
    teardown
    [ -z "$old" ] || echo "$old" >"$PARAM"
    ;;
  *) unknown_action ;;
esac
