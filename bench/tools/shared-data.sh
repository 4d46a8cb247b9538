#!/usr/bin/env bash
# Shared mode's data path on object storage, on this machine: a 3-member
# etcd cluster and a SeaweedFS S3 server on 127.0.0.1 (tests/services/),
# one volume, one mount (release build). Two measurements:
#   rss     a BIG_GIB GiB file written with dd, then read back after the
#           kernel's caches are dropped; the daemon's RSS sampled every
#           0.5 s against its configured bounds (dirty_bytes_max,
#           object_cache_bytes and the disk cache index), checksums compared;
#   delete  a tree of SMALL small files (1 KiB, in 100 directories) and
#           LARGE large ones (LARGE_MIB MiB each) deleted with rm -rf: time
#           until rm returns, then the delete backlog sampled until it has
#           drained (its rate), foreground creates timed while it drains;
#   churn   W2 (create, write 100 bytes, close, unlink) ITERS times in one
#           directory: its rate by tenths, the daemon's RSS after 100k
#           cycles and at the end, and the engine's keys before and after
#           (without the leased ones: the session's slots, delegations and
#           recalls).
# Writes bench/results/<date>-shared-data-<parts>.md with its PNG plots.
# Usage: bench/tools/shared-data.sh [rss] [delete] [churn]   (default: rss delete)
# BIG_GIB=10 SMALL=100000 LARGE=100 LARGE_MIB=8 ITERS=1000000 override the sizes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$HOME/.cache/churnfs-target}
BIN=$target/release/churnfs
BENCH=$target/release/churnfs-bench
BIG_GIB=${BIG_GIB:-10}
SMALL=${SMALL:-100000}
LARGE=${LARGE:-100}
LARGE_MIB=${LARGE_MIB:-8}
ITERS=${ITERS:-1000000}
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(rss delete)
for b in "$BIN" "$BENCH"; do
  [ -x "$b" ] || { echo "shared-data: $b missing (cargo build --release -p churnfs -p churnfs-bench)" >&2; exit 1; }
done

work=$(mktemp -d /tmp/churnfs-shared-data.XXXXXX)
mnt=$work/mnt
daemon=""
cleanup() {
  if grep -qs " $mnt " /proc/mounts; then fusermount3 -u "$mnt" || fusermount3 -u -z "$mnt" || true; fi
  if [ -n "$daemon" ]; then
    for _ in $(seq 300); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$daemon" 2>/dev/null || true
  fi
  ETCD_BASE_PORT=24850 "$root/tests/services/etcd-cluster.sh" stop "$work/etcd" || true
  S3_BASE_PORT=24870 "$root/tests/services/s3-server.sh" stop "$work/s3" || true
  rm -rf "$work"
}
trap cleanup EXIT

