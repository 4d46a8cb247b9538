#!/usr/bin/env bash
# Conformance suites nobody here wrote, on a fresh churnfs mount each:
#   pjdfstest (whole suite, as root and as the users `nobody` and `tests`),
#   fsx (100,000 operations with a fixed seed and 100,000 with a random one),
#   stress-ng (the filesystem class, every stressor in turn),
#   uring: fsx and stress-ng again over FUSE over io_uring, and O_TMPFILE,
#   shared: pjdfstest (both passes), fsx (FSX_SHARED_OPS operations) and fsx
#   on a 64 MiB file (FSX_LARGE_OPS) on volumes of a 3-member etcd cluster
#   with their data in a SeaweedFS S3 server, all on 127.0.0.1
#   (tests/services/).
# Usage: tests/conformance/run.sh [pjdfstest|fsx|stress-ng|uring|shared]...   (default: all)
# CONF_MOUNT_OPTS adds mount options to every mount (e.g. uring=1).
# After each suite the filesystem is unmounted and `churnfs fsck` must be clean.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${CARGO_TARGET_DIR:=$HOME/.cache/churnfs-target}"
# Exported: the uring pass runs `cargo test`, which must build where `make` does.
export CARGO_TARGET_DIR
BIN=${CHURNFS_BIN:-$CARGO_TARGET_DIR/release/churnfs}
FSX_OPS=${FSX_OPS:-100000}
FSX_SHARED_OPS=${FSX_SHARED_OPS:-20000}
FSX_LARGE_OPS=${FSX_LARGE_OPS:-3000}
STRESS_SECS=${STRESS_SECS:-2}
PJDFSTEST_VERSION=0.2.2
FSX_VERSION=0.3.2

log() { printf 'conformance: %s\n' "$*"; }

install_suites() {
  export PATH="$HOME/.cargo/bin:$PATH"
  if ! pjdfstest --version 2>/dev/null | grep -q "$PJDFSTEST_VERSION"; then
    log "installing pjdfstest $PJDFSTEST_VERSION"
    cargo install --locked --quiet "pjdfstest@$PJDFSTEST_VERSION"
  fi
  if ! fsx --version 2>/dev/null | grep -q "$FSX_VERSION"; then
    log "installing fsx $FSX_VERSION"
    cargo install --locked --quiet "fsx@$FSX_VERSION"
  fi
  if ! command -v stress-ng >/dev/null; then
    log "installing stress-ng"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stress-ng >/dev/null
  fi
  # pjdfstest switches to `nobody` and `tests`.
  id tests >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin tests
  [ -x "$BIN" ] || { echo "conformance: $BIN missing (cargo build --release -p churnfs)" >&2; exit 1; }
}

work=""
daemon=""
# Set by run_shared: the etcd cluster's endpoints, its directory, and the
# volume of the current mount.
shared_eps=""
shared_dir=""
shared_s3=""
volume=""
cleanup() {
  if [ -n "$work" ]; then
    if grep -qs " $work/mnt " /proc/mounts; then fusermount3 -u -z "$work/mnt" || true; fi
    if [ -n "$daemon" ]; then
      for _ in $(seq 100); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$daemon" 2>/dev/null || true
    fi
    rm -rf "$work"
  fi
  work=""; daemon=""
}
stop_cluster() {
  if [ -n "$shared_dir" ]; then
    "$here/../services/etcd-cluster.sh" stop "$shared_dir"
    "$here/../services/s3-server.sh" stop "$shared_dir/s3"
    rm -rf "$shared_dir"
  fi
  shared_dir=""; shared_eps=""; shared_s3=""
}
trap 'cleanup; stop_cluster' EXIT

