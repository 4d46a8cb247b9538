#!/bin/bash
# Run by bench/ab.sh inside MNT/b: finds the daemon serving this mount, gives its
# threads the EEVDF slice SLICE_NS (unset: unchanged), runs W3 (K=20, PROCS default 2,4).
# run inside MNT/b; find the daemon serving this mount, set its slice, run W3
store=$(realpath ../../ram/store)
for p in /proc/[0-9]*; do
  if tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q "mount $store "; then pid=${p#/proc/}; fi
done
if [ -n "${SLICE_NS:-}" ]; then python3 "$(dirname "$0")/slice.py" $pid $SLICE_NS; fi
churnfs-bench w3 --dir . --rounds 20 --procs ${PROCS:-2,4}
