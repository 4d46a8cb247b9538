//! The engine's tunables (`churnfs mount -o ...`, crates/cli/src/opts.rs).

use std::path::PathBuf;

/// Tunables, with the defaults `churnfs mount --help` lists.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub commit_interval_ms: u64,
    pub inodes_max: usize,
    pub dentries_max: usize,
    pub negative_entries_max: usize,
    pub dirty_bytes_max: u64,
    /// Dirty items (inodes, names, blocks, xattrs) before the next operation
    /// commits them without waiting for the interval.
    pub dirty_items_max: usize,
    /// Keys per store batch when the data of unlinked files is deleted in
    /// the background (large files, and a crash's orphans).
    pub free_batch_keys: usize,
    /// A shrink by more stored blocks than this leaves them to the
    /// background (orphan.rs); tests lower it to exercise that path.
    pub truncate_inline_blocks: u64,
    /// Directory whose filesystem statfs reports (the store's).
    pub statfs_path: Option<PathBuf>,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            commit_interval_ms: 5_000,
            inodes_max: 100_000,
            dentries_max: 200_000,
            negative_entries_max: 10_000,
            dirty_bytes_max: 256 << 20,
            dirty_items_max: 10_000,
            free_batch_keys: 1024,
            truncate_inline_blocks: crate::orphan::TRUNCATE_INLINE_BLOCKS,
            statfs_path: None,
        }
    }
}
