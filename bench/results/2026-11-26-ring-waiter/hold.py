# hold.py MNT SECS: on CPU 0, one process fsyncs a small file in a loop while
# another stats an existing file in a loop; prints the stat latency p50/p99/max (µs)
import os, sys, time
mnt, secs = sys.argv[1], float(sys.argv[2])
open(os.path.join(mnt, "s"), "w").close()
os.sched_setaffinity(0, {0})
pid = os.fork()
if pid == 0:
    fd = os.open(os.path.join(mnt, "f"), os.O_CREAT | os.O_WRONLY)
    end = time.time() + secs + 0.5
    n = 0
    while time.time() < end:
        os.pwrite(fd, b"x" * 4096, 0); os.fsync(fd); n += 1
    os._exit(0)
time.sleep(0.2)
lat = []
end = time.time() + secs
p = os.path.join(mnt, "s")
while time.time() < end:
    t = time.perf_counter_ns(); os.stat(p); lat.append((time.perf_counter_ns() - t) / 1000)
    time.sleep(0.0002)
os.waitpid(pid, 0)
lat.sort()
q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))]
print(f"stats={len(lat)} p50={q(0.5):.1f} p99={q(0.99):.1f} max={lat[-1]:.1f}")
