#!/usr/bin/env bash
# w3pin.sh ROUNDS PROCS: pins churnfs-dev0 to CPU 0 and dev1 to CPU 1 from outside, then w3
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s27XXXX)
bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
D=$(cat $S/pid)
stat $S/mnt/bench >/dev/null
for t in /proc/$D/task/*; do c=$(cat $t/comm); case $c in churnfs-dev0) taskset -p -c 0 $(basename $t) >/dev/null;; churnfs-dev1) taskset -p -c 1 $(basename $t) >/dev/null;; esac; done
$B/churnfs-bench w3 --dir $S/mnt/bench --rounds $1 --procs $2 | grep -o "p[124]_truncates_per_s=[0-9]*" | tr '\n' ' '; echo
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
