//! Counters and gauges of a shared-mode mount, readable while mounted.

churnfs_vfs::counters! {
    /// Every counter and gauge of the shared-mode engine (docs/design.md
    /// §15, "Stats").
    pub struct Stats {
    engine "the metadata engine: reads, scans, commits (grouped or alone), conflicts, retries" {
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
    }
    deleg "delegated directories (deleg.rs): held, taken, recalled, ended, lost; operations answered from an image or passed through; batches; image keys; recalls made and waited for" {
        #[gauge] delegations_held,
        delegations_taken,
        delegations_recalled,
        delegations_ended,
        delegations_lost,
        delegation_local_ops,
        delegation_passed,
        delegation_conflicts,
        delegation_deferred_frees,
        delegation_deferred_closes,
        #[gauge] delegation_deferred_files,
        delegation_guard_rechecks,
        delegation_flushes,
        #[gauge] delegation_keys,
        recalls_made,
        recall_wait_us,
    }
    session "this mount's session in the engine: its id, lease renewals, fences" {
        #[gauge] session_id,
        session_renewals,
        session_renewal_failures,
        sessions_started,
        fenced,
    }
    inodes "inode records cached for this mount's reads (icache.rs) and read ahead for lookups that walk a directory, inodes the kernel holds, files open" {
        #[gauge] icache_entries,
        #[gauge] icache_entries_max,
        icache_hits,
        icache_misses,
        icache_evictions,
        icache_readaheads,
        icache_readahead_records,
        #[gauge] kernel_known_inodes,
        #[gauge] open_files,
        ino_ranges_taken,
    }
    unlinked "files unlinked while open here, freed at last close; sessions that ended without unmounting, reclaimed" {
        #[gauge] unlinked_inodes,
        unlinked_freed,
        #[gauge] frees_pending,
        sessions_reclaimed,
        reclaimed_inodes,
    }
    deletes "the delete queue: items queued and done, the backlog, chunks and objects freed" {
        delete_queued,
        delete_done,
        #[gauge] delete_backlog,
        chunks_freed,
        objects_deleted,
        object_delete_batches,
    }
    dirty "file data written here and not yet uploaded; flushes and uploads" {
        #[gauge] dirty_bytes,
        #[gauge] dirty_bytes_max,
        dirty_files,
        writer_flushes,
        flushes,
        objects_put,
        object_bytes_put,
        upload_window_retries,
        upload_refreshes,
    }
    objects "object reads, the read cache in memory and on local disk, compactions, damage" {
        objects_got,
        object_bytes_got,
        #[gauge] object_cache_bytes,
        #[gauge] object_cache_bytes_max,
        object_cache_hits,
        object_cache_misses,
        #[gauge] disk_cache_bytes,
        #[gauge] disk_cache_bytes_max,
        #[gauge] disk_cache_entries,
        #[gauge] disk_cache_entries_max,
        disk_cache_hits,
        disk_cache_misses,
        disk_cache_evictions,
        disk_cache_errors,
        chunk_compactions,
        background_compactions,
        #[gauge] compactions_pending,
        compactions_dropped,
        compactions_conflicted,
        objects_discarded,
        object_errors,
        corrupt_objects,
        stale_chunk_rereads,
    }
    watch "following other mounts' changes: events, invalidations sent to the kernel" {
        watch_events,
        watch_foreign,
        watch_restarts,
        inval_entries,
        inval_inodes,
        pages_dropped_at_open,
    }
    }
}
