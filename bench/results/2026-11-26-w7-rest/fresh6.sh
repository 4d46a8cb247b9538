#!/bin/bash
# fresh6.sh TARGET: mounts TARGET (bench/targets), then from fresh6.py: four rounds of
# 1,000 new missing names then 3,000 more, after 1 s spent running flat out
# ("cpu", no system calls) or asleep ("sleep"); prints the median stat() per round.
T=$1
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
ST=$(mktemp -d /tmp/churnfs-bench.XXXX)
bash targets/$T.sh up $ST > $ST/up.out
D=$ST/mnt; [ "${T#churnfs}" != "$T" ] && { mkdir $ST/mnt/bench; D=$ST/mnt/bench; }
python3 "$HERE/fresh6.py" $D
bash targets/$T.sh umount $ST >/dev/null; bash targets/$T.sh down $ST >/dev/null; rm -rf $ST
