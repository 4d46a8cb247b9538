import os, sys, time
d = sys.argv[1]; n = int(sys.argv[2])
os.makedirs(d, exist_ok=True)
ts = []
pc = time.perf_counter_ns
st = os.stat
for i in range(n):
    p = f"{d}/m{i}"
    t0 = pc()
    try: st(p)
    except FileNotFoundError: pass
    ts.append(pc() - t0)
ts.sort()
tot = sum(ts)
big = sum(t for t in ts if t > 100_000)
nbig = sum(1 for t in ts if t > 100_000)
mid = sum(t for t in ts if 30_000 < t <= 100_000)
print(f"mean={tot/n/1000:.2f}us p50={ts[n//2]/1000:.2f} p90={ts[int(n*.9)]/1000:.2f} p99={ts[int(n*.99)]/1000:.2f} p999={ts[int(n*.999)]/1000:.1f} max={ts[-1]/1000:.0f} stall>100us: n={nbig} share={big/tot*100:.1f}% 30-100us share={mid/tot*100:.1f}%")
