#!/usr/bin/env bash
# ext4 on a loop device whose image lives on a tmpfs (a RAM disk).
. "$(dirname "$0")/lib.sh"
case "$ACTION" in
  check)
    command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 missing (package e2fsprogs; bench/install.sh)"
    echo "desc=ext4 on a $IMG_SIZE loop image on tmpfs"
    echo "version=kernel $(uname -r), $(dpkg-query -W -f='${Package} ${Version}' e2fsprogs 2>/dev/null || true)"
    ;;
  up)
    mkdir -p "$MNT"
    image_up ext4
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
