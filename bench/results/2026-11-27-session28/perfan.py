"""Summaries of a W1 perf.data (perf record -a -g).

  perfan.py close DATA   samples of the W1 worker processes in close(2) or __fput:
                         leaf, first-named and inclusive counts
  perfan.py daemon DATA  samples of churnfs's readers handling a RELEASE or FORGET
"""
import sys, subprocess, collections


def samples(data):
    out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,ip,sym"],
                         capture_output=True, text=True).stdout
    found, cur = [], None
    for line in out.split("\n"):
        if not line.strip():
            if cur:
                found.append(cur)
            cur = None
        elif not line.startswith((" ", "\t")):
            cur = {"comm": line.split()[0], "stack": []}
        elif cur is not None:
            cur["stack"].append(line.strip().split(None, 1)[-1])
    if cur:
        found.append(cur)
    return found


FIRST = ("fuse_evict_inode", "fuse_release", "fuse_file_put", "fuse_simple_background",
         "fuse_queue_forget", "dput", "evict", "iput", "fuse_release_common",
         "fuse_file_release", "__dentry_kill", "destroy_inode", "fuse_free_inode",
         "kmem_cache_free", "try_to_wake_up", "fuse_request_alloc", "__wake_up", "dentry_free",
         "fuse_prepare_release", "truncate_inode_pages_final", "locks_remove_file", "fsnotify",
         "security_file_free", "__x64_sys_close", "file_close_fd", "filp_flush")


def close(all_samples):
    cs = [s for s in all_samples if s["comm"].startswith("churnfs-bench")
          and any(f in ("__fput", "__fput_sync", "task_work_run") or f.startswith("__x64_sys_close")
                  for f in s["stack"])]
    print("total samples", len(all_samples), "close samples", len(cs))
    leaf = collections.Counter(s["stack"][0] for s in cs)
    first = collections.Counter()
    for s in cs:
        hit = next((f for f in s["stack"] if f in FIRST), None)
        first[hit if hit else "other:" + s["stack"][0]] += 1
    inc = collections.Counter(f for s in cs for f in set(s["stack"]))
    for k, v in leaf.most_common(25):
        print(f"leaf {v:6d} {k}")
    for k, v in first.most_common(30):
        print(f"first {v:6d} {k}")
    for k, v in inc.most_common(45):
        print(f"incl {v:6d} {k}")
    print(collections.Counter(s["comm"] for s in all_samples).most_common(10))


def daemon(all_samples, data):
    d = [s for s in all_samples if s["comm"].startswith("churnfs-dev")]
    kinds = collections.Counter()
    inc = collections.Counter()
    for s in d:
        j = " ".join(s["stack"]).lower()
        kind = next((k for k in ("release", "forget", "tmpfile") if k in j), "other")
        kinds[kind] += 1
        if kind in ("release", "forget"):
            inc.update(set(s["stack"]))
    print(data, len(d), dict(kinds))
    for k, v in inc.most_common(40):
        print(f"  {v:6d} {k[:110]}")


if __name__ == "__main__":
    mode, data = sys.argv[1], sys.argv[2]
    if mode == "close":
        close(samples(data))
    else:
        daemon(samples(data), data)
