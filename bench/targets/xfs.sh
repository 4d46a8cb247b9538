#!/usr/bin/env bash
# xfs on a loop device whose image lives on a tmpfs (a RAM disk).
. "$(dirname "$0")/lib.sh"
case "$ACTION" in
  check)
    command -v mkfs.xfs >/dev/null || die "mkfs.xfs missing (package xfsprogs; bench/install.sh)"
    echo "desc=xfs on a $IMG_SIZE loop image on tmpfs"
    echo "version=kernel $(uname -r), $(dpkg-query -W -f='${Package} ${Version}' xfsprogs 2>/dev/null || true)"
    ;;
  up)
    mkdir -p "$MNT"
    image_up xfs
    mount "$(loop_up)" "$MNT"
    echo "mnt=$MNT"
    ;;
  umount) umount "$MNT" ;;
  remount)
    umount "$MNT"
    mount "$(cat "$STATE/loopdev")" "$MNT"
    ;;
  down) teardown ;;
  *) unknown_action ;;
esac
