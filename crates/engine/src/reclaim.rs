//! Every background reclaim, on one thread per mount (`reclaimer`): the
//! inodes a crash left unlinked (orphans, `U` records no live mount holds),
//! then, until unmount, the data of the large files this mount frees and the
//! blocks its large shrinking truncates left behind (orphan.rs's `T`
//! records), as commits queue them (unlinked.rs's `FreeQueue`). Each works
//! in batches of `free_batch_keys` keys applied on their own, so a reclaim
//! never holds the state lock or a commit for long, and none of it is in
//! the way of a mount or an unmount (docs/design.md §7).

use crate::error::Result;
use crate::format;
use crate::fs::Engine;
use crate::stats::Stats;
use crate::store::{Batch, KvStore};
use crate::types::{BlockNo, Ino};
use crate::unlinked::{self, FreeQueue, Freer, Next};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

impl Engine {
    /// Waits until the inodes a crash left unlinked are freed and the large
    /// files this mount freed have lost their data (or the reclaim stopped:
    /// unmount, or a failed store).
    pub fn wait_reclaim(&self) {
        self.free_queue.wait_idle();
    }

    /// Applies a batch of the reclaim thread's deletions.
    fn apply_freed(&self, batch: Batch) -> Result<()> {
        self.store.apply(&batch).map_err(|e| self.stop(e.into()))
    }

    /// Deletes the data of a large file this mount freed (queued by the
    /// commit that freed it), in bounded batches; its own records go last.
    fn free_large(&self, ino: Ino) -> Result<()> {
        // The commit that queued `ino` holds the commit lock until it has
        // applied its batch and, if it syncs, synced: taking the lock once
        // orders the deletions after it (so an fsync that freed the file
        // makes its `U` record durable before any of its data goes).
        drop(self.commit.lock().unwrap_or_else(|p| p.into_inner()));
        let mut freer = Freer::new(&*self.store, self.cfg.free_batch_keys);
        let stop = || self.is_stopped() || self.free_queue.stopping();
        let mut apply = |b| self.apply_freed(b);
        let whole = freer.free(ino, &stop, &mut apply)?;
        if whole {
            freer.flush(&mut apply)?;
            Stats::inc(&self.stats.large_frees_done);
        }
        Stats::add(&self.stats.free_batches, freer.batches);
        Stats::add(&self.stats.store_scans, freer.scans);
        Ok(())
    }

    /// Deletes the blocks a large shrinking truncate left to this thread
    /// (orphan.rs), `free_batch_keys` at a time. Only a range the store
    /// holds as it stands in memory is worked on: the commit that writes a
    /// changed range queues the file again, so no deletion reaches the store
    /// before the truncate that made the blocks garbage (the store keeps
    /// batches in order across a crash). The keys are read without any lock
    /// (reading a 64 KiB block's key costs reading the block); the batch is
    /// built under the commit lock and the state lock only if the range is
    /// the one scanned, untouched in between (same generation: a write that
    /// revealed part of it, had its block committed and was shrunk away
    /// again would leave a block the scan missed), and applied before the
    /// commit lock is released, so no commit can write a block in between.
    /// It moves the `T` record's `from` up, or deletes the record with the
    /// last blocks, and memory follows once the store has the batch.
    fn finish_truncate(&self, ino: Ino) -> Result<()> {
        let keys = self.cfg.free_batch_keys.max(1);
        loop {
            if self.is_stopped() || self.free_queue.stopping() {
                return Ok(());
            }
            let Some(seen) = self.lock_state()?.part(ino).truncates.stamp(ino) else {
                return Ok(());
            };
            let (from, to, _) = seen;
            let (found, done) = crate::data::block_numbers(&*self.store, ino, from, to, keys)?;
            let reached = match found.last() {
                Some(&n) if !done => n + 1,
                _ => to,
            };
            let _commit = self.commit.lock().unwrap_or_else(|p| p.into_inner());
            let held = Instant::now();
            let mut batch = Batch::default();
            let next = {
                let mut s = self.lock_state()?;
                // Any change since the scan, even one changed back, and the
                // scan may have missed a block: a write that revealed part
                // of the range can have had its block committed, and a
                // shrink made it garbage again, after the scan and before
                // the commit lock was ours. The commit that wrote the change
                // queues the file again.
                if s.part(ino).truncates.stamp(ino) != Some(seen) {
                    return Ok(());
                }
                // With the commit lock held nothing is staged: this reads
                // what the store holds.
                let stored = match self.store.get(&format::truncate_key(ino))? {
                    Some(v) => Some(format::decode_truncate(ino, &v)?),
                    None => None,
                };
                if stored != Some((from, to)) {
                    // Changed since the last commit, which queues it again.
                    return Ok(());
                }
                for &n in &found {
                    assert!(
                        n >= from && n < to,
                        "scanned block {n} outside {from}..{to}"
                    );
                    batch.delete(format::block_key(ino, BlockNo(n)));
                }
                let next = reached.min(to);
                if next >= to {
                    batch.delete(format::truncate_key(ino));
                } else {
                    batch.put(format::truncate_key(ino), format::encode_truncate(next, to));
                }
                next
            };
            self.apply_freed(batch)?;
            // The range moves up in memory only now that the blocks below
            // `next` are gone from the store. Moved before, a write between
            // the two into a block below `next` saw no range there, read the
            // block's stale bytes from the store as its base and kept them
            // (the concurrent scenario test, about 3 runs in 100). If a write
            // or a truncate changed the range meanwhile, memory stands: the
            // commit that writes it queues the file again.
            let finished = {
                let mut s = self.lock_state()?;
                let part = s.part(ino);
                if part.truncates.stamp(ino) != Some(seen) {
                    return Ok(());
                }
                if next >= to {
                    part.truncates.remove(ino, &self.stats);
                    true
                } else {
                    part.truncates.set(ino, next, to, &self.stats);
                    false
                }
            };
            Stats::inc(&self.stats.truncate_batches);
            // How long a commit (an fsync) waited at most behind one batch.
            Stats::max(
                &self.stats.truncate_batch_max_us,
                held.elapsed().as_micros() as u64,
            );
            if finished {
                Stats::inc(&self.stats.truncates_done);
                return Ok(());
            }
        }
    }

