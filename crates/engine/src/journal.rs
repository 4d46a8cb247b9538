//! journal: dirty items, written as one atomic store batch per commit
//! (group commit), and the committer thread. Mount and unmount are
//! mount.rs's, the background reclaims reclaim.rs's.
//!
//! Every operation changes in-memory items and adds them to a dirty list
//! (`DirtyList`, one per part of the state, state.rs; a set: an item is on it
//! once, however often it changed, and the commit writes its final state;
//! names are on the name cache's pending table instead). A commit drains
//! every part's list under the state lock, held exclusively, copies each
//! inode's *final* record, takes the pending names whole and closes the
//! store to readers (inflight.rs, `Staging`), releases the lock, encodes
//! the records, puts the names into the batch and stages it as one
//! (readers see it at once and go on), and only then applies the batch to
//! the store and syncs it when durability was asked for: requests wait for
//! the drain, never for the store's write, and only store readers wait for
//! the names. After that the names it wrote go back into the name cache
//! and the inodes it wrote onto the inode cache's idle list, a thousand or
//! two per short hold of the lock (`Engine::hand_back`). A name created and
//! removed between two commits leaves the pending table when it is removed
//! (`State::set_name`): it never reaches the store.
//!
//! Triggers: the committer thread every `commit_interval_ms`; fsync and
//! fsyncdir at once (concurrent callers share one sync: a caller whose
//! changes a running commit already drained waits for that commit instead of
//! starting another); writers when dirty data exceeds `dirty_bytes_max`.
//!
//! A failed apply or sync stops the engine: every later operation answers
//! `Stopped` (EIO) until the store is mounted again.

use crate::dcache::PendingNames;
use crate::dirty::Drained;
use crate::error::{EngineError, Result};
use crate::format;
use crate::fs::{CommitCtl, Engine};
use crate::stats::Stats;
use crate::store::{Batch, KvStore};
use crate::types::Ino;
use crate::unlinked;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Names put back into the name cache per hold of the state lock after a
/// commit (`Engine::hand_back`): about half a millisecond of work here.
const RECACHE_CHUNK: usize = 1024;

/// Inodes a commit wrote put back on the idle list per hold of the state
/// lock (`Engine::hand_back`): about half a millisecond of work here.
const REPIN_CHUNK: usize = 2048;

/// Puts the names a drain took into its batch. Runs outside the state
/// lock, before the batch is published (`Staging`); lookups meanwhile read
/// the names from `DCache::committing_of`. These are the only name keys a
/// commit's batch holds (asserted by the key's tag in `debug_assertions`
/// builds: the drain's other records are an inode's own).
fn put_names(batch: &mut Batch, names: &PendingNames) {
    #[cfg(debug_assertions)]
    for op in &batch.ops {
        let (crate::store::BatchOp::Put(k, _) | crate::store::BatchOp::Delete(k)) = op;
        debug_assert_ne!(
            k.first(),
            Some(&format::TAG_DENTRY),
            "a name outside the pending table"
        );
    }
    for ((dir, hash, name), p) in names.iter() {
        let key = format::dentry_key(*dir, *hash, name);
        match p.child {
            Some((ino, kind)) => batch.put(key, format::encode_dentry(ino, kind)),
            None => {
                assert!(p.stored, "pending removal of a name the store never held");
                batch.delete(key)
            }
        }
    }
}

impl Engine {
    /// Makes every change acknowledged so far durable, sharing a running
    /// commit's sync when that commit already drained the caller's changes.
    pub(crate) fn sync_all(&self) -> Result<()> {
        let need = self.lock_state()?.drained() + 1;
        let mut ctl = self.commit.lock().unwrap_or_else(|p| p.into_inner());
        if ctl.durable >= need {
            Stats::inc(&self.stats.fsync_shared);
            return Ok(());
        }
        self.commit_locked(&mut ctl, true)
    }

    /// Writes the dirty list without waiting for durability (memory pressure).
    pub(crate) fn commit_nosync(&self) -> Result<()> {
        let mut ctl = self.commit.lock().unwrap_or_else(|p| p.into_inner());
        self.commit_locked(&mut ctl, false)
    }

