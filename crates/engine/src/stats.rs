//! Counters and gauges of every cache and list, readable while mounted.
//! Gauges are set by the module that owns the structure; counters only grow.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

macro_rules! stats {
    ($($name:ident),* $(,)?) => {
        /// Every counter and gauge of the engine (see docs/design.md, "Stats").
        #[derive(Default, Debug)]
        pub struct Stats {
            $(pub $name: AtomicU64,)*
        }

        impl Stats {
            /// All values as `(name, value)`, in declaration order.
            pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name.load(Relaxed)),)*]
            }
        }
    };
}

stats! {
    // icache
    icache_inodes,
    icache_inodes_max,
    icache_hits,
    icache_misses,
    icache_evictions,
    kernel_known_inodes,
    open_handles,
    // dcache
    dcache_positive,
    dcache_positive_max,
    dcache_negative,
    dcache_negative_max,
    dcache_hits,
    dcache_negative_hits,
    dcache_misses,
    dcache_evictions,
    dcache_negative_recycled,
    dcache_negative_deferred,
    dcache_committing_hits,
    // journal
    dirty_items,
    dirty_blocks,
    dirty_bytes_max,
    dirty_items_max,
    dirty_items_commits,
    pending_dentries,
    commits,
    commit_syncs,
    commit_items,
    commit_bytes,
    commit_last_us,
    commit_max_us,
    commit_locked_max_us,
    commit_locked_us,
    commit_staging_max_us,
    commit_apply_max_us,
    fsync_requests,
    fsync_shared,
    writer_throttles,
    writer_apply_waits,
    names_never_stored,
    // orphan: large truncates finished in the background
    truncates_pending,
    truncates_over_share,
    truncates_deferred,
    truncates_inline,
    truncates_done,
    truncate_batches,
    truncate_batch_max_us,
    // unlinked
    unlinked_inodes,
    unlinked_freed,
    unlinked_unstored,
    frees_unscanned,
    tmpfiles,
    recovered_unlinked,
    recovery_running,
    large_frees_queued,
    large_frees_done,
    large_frees_pending,
    large_frees_inline,
    free_batches,
    // store
    store_gets,
    store_scans,
    names_missing_unread,
    // engine
    engine_stopped,
    // the state lock (fs.rs): acquisitions, how many found it held, and
    // how long those waited
    state_locks,
    state_locks_shared,
    state_lock_waits,
    state_lock_wait_ns,
    state_lock_wait_max_ns,
    // the parts' locks (fs.rs): acquisitions by operations on one inode,
    // how many found theirs held, and how long those waited
    part_locks,
    part_lock_waits,
    part_lock_wait_ns,
    // kernel negative dentries (adapter)
    kernel_negative_budget,
    kernel_negative_tracked,
    kernel_negative_invalidated,
    kernel_negative_inval_failed,
    kernel_negative_dropped,
    kernel_negative_compactions,
    kernel_negative_dir_flushes,
    kernel_negative_dir_flush_refused,
    // worker threads reading /dev/fuse (adapter)
    workers_parked,
    worker_parks,
    worker_wakes,
    worker_backlogs,
    worker_spin_hits,
    worker_spin_misses,
    // readers that kept to a CPU of their own while several callers sent
    // requests, and the moves in and out of it (adapter, workers.rs)
    workers_spread,
    worker_spread_moves,
    // serving threads (/dev/fuse readers and ring queue threads) that run
    // as SCHED_BATCH, and those the kernel refused it (adapter)
    sched_batch_threads,
    sched_batch_refused,
    // FUSE over io_uring queues (adapter, ring.rs)
    ring_queues,
    ring_requests,
    ring_spin_hits,
    ring_spin_misses,
    ring_handed_off,
    // permission checks in the daemon (adapter)
    perm_checks,
    perm_denied,
    perm_proc_reads,
    setid_cleared,
    // FUSE requests by opcode (adapter)
    op_lookup,
    op_forget,
    op_getattr,
    op_setattr,
    op_readlink,
    op_mknod,
    op_mkdir,
    op_unlink,
    op_rmdir,
    op_symlink,
    op_rename,
    op_link,
    op_open,
    op_read,
    op_write,
    op_flush,
    op_release,
    op_fsync,
    op_opendir,
    op_readdir,
    op_readdirplus,
    op_releasedir,
    op_fsyncdir,
    op_statfs,
    op_xattr,
    op_access,
    op_create,
    op_tmpfile,
    op_fallocate,
    op_lseek,
}

impl Stats {
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Relaxed);
    }
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }
    /// Takes back what `inc` or `add` gave (gauges kept as sums of parts).
    pub fn sub(c: &AtomicU64, n: u64) {
        let old = c.fetch_sub(n, Relaxed);
        debug_assert!(old >= n, "gauge below zero");
    }
    pub fn set(c: &AtomicU64, n: u64) {
        c.store(n, Relaxed);
    }
    pub fn max(c: &AtomicU64, n: u64) {
        c.fetch_max(n, Relaxed);
    }
}
