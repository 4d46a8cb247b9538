#!/usr/bin/env bash
# churnfs with its store on a tmpfs and extended attributes off (-o xattr=0):
# the kernel then stops asking for security.capability before writes and
# truncates, as it does for passthrough_ll and JuiceFS by default.
. "$(dirname "$0")/lib.sh"
STORE_ON=tmpfs
CHURNFS_MOUNT_OPTS="${CHURNFS_MOUNT_OPTS:+$CHURNFS_MOUNT_OPTS }-o xattr=0"
. "$(dirname "$0")/churnfs-common.sh"
