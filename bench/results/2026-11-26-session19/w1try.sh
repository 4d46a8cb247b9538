#!/bin/bash
# usage: w1try.sh OPTS  (root; a tmpfs and a mount under /tmp, both removed)
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/w1try.XXXX); mkdir -p $S/ram $S/mnt
mount -t tmpfs -o size=8g w1try $S/ram
$B/churnfs mkfs $S/ram/store >/dev/null
$B/churnfs mount ${1:+-o $1} $S/ram/store $S/mnt --background >/dev/null 2>&1
mkdir $S/mnt/bench
out=$($B/churnfs-bench w1 --dir $S/mnt/bench --n 1000,200000 --repeat-to 200000 2>&1)
echo "[$1] $(echo "$out" | grep -E "close_us|ratio" | tr '\n' ' ')"
fusermount3 -u $S/mnt; sleep 1; umount $S/ram; rm -rf $S
