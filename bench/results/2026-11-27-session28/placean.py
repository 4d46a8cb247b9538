import sys, collections
for f in sys.argv[1:]:
    rows=[l.split() for l in open(f) if len(l.split())>=5]
    # per sample time: which CPU each reader and each caller is on, and running state
    by_t=collections.defaultdict(list)
    for r in rows: by_t[r[0]].append(r)
    stats=collections.Counter()
    for t,rs in by_t.items():
        readers=[r for r in rs if r[4].startswith("churnfs-dev")]
        callers=[r for r in rs if r[4].startswith("churnfs-bench")]
        rc=collections.Counter(r[2] for r in readers)
        cc=collections.Counter(r[2] for r in callers)
        key=f"readers cpu0={rc.get('0',0)} cpu1={rc.get('1',0)} | callers cpu0={cc.get('0',0)} cpu1={cc.get('1',0)}"
        stats[key]+=1
    res=open(f+".res").read().strip().split("\n")
    print(f, [x for x in res if "per_s" in x])
    for k,v in stats.most_common(6): print(f"  {v:4d} {k}")
