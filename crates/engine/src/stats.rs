//! Counters and gauges of every cache and list, readable while mounted.
//! Gauges are set by the module that owns the structure; counters only grow.

churnfs_vfs::counters! {
    /// Every counter and gauge of the engine (docs/design.md, "Stats").
    pub struct Stats {
    inodes "inode cache (icache), inodes the kernel holds, open handles" {
        #[gauge] icache_inodes,
        #[gauge] icache_inodes_max,
        icache_hits,
        icache_misses,
        icache_evictions,
        #[gauge] kernel_known_inodes,
        #[gauge] open_handles,
    }
    names "name cache (dcache): positive entries" {
        #[gauge] dcache_positive,
        #[gauge] dcache_positive_max,
        dcache_hits,
        dcache_misses,
        dcache_evictions,
        dcache_committing_hits,
    }
    negative "name cache (dcache): negative entries, bounded apart" {
        #[gauge] dcache_negative,
        #[gauge] dcache_negative_max,
        dcache_negative_hits,
        dcache_negative_recycled,
        dcache_negative_deferred,
    }
    dirty "dirty items waiting for the next commit, and writers held back" {
        #[gauge] dirty_items,
        #[gauge] dirty_blocks,
        #[gauge] dirty_bytes_max,
        #[gauge] dirty_items_max,
        dirty_items_commits,
        #[gauge] pending_dentries,
        writer_throttles,
        writer_apply_waits,
    }
    journal "commits to the store (journal.rs) and fsyncs" {
        commits,
        commit_syncs,
        commit_items,
        commit_bytes,
        #[gauge] commit_last_us,
        #[gauge] commit_max_us,
        #[gauge] commit_locked_max_us,
        commit_locked_us,
        #[gauge] commit_staging_max_us,
        #[gauge] commit_apply_max_us,
        fsync_requests,
        fsync_shared,
        names_never_stored,
    }
    truncates "large truncates finished in the background (orphan.rs)" {
        #[gauge] truncates_pending,
        #[gauge] truncates_over_share,
        truncates_deferred,
        truncates_inline,
        truncates_done,
        truncate_batches,
        #[gauge] truncate_batch_max_us,
    }
    unlinked "files unlinked while open, and large frees in the background" {
        #[gauge] unlinked_inodes,
        unlinked_freed,
        unlinked_unstored,
        frees_unscanned,
        tmpfiles,
        recovered_unlinked,
        #[gauge] recovery_running,
        large_frees_queued,
        large_frees_done,
        #[gauge] large_frees_pending,
        large_frees_inline,
        free_batches,
    }
    store "reads of the embedded store, reopens, waits for its staging" {
        store_gets,
        store_scans,
        names_missing_unread,
        store_reopens,
        staging_waits,
    }
    engine "the engine stopped (after a failure); set-ID bits dropped by a write, truncate or chown" {
        #[gauge] engine_stopped,
        setid_cleared,
    }
    locks "the state lock and the parts' locks: acquisitions, those that found it held, their waits" {
        state_locks,
        state_locks_shared,
        state_lock_waits,
        state_lock_wait_ns,
        #[gauge] state_lock_wait_max_ns,
        part_locks,
        part_lock_waits,
        part_lock_wait_ns,
    }
    }
}
