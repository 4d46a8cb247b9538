# Sourced by the scripts here: mounts fuser's spinning floor and churnfs (store on
# tmpfs, mount options $OPTS) side by side under /tmp, sets FP/CP (daemon pids) and
# D (churnfs's directory); `down` unmounts both. BIN: directory with churnfs,
# churnfs-bench and churnfs-bench-floor.
BIN=$(realpath "${1:-$HOME/.cache/churnfs-target/release}")
TARGETS=$(realpath "$(dirname "${BASH_SOURCE[0]}")/../../targets")
up() {
  F=$(mktemp -d /tmp/churnfs-bench.parts-f.XXXXXX); C=$(mktemp -d /tmp/churnfs-bench.parts-c.XXXXXX)
  FLOOR_BIN="$BIN/churnfs-bench-floor" bash "$TARGETS/floor-spin.sh" up "$F" >"$F/up.out" 2>&1 || { echo "floor up failed"; exit 1; }
  PATH="$BIN:$PATH" CHURNFS_BIN="$BIN/churnfs" CHURNFS_MOUNT_OPTS="${OPTS:-}" \
    bash "$TARGETS/churnfs-tmpfs.sh" up "$C" >"$C/up.out" 2>&1 || { echo "churnfs up failed"; bash "$TARGETS/floor-spin.sh" umount "$F"; exit 1; }
  FP=$(sed -n 's/^pid=//p' "$F/up.out"); CP=$(sed -n 's/^pid=//p' "$C/up.out")
  D="$C/mnt/bench"; mkdir -p "$D"
}
down() {
  PATH="$BIN:$PATH" bash "$TARGETS/churnfs-tmpfs.sh" umount "$C" >/dev/null 2>&1; bash "$TARGETS/churnfs-tmpfs.sh" down "$C" >/dev/null 2>&1
  bash "$TARGETS/floor-spin.sh" umount "$F" >/dev/null 2>&1; bash "$TARGETS/floor-spin.sh" down "$F" >/dev/null 2>&1
}
# traced_pair EVENT...: a 4 s `churnfs-bench w7-pair`, with the ftrace EVENTs (their
# filters set beforehand) on for 1.5 s in its middle; leaves the trace in $C/trace and
# prints the pair's figures.
traced_pair() {
  local T=/sys/kernel/tracing e W
  echo 0 >$T/tracing_on; echo >$T/trace; echo 16384 >$T/buffer_size_kb
  for e in "$@"; do echo 1 >$T/events/$e/enable; done
  "$BIN/churnfs-bench" w7-pair --dir "$D" --against "$F/mnt" --secs 4 >"$C/pair.out" &
  W=$!
  sleep 2.2; echo 1 >$T/tracing_on; sleep 1.5; echo 0 >$T/tracing_on
  wait $W
  for e in "$@"; do echo 0 >$T/events/$e/enable; echo 0 >$T/events/$e/filter; done
  cp $T/trace "$C/trace"; echo >$T/trace
  echo "[${OPTS:-defaults}] $(tr '\n' ' ' <"$C/pair.out")"
}
