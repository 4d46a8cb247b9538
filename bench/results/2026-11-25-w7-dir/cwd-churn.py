import os, sys, subprocess
mnt, n, phases = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def neg(): return int(open('/proc/sys/fs/dentry-state').read().split()[4])
def st(): 
    out = subprocess.run(['churnfs','stats',mnt],capture_output=True,text=True).stdout
    d = dict(l.split() for l in out.splitlines() if l.strip())
    return {k: d[k] for k in ('op_lookup','kernel_negative_dir_flushes','kernel_negative_tracked')}
os.chdir(mnt + '/b')
k = 0
for p in range(phases):
    n0 = neg()
    for i in range(n):
        name = 'f%d' % k; k += 1
        fd = os.open(name, os.O_CREAT | os.O_WRONLY, 0o644); os.write(fd, b'x'); os.close(fd)
        os.unlink(name)
    print('phase', p, 'neg +', neg() - n0, st(), flush=True)