# Fresh store and mount under /tmp with mount options $1, every path
# component searchable by all (pjdfstest's unprivileged users must reach the
# test directory). pjdfstest needs allow_other, so the kernel checks
# permissions there; fsx and stress-ng run as root on a private mount, where
# the daemon checks them.
mount_fresh() {
  opts_extra=""
  work=$(mktemp -d /tmp/churnfs-conf.XXXXXX)
  chmod 755 "$work"
  mkdir -p "$work/mnt"
  local source="$work/store"
  if [ -n "$shared_eps" ]; then
    # A new volume on the cluster for each mount, its data under a prefix
    # of its own in the S3 server's bucket.
    local name
    name="conf$(basename "$work" | tr -dc 'a-zA-Z0-9')"
    volume="etcd://$shared_eps/$name"
    source=$volume
    "$BIN" mkfs "$volume" --data "s3://churnfs/$name?endpoint=$shared_s3" >/dev/null
    opts_extra="cache_dir=$work/cache"
  else
    "$BIN" mkfs "$work/store" >/dev/null
  fi
  local out
  local opts=${1:-}
  if [ -n "${CONF_MOUNT_OPTS:-}" ]; then opts=${opts:+$opts,}$CONF_MOUNT_OPTS; fi
  if [ -n "$opts_extra" ]; then opts=${opts:+$opts,}$opts_extra; fi
  out=$("$BIN" mount "$source" "$work/mnt" --background ${opts:+-o "$opts"})
  daemon=$(printf '%s\n' "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
  [ -n "$daemon" ] || { echo "conformance: mount did not report its daemon: $out" >&2; exit 1; }
  chmod 1777 "$work/mnt"
}

# Clean unmount, wait for the daemon to commit and exit, then fsck.
unmount_check() {
  fusermount3 -u "$work/mnt"
  for _ in $(seq 600); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$daemon" 2>/dev/null; then echo "conformance: daemon $daemon did not exit" >&2; exit 1; fi
  if [ -n "$shared_eps" ]; then "$BIN" fsck "$volume"; else "$BIN" fsck "$work/store"; fi
  daemon=""
  cleanup
}

# One pjdfstest pass on a fresh mount: pjdfstest_pass CONFIG [PATTERN...]
pjdfstest_pass() {
  local conf=$1; shift
  mount_fresh allow_other
  mkdir -m 777 "$work/secondary"
  # `mount -o remount,ro` would run mount.fuse3's helper; -i remounts directly.
  mkdir -p "$work/shim"
  printf '#!/bin/sh\nexec %s -i "$@"\n' "$(command -v mount)" > "$work/shim/mount"
  chmod 755 "$work/shim/mount"
  log "pjdfstest $PJDFSTEST_VERSION ($(basename "$conf")${1:+, tests matching $*}) on $work/mnt"
  local rc=0
  (cd "$work/mnt" && PATH="$work/shim:$PATH" pjdfstest -c "$conf" -p "$work/mnt" -s "$work/secondary" "$@") \
    > "$work/pjdfstest.out" 2>&1 || rc=$?
  grep -vE '[[:space:]]ok$' "$work/pjdfstest.out" | grep -vE '^$' || true
  log "pjdfstest $(grep '^Summary:' "$work/pjdfstest.out" || echo 'Summary: missing')"
  awk '$2=="skipped"{print $1}' "$work/pjdfstest.out" > "$work/../pjdfstest.skipped.$$" || true
  [ "$rc" -eq 0 ] || { echo "conformance: pjdfstest failed" >&2; exit 1; }
  unmount_check
}

run_pjdfstest() {
  pjdfstest_pass "$here/pjdfstest.toml"
  local skipped; skipped=$(cat "/tmp/pjdfstest.skipped.$$"); rm -f "/tmp/pjdfstest.skipped.$$"
  pjdfstest_pass "$here/pjdfstest-erofs.toml" erofs
  [ ! -s "/tmp/pjdfstest.skipped.$$" ] || { echo "conformance: erofs pass skipped tests" >&2; exit 1; }
  rm -f "/tmp/pjdfstest.skipped.$$"
  # Every test not run by either pass must be listed, with its reason.
  for t in $skipped; do
    case "$t" in *::erofs_*) continue ;; esac
    grep -q "^$t " "$here/pjdfstest-exclusions.txt" || {
      echo "conformance: $t skipped but not in pjdfstest-exclusions.txt" >&2; exit 1; }
  done
}

