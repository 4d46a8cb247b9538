#!/usr/bin/env bash
# The W7 floor with the request-side wake-up avoided: churnfs-bench-floor
# polling /dev/fuse for up to 50 µs after each reply (as churnfs's lone
# reader does), so that its first-miss cost compares with churnfs's like for like.
FLOOR_SPIN_US=50
FLOOR_DESC="churnfs-bench-floor polling 50 µs after each reply, zero TTLs"
. "$(dirname "$0")/floor.sh"
