//! unlinked: inodes with `nlink == 0` that are still open or still known to
//! the kernel, and their recovery after a crash.
//!
//! In memory: a hash set, O(1) insert, remove and membership; no list walk.
//! On the store: one `U|ino` record per member, written by the same commit as
//! the unlink that created the need (the journal writes it with the inode).
//! At last release / FORGET the inode leaves the set and is freed: the
//! journal deletes its inode, blocks, xattrs and `U` record in one commit.
//! After a crash the `U` records name exactly the inodes to reclaim. The
//! mount does not wait for them: a background thread (`reclaimer` in
//! journal.rs) frees them in bounded batches while the filesystem serves
//! requests, so mounting costs the same whatever a crash left behind. A `U`
//! record whose inode is in memory belongs to this mount (an inode unlinked
//! while open since) and is left alone; one that is not can never be reached
//! again (it has no name), so freeing it outside the state lock is safe.
//!
//! Bound: the set holds at most `UNLINKED_MAX` inodes (asserted); it cannot
//! exceed the number of open handles plus kernel-known inodes.

use crate::error::{EngineError, Result};
use crate::format::{self, Key};
use crate::store::{Batch, KvStore};
use crate::types::Ino;
use std::collections::HashSet;

/// Ceiling on the set (far above what the kernel and open files can hold).
pub const UNLINKED_MAX: usize = 1 << 26;
/// Inodes reclaimed per store batch during recovery.
pub const RECOVERY_BATCH: usize = 256;

#[derive(Default)]
pub struct Unlinked {
    set: HashSet<Ino>,
}

impl Unlinked {
    pub fn insert(&mut self, ino: Ino) {
        assert!(self.set.len() < UNLINKED_MAX, "unlinked set over its bound");
        self.set.insert(ino);
    }
    pub fn remove(&mut self, ino: Ino) -> bool {
        self.set.remove(&ino)
    }
    pub fn contains(&self, ino: Ino) -> bool {
        self.set.contains(&ino)
    }
    pub fn len(&self) -> usize {
        self.set.len()
    }
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

/// Adds to `batch` the deletion of everything the store holds for `ino`.
pub fn delete_inode_records(store: &dyn KvStore, ino: Ino, batch: &mut Batch) -> Result<()> {
    let prefix = format::block_prefix(ino);
    let mut start = prefix.clone();
    loop {
        let page = store.scan(&prefix, &start, 1024)?;
        let Some((last, _)) = page.last() else { break };
        start = last.clone();
        start.push(0);
        let full = page.len() == 1024;
        for (k, _) in page {
            batch.delete(k);
        }
        if !full {
            break;
        }
    }
    batch.delete(format::inode_key(ino));
    batch.delete(format::xattr_key(ino));
    batch.delete(format::unlinked_key(ino));
    Ok(())
}

/// One page of at most `limit` `U` records from key `start` on: the inodes
/// they name, and the key the next page starts at (`None` after the last).
pub fn orphan_page(
    store: &dyn KvStore,
    start: &[u8],
    limit: usize,
) -> Result<(Vec<Ino>, Option<Vec<u8>>)> {
    let prefix = format::unlinked_prefix();
    let page = store.scan(&prefix, start, limit)?;
    let next = match page.last() {
        Some((last, _)) if page.len() == limit => {
            let mut n = last.clone();
            n.push(0);
            Some(n)
        }
        _ => None,
    };
    let mut inos = Vec::with_capacity(page.len());
    for (k, v) in &page {
        let Key::Unlinked(ino) = format::decode_key(k)? else {
            return Err(EngineError::corrupt(
                None,
                "a scan of the unlinked records returned another key",
            ));
        };
        format::decode_unlinked(ino, v)?;
        inos.push(ino);
    }
    Ok((inos, next))
}
