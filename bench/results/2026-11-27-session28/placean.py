"""How W3 P=4's four callers were split over the two CPUs, from w3place.sh files.

  placean.py LABEL=FILE ...   (FILE.res holds the run's W3 output)
"""
import sys, collections

print("run              truncates/s  samples  callers 2/2  callers 3/1 or 1/3  callers 4/0 or 0/4  other  unbalanced share")
for arg in sys.argv[1:]:
    label, f = arg.split("=", 1)
    by_t = collections.defaultdict(list)
    for line in open(f):
        r = line.split()
        if len(r) >= 5:
            by_t[r[0]].append(r)
    c = collections.Counter()
    for rs in by_t.values():
        callers = [r for r in rs if r[4].startswith("churnfs-bench")]
        if len(callers) != 4:
            c["other"] += 1
            continue
        on0 = sum(1 for r in callers if r[2] == "0")
        c[{2: "2/2", 1: "3/1", 3: "3/1", 0: "4/0", 4: "4/0"}[on0]] += 1
    rate = [x for x in open(f + ".res").read().split() if "per_s" in x][0].split("=")[1]
    four = c["2/2"] + c["3/1"] + c["4/0"]
    print(f"{label:15s}  {int(rate):11,d}  {sum(c.values()):7d}  {c['2/2']:11d}  {c['3/1']:18d}"
          f"  {c['4/0']:18d}  {c['other']:5d}  {(c['3/1'] + c['4/0']) / four:.2f}")
