"""Large truncates: three times, write N MiB (default 1024) to a new file,
fsync it, then time ftruncate(0) and the fsync after it. Run it in a
directory of the filesystem under test, e.g. through bench/tools/ab.sh:
  KEY="ftruncate_ms|fsync_after" bench/tools/ab.sh OLD_BIN NEW_BIN 2 python3 bench/tools/large-truncate.py 1024
"""
import os
import sys
import time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
buf = b"x" * (1 << 20)
res = {"ftruncate_ms": [], "fsync_after_ms": []}
for r in range(3):
    fd = os.open(f"f{r}", os.O_CREAT | os.O_RDWR, 0o644)
    for _ in range(n):
        os.write(fd, buf)
    os.fsync(fd)
    t = time.perf_counter()
    os.ftruncate(fd, 0)
    t1 = time.perf_counter()
    os.fsync(fd)
    t2 = time.perf_counter()
    res["ftruncate_ms"].append((t1 - t) * 1e3)
    res["fsync_after_ms"].append((t2 - t1) * 1e3)
    os.close(fd)
for k, v in res.items():
    print(f"{k}=" + "/".join(f"{x:.1f}" for x in v))
