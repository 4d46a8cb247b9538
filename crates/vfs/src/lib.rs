//! churnfs's boundary between the FUSE adapter and a filesystem backend:
//! the `Backend` trait, the values that cross it, its errors and the
//! permission rules both sides apply. It knows nothing of FUSE and nothing
//! of how a backend stores what it holds.

pub mod backend;
pub mod counters;
pub mod error;
pub mod perm;
pub mod types;

pub use backend::{Backend, Coherence, KernelCache, Opened, WaitHook};
pub use error::{EngineError, Result, StoreError};
pub use types::*;
