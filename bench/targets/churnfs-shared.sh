#!/usr/bin/env bash
# churnfs in shared mode: metadata on a 3-member etcd cluster, data on a
# SeaweedFS S3 server, both on 127.0.0.1 and started here; one mount.
. "$(dirname "$0")/lib.sh"
BIN=${CHURNFS_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/churnfs-target}/release/churnfs}

volume() { echo "etcd://$(cat "$STATE/etcd.eps")/bench"; }

start() {
  local out
  # shellcheck disable=SC2086
  out=$("$BIN" mount "$(volume)" "$MNT" --background -o "cache_dir=$STATE/cache" ${CHURNFS_MOUNT_OPTS:-}) ||
    die "churnfs mount failed: $out"
  echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p' >"$STATE/pid"
  [ -s "$STATE/pid" ] || die "no daemon pid in: $out"
}

case "$ACTION" in
  check)
    [ -x "$BIN" ] || die "$BIN missing (cargo build --release -p churnfs)"
    services_check
    echo "desc=churnfs shared mode, 3-member etcd on 127.0.0.1 + SeaweedFS S3${CHURNFS_MOUNT_OPTS:+, $CHURNFS_MOUNT_OPTS}"
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
  mount2)
    mkdir -p "$MNT2"
    # shellcheck disable=SC2086
    out=$("$BIN" mount "$(volume)" "$MNT2" --background -o "cache_dir=$STATE/cache2" ${CHURNFS_MOUNT_OPTS:-}) ||
      die "second churnfs mount failed: $out"
    echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p' >"$STATE/pid2"
    echo "mnt2=$MNT2"
    ;;
  umount2) second_down ;;
  remount)
    if mountpoint -q "$MNT"; then
      fuse_umount
    fi
    wait_daemon_gone 60 || die "daemon did not exit after unmount"
    start
    echo "pid=$(daemon_pid)"
    ;;
  down)
    second_down
    unmount_any "$MNT"
    stop_daemon
    services_down
    teardown
    ;;
  *) unknown_action ;;
esac
