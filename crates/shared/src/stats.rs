//! Counters and gauges of a shared-mode mount, readable while mounted.

churnfs_vfs::counters! {
    /// Every counter and gauge of the shared-mode engine (docs/design.md
    /// §15, "Stats").
    pub struct Stats {
    // the metadata engine
    kv_reads,
    kv_scans,
    kv_commits,
    group_commits,
    group_members,
    group_retries_alone,
    kv_conflicts,
    kv_unavailable,
    kv_ambiguous_resolved,
    op_retries,
    op_timeouts,
    // delegated directories (deleg.rs): held now, taken, given back on
    // request, ended here, lost with a session; operations answered from
    // an image, passed through to the engine with it, refused by it;
    // batches committed; keys the images hold; recalls this mount made and
    // the time it waited for them
    delegations_held,
    delegations_taken,
    delegations_recalled,
    delegations_ended,
    delegations_lost,
    delegation_local_ops,
    delegation_passed,
    delegation_conflicts,
    delegation_deferred_frees,
    delegation_deferred_closes,
    delegation_deferred_files,
    delegation_guard_rechecks,
    delegation_flushes,
    delegation_keys,
    recalls_made,
    recall_wait_us,
    // the session
    session_id,
    session_renewals,
    session_renewal_failures,
    sessions_started,
    fenced,
    // inode records cached for this mount's own reads (icache.rs)
    icache_entries,
    icache_entries_max,
    icache_hits,
    icache_misses,
    icache_evictions,
    // inodes this mount's kernel holds, and files open here
    kernel_known_inodes,
    open_files,
    ino_ranges_taken,
    // files unlinked while open here (recorded for this session), freed at
    // last close or forget
    unlinked_inodes,
    unlinked_freed,
    frees_pending,
    // other sessions that ended without unmounting, and what was reclaimed
    sessions_reclaimed,
    reclaimed_inodes,
    // the delete queue: items this mount queued and did, the difference
    // (its backlog), chunks and objects freed
    delete_queued,
    delete_done,
    delete_backlog,
    chunks_freed,
    objects_deleted,
    object_delete_batches,
    // file data
    dirty_bytes,
    dirty_bytes_max,
    dirty_files,
    writer_flushes,
    flushes,
    objects_put,
    object_bytes_put,
    objects_got,
    object_bytes_got,
    object_cache_bytes,
    object_cache_bytes_max,
    object_cache_hits,
    object_cache_misses,
    // the read cache on local disk (diskcache.rs)
    disk_cache_bytes,
    disk_cache_bytes_max,
    disk_cache_entries,
    disk_cache_entries_max,
    disk_cache_hits,
    disk_cache_misses,
    disk_cache_evictions,
    disk_cache_errors,
    chunk_compactions,
    background_compactions,
    compactions_pending,
    compactions_dropped,
    compactions_conflicted,
    objects_discarded,
    upload_window_retries,
    upload_refreshes,
    object_errors,
    corrupt_objects,
    stale_chunk_rereads,
    // following other mounts' changes
    watch_events,
    watch_foreign,
    watch_restarts,
    inval_entries,
    inval_inodes,
    pages_dropped_at_open,
    }
}
