//! The adapter's counters and gauges: requests by opcode, the serving
//! threads, the kernel's negative-dentry budget and permission checks. The
//! backend's own are served beside them (`Backend::stats`).

churnfs_vfs::counters! {
    /// Every counter and gauge of the adapter (docs/design.md, "Stats").
    pub struct Stats {
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
    // notifications a shared-mode backend asked for, sent and refused
    kernel_inval_entries,
    kernel_inval_inodes,
    kernel_inval_refused,
    kernel_inval_dropped,
    }
}
