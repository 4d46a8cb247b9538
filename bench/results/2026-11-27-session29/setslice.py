#!/usr/bin/env python3
# usage: setslice.py SLICE_NS TID... -- SCHED_BATCH with a custom slice (sched_setattr's
# sched_runtime, honoured by the fair scheduler since Linux 6.12); 0 = the default slice
import ctypes, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
SYS_sched_setattr, SCHED_BATCH = 314, 3
slice_ns = int(sys.argv[1])
for tid in map(int, sys.argv[2:]):
    attr = struct.pack("IIQiIQQQ", 48, SCHED_BATCH, 0, 0, 0, slice_ns, 0, 0)
    buf = ctypes.create_string_buffer(attr, 48)
    if libc.syscall(SYS_sched_setattr, tid, buf, 0) != 0:
        sys.exit(f"sched_setattr {tid}: errno {ctypes.get_errno()}")
