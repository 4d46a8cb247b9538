#!/usr/bin/env bash
# churnfs in shared mode: metadata on a 3-member etcd cluster, data on a
# SeaweedFS S3 server, both on 127.0.0.1 and started here; one mount.
. "$(dirname "$0")/lib.sh"
BIN=${CHURNFS_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/churnfs-target}/release/churnfs}

volume() { echo "etcd://$(cat "$STATE/etcd.eps")/bench"; }

# start [2]: the first mount, or W8's second.
start() {
  # shellcheck disable=SC2086
  churnfs_background "$STATE/pid${1:-}" "$(volume)" "$STATE/mnt${1:-}" \
    -o "cache_dir=$STATE/cache${1:-}" ${CHURNFS_MOUNT_OPTS:-}
}

case "$ACTION" in
  check)
    [ -x "$BIN" ] || die "$BIN missing (cargo build --release -p churnfs)"
    services_check
    echo "desc=churnfs shared mode, 3-member etcd on 127.0.0.1 + SeaweedFS S3${CHURNFS_MOUNT_OPTS:+, $CHURNFS_MOUNT_OPTS}$(services_note)"
    echo "version=$("$BIN" --version 2>/dev/null | head -n 1); etcd $(etcd --version | awk 'NR == 1 { print $3 }'); weed $(weed version 2>&1 | awk '{ print $3 }')"
    ;;
  up)
    mkdir -p "$MNT"
    services_up
    "$BIN" mkfs "$(volume)" --data "s3://churnfs/bench?endpoint=$(cat "$STATE/s3.url")" >/dev/null
    start
    echo "mnt=$MNT"
    echo "pid=$(daemon_pid)"
    ;;
  umount) fuse_umount ;;
  mount2) second_up ;;
  umount2) second_down ;;
  remount)
    unmount_for_remount
    start
    echo "pid=$(daemon_pid)"
    ;;
  down) shared_teardown ;;
  *) unknown_action ;;
esac
