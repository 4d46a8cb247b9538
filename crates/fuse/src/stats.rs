//! The adapter's counters and gauges: requests by opcode, the serving
//! threads, the kernel's negative-dentry budget and permission checks. The
//! backend's own are served beside them (`Backend::stats`).

churnfs_vfs::counters! {
    /// Every counter and gauge of the adapter (docs/design.md, "Stats").
    pub struct Stats {
    negative "negative dentries the kernel holds for this mount: the budget, those tracked, invalidated, answered ENOENT, dropped; whether the kernel refuses to drop them; its fs.dentry-negative" {
        #[gauge] kernel_negative_budget,
        #[gauge] kernel_negative_tracked,
        kernel_negative_invalidated,
        kernel_negative_inval_failed,
        kernel_negative_inval_enoent,
        #[gauge] kernel_negative_refused,
        #[gauge] kernel_dentry_negative_sysctl,
        kernel_negative_dropped,
        kernel_negative_compactions,
        kernel_negative_dir_flushes,
        kernel_negative_dir_flush_refused,
    }
    workers "threads reading /dev/fuse and FUSE-over-io_uring queues: parks, spins, moves, scheduling class" {
        #[gauge] workers_parked,
        worker_parks,
        worker_wakes,
        worker_backlogs,
        worker_spin_hits,
        worker_spin_misses,
        #[gauge] workers_spread,
        worker_spread_moves,
        #[gauge] sched_batch_threads,
        sched_batch_refused,
        #[gauge] ring_queues,
        ring_requests,
        ring_spin_hits,
        ring_spin_misses,
        ring_handed_off,
    }
    pruning "inodes the kernel holds for this mount, kept near kernel_inodes_max with FUSE_NOTIFY_PRUNE" {
        #[gauge] kernel_inodes_max,
        #[gauge] kernel_inodes_noted,
        kernel_prunes,
        kernel_prune_inodes,
        kernel_prune_dropped,
        #[gauge] kernel_prune_unsupported,
    }
    perm "permission checks made in the daemon" {
        perm_checks,
        perm_denied,
        perm_proc_reads,
    }
    fuse "FUSE requests served, by opcode" {
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
    notify "notifications to the kernel a shared-mode backend asked for: sent, refused, dropped" {
        kernel_inval_entries,
        kernel_inval_inodes,
        kernel_inval_refused,
        kernel_inval_dropped,
    }
    }
}
