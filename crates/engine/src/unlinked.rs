//! unlinked: inodes with `nlink == 0` that are still open or still known to
//! the kernel, and their recovery after a crash.
//!
//! In memory: a hash set, O(1) insert, remove and membership; no list walk.
//! On the store: one `U|ino` record per member, written by the same commit as
//! the unlink that created the need (the journal writes it with the inode).
//! At last release / FORGET the inode leaves the set and is freed: the
//! journal deletes its inode, blocks, xattrs and `U` record in one commit.
//! After a crash the `U` records name exactly the inodes to reclaim;
//! `recover` frees them in bounded batches, so its cost is proportional to
//! the set, not to the filesystem.
//!
//! Bound: the set holds at most `UNLINKED_MAX` inodes (asserted); it cannot
//! exceed the number of open handles plus kernel-known inodes.

use crate::error::Result;
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

/// Frees every inode the store lists as unlinked (after a crash no handle
/// and no kernel reference survives). Returns how many were freed.
pub fn recover(store: &dyn KvStore) -> Result<u64> {
    let prefix = format::unlinked_prefix();
    let mut freed = 0u64;
    loop {
        let page = store.scan(&prefix, &prefix, RECOVERY_BATCH)?;
        if page.is_empty() {
            break;
        }
        let mut batch = Batch::default();
        for (k, v) in &page {
            let Key::Unlinked(ino) = format::decode_key(k)? else {
                unreachable!("scan of the U prefix returned another key")
            };
            format::decode_unlinked(ino, v)?;
            delete_inode_records(store, ino, &mut batch)?;
            freed += 1;
        }
        store.apply(batch)?;
    }
    if freed > 0 {
        store.sync()?;
    }
    Ok(freed)
}
