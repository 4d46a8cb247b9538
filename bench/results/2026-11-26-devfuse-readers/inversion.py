# Creates in the mount's root while another process stats new names in
# $MNT/bench (driving directory drops, which lock the root) and $HOGS busy
# loops compete for the CPUs: python3 inversion.py MNT SECS
import os, sys, time, subprocess
mnt = sys.argv[1]; secs = float(sys.argv[2])
os.makedirs(f"{mnt}/bench", exist_ok=True)
# A: first misses in bench (drives directory drops, each locking the root)
a = subprocess.Popen([sys.executable, "-c", f"""
import os,time
t=time.time(); i=0
while time.time()-t<{secs}:
    for k in range(256):
        try: os.stat('{mnt}/bench/m%d'%i)
        except FileNotFoundError: pass
        i+=1
print('A', i)
"""])
hogs = [subprocess.Popen(["sh", "-c", f"timeout {secs} sh -c 'while :; do :; done'"]) for _ in range(int(os.environ.get("HOGS","2")))]
lat = []
t = time.time(); n = 0
while time.time() - t < secs:
    s = time.perf_counter()
    fd = os.open(f"{mnt}/root{n%50}", os.O_CREAT | os.O_WRONLY, 0o600); os.close(fd); os.unlink(f"{mnt}/root{n%50}")
    lat.append(time.perf_counter() - s); n += 1
    time.sleep(0.001)
a.wait(); [h.wait() for h in hogs]
lat.sort()
q = lambda p: lat[int(p*(len(lat)-1))]*1e3
print(f"B n={len(lat)} p50={q(.5):.2f}ms p99={q(.99):.2f}ms p999={q(.999):.2f}ms max={lat[-1]*1e3:.1f}ms")
