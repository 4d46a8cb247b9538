//! Errors of a backend (the engine) and of the store below it. The adapter maps
//! `EngineError` to an errno in exactly one function; the CLI prints `Display`.

use crate::types::Ino;

/// A failure of the key-value store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store I/O failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("store is locked by another process (already mounted?)")]
    Locked,
    #[error("store engine failed: {0}")]
    Engine(String),
    #[error("store is full (no space left on its device)")]
    NoSpace,
    #[error("store refused writes after an earlier failure")]
    Poisoned,
    #[error("store closed: opening it again after a failure did not succeed")]
    Closed,
    /// Shared mode: the metadata engine or the object store did not answer
    /// within the operation's deadline (no quorum, unreachable).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// Shared mode: this mount's session expired (partitioned or paused
    /// past its lease); it writes nothing until it has a new one.
    #[error("this mount's session expired; it writes nothing until it has a new one")]
    Fenced,
}

impl StoreError {
    /// Classify an I/O error: ENOSPC and EDQUOT become `NoSpace`.
    pub fn from_io(e: std::io::Error) -> StoreError {
        match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => StoreError::NoSpace,
            _ => StoreError::Io(e),
        }
    }
}

/// Everything an engine operation can answer besides success.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("no such file or directory")]
    NotFound,
    #[error("file exists")]
    Exists,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    #[error("name longer than 255 bytes")]
    NameTooLong,
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    #[error("file too large")]
    FileTooBig,
    #[error("no such attribute")]
    NoAttr,
    #[error("attribute value does not fit the buffer")]
    Range,
    #[error("attribute value too large")]
    TooBig,
    #[error("no space left")]
    NoSpace,
    #[error("operation not permitted")]
    Perm,
    #[error("permission denied")]
    Access,
    #[error("too many links")]
    TooManyLinks,
    #[error("operation not supported")]
    NotSupported,
    #[error("offset beyond the end of data")]
    NoSuchOffset,
    #[error("engine stopped after a failed store write; remount to recover")]
    Stopped,
    #[error("store corrupt at {ino:?}: {what}")]
    Corrupt { ino: Option<Ino>, what: String },
    #[error("not a churnfs store: {0}")]
    NotAStore(String),
    #[error("store has format version {found}, this churnfs reads version {expected}")]
    WrongVersion { found: u32, expected: u32 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl EngineError {
    pub fn corrupt(ino: Option<Ino>, what: impl Into<String>) -> EngineError {
        EngineError::Corrupt {
            ino,
            what: what.into(),
        }
    }
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;
