# Medians of stat() of new missing names after the caller ran flat out or slept for 1 s.
import os, sys, time, statistics
d = sys.argv[1]
def phase(prefix, n):
    lat = []
    for i in range(n):
        p = f"{d}/{prefix}-{i}"
        t = time.perf_counter_ns()
        try: os.stat(p)
        except FileNotFoundError: pass
        lat.append(time.perf_counter_ns() - t)
    return lat
def idle(secs, how):
    t=time.time()
    while time.time()-t < secs:
        if how=="kernelmiss":
            try: os.stat(d+"/w7-no-such-name")
            except FileNotFoundError: pass
res=[]
for how in ("cpu","cpu","sleep","sleep"):
    if how=="sleep": time.sleep(1)
    else: idle(1, how)
    f=phase(how+"f%d"%len(res),1000); n=phase(how+"n%d"%len(res),3000)
    res.append("%s: first1000 med=%.1f  next3000 med=%.1f"%(how, statistics.median(f)/1000, statistics.median(n)/1000))
print(" | ".join(res))
