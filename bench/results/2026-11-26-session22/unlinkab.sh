#!/usr/bin/env bash
# A/B of unlinksmall.py (next to this script; /tmp/s22 when it ran): bash unlinkab.sh BIN_A BIN_B ROUNDS N SIZE
set -u
A=$1; B=$2; R=$3; N=$4; SZ=$5
for r in $(seq "$R"); do
  for T in "$A" "$B"; do
    w=$(mktemp -d /tmp/churnfs-ub.XXXXXX); mkdir -p $w/ram $w/mnt
    mount -t tmpfs -o size=8g s22ub $w/ram
    "$T/churnfs" mkfs $w/ram/store >/dev/null
    "$T/churnfs" mount $w/ram/store $w/mnt --background >/dev/null
    echo "round $r [$T]: $(CHURNFS=$T/churnfs python3 "$(dirname "$0")/unlinksmall.py" $w/mnt/q $N $SZ $w/mnt)"
    fusermount3 -u $w/mnt; sleep 1; umount $w/ram; rm -rf $w
  done
done
