#!/usr/bin/env bash
# churnfs with its store on a tmpfs and extended attributes on (-o xattr=1):
# the kernel then asks for security.capability before a new file's first
# write and before every truncate. The like-for-like peer is
# passthrough_ll-xattr.
. "$(dirname "$0")/lib.sh"
STORE_ON=tmpfs
CHURNFS_MOUNT_OPTS="${CHURNFS_MOUNT_OPTS:+$CHURNFS_MOUNT_OPTS }-o xattr=1"
. "$(dirname "$0")/churnfs-common.sh"