    /// One batch of the background reclaim: frees those of `inos` that this
    /// mount neither holds in memory nor has queued for freeing (a large
    /// file this mount freed has a `U` record too, until its data is gone).
    /// Returns how many it freed.
    fn reclaim_batch(&self, inos: &[Ino], stop: &dyn Fn() -> bool) -> Result<u64> {
        let orphans: Vec<Ino> = {
            // Under the lock, where the journal drains its batches (reads
            // see a staged batch before the store has it): the page was
            // read before, and a commit may since have deleted a record of
            // this mount's (an inode freed after its unlink).
            let mut s = self.lock_state()?;
            let mut v = Vec::with_capacity(inos.len());
            for &i in inos {
                if s.part(i).icache.peek(i).is_none()
                    && !s.is_unlinked(i)
                    && !self.free_queue.contains(i)
                    && self.store.get(&format::unlinked_key(i))?.is_some()
                {
                    v.push(i);
                }
            }
            v
        };
        // Outside the lock: an orphan not in memory has no name and no
        // reference, so no request can load it again.
        let mut freer = Freer::new(&*self.store, self.cfg.free_batch_keys);
        let mut apply = |b| self.apply_freed(b);
        let mut freed = 0;
        for &ino in &orphans {
            if !freer.free(ino, stop, &mut apply)? {
                break;
            }
            freed += 1;
        }
        freer.flush(&mut apply)?;
        Stats::add(&self.stats.free_batches, freer.batches);
        Stats::add(&self.stats.store_scans, freer.scans);
        Ok(freed)
    }
}

