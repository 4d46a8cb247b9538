import re,sys,collections
rx=re.compile(r'^\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)$')
ev=[]
for l in open(sys.argv[1]):
    m=rx.match(l)
    if not m: continue
    comm,tid,cpu,t,e,rest=m.groups(); ev.append((float(t),int(cpu),e,comm,int(tid),rest))
t0=ev[0][0]
W=0.1
win=collections.defaultdict(lambda: collections.Counter())
# task cpu residency: from switch events: next task runs on cpu from time t
running={}  # cpu -> (comm,start)
for t,cpu,e,comm,tid,rest in ev:
    w=int((t-t0)/W)
    c=win[w]
    if e=='sched_wakeup':
        tc=int(re.search(r'target_cpu=(\d+)',rest).group(1))
        wc=re.search(r'comm=(\S+)',rest).group(1)
        if wc.startswith('churnfs-dev') or wc=='churnfs-bench':
            c['wake']+=1
            if tc!=cpu: c['wake_x']+=1
            if comm=='swapper': c['wake_from_idle']+=1
    elif e=='sched_switch':
        nxt=re.search(r'next_comm=(.*?) next_pid=(\d+)',rest)
        prev=running.get(cpu)
        if prev:
            c['run_'+('idle' if prev[0].startswith('swapper') else ('dev' if prev[0].startswith('churnfs-dev') else ('bench' if prev[0]=='churnfs-bench' else 'other')))+str(cpu)]+=t-prev[1]
        running[cpu]=(nxt.group(1),t)
        c['switch']+=1
    elif e=='sched_migrate_task':
        mc=re.search(r'comm=(\S+)',rest).group(1)
        if mc.startswith('churnfs'): c['migr']+=1
print("win  wakes  cross%  switches migr | idle0 idle1 dev0 dev1 bench0 bench1 (ms)")
for w in sorted(win):
    c=win[w]
    if c['wake']<50: continue
    print("%4.1f %6d %5.0f%% %7d %4d | %5.0f %5.0f %5.0f %5.0f %5.0f %5.0f"%(w*W,c['wake'],100*c['wake_x']/max(c['wake'],1),c['switch'],c['migr'],
      1000*c['run_idle0'],1000*c['run_idle1'],1000*c['run_dev0'],1000*c['run_dev1'],1000*c['run_bench0'],1000*c['run_bench1']))
