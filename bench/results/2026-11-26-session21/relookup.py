import os, sys, time
d = sys.argv[1]; n = int(sys.argv[2])
os.makedirs(d, exist_ok=True)
for i in range(n):
    with open(f"{d}/f{i:06}", "wb") as f: pass
fd = os.open(d, os.O_RDONLY); os.fsync(fd); os.close(fd)
res = []
for r in range(3):
    time.sleep(1.3)
    t = time.perf_counter()
    for i in range(n):
        os.stat(f"{d}/f{i:06}")
    res.append((time.perf_counter() - t) / n * 1e6)
print("stat_us_after_commit", " ".join(f"{x:.2f}" for x in res))