/// The reclaim thread. First it frees the inodes a crash left unlinked, a
/// page of `RECOVERY_BATCH` `U` records at a time (progress:
/// `recovered_unlinked` grows per batch; `recovery_running` is 0 at the
/// end). Then, until shutdown, it deletes the data of the large files this
/// mount frees, as commits queue them. It holds the engine only while it
/// works.
pub(crate) fn reclaimer(
    engine: std::sync::Weak<Engine>,
    wake: Arc<(Mutex<bool>, Condvar)>,
    queue: Arc<FreeQueue>,
) {
    if let Err(err) = reclaim_all(&engine, &wake) {
        tracing::error!("reclaiming inodes a crash left unlinked stopped: {err}");
    }
    if let Some(e) = engine.upgrade() {
        Stats::set(&e.stats.recovery_running, 0);
    }
    queue.recovered();
    loop {
        let ino = match queue.next(Duration::from_secs(1)) {
            Next::Stop => break,
            Next::Idle if engine.strong_count() == 0 => break,
            Next::Idle => continue,
            Next::Free(ino) => ino,
            Next::Truncate(ino) => {
                let Some(e) = engine.upgrade() else {
                    queue.done();
                    break;
                };
                let r = e.finish_truncate(ino);
                queue.done();
                if let Err(err) = r {
                    tracing::error!("deleting the blocks truncated off inode {ino} stopped: {err}");
                    break;
                }
                continue;
            }
        };
        let Some(e) = engine.upgrade() else {
            queue.done();
            break;
        };
        let r = e.free_large(ino);
        Stats::set(&e.stats.large_frees_pending, queue.len() as u64);
        queue.done();
        if let Err(err) = r {
            tracing::error!("freeing the data of unlinked inode {ino} stopped: {err}");
            break;
        }
    }
    // Nothing waits for a thread that is gone; what is queued keeps its `U`
    // record for the next mount.
    queue.stop();
}

/// The reclaimer's walk; returns when done, at shutdown, when the engine is
/// gone or stopped, or at the first error.
fn reclaim_all(engine: &std::sync::Weak<Engine>, wake: &(Mutex<bool>, Condvar)) -> Result<()> {
    let mut start = format::unlinked_prefix();
    let mut freed_any = false;
    loop {
        if *wake.0.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(());
        }
        let Some(e) = engine.upgrade() else {
            return Ok(());
        };
        if e.is_stopped() {
            return Ok(());
        }
        let (inos, next) = unlinked::orphan_page(&*e.store, &start, unlinked::RECOVERY_BATCH)?;
        let stop = || *wake.0.lock().unwrap_or_else(|p| p.into_inner());
        let freed = e.reclaim_batch(&inos, &stop)?;
        Stats::add(&e.stats.recovered_unlinked, freed);
        freed_any |= freed > 0;
        match next {
            Some(n) => start = n,
            None => {
                // Durable now rather than at the next commit.
                if freed_any {
                    if let Err(err) = e.store.sync() {
                        tracing::warn!("sync after reclaiming orphans failed: {err}");
                    }
                }
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::INLINE_MAX;
    use crate::fs::EngineConfig;
    use crate::store::{KvStore, MemStore};
    use crate::types::Ctx;
    use std::sync::atomic::Ordering;

    /// A `U` record written by this mount (a file unlinked while open) is
    /// not an orphan: the reclaim leaves it and its data alone, then frees
    /// an orphan of an earlier mount.
    #[test]
    fn reclaim_skips_inodes_this_mount_holds() {
        let store = Arc::new(MemStore::default());
        Engine::mkfs(&*store, 0, 0).unwrap();
        let e = Engine::mount(store.clone(), EngineConfig::default()).unwrap();
        e.wait_reclaim();
        let (live, _fh) = e.create(Ctx::ROOT, Ino::ROOT, b"live", 0o600).unwrap();
        // Past the inline bytes: a stored block, which a crash must reclaim.
        let data = vec![7u8; INLINE_MAX as usize + 1];
        e.write(live.ino, 0, &data).unwrap();
        e.unlink(Ino::ROOT, b"live").unwrap();
        e.fsync().unwrap();
        assert!(store
            .get(&format::unlinked_key(live.ino))
            .unwrap()
            .is_some());

        assert_eq!(e.reclaim_batch(&[live.ino], &|| false).unwrap(), 0);
        assert!(store
            .get(&format::unlinked_key(live.ino))
            .unwrap()
            .is_some());
        assert!(store.get(&format::inode_key(live.ino)).unwrap().is_some());
        assert_eq!(e.read(live.ino, 0, 4096).unwrap(), data);

        // Once this mount is gone, the same record is an orphan.
        drop(e);
        let e = Engine::mount(store.clone(), EngineConfig::default()).unwrap();
        e.wait_reclaim();
        assert_eq!(e.stats.recovered_unlinked.load(Ordering::Relaxed), 1);
        assert_eq!(e.stats.recovery_running.load(Ordering::Relaxed), 0);
        assert!(store
            .get(&format::unlinked_key(live.ino))
            .unwrap()
            .is_none());
        assert!(store.get(&format::inode_key(live.ino)).unwrap().is_none());
        e.shutdown().unwrap();
    }
}
