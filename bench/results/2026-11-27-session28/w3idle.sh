#!/usr/bin/env bash
# W3 P=4 alone on a fresh mount; per-CPU idle share over the run, context switches
B=$HOME/.cache/churnfs-target/release
S=$(mktemp -d /tmp/churnfs-bench.s28XXXX)
bash /work/main/bench/targets/churnfs-tmpfs.sh up $S >/dev/null
mkdir -p $S/mnt/bench
a=$(grep -E "^cpu[01] " /proc/stat); c0=$(awk '/^ctxt/{print $2}' /proc/stat)
r=$($B/churnfs-bench w3 --dir $S/mnt/bench --rounds 60 --procs 4 | grep -o "p4_truncates_per_s=[0-9]*")
b=$(grep -E "^cpu[01] " /proc/stat); c1=$(awk '/^ctxt/{print $2}' /proc/stat)
python3 - "$a" "$b" "$r" $c0 $c1 <<'PY'
import sys
a=[l.split() for l in sys.argv[1].split("\n")]; b=[l.split() for l in sys.argv[2].split("\n")]
out=[]
for x,y in zip(a,b):
    d=[int(q)-int(p) for p,q in zip(x[1:],y[1:])]
    tot=sum(d); out.append(f"{x[0]} idle {d[3]/tot:.2f} user {d[0]/tot:.2f} sys {d[2]/tot:.2f} softirq {d[6]/tot:.2f}")
rate=int(sys.argv[3].split("=")[1])
print(f"{rate:9,d}  ctxt/truncate {(int(sys.argv[5])-int(sys.argv[4]))/(rate and 1):,}".split("  ctxt")[0], " | ".join(out), f"| ctxt {int(sys.argv[5])-int(sys.argv[4]):,}")
PY
bash /work/main/bench/targets/churnfs-tmpfs.sh down $S >/dev/null
