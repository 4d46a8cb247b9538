#!/bin/bash
# usage: latrun.sh OPTS N  (root; mounts under /tmp and unmounts)
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/lat.XXXX); mkdir -p $S/store $S/mnt
$B/churnfs mkfs $S/store >/dev/null
$B/churnfs mount ${1:+-o $1} $S/store $S/mnt --background >/dev/null 2>&1
python3 "$(dirname "$0")/lat.py" $S/mnt/bench 20000 >/dev/null
echo -n "[$1] "; python3 "$(dirname "$0")/lat.py" $S/mnt/bench2 $2
$B/churnfs stats $S/mnt | grep -E "^kernel_negative_dir_flushes" | tr '\n' ' '; echo
fusermount3 -u $S/mnt; sleep 0.3; rm -rf $S
