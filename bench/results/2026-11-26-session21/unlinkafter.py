import os, sys, time
d = sys.argv[1]; n = int(sys.argv[2])
os.makedirs(d, exist_ok=True)
for i in range(n):
    with open(f"{d}/f{i:06}", "wb") as f: pass
fd = os.open(d, os.O_RDONLY); os.fsync(fd); os.close(fd)
t = time.perf_counter()
for i in range(n):
    os.unlink(f"{d}/f{i:06}")
print(f"unlink_us_after_commit {(time.perf_counter() - t) / n * 1e6:.2f}")
