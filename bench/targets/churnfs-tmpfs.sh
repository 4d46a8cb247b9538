#!/usr/bin/env bash
# churnfs with its store on a tmpfs.
. "$(dirname "$0")/lib.sh"
STORE_ON=tmpfs
. "$(dirname "$0")/churnfs-common.sh"
