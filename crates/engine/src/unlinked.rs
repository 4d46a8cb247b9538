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
//! reclaim.rs) frees them in bounded batches while the filesystem serves
//! requests, so mounting costs the same whatever a crash left behind. A `U`
//! record whose inode is in memory belongs to this mount (an inode unlinked
//! while open since) and is left alone; one that is not can never be reached
//! again (it has no name), so freeing it outside the state lock is safe.
//!
//! A file larger than `FREE_INLINE_MAX` is not deleted by the commit that
//! frees it: that commit keeps its `U` record and hands the inode to the
//! same thread (`FreeQueue`), which deletes its blocks in store batches of
//! at most `free_batch_keys` keys and its own records last (`Freer`). So no
//! commit, and no request waiting on the state lock, pays for a large file's
//! data; a crash part way leaves the `U` record, and recovery finishes it.
//!
//! Bounds: the set holds at most `UNLINKED_MAX` inodes (asserted); it cannot
//! exceed the number of open handles plus kernel-known inodes. The free
//! queue holds at most `FREE_QUEUE_MAX` inodes; past it a commit frees the
//! file itself, as it does small ones.

use crate::error::{EngineError, Result};
use crate::format::{self, Key};
use crate::store::{Batch, KvStore};
use crate::types::{Ino, InoSet};
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Ceiling on the set (far above what the kernel and open files can hold).
pub const UNLINKED_MAX: usize = 1 << 26;
/// Inodes reclaimed per store batch during recovery.
pub const RECOVERY_BATCH: usize = 256;
/// Files up to this size are deleted by the commit that frees them (at most
/// 64 block keys); larger ones go to the reclaim thread.
pub const FREE_INLINE_MAX: u64 = 64 * format::BLOCK_SIZE;
/// Inodes waiting for the reclaim thread to delete their data.
pub const FREE_QUEUE_MAX: usize = 1024;

#[derive(Default)]
pub struct Unlinked {
    set: InoSet,
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

/// Adds to `batch` the deletion of everything the store holds for `ino`
/// (a commit's batch: the `Freer`'s pages all go into it, none is applied).
pub fn delete_inode_records(store: &dyn KvStore, ino: Ino, batch: &mut Batch) -> Result<u64> {
    let mut freer = Freer::new(store, 1024);
    let mut gather = |b: Batch| {
        batch.ops.extend(b.ops);
        Ok(())
    };
    freer.free(ino, &|| false, &mut gather)?;
    freer.flush(&mut gather)?;
    Ok(freer.scans)
}

/// Deletes what the store holds for inodes nothing can reach any more, in
/// store batches of at most `max_keys` keys (plus an inode's own three):
/// blocks first, the inode, xattr and `U` records last, so that a crash at
/// any point leaves the `U` record to finish from.
pub struct Freer<'a> {
    store: &'a dyn KvStore,
    batch: Batch,
    max_keys: usize,
    /// Store batches applied so far.
    pub batches: u64,
    /// Pages of block keys read so far.
    pub scans: u64,
}

impl<'a> Freer<'a> {
    pub fn new(store: &'a dyn KvStore, max_keys: usize) -> Freer<'a> {
        Freer {
            store,
            batch: Batch::default(),
            max_keys: max_keys.max(1),
            batches: 0,
            scans: 0,
        }
    }

    /// Adds the deletion of everything of `ino`, applying each full batch
    /// with `apply`. Between batches it asks `stop`; `false` if it stopped
    /// before the inode's own records were added.
    pub fn free(
        &mut self,
        ino: Ino,
        stop: &dyn Fn() -> bool,
        apply: &mut dyn FnMut(Batch) -> Result<()>,
    ) -> Result<bool> {
        let prefix = format::block_prefix(ino);
        let mut start = prefix.clone();
        loop {
            if self.batch.len() >= self.max_keys {
                self.flush(apply)?;
                if stop() {
                    return Ok(false);
                }
            }
            let room = self.max_keys - self.batch.len();
            let page = self.store.scan_keys(&prefix, &start, room)?;
            self.scans += 1;
            let full = page.len() == room;
            if let Some(last) = page.last() {
                // The next page starts after this one, not at the prefix:
                // the deletions applied meanwhile are not walked again.
                start = last.clone();
                start.push(0);
            }
            for k in page {
                self.batch.delete(k);
            }
            if !full {
                break;
            }
        }
        self.batch.delete(format::inode_key(ino));
        self.batch.delete(format::xattr_key(ino));
        self.batch.delete(format::unlinked_key(ino));
        self.batch.delete(format::truncate_key(ino));
        Ok(true)
    }

    /// Applies what is gathered.
    pub fn flush(&mut self, apply: &mut dyn FnMut(Batch) -> Result<()>) -> Result<()> {
        if !self.batch.is_empty() {
            apply(std::mem::take(&mut self.batch))?;
            self.batches += 1;
        }
        Ok(())
    }
}

/// What the reclaim thread gets from `FreeQueue::next`.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    Free(Ino),
    /// Delete the blocks of a pending truncate (orphan.rs).
    Truncate(Ino),
    Idle,
    Stop,
}

