#!/usr/bin/env bash
# churnfs with its store on a tmpfs, served over FUSE-over-io_uring
# (-o uring=1; Linux 6.14+). The kernel offers it only while the fuse
# module's enable_uring parameter is on: `up` turns it on and `down` puts
# back what it was (servers that do not ask for the ring are not affected).
# `up` fails unless requests really arrive on the ring.
. "$(dirname "$0")/lib.sh"
STORE_ON=tmpfs
CHURNFS_MOUNT_OPTS="${CHURNFS_MOUNT_OPTS:+$CHURNFS_MOUNT_OPTS }-o uring=1"
PARAM=/sys/module/fuse/parameters/enable_uring
case "$ACTION" in
  check) [ -w "$PARAM" ] || die "$PARAM missing or read-only: no FUSE over io_uring here (Linux 6.14+, root)" ;;
  up | remount)
    [ -s "$STATE/enable_uring.old" ] || cat "$PARAM" >"$STATE/enable_uring.old"
    echo Y >"$PARAM"
    ;;
  down) old=$(cat "$STATE/enable_uring.old" 2>/dev/null || true) ;;
esac
. "$(dirname "$0")/churnfs-common.sh"
case "$ACTION" in
  up)
    stat "$MNT" >/dev/null
    served=$("$BIN" stats "$MNT" | awk '$1 == "ring_requests" { print $2 }')
    [ "${served:-0}" -gt 0 ] || die "the mount does not serve over io_uring (ring_requests ${served:-0})"
    ;;
  down) [ -z "$old" ] || echo "$old" >"$PARAM" ;;
esac
