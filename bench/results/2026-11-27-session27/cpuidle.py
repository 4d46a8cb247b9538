import time,sys
def snap():
    out={}
    for l in open('/proc/stat'):
        if l.startswith('cpu') and l[3].isdigit():
            f=l.split(); out[f[0]]=(sum(map(int,f[1:8])), int(f[4])+int(f[5]))
    return out
prev=snap(); t0=time.time()
while time.time()-t0 < float(sys.argv[1]):
    time.sleep(0.1)
    cur=snap()
    s=[]
    for c in sorted(cur):
        tot=cur[c][0]-prev[c][0]; idle=cur[c][1]-prev[c][1]
        s.append("%s busy %3d%%"%(c, 100-100*idle//max(tot,1)))
    print("%.1f "%(time.time()-t0)+"  ".join(s), flush=True)
    prev=cur