    pub(crate) fn commit_locked(&self, ctl: &mut CommitCtl, sync: bool) -> Result<()> {
        let start = Instant::now();
        let seq;
        let filling;
        let names;
        let inodes;
        let scanned_frees;
        let staging;
        let locked;
        {
            let mut s = self.lock_state()?;
            locked = Instant::now();
            seq = s.next_drain();
            self.drains.store(seq, Ordering::Release);
            Drained {
                batch: filling,
                names,
                inodes,
                scanned_frees,
            } = match s.drain() {
                Ok(d) => d,
                Err(e) => return Err(self.stop(e)),
            };
            // From here until the batch is published, a reader that
            // reaches the store waits for it (inflight.rs): the drain's
            // records are in no cache and in no staged batch yet (names
            // are read from the name cache's `committing` table).
            staging = self.store.begin_stage();
            // How long every request waited at most behind this commit.
            let held = locked.elapsed().as_micros() as u64;
            Stats::max(&self.stats.commit_locked_max_us, held);
            Stats::add(&self.stats.commit_locked_us, held);
        }
        let staged = {
            // A panic from here to the publication (the records, the
            // names, the scans, the sort) would lose the batch, whose items
            // are marked clean already: the engine stops, as under the
            // state lock.
            let _stop = crate::fs::PanicStop(self);
            let mut batch = match filling.finish() {
                Ok(b) => b,
                Err(e) => return Err(self.stop(e)),
            };
            put_names(&mut batch, &names);
            if let Err(e) = self.delete_scanned(&mut batch, &scanned_frees) {
                // Readers waiting for the batch go on once `staging` is
                // dropped, to an engine that answers errors.
                return Err(self.stop(e));
            }
            Stats::add(&self.stats.commit_bytes, batch.bytes() as u64);
            let staged = !batch.is_empty();
            // Readers see the batch from here on; the store writes it below.
            staging.publish(batch);
            staged
        };
        Stats::max(
            &self.stats.commit_staging_max_us,
            locked.elapsed().as_micros() as u64,
        );
        if staged {
            let t = Instant::now();
            // A refused batch stops the engine before it is retired (inflight.rs).
            if let Err(e) = self.store.apply_staged(|e| self.halt(e)) {
                return Err(self.stop(e.into()));
            }
            ctl.unsynced = true;
            Stats::max(
                &self.stats.commit_apply_max_us,
                t.elapsed().as_micros() as u64,
            );
        }
        Stats::inc(&self.stats.commits);
        if sync && ctl.unsynced {
            if let Err(e) = self.store.sync() {
                return Err(self.stop(e.into()));
            }
            ctl.unsynced = false;
            Stats::inc(&self.stats.commit_syncs);
        }
        if sync {
            ctl.durable = seq;
        }
        self.hand_back(&names, inodes);
        let us = start.elapsed().as_micros() as u64;
        Stats::set(&self.stats.commit_last_us, us);
        Stats::max(&self.stats.commit_max_us, us);
        Ok(())
    }

    /// The names a commit wrote go back into the name cache
    /// (`DCache::recache`), and the inodes it wrote onto the inode cache's
    /// idle list (`ICache::repin`, which files each by its state at that
    /// moment: an inode changed again since stays off it), in the order the
    /// commit wrote them, `RECACHE_CHUNK` names and `REPIN_CHUNK` inodes at a
    /// time under the exclusive state lock, so that a request waits at most
    /// for one piece. Inside the drain they took half its hold under W4
    /// (docs/design.md §6, §8). Each piece ends with the inode cache back
    /// within its bound (`StateGuard`). A stopped engine caches nothing
    /// more.
    fn hand_back(&self, names: &PendingNames, inodes: Vec<Ino>) {
        let (mut names, mut inodes) = (names.iter().peekable(), inodes.into_iter().peekable());
        loop {
            let Ok(mut s) = self.lock_state() else { return };
            let locked = Instant::now();
            for ((dir, hash, name), p) in names.by_ref().take(RECACHE_CHUNK) {
                s.recache_name(*dir, *hash, name, p.child);
            }
            for ino in inodes.by_ref().take(REPIN_CHUNK) {
                s.part(ino).icache.repin(ino);
            }
            let done = names.peek().is_none() && inodes.peek().is_none();
            if done {
                s.end_commit();
            }
            // Also a wait behind a commit, for whoever wants the lock.
            let held = locked.elapsed().as_micros() as u64;
            Stats::max(&self.stats.commit_locked_max_us, held);
            Stats::add(&self.stats.commit_locked_us, held);
            if done {
                return;
            }
        }
    }

