#!/usr/bin/env bash
# passthrough_ll with extended attributes on (-o xattr): it then answers
# the kernel's getxattr(security.capability) before writes and truncates, as
# churnfs does with its default xattr=1 (passthrough_ll's default answers
# ENOSYS, after which the kernel never asks again).
PASSTHROUGH_OPTS=",xattr"
PASSTHROUGH_DESC="libfuse passthrough_ll with -o xattr over tmpfs"
. "$(dirname "$0")/passthrough_ll.sh"