eps=$(ETCD_BASE_PORT=24850 "$root/tests/services/etcd-cluster.sh" start "$work/etcd")
# Room for the big file: 400 volumes of 64 MiB.
s3=$(S3_VOLUMES=400 S3_BASE_PORT=24870 "$root/tests/services/s3-server.sh" start "$work/s3")
vol="etcd://$eps/bench"
"$BIN" mkfs "$vol" --data "s3://churnfs/bench?endpoint=$s3" >/dev/null
mkdir -p "$mnt"
out=$("$BIN" mount "$vol" "$mnt" --background -o "cache_dir=$work/cache")
daemon=$(printf '%s\n' "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
stat() { "$BIN" stats "$mnt" | awk -v k="$1" '$1 == k { print $2 }'; }
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$daemon/status"; }
now() { date +%s.%N; }
# calc EXPR [DECIMALS]: floating-point arithmetic.
calc() { awk "BEGIN { printf \"%.${2:-0}f\", $1 }"; }

date_tag=$(date +%F)
res="$root/bench/results"
md="$res/$date_tag-shared-data-$(IFS=-; echo "${parts[*]}").md"
csv_rss="$work/rss.csv"
csv_backlog="$work/backlog.csv"
echo "series,seconds,value" > "$csv_rss"
echo "series,seconds,value" > "$csv_backlog"
rows=()

# Samples the daemon's RSS (MiB) every 0.5 s under series $1 until $2 exists.
sample_rss() {
  local name=$1 stop=$2 t0
  t0=$(now)
  while [ ! -e "$stop" ]; do
    r=$(rss_kib 2>/dev/null) || return 0
    echo "$name,$(calc "$(now) - $t0" 1),$(( r / 1024 ))" >> "$csv_rss"
    sleep 0.5
  done
}

if [[ " ${parts[*]} " == *" rss "* ]]; then
  base=$(( $(rss_kib) / 1024 ))
  bound=$(( ( $(stat dirty_bytes_max) + $(stat object_cache_bytes_max) + $(stat disk_cache_entries_max) * 96 ) >> 20 ))
  sample_rss write "$work/w.done" &
  sampler=$!
  t0=$(now)
  head -c "$((BIG_GIB << 30))" /dev/urandom | tee >(md5sum > "$work/w.sum") \
    | dd of="$mnt/big" bs=1M iflag=fullblock conv=fsync status=none
  t1=$(now)
  touch "$work/w.done"; wait "$sampler"
  sync; echo 3 > /proc/sys/vm/drop_caches
  sample_rss read "$work/r.done" &
  sampler=$!
  t2=$(now)
  md5sum < "$mnt/big" > "$work/r.sum"
  t3=$(now)
  touch "$work/r.done"; wait "$sampler"
  same=no; cmp -s "$work/w.sum" "$work/r.sum" && same=yes
  peak_w=$(awk -F, '$1 == "write" { if ($3 > m) m = $3 } END { print m + 0 }' "$csv_rss")
  peak_r=$(awk -F, '$1 == "read" { if ($3 > m) m = $3 } END { print m + 0 }' "$csv_rss")
  wmbs=$(calc "($BIG_GIB * 1024) / ($t1 - $t0)")
  rmbs=$(calc "($BIG_GIB * 1024) / ($t3 - $t2)")
  rows+=("| write ${BIG_GIB} GiB (dd bs=1M, fsync) | $wmbs MiB/s | RSS peak $peak_w MiB (at mount $base MiB; bounds $bound MiB) |")
  rows+=("| read it back (caches dropped) | $rmbs MiB/s | RSS peak $peak_r MiB; checksums equal: $same |")
  "$BENCH" plot-series --csv "$csv_rss" --out "$res/$date_tag-shared-data-rss.png" \
    --title "churnfs shared mode: daemon RSS writing and reading ${BIG_GIB} GiB (S3: SeaweedFS)" --y "RSS MiB"
  rm -f "$mnt/big"
fi

if [[ " ${parts[*]} " == *" delete "* ]]; then
  mkdir -p "$mnt/tree"
  t0=$(now)
  for d in $(seq 0 99); do
    (
      mkdir -p "$mnt/tree/d$d"
      for i in $(seq 1 $((SMALL / 100))); do head -c 1024 /dev/zero > "$mnt/tree/d$d/f$i"; done
    ) &
    # Four directories at a time.
    if (( d % 4 == 3 )); then wait; fi
  done
  wait
  for i in $(seq 1 "$LARGE"); do
    head -c "$((LARGE_MIB << 20))" /dev/urandom > "$mnt/tree/large$i"
  done
  t1=$(now)
  made=$(calc "($SMALL + $LARGE) / ($t1 - $t0)")
  objs0=$(stat objects_deleted)
  # The backlog and the objects deleted, sampled from the start of rm -rf
  # until the backlog is empty after it returned; a foreground
  # create+unlink timed every 0.2 s meanwhile.
  t2=$(now)
  (
    while [ ! -e "$work/drained" ]; do
      t=$(calc "$(now) - $t2" 1)
      echo "delete backlog (queue items),$t,$(stat delete_backlog)" >> "$csv_backlog"
      echo "objects deleted,$t,$(( $(stat objects_deleted) - objs0 ))" >> "$csv_backlog"
      sleep 0.5
    done
  ) &
  sampler=$!
  fg=$work/fg; : > "$fg"
  (
    while [ ! -e "$work/drained" ]; do
      a=$(now); : > "$mnt/fg"; rm "$mnt/fg"; b=$(now)
      calc "($b - $a) * 1000" 1 >> "$fg"; echo >> "$fg"
      sleep 0.2
    done
  ) &
  fgpid=$!
  rm -rf "$mnt/tree"
  t3=$(now)
  rm_s=$(calc "$t3 - $t2" 1)
  while [ "$(stat delete_backlog)" != 0 ]; do sleep 0.2; done
  t5=$(now)
  touch "$work/drained"
  wait "$sampler" "$fgpid"
  objs=$(( $(stat objects_deleted) - objs0 ))
  drain_s=$(calc "$t5 - $t3" 1)
  rate=$(calc "$objs / ($t5 - $t2)" 1)
  fg_med=$(sort -n "$fg" | awk 'NF { a[++n] = $1 } END { if (n) print a[int((n + 1) / 2)]; else print "-" }')
  rows+=("| create $SMALL × 1 KiB + $LARGE × $LARGE_MIB MiB | $made files/s | |")
  rows+=("| rm -rf of that tree | returns in $rm_s s | create+unlink beside it: median $fg_med ms |")
  rows+=("| delete backlog empty | $drain_s s after rm returned; $objs objects deleted ($rate objects/s from the start of rm) | |")
  "$BENCH" plot-series --csv "$csv_backlog" --out "$res/$date_tag-shared-data-backlog.png" \
    --title "churnfs shared mode: rm -rf of $((SMALL + LARGE)) files, from its start" --y "items" \
    || echo "shared-data: no backlog to plot" >&2
fi

if [[ " ${parts[*]} " == *" churn "* ]]; then
  # The range's count (etcd leaves it out of the answer when it is 0).
  count() {
    local n
    n=$(ETCDCTL_API=3 etcdctl --endpoints="${eps%%,*}" get --prefix "$1" --keys-only --limit=1 -w json |
      sed -n 's/.*"count":\([0-9]*\).*/\1/p')
    echo "${n:-0}"
  }
  keys() {
    local p=churnfs/bench/
    echo $(( $(count $p) - $(count ${p}L) - $(count ${p}Y) - $(count ${p}R) ))
  }
  mkdir -p "$mnt/spool"
  sleep 1
  k0=$(keys)
  "$BENCH" w2 --dir "$mnt/spool" --iters "$ITERS" --pid "$daemon" > "$work/w2.out"
  # The directory's last batch goes within delegate_flush_ms.
  sleep 1
  k1=$(keys)
  kv() { awk -F= -v k="$1" '$1 == k { print $2 }' "$work/w2.out"; }
  tenths=$(for i in $(seq 1 10); do printf '%s ' "$(calc "$(kv tenth$i)")"; done)
  rows+=("| W2, $ITERS cycles in one directory | $(calc "$(kv rate)") cycles/s; last tenth / first $(kv last_over_first) (tenths: $tenths) | RSS after 100k cycles $(( $(kv rss_kb_warm) / 1024 )) MiB, at the end $(( $(kv rss_kb_after) / 1024 )) MiB; engine keys (without leased ones) $k0 before, $k1 after |")
fi

{
  echo "# Shared mode's data on S3 — $date_tag"
  echo
  echo "\`bench/tools/shared-data.sh ${parts[*]}\` on this machine ($(nproc) cores): a 3-member etcd"
  echo "cluster and a SeaweedFS S3 server ($(weed version 2>/dev/null | awk '{print $3}')) on 127.0.0.1,"
  echo "one mount of the release build with its defaults (dirty_bytes_max, object_cache_bytes,"
  echo "a 1 GiB disk read cache). One run each."
  echo
  echo "| what | rate | memory and more |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  if [[ " ${parts[*]} " == *" rss "* ]]; then echo "![RSS]($date_tag-shared-data-rss.png)"; fi
  if [[ " ${parts[*]} " == *" delete "* ]] && [ -e "$res/$date_tag-shared-data-backlog.png" ]; then
    echo "![backlog]($date_tag-shared-data-backlog.png)"
  fi
} > "$md"
cat "$md"
