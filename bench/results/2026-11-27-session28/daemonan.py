import sys, subprocess, collections
data=sys.argv[1]
out=subprocess.run(["perf","script","-i",data,"-F","comm,tid,ip,sym"],capture_output=True,text=True).stdout
samples=[];cur=None
for line in out.split("\n"):
    if not line.strip():
        if cur: samples.append(cur); cur=None
        continue
    if not line.startswith((" ","\t")):
        cur={"comm":line.split()[0],"stack":[]}
    elif cur is not None:
        cur["stack"].append(line.strip().split(None,1)[-1])
if cur: samples.append(cur)
d=[s for s in samples if s["comm"].startswith("churnfs-dev")]
c=collections.Counter()
for s in d:
    j=" ".join(s["stack"]).lower()
    if "release" in j: c["release"]+=1
    elif "forget" in j: c["forget"]+=1
    elif "tmpfile" in j: c["tmpfile"]+=1
    else: c["other"]+=1
print(data, len(d), dict(c))
inc=collections.Counter()
for s in d:
    j=" ".join(s["stack"]).lower()
    if "release" in j or "forget" in j:
        for f in set(s["stack"]): inc[f]+=1
for k,v in inc.most_common(40): print(f"  {v:6d} {k[:110]}")
