#!/usr/bin/env bash
# churnfs-bench w7-pair in a directory made after a remount of a store that
# holds N files in another directory: bash hist.sh BIN_DIR [N] (default
# 300,000). BIN_DIR holds churnfs, churnfs-bench, churnfs-bench-floor.
# Root only; unmounts what it mounts.
set -u
BIN=$(realpath "$1"); N=${2:-300000}
cd "$(dirname "$0")/../.."
w=$(mktemp -d /tmp/churnfs-bench.hist.XXXXXX); mkdir -p $w/ram $w/mnt; mount -t tmpfs -o size=8g hist $w/ram
$BIN/churnfs mkfs $w/ram/store >/dev/null
$BIN/churnfs mount $w/ram/store $w/mnt --background >/dev/null
mkdir $w/mnt/big
python3 -c "
import os,sys
d=sys.argv[1]
for i in range(int(sys.argv[2])):
    os.close(os.open(f'{d}/file-{i:07d}', os.O_CREAT|os.O_WRONLY, 0o644))
" $w/mnt/big $N
fusermount3 -u $w/mnt; sleep 1
$BIN/churnfs mount $w/ram/store $w/mnt --background >/dev/null
mkdir $w/mnt/bench
f=$(mktemp -d /tmp/churnfs-bench.pair-f.XXXXXX)
FLOOR_BIN="$BIN/churnfs-bench-floor" bash targets/floor-spin.sh up "$f" >/dev/null 2>&1
echo "$(basename $BIN): $($BIN/churnfs-bench w7-pair --dir $w/mnt/bench --against $f/mnt --secs 20 | tr '\n' ' ') | $($BIN/churnfs stats $w/mnt | grep -E '^(store_gets|dcache_complete_answers) ' | tr '\n' ' ')"
fusermount3 -u $w/mnt; bash targets/floor-spin.sh umount "$f" >/dev/null 2>&1; bash targets/floor-spin.sh down "$f" >/dev/null 2>&1
sleep 1; umount $w/ram; rm -rf $w
