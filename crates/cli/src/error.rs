//! Errors of the command line: each prints as one line that says what is
//! wrong and where.

use churnfs_engine::{EngineError, StoreError};
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}: not a churnfs store ({1})")]
    NotAStore(PathBuf, String),
    #[error("{0}: store format version {found}, this churnfs reads version {expected}", found = .1, expected = .2)]
    WrongVersion(PathBuf, u32, u32),
    #[error("{0}: store is already mounted{1}")]
    AlreadyMounted(PathBuf, String),
    #[error("{0}: directory is not empty; mkfs needs a missing or empty directory")]
    StoreNotEmpty(PathBuf),
    #[error("{0}: {1}")]
    BadMountpoint(PathBuf, &'static str),
    #[error("unknown mount option {0:?} (see `churnfs mount --help`)")]
    UnknownOption(String),
    #[error("mount option {0}: {1}")]
    BadOptionValue(String, String),
    #[error("{0}: store is corrupt: {1}")]
    Corrupt(PathBuf, String),
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("{0}: {1}")]
    Engine(PathBuf, EngineError),
    #[error("{0}")]
    Other(String),
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::UnknownOption(_) | CliError::BadOptionValue(..) => 2,
            _ => 1,
        }
    }

    /// Classifies an engine error met while opening or using the store at `path`.
    pub fn engine(path: &std::path::Path, e: EngineError) -> CliError {
        let path = path.to_path_buf();
        match e {
            EngineError::NotAStore(why) => CliError::NotAStore(path, why),
            EngineError::WrongVersion { found, expected } => {
                CliError::WrongVersion(path, found, expected)
            }
            EngineError::Store(StoreError::Locked) => CliError::AlreadyMounted(path, String::new()),
            EngineError::Corrupt { .. } => CliError::Corrupt(path, e.to_string()),
            EngineError::Store(StoreError::Engine(msg)) => CliError::Corrupt(path, msg),
            other => CliError::Engine(path, other),
        }
    }
}
