import os, sys, time, subprocess
d = sys.argv[1]; n = int(sys.argv[2]); size = int(sys.argv[3]); mnt = sys.argv[4]
os.makedirs(d, exist_ok=True)
buf = b"x" * size
for i in range(n):
    fd = os.open(f"{d}/f{i}", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, buf); os.close(fd)
os.sync()
time.sleep(6)
def stat(k):
    out = subprocess.run([os.environ.get("CHURNFS","churnfs"), "stats", mnt], capture_output=True, text=True).stdout
    for l in out.splitlines():
        a = l.split()
        if a and a[0] == k: return int(a[1])
before = {k: stat(k) for k in ["commit_locked_max_us", "store_scans", "commit_locked_us"]}
t = time.perf_counter()
for i in range(n):
    os.unlink(f"{d}/f{i}")
el = time.perf_counter() - t
os.sync(); time.sleep(6)
print(f"unlink_us={el/n*1e6:.1f}", "before", before, "after", {k: stat(k) for k in ["commit_locked_max_us", "store_scans", "commit_locked_us", "commit_max_us", "frees_unscanned"]})
