#!/usr/bin/env bash
# Does a slower answer make the floor's wake-up of the caller dearer?
#   bash delay.sh [BIN] NS     (root)
# Two floors side by side (target floor-spin), one busy-waiting NS ns before each
# missing-name answer (FLOOR_DELAY_NS), asked in alternating slices by
# `churnfs-bench w7-pair` for 10 s under `perf record -g`; prints the ratio and,
# per answer, the kernel time of the writev, of waking the caller and of copying.
# Side A is the delayed floor, F the plain one.
set -u
BIN=$(realpath "${1:-$HOME/.cache/churnfs-target/release}"); NS=${2:-1000}
TARGETS=$(realpath "$(dirname "$0")/../../targets")
A=$(mktemp -d /tmp/churnfs-bench.delay-a.XXXXXX); F=$(mktemp -d /tmp/churnfs-bench.delay-f.XXXXXX)
FLOOR_BIN="$BIN/churnfs-bench-floor" bash "$TARGETS/floor-spin.sh" up "$F" >"$F/up.out" 2>&1 || exit 1
FLOOR_DELAY_NS=$NS FLOOR_BIN="$BIN/churnfs-bench-floor" bash "$TARGETS/floor-spin.sh" up "$A" >"$A/up.out" 2>&1 || exit 1
pids=()
for d in "$F" "$A"; do
  p=$(sed -n 's/^pid=//p' "$d/up.out")
  perf record -q -g -F 10000 -p "$p" -o "$d/perf.data" 2>/dev/null & pids+=($!)
  perf stat -x, -e syscalls:sys_enter_writev -p "$p" -o "$d/count" & pids+=($!)
done
sleep 0.3
echo "[delay $NS ns] $("$BIN/churnfs-bench" w7-pair --dir "$A/mnt" --against "$F/mnt" --secs 10 | tr '\n' ' ')"
kill -INT "${pids[@]}"; wait "${pids[@]}" 2>/dev/null
for d in "$A" "$F"; do
  side=$([ "$d" = "$A" ] && echo "A (delayed)" || echo "F (plain)")
  n=$(grep sys_enter_writev "$d/count" | cut -d, -f1)
  tot=$(perf report -i "$d/perf.data" --no-children --sort comm -g none -n 2>/dev/null | grep '%' | grep -v '^#' | awk '{t+=$2} END {print t}')
  perf report -i "$d/perf.data" --children --sort sym -g none 2>/dev/null |
    grep -E '\] (do_writev|__wake_up|fuse_copy_args)$' |
    awk -v n="$n" -v s="$side" -v tot="$tot" '{gsub("%","",$1); printf "  %-11s %-15s %.2f µs per answer (%d answers)\n", s, $4, $1*tot/100/10000*1e6/n, n}'
done
for d in "$A" "$F"; do bash "$TARGETS/floor-spin.sh" umount "$d" >/dev/null 2>&1; bash "$TARGETS/floor-spin.sh" down "$d" >/dev/null 2>&1; done