# Seed 1 on the default mount (writeback cache off), the random seed with
# the writeback cache on, so both data paths see the whole operation mix.
run_fsx() {
  local seed=${FSX_SEED:-$(( (RANDOM << 15) | RANDOM ))}
  local s opt wb
  for s in 1 "$seed"; do
    if [ "$s" = 1 ]; then opt=""; wb=off; else opt="writeback_cache=1"; wb=on; fi
    mount_fresh "$opt"
    log "fsx -N $FSX_OPS -S $s (config tests/conformance/fsx.toml, writeback cache $wb)"
    (cd "$work" && fsx -q -f "$here/fsx.toml" -N "$FSX_OPS" -S "$s" -P "$work" "$work/mnt/fsx.$s") || {
      echo "conformance: fsx failed with seed $s (replay: FSX_SEED=$s tests/conformance/run.sh fsx)" >&2; exit 1; }
    unmount_check
  done
  log "fsx: $((2 * FSX_OPS)) operations, seeds 1 (writeback off) and $seed (writeback on), zero miscompares"
}

run_stress_ng() {
  # With extended attributes on, so that its xattr stressor exercises them,
  # and a small kernel negative-dentry budget, so that the dropping of
  # cached names (a directory at a time, or one by one) runs all along
  # under its whole operation mix (about 700 directory drops in a run).
  mount_fresh xattr=1,kernel_negative_max=256
  log "stress-ng --class filesystem --seq 1 -t ${STRESS_SECS}s"
  # binderfs is not a filesystem on a path (it needs the binder driver, absent here);
  # procfs reads /proc, not the mount, and its reader of /proc/kmsg blocks until the
  # kernel logs something, which can hold the run indefinitely.
  (cd "$work/mnt" && stress-ng --class filesystem --seq 1 -t "${STRESS_SECS}s" --exclude binderfs,procfs \
      --temp-path "$work/mnt" --metrics-brief) > "$work/stress.out" 2>&1 || {
    cat "$work/stress.out"; echo "conformance: stress-ng reported failures" >&2; exit 1; }
  grep -E 'skipping|successful|fail' "$work/stress.out" || true
  unmount_check
}

