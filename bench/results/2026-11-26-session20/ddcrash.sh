#!/usr/bin/env bash
# ddcrash.sh BIN_DIR MIB: a fresh store on a tmpfs, dd MIB MiB of zeros into
# one file, kill -9 the daemon, then time the remount (fjall replays its
# journal). BIN_DIR holds a churnfs binary. Root only; unmounts what it mounts.
set -u
BIN=$1; MIB=$2
w=$(mktemp -d /tmp/churnfs-dd.XXXXXX); mkdir -p "$w/ram" "$w/mnt"
mount -t tmpfs -o size=8g churnfs-dd "$w/ram"
"$BIN/churnfs" mkfs "$w/ram/store" >/dev/null
out=$("$BIN/churnfs" mount "$w/ram/store" "$w/mnt" --background)
pid=$(echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
dd if=/dev/zero of=$w/mnt/big bs=1M count=$MIB status=none
sleep ${WAIT:-0}
kill -KILL $pid; while [ -d /proc/$pid/fd ]; do sleep 0.01; done
fusermount3 -u -z $w/mnt
j=$(du -cb $w/ram/store/db/*.jnl | tail -1 | cut -f1)
s=$(date +%s.%N)
out=$("$BIN/churnfs" mount "$w/ram/store" "$w/mnt" --background)
e=$(date +%s.%N)
pid=$(echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
echo "$BIN mib=$MIB journal=$j remount_s=$(echo "$e - $s" | bc) size=$(stat -c %s $w/mnt/big)"
fusermount3 -u $w/mnt; while kill -0 $pid 2>/dev/null; do sleep 0.1; done
umount $w/ram; rm -rf $w
