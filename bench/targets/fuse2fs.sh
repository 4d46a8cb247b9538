#!/usr/bin/env bash
# fuse2fs (e2fsprogs' FUSE ext4) over an ext4 image that lives on a tmpfs.
. "$(dirname "$0")/lib.sh"
start() { start_daemon fuse2fs "$RAM/img" "$MNT" -f; }
case "$ACTION" in
  check)
    command -v fuse2fs >/dev/null || die "fuse2fs missing (package fuse2fs; bench/install.sh)"
    echo "desc=fuse2fs over a $IMG_SIZE ext4 image on tmpfs"
    echo "version=$(dpkg-query -W -f='fuse2fs ${Version}' fuse2fs 2>/dev/null || echo fuse2fs)"
    ;;
  up)
    mkdir -p "$MNT"
    image_up ext4
    start
    wait_mounted
    echo "mnt=$MNT"
    echo "pid=$(daemon_pid)"
    ;;
  umount) fuse_umount ;;
  remount)
    unmount_for_remount
    start
    wait_mounted
    echo "pid=$(daemon_pid)"
    ;;
  down) teardown ;;
  *) unknown_action ;;
esac
