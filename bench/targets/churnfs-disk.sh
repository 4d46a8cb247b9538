#!/usr/bin/env bash
# churnfs with its store on the machine's disk ($BENCH_DISK_DIR, default /var/tmp).
. "$(dirname "$0")/lib.sh"
STORE_ON=disk
. "$(dirname "$0")/churnfs-common.sh"
