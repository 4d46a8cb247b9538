import sys, subprocess, collections
# Usage: closean.py perf.data N_FILES
data, nfiles = sys.argv[1], int(sys.argv[2])
out = subprocess.run(["perf","script","-i",data,"-F","comm,tid,cpu,ip,sym"],capture_output=True,text=True).stdout
samples=[]; cur=None
for line in out.split("\n"):
    if not line.strip():
        if cur: samples.append(cur); cur=None
        continue
    if not line.startswith((" ","\t")):
        parts=line.split()
        cur={"comm":parts[0],"stack":[]}
    elif cur is not None:
        cur["stack"].append(line.strip().split(None,1)[-1])
if cur: samples.append(cur)
close=[s for s in samples if s["comm"].startswith("churnfs-bench") and any(f in ("__fput","__x64_sys_close","__fput_sync","task_work_run") or f.startswith("__x64_sys_close") for f in s["stack"])]
print("total samples", len(samples), "close samples", len(close))
leaf=collections.Counter(s["stack"][0] for s in close)
mid=collections.Counter()
for s in close:
    st=s["stack"]
    # first frame among interesting callers
    for f in st:
        if f in ("fuse_evict_inode","fuse_release","fuse_file_put","fuse_simple_background","fuse_queue_forget","dput","evict","iput","fuse_release_common","fuse_file_release","__dentry_kill","destroy_inode","fuse_free_inode","kmem_cache_free","try_to_wake_up","fuse_request_alloc","__wake_up","dentry_free","fuse_prepare_release","truncate_inode_pages_final","locks_remove_file","fsnotify","security_file_free","__x64_sys_close","file_close_fd","filp_flush"):
            mid[f]+=1; break
    else: mid["other:"+st[0]]+=1
for k,v in leaf.most_common(25): print(f"leaf {v:6d} {k}")
for k,v in mid.most_common(30): print(f"first {v:6d} {k}")
# inclusive
inc=collections.Counter()
for s in close:
    for f in set(s["stack"]): inc[f]+=1
for k,v in inc.most_common(45): print(f"incl {v:6d} {k}")
comms=collections.Counter(s["comm"] for s in samples)
print(comms.most_common(10))
