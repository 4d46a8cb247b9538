import ctypes, os, struct, sys
# usage: slice.py PID SLICE_NS  -> sets SCHED_OTHER custom slice on every thread of PID
libc = ctypes.CDLL(None, use_errno=True)
pid, ns = int(sys.argv[1]), int(sys.argv[2])
attr = struct.pack("IIQiIQQQII", 56, 0, 0, 0, 0, ns, 0, 0, 0, 0)
buf = ctypes.create_string_buffer(attr, 56)
for tid in os.listdir(f"/proc/{pid}/task"):
    r = libc.syscall(314, int(tid), buf, 0)
    if r != 0:
        print("sched_setattr", tid, os.strerror(ctypes.get_errno()), file=sys.stderr)