    /// Deletes the records of freed inodes that a drain could not list
    /// without a scan of the store (a file with stored blocks, up to
    /// `FREE_INLINE_MAX`, or a larger one when the reclaim queue is full).
    /// Runs outside the state lock, before the batch is published: 10,000
    /// freed 8 KiB files took 10,000 scans and held the lock 108 ms inside
    /// the drain (docs/design.md §6). The scans read the store without the
    /// staged slot, which this commit holds for writing: no commit's batch
    /// but this one touches a freed inode's keys, and the reclaim thread
    /// writes only while it holds the commit lock, which this commit holds.
    fn delete_scanned(&self, batch: &mut Batch, freed: &[Ino]) -> Result<()> {
        for &ino in freed {
            let scans = unlinked::delete_inode_records(self.store.base(), ino, batch)?;
            Stats::add(&self.stats.store_scans, scans);
        }
        Ok(())
    }

    /// Stops the engine: every operation from now on answers an error.
    /// Logged once.
    pub(crate) fn halt(&self, e: &dyn std::fmt::Display) {
        if !self.stopped.swap(true, Ordering::AcqRel) {
            tracing::error!(
                "store write failed, engine stopped (every operation now answers EIO): {e}"
            );
            Stats::set(&self.stats.engine_stopped, 1);
        }
    }

    /// Stops the engine after a failed store write; logged once.
    pub(crate) fn stop(&self, e: EngineError) -> EngineError {
        self.halt(&e);
        match e {
            EngineError::Store(crate::error::StoreError::NoSpace) => EngineError::NoSpace,
            other => other,
        }
    }

    /// Commits (without sync) when the dirty list holds more items than its
    /// bound: called before every operation takes the state lock, so the
    /// list never exceeds the bound by more than one operation's items.
    pub(crate) fn push_back(&self) -> Result<()> {
        let dirty = self.stats.dirty_items.load(Ordering::Relaxed)
            + self.stats.pending_dentries.load(Ordering::Relaxed);
        if dirty > self.cfg.dirty_items_max as u64 {
            Stats::inc(&self.stats.dirty_items_commits);
            self.before_wait();
            self.commit_nosync()?;
        }
        Ok(())
    }

    /// Pushes back on a writer whose operation left dirty data over its
    /// bound (`over`, read under the lock the operation held, so that a
    /// write takes the state lock once).
    pub(crate) fn throttle(&self, over: bool) -> Result<()> {
        if over {
            Stats::inc(&self.stats.writer_throttles);
            self.before_wait();
            self.commit_nosync()?;
        }
        Ok(())
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
}

/// The committer thread: one commit per interval until shutdown. It holds
/// the engine only while committing, so an engine dropped without
/// `shutdown` goes away at once.
pub(crate) fn committer(
    engine: std::sync::Weak<Engine>,
    wake: Arc<(Mutex<bool>, Condvar)>,
    interval: Duration,
) {
    loop {
        {
            let (m, cv) = &*wake;
            let g = m.lock().unwrap_or_else(|p| p.into_inner());
            let (g, _) = cv
                .wait_timeout_while(g, interval, |stop| !*stop)
                .unwrap_or_else(|p| p.into_inner());
            if *g {
                return;
            }
        }
        let Some(e) = engine.upgrade() else { return };
        if e.is_stopped() {
            return;
        }
        let busy = e.lock_state().map(|mut s| s.has_dirty()).unwrap_or(false);
        let unsynced = e.commit.lock().map(|c| c.unsynced).unwrap_or(false);
        if busy || unsynced {
            let mut ctl = e.commit.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(err) = e.commit_locked(&mut ctl, true) {
                tracing::error!("periodic commit failed: {err}");
            }
        }
    }
}
