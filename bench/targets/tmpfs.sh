#!/usr/bin/env bash
# tmpfs: the kernel's memory filesystem.
. "$(dirname "$0")/lib.sh"
case "$ACTION" in
  check)
    echo "desc=tmpfs (size ${BENCH_RAM_SIZE:-12G})"
    echo "version=kernel $(uname -r)"
    ;;
  up)
    mkdir -p "$MNT"
    mount -t tmpfs -o "size=${BENCH_RAM_SIZE:-12G}" churnfs-bench-tmpfs "$MNT"
    echo "mnt=$MNT"
    ;;
  umount) umount "$MNT" ;;
  remount)
    # Unmounting a tmpfs throws its files away: only remount in place.
    mount -o remount "$MNT"
    echo "note=tmpfs loses its files when unmounted: 'after remount' is after mount -o remount"
    ;;
  down) teardown ;;
  *) unknown_action ;;
esac
