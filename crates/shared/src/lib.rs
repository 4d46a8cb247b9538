//! churnfs shared mode: many mounts, on one machine or many, share one
//! volume. Its metadata lives in a distributed engine behind the
//! `churnfs_kv::MetaKv` trait (etcd today), its file data in object
//! storage (`object_store`); each mount is a `SharedFs` behind the same
//! adapter boundary as local mode (`churnfs_vfs::Backend`).
//!
//! docs/design.md §15 has the key schema, the transaction of every
//! operation, the session and lease protocol, the reclaim protocol and the
//! consistency contract.

pub mod backend;
pub mod check;
pub mod data;
mod deleg;
pub mod diskcache;
pub mod fs;
pub mod gc;
mod group;
mod icache;
pub mod names;
pub mod objects;
pub mod reclaim;
pub mod schema;
pub mod session;
pub mod stats;
pub mod url;
pub mod watch;

pub use fs::{MountArgs, SharedConfig, SharedFs};
pub use url::VolumeUrl;
