//! The store directory: layout, creation, opening with its lock, and fsck.
//!
//! ```text
//! STORE/db/          the fjall database (every record)
//! STORE/lock         flock()ed by the process that mounts or checks the store
//! STORE/stats.sock   the mounted daemon's stats socket
//! STORE/mount.log    log of a daemon started with --background
//! ```

use crate::error::CliError;
use crate::Result;
use churnfs_engine::{check, Engine, EngineError, FjallStore, StoreError};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// fjall's block cache for the daemon and fsck.
const STORE_CACHE_BYTES: u64 = 64 << 20;

pub fn lock_path(store: &Path) -> PathBuf {
    store.join("lock")
}
pub fn sock_path(store: &Path) -> PathBuf {
    store.join("stats.sock")
}
pub fn log_path(store: &Path) -> PathBuf {
    store.join("mount.log")
}

/// An exclusive hold on a store, released when dropped (or the process dies).
pub struct StoreLock {
    _file: File,
}

/// Checks that `store` looks like a churnfs store and takes its lock.
pub fn lock(store: &Path) -> Result<StoreLock> {
    if !store.is_dir() {
        return Err(CliError::NotAStore(
            store.into(),
            "no such directory".into(),
        ));
    }
    if !store.join(churnfs_engine::store::DB_DIR).is_dir() || !lock_path(store).is_file() {
        return Err(CliError::NotAStore(
            store.into(),
            "no churnfs database in it".into(),
        ));
    }
    lock_file(store)
}

/// Takes the store's lock file, naming the holder when it is taken.
fn lock_file(store: &Path) -> Result<StoreLock> {
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(lock_path(store))
        .map_err(|e| CliError::Io(lock_path(store), e))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let mut holder = String::new();
        let _ = f.read_to_string(&mut holder);
        let holder = holder.trim();
        let by = if holder.is_empty() {
            String::new()
        } else {
            format!(" (by pid {holder})")
        };
        return Err(CliError::AlreadyMounted(store.into(), by));
    }
    let _ = f.set_len(0);
    let _ = f.rewind();
    let _ = write!(f, "{}", std::process::id());
    Ok(StoreLock { _file: f })
}

/// Opens the store's database (the caller holds the lock) and checks its superblock.
pub fn open(store: &Path) -> Result<Arc<FjallStore>> {
    let kv = FjallStore::open(store, false, STORE_CACHE_BYTES).map_err(|e| match e {
        StoreError::Locked => CliError::AlreadyMounted(store.into(), String::new()),
        StoreError::Engine(msg) => CliError::Corrupt(store.into(), msg),
        other => CliError::engine(store, EngineError::Store(other)),
    })?;
    Engine::read_superblock(&kv).map_err(|e| CliError::engine(store, e))?;
    Ok(Arc::new(kv))
}

pub fn mkfs(store: &Path) -> Result<ExitCode> {
    if store.exists() {
        let mut entries = std::fs::read_dir(store).map_err(|e| CliError::Io(store.into(), e))?;
        if entries.next().is_some() {
            return Err(CliError::StoreNotEmpty(store.into()));
        }
    } else {
        std::fs::create_dir_all(store).map_err(|e| CliError::Io(store.into(), e))?;
    }
    File::create(lock_path(store)).map_err(|e| CliError::Io(lock_path(store), e))?;
    let _lock = lock_file(store)?;
    let kv = FjallStore::open(store, true, STORE_CACHE_BYTES)
        .map_err(|e| CliError::engine(store, e.into()))?;
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let sb = Engine::mkfs(&kv, uid, gid).map_err(|e| CliError::engine(store, e))?;
    let uuid = sb
        .uuid
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    crate::out!(
        "churnfs: created store {} (format {}, uuid {uuid})",
        store.display(),
        sb.version
    );
    Ok(ExitCode::SUCCESS)
}

pub fn fsck(store: &Path, repair: bool) -> Result<ExitCode> {
    let _lock = lock(store)?;
    let kv = open(store)?;
    let check_now = || -> Result<check::Report> {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_message("checking");
        let report = check::check_store(&*kv, &mut |n| {
            bar.set_message(format!("{n} keys read"));
            bar.tick();
        })
        .map_err(|e| CliError::engine(store, e))?;
        bar.finish_and_clear();
        Ok(report)
    };
    let mut report = check_now()?;
    for p in &report.problems {
        crate::out!("{}: {p}", store.display());
    }
    if repair && !report.fixes.is_empty() {
        let lines = check::repair_store(&*kv, &report).map_err(|e| CliError::engine(store, e))?;
        for l in &lines {
            crate::out!("{}: repaired: {l}", store.display());
        }
        report = check_now()?;
        for p in &report.problems {
            crate::out!("{}: left: {p}", store.display());
        }
    }
    if report.is_clean() {
        crate::out!(
            "{}: clean ({} inodes, {} names, {} data blocks, {} keys)",
            store.display(),
            report.inodes,
            report.dentries,
            report.blocks,
            report.keys
        );
        Ok(ExitCode::SUCCESS)
    } else {
        crate::out!(
            "{}: {} problems found{}",
            store.display(),
            report.problems.len(),
            if repair {
                " that --repair does not fix without guessing"
            } else if report.fixes.is_empty() {
                ""
            } else {
                " (--repair fixes some)"
            }
        );
        Ok(ExitCode::from(1))
    }
}