#[derive(Default)]
struct Queue {
    inos: VecDeque<Ino>,
    /// The same inodes, for `contains` (at most `FREE_QUEUE_MAX`).
    queued: InoSet,
    /// Files with a pending truncate range, each once (at most
    /// `TRUNCATES_PENDING_MAX`: only members of that set are pushed).
    truncates: VecDeque<Ino>,
    truncates_queued: InoSet,
    /// The inode the thread is deleting.
    busy: Option<Ino>,
    /// The thread is deleting a truncate's blocks.
    busy_truncate: bool,
    /// Recovery of a crash's orphans has not ended.
    recovering: bool,
    /// Shutdown asked, or the thread ended.
    stop: bool,
}

/// Freed large files waiting for the reclaim thread (see the module doc).
pub struct FreeQueue {
    q: Mutex<Queue>,
    cv: Condvar,
}

impl Default for FreeQueue {
    fn default() -> FreeQueue {
        FreeQueue {
            q: Mutex::new(Queue {
                recovering: true,
                ..Queue::default()
            }),
            cv: Condvar::new(),
        }
    }
}

impl FreeQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.q.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `ino`; `false` when the queue is full or stopped (the caller
    /// then frees the inode itself).
    pub fn push(&self, ino: Ino) -> bool {
        let mut q = self.lock();
        if q.stop || q.inos.len() >= FREE_QUEUE_MAX {
            return false;
        }
        if q.queued.insert(ino) {
            q.inos.push_back(ino);
        }
        self.cv.notify_all();
        true
    }

    /// Queues the deletion of `ino`'s pending truncate range.
    pub fn push_truncate(&self, ino: Ino) {
        let mut q = self.lock();
        if q.stop {
            return;
        }
        if q.truncates_queued.insert(ino) {
            q.truncates.push_back(ino);
        }
        assert!(
            q.truncates.len() <= crate::orphan::TRUNCATES_PENDING_MAX,
            "truncate queue over its bound"
        );
        self.cv.notify_all();
    }

    /// `ino` is queued or being freed: its `U` record is this mount's, not
    /// a crash's orphan (the recovery walk leaves it alone).
    pub fn contains(&self, ino: Ino) -> bool {
        let q = self.lock();
        q.busy == Some(ino) || q.queued.contains(&ino)
    }

    pub fn len(&self) -> usize {
        self.lock().inos.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next inode to free (the caller calls `done` after it), waiting
    /// at most `wait` for one.
    pub fn next(&self, wait: Duration) -> Next {
        let mut q = self.lock();
        if q.inos.is_empty() && q.truncates.is_empty() && !q.stop {
            q = self
                .cv
                .wait_timeout(q, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        if q.stop {
            return Next::Stop;
        }
        match q.inos.pop_front() {
            Some(ino) => {
                q.queued.remove(&ino);
                q.busy = Some(ino);
                Next::Free(ino)
            }
            None => match q.truncates.pop_front() {
                Some(ino) => {
                    q.truncates_queued.remove(&ino);
                    q.busy_truncate = true;
                    Next::Truncate(ino)
                }
                None => Next::Idle,
            },
        }
    }

    /// The inode taken last is done with.
    pub fn done(&self) {
        let mut q = self.lock();
        q.busy = None;
        q.busy_truncate = false;
        self.cv.notify_all();
    }

    /// Recovery ended.
    pub fn recovered(&self) {
        self.lock().recovering = false;
        self.cv.notify_all();
    }

    /// Shutdown, or the thread ended: nothing more is taken or waited for.
    /// What is still queued keeps its `U` record for the next mount.
    pub fn stop(&self) {
        self.lock().stop = true;
        self.cv.notify_all();
    }

    pub fn stopping(&self) -> bool {
        self.lock().stop
    }

    /// Waits until recovery has ended and every queued inode is freed, or
    /// the queue stopped.
    pub fn wait_idle(&self) {
        let mut q = self.lock();
        while !q.stop
            && (q.recovering
                || q.busy.is_some()
                || q.busy_truncate
                || !q.inos.is_empty()
                || !q.truncates.is_empty())
        {
            q = self
                .cv
                .wait_timeout(q, Duration::from_millis(100))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_free_queue_knows_what_it_holds_until_it_is_done() {
        let q = FreeQueue::default();
        assert!(q.push(Ino(7)));
        assert!(q.push(Ino(7)), "a second push of the same inode is a no-op");
        assert_eq!(q.len(), 1);
        assert!(q.contains(Ino(7)));
        assert!(!q.contains(Ino(8)));
        assert_eq!(q.next(Duration::ZERO), Next::Free(Ino(7)));
        assert!(q.contains(Ino(7)), "being freed");
        assert_eq!(q.next(Duration::ZERO), Next::Idle);
        q.done();
        assert!(!q.contains(Ino(7)));
        q.stop();
        assert!(!q.push(Ino(9)), "a stopped queue takes nothing");
        assert_eq!(q.next(Duration::ZERO), Next::Stop);
    }

    #[test]
    fn the_free_queue_has_a_bound() {
        let q = FreeQueue::default();
        for i in 0..FREE_QUEUE_MAX as u64 {
            assert!(q.push(Ino(1000 + i)));
        }
        assert!(!q.push(Ino(1)), "full: the caller frees inline");
        assert_eq!(q.len(), FREE_QUEUE_MAX);
    }
}
