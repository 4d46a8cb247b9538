#!/usr/bin/env bash
# churnfs with its store on a tmpfs and extended attributes off (-o xattr=0):
# the kernel's getxattr(security.capability) before a new file's first write
# and before every truncate goes away (the first xattr call answers ENOSYS).
# The like-for-like peer is passthrough_ll; churnfs-tmpfs (xattrs on, the
# default) is passthrough_ll-xattr's.
. "$(dirname "$0")/lib.sh"
STORE_ON=tmpfs
CHURNFS_MOUNT_OPTS="${CHURNFS_MOUNT_OPTS:+$CHURNFS_MOUNT_OPTS }-o xattr=0"
. "$(dirname "$0")/churnfs-common.sh"
