//! Counters and gauges of every cache and list, readable while mounted.
//! Gauges are set by the module that owns the structure; counters only grow.

churnfs_vfs::counters! {
    /// Every counter and gauge of the engine (docs/design.md, "Stats").
    pub struct Stats {
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
    // set-ID bits dropped by a write, truncate or chown
    setid_cleared,
    }
}
