#!/usr/bin/env bash
# W2 on a fresh churnfs mount with and without SCHED_IDLE busy loops on the machine.
# idlespin.sh BIN ROUNDS ITERS NSPIN
set -u
BIN=$1; R=$2; N=$3; NS=${4:-1}
for round in $(seq "$R"); do
  for side in plain spin; do
    w=$(mktemp -d /tmp/churnfs-exp.XXXXXX); mkdir -p "$w/ram" "$w/mnt"
    mount -t tmpfs -o size=8g churnfs-exp "$w/ram"
    "$BIN/churnfs" mkfs "$w/ram/store" >/dev/null
    out=$("$BIN/churnfs" mount "$w/ram/store" "$w/mnt" --background ${OPTS:-})
    pid=$(echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
    mkdir "$w/mnt/b"
    spins=()
    if [ $side = spin ]; then
      for i in $(seq $NS); do chrt -i 0 bash -c 'while :; do :; done' & spins+=($!); done
    fi
    r=$(cd "$w/mnt/b" && "$BIN/churnfs-bench" "${WL:-w2}" --dir . --iters "$N" 2>&1 | grep -E '^rate=|last_over' | tr '\n' ' ')
    for p in "${spins[@]}"; do kill "$p"; wait "$p" 2>/dev/null; done
    echo "round $round $side: $r"
    fusermount3 -u "$w/mnt"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    umount "$w/ram"; rm -rf "$w"
  done
done