# fsx (seed 1) and stress-ng again with FUSE over io_uring (-o uring=1,
# docs/design.md §12). The kernel offers it only while the fuse module's
# enable_uring parameter is on: this pass turns it on and puts back what it
# was (it changes nothing for servers that do not ask). It checks that the
# daemon's ring queues serve the mount, so a fallback to /dev/fuse fails it.
run_uring() {
  local p=/sys/module/fuse/parameters/enable_uring
  [ -w "$p" ] || { echo "conformance: $p missing or read-only: the kernel lacks FUSE over io_uring (6.14+)" >&2; exit 1; }
  local old; old=$(cat "$p")
  echo Y > "$p"
  # The value is put into the trap now: `old` is local and gone by exit.
  trap 'echo '"$old"' > '"$p"'; cleanup; stop_cluster' EXIT
  mount_fresh uring=1
  grep -qx 'churnfs-ring0' /proc/"$daemon"/task/*/comm || {
    echo "conformance: uring=1 mount has no ring queue threads" >&2; exit 1; }
  log "fsx -N $FSX_OPS -S 1 over io_uring"
  (cd "$work" && fsx -q -f "$here/fsx.toml" -N "$FSX_OPS" -S 1 -P "$work" "$work/mnt/fsx.1") || {
    echo "conformance: fsx over io_uring failed with seed 1" >&2; exit 1; }
  local served; served=$("$BIN" stats "$work/mnt" | awk '$1=="ring_requests"{print $2}')
  [ "${served:-0}" -gt 10000 ] || {
    echo "conformance: only ${served:-0} requests came over io_uring during fsx" >&2; exit 1; }
  unmount_check
  mount_fresh uring=1,xattr=1,kernel_negative_max=256
  log "stress-ng --class filesystem --seq 1 -t ${STRESS_SECS}s over io_uring"
  (cd "$work/mnt" && stress-ng --class filesystem --seq 1 -t "${STRESS_SECS}s" --exclude binderfs,procfs \
      --temp-path "$work/mnt" --metrics-brief) > "$work/stress.out" 2>&1 || {
    cat "$work/stress.out"; echo "conformance: stress-ng over io_uring reported failures" >&2; exit 1; }
  # Its fsyncs went to the queues' waiter threads (ring.rs, `waits`).
  local handed; handed=$("$BIN" stats "$work/mnt" | awk '$1=="ring_handed_off"{print $2}')
  [ "${handed:-0}" -gt 0 ] || {
    echo "conformance: no fsync was handed to a ring queue's waiter during stress-ng" >&2; exit 1; }
  unmount_check
  # O_TMPFILE over the ring: the mount test's ring case, which needs
  # enable_uring and is made mandatory here (the /dev/fuse case runs with
  # the other mount tests).
  log "O_TMPFILE over io_uring (cargo test -p churnfs-tests --test mount tmpfile_over_the_ring)"
  local out; out=$(mktemp /tmp/churnfs-conf.tmpfile.XXXXXX)
  (cd "$here/../.." && CHURNFS_TEST_RING=1 CHURNFS_BIN="$BIN" \
      cargo test -q -p churnfs-tests --test mount tmpfile_over_the_ring) >"$out" 2>&1 || {
    cat "$out"; rm -f "$out"; echo "conformance: O_TMPFILE over io_uring failed" >&2; exit 1; }
  grep -q 'test result: ok\. 1 passed' "$out" || {
    cat "$out"; rm -f "$out"; echo "conformance: the O_TMPFILE test did not run" >&2; exit 1; }
  rm -f "$out"
  echo "$old" > "$p"
  trap 'cleanup; stop_cluster' EXIT
  log "uring: fsx ($served requests on the ring), stress-ng ($handed fsyncs handed to waiters) and O_TMPFILE passed over io_uring"
}

# pjdfstest (both passes) and fsx on shared volumes: the same pass list as
# a local store (tests/conformance/pjdfstest-exclusions.txt).
run_shared() {
  shared_dir=$(mktemp -d /tmp/churnfs-conf-etcd.XXXXXX)
  shared_eps=$("$here/../services/etcd-cluster.sh" start "$shared_dir")
  shared_s3=$("$here/../services/s3-server.sh" start "$shared_dir/s3")
  log "shared: 3-member etcd cluster at $shared_eps, SeaweedFS S3 at $shared_s3"
  run_pjdfstest
  local seed=${FSX_SEED:-1}
  mount_fresh ""
  log "fsx -N $FSX_SHARED_OPS -S $seed on a shared volume"
  (cd "$work" && fsx -q -f "$here/fsx.toml" -N "$FSX_SHARED_OPS" -S "$seed" -P "$work" "$work/mnt/fsx.$seed") || {
    echo "conformance: fsx on a shared volume failed with seed $seed" >&2; exit 1; }
  log "fsx -N $FSX_LARGE_OPS -S $seed on a 64 MiB file of a shared volume"
  (cd "$work" && fsx -q -f "$here/fsx-large.toml" -N "$FSX_LARGE_OPS" -S "$seed" -P "$work" "$work/mnt/fsx-large.$seed") || {
    echo "conformance: fsx on a large file of a shared volume failed with seed $seed" >&2; exit 1; }
  unmount_check
  stop_cluster
  log "shared: pjdfstest, fsx ($FSX_SHARED_OPS operations) and fsx on a large file ($FSX_LARGE_OPS) passed on shared volumes with data on S3"
}

install_suites
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(pjdfstest fsx stress-ng uring shared)
for s in "${suites[@]}"; do
  case "$s" in
    pjdfstest) run_pjdfstest ;;
    fsx) run_fsx ;;
    stress-ng) run_stress_ng ;;
    uring) run_uring ;;
    shared) run_shared ;;
    *) echo "conformance: unknown suite $s" >&2; exit 2 ;;
  esac
done
log "all suites passed: ${suites[*]}"
