#!/usr/bin/env bash
# Flame graphs of the churnfs daemon under W2 (spool churn) and W4 (fs_mark):
#   bench/tools/flame.sh [OUT_DIR]      (default bench/results/<date>-flame)
# Mounts churnfs (release build, store on a tmpfs) under /tmp, samples the
# daemon with `perf record -g` while one workload runs, and folds the stacks
# into an SVG with inferno (installed with cargo when missing). Root only.
# Also writes the FUSE requests per operation that `churnfs stats` counted.
# REQUESTS_ONLY=1 skips perf and the SVGs and writes only the request counts.
# CHURNFS_MOUNT_OPTS adds mount options (e.g. "-o xattr=0").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${CARGO_TARGET_DIR:=$HOME/.cache/churnfs-target}"
BIN=$CARGO_TARGET_DIR/release/churnfs
BENCH=$CARGO_TARGET_DIR/release/churnfs-bench
OUT=${1:-$here/../results/$(date +%F)-flame}
W2_ITERS=${W2_ITERS:-100000}
W4_FILES=${W4_FILES:-20000}

log() { printf 'flame: %s\n' "$*" >&2; }
REQUESTS_ONLY=${REQUESTS_ONLY:-0}
export PATH="$HOME/.cargo/bin:$PATH"
if [ "$REQUESTS_ONLY" != 1 ]; then
  command -v perf >/dev/null || { log "perf missing (apt-get install linux-perf)"; exit 1; }
fi
if [ "$REQUESTS_ONLY" != 1 ] && ! command -v inferno-flamegraph >/dev/null; then
  log "installing inferno"
  cargo install --locked --quiet inferno
fi
[ -x "$BIN" ] && [ -x "$BENCH" ] || { log "build first: cargo build --release -p churnfs -p churnfs-bench"; exit 1; }
mkdir -p "$OUT"

work=""
pid=""
cleanup() {
  if [ -n "$work" ]; then
    if grep -qs " $work/mnt " /proc/mounts; then fusermount3 -u -z "$work/mnt" || true; fi
    if [ -n "$pid" ]; then
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    if grep -qs " $work/ram " /proc/mounts; then umount "$work/ram" || true; fi
    rm -rf "$work"
  fi
  work=""; pid=""
}
trap cleanup EXIT

# profile NAME CMD...: one fresh mount, perf on the daemon while CMD runs in $work/mnt/bench.
profile() {
  local name=$1; shift
  work=$(mktemp -d /tmp/churnfs-flame.XXXXXX)
  mkdir -p "$work/ram" "$work/mnt"
  mount -t tmpfs -o size=4g churnfs-flame "$work/ram"
  "$BIN" mkfs "$work/ram/store" >/dev/null
  local out
  # shellcheck disable=SC2086
  out=$("$BIN" mount "$work/ram/store" "$work/mnt" --background ${CHURNFS_MOUNT_OPTS:-})
  pid=$(printf '%s\n' "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
  [ -n "$pid" ] || { log "no daemon pid in: $out"; exit 1; }
  mkdir "$work/mnt/bench"
  "$BIN" stats "$work/mnt" > "$work/before"
  local perf_pid=""
  if [ "$REQUESTS_ONLY" != 1 ]; then
    perf record -F 499 -g -p "$pid" -o "$work/perf.data" 2>"$work/perf.log" &
    perf_pid=$!
    sleep 1
  fi
  log "$name: $*"
  (cd "$work/mnt/bench" && "$@") > "$OUT/$name.kv"
  if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
  "$BIN" stats "$work/mnt" > "$work/after"
  if [ -n "$perf_pid" ]; then
    perf script -i "$work/perf.data" 2>/dev/null | inferno-collapse-perf > "$work/folded"
    inferno-flamegraph --title "churnfs daemon, $name" < "$work/folded" > "$OUT/$name.svg"
  fi
  # Requests the workload sent, by opcode.
  join <(grep '^op_' "$work/before" | sort) <(grep '^op_' "$work/after" | sort) |
    awk '$3 > $2 { print $1 "=" $3 - $2 }' > "$OUT/$name.requests"
  fusermount3 -u "$work/mnt"
  cleanup
  log "$name: $OUT/$name.requests"
}

# pt_requests NAME CMD...: the same workload on passthrough_ll (debug mode,
# which logs every request) over a tmpfs directory; counts requests by opcode.
pt_requests() {
  local name=$1; shift
  local pt=$CARGO_TARGET_DIR/bench-tools/passthrough_ll
  [ -x "$pt" ] || { log "no $pt (run make bench once): skipping passthrough_ll counts"; return 0; }
  work=$(mktemp -d /tmp/churnfs-flame.XXXXXX)
  mkdir -p "$work/ram" "$work/mnt"
  mount -t tmpfs -o size=4g churnfs-flame "$work/ram"
  "$pt" -d -o "source=$work/ram" "$work/mnt" 2>"$work/pt.log" &
  pid=$!
  for _ in $(seq 100); do grep -qs " $work/mnt " /proc/mounts && break; sleep 0.1; done
  mkdir "$work/mnt/bench"
  : > "$work/pt.log"
  (cd "$work/mnt/bench" && "$@") > /dev/null
  fusermount3 -u "$work/mnt"
  wait "$pid" || true
  pid=""
  sed -n 's/.*opcode: \([A-Z_]*\) .*/\1/p' "$work/pt.log" | sort | uniq -c |
    awk '{ print "op_" tolower($2) "=" $1 }' > "$OUT/$name.passthrough_ll.requests"
  cleanup
}

profile w2 "$BENCH" w2 --dir . --iters "$W2_ITERS"
profile w4 "$BENCH" w4 --dir . --files "$W4_FILES" --loops 2 --subdirs 100
pt_requests w2 "$BENCH" w2 --dir . --iters 10000
pt_requests w4 "$BENCH" w4 --dir . --files 2000 --loops 2 --subdirs 100
