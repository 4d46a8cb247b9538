//! churnfs engine: namespace, caches, journal and store of a filesystem that
//! keeps its costs independent of history. Nothing here knows about FUSE;
//! `churnfs-fuse` adapts the protocol to `Engine`.

pub mod backend;
pub mod check;
pub mod config;
pub mod data;
pub mod dcache;
pub mod dirty;
pub mod format;
pub mod fs;
pub mod icache;
pub mod inflight;
pub mod journal;
pub mod mount;
pub mod orphan;
pub mod reclaim;
pub mod state;
pub mod stats;
pub mod store;
pub mod unlinked;

pub use churnfs_vfs::{error, perm, types};
pub use error::{EngineError, Result, StoreError};
pub use fs::{Engine, EngineConfig};
pub use store::{store_workers, FjallStore, KvStore, MemStore};
pub use types::*;
