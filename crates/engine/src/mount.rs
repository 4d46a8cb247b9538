//! mkfs, mount and unmount of the engine: the superblock written and
//! checked, the state built from what the store holds (the pending
//! truncates of `T` records queued again), the committer (journal.rs) and
//! the reclaim thread (reclaim.rs) started, and at unmount both stopped and
//! everything committed. Recovery after a crash needs nothing more here:
//! the store's batches are atomic (docs/design.md §7), and what a crash
//! left unlinked is freed by the reclaim thread after the mount returned.

use crate::error::{EngineError, Result};
use crate::format::{self, InodeRecord, Superblock, FORMAT_VERSION};
use crate::fs::{CommitCtl, Engine, EngineConfig};
use crate::inflight::InFlightStore;
use crate::orphan;
use crate::state::{part_of, Part, State, PARTS};
use crate::stats::Stats;
use crate::store::{Batch, KvStore};
use crate::types::{Ino, Timespec};
use crate::unlinked::FreeQueue;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, RwLock};

impl Engine {
    /// Writes a new, empty filesystem into an empty store.
    pub fn mkfs(store: &dyn KvStore, root_uid: u32, root_gid: u32) -> Result<Superblock> {
        if store.get(&format::super_key())?.is_some() {
            return Err(EngineError::Exists);
        }
        let now = Timespec::now();
        let sb = Superblock {
            version: FORMAT_VERSION,
            uuid: *uuid::Uuid::new_v4().as_bytes(),
            created: now,
            next_ino: Ino::ROOT.0 + 1,
        };
        let root = InodeRecord::empty_dir(0o755, root_uid, root_gid, Ino::ROOT, now);
        let mut b = Batch::default();
        b.put(format::inode_key(Ino::ROOT), root.encode(Ino::ROOT)?);
        b.put(format::super_key(), sb.encode());
        store.apply(&b)?;
        store.sync()?;
        Ok(sb)
    }

    /// Reads and checks the superblock of a store.
    pub fn read_superblock(store: &dyn KvStore) -> Result<Superblock> {
        let bytes = store
            .get(&format::super_key())?
            .ok_or_else(|| EngineError::NotAStore("no superblock".into()))?;
        let sb = Superblock::decode(&bytes)?;
        if sb.version != FORMAT_VERSION {
            return Err(EngineError::WrongVersion {
                found: sb.version,
                expected: FORMAT_VERSION,
            });
        }
        Ok(sb)
    }

    /// Mounts the engine on a store: checks the superblock, starts the
    /// committer, and starts freeing in the background the inodes a crash
    /// left unlinked (the mount does not wait for them).
    pub fn mount(store: Arc<dyn KvStore>, cfg: EngineConfig) -> Result<Arc<Engine>> {
        let sb = Self::read_superblock(&*store)?;
        let store = Arc::new(InFlightStore::new(store));
        let stats = Arc::new(Stats::default());
        Stats::set(&stats.dirty_bytes_max, cfg.dirty_bytes_max);
        Stats::set(&stats.dirty_items_max, cfg.dirty_items_max as u64);
        let free_queue = Arc::new(FreeQueue::default());
        // Pending truncates are few by construction (orphan.rs): all of them
        // are queued again before the mount returns. Those of a crash's
        // orphans go with the orphan.
        let mut parts: Vec<Part> = (0..PARTS)
            .map(|i| Part::new(i, cfg.inodes_max, &stats))
            .collect();
        Stats::set(
            &stats.icache_inodes_max,
            parts.iter().map(|p| p.icache.inodes_max() as u64).sum(),
        );
        for (ino, from, to) in orphan::load(&*store)? {
            if store.get(&format::unlinked_key(ino))?.is_none() {
                parts[part_of(ino)].truncates.restore(ino, from, to, &stats);
                free_queue.push_truncate(ino);
            }
        }
        let state = State::new(
            parts,
            sb,
            &cfg,
            store.clone(),
            stats.clone(),
            free_queue.clone(),
        );
        let engine = Arc::new(Engine {
            state: RwLock::new(state),
            commit: Mutex::new(CommitCtl::default()),
            store,
            stats,
            stopped: AtomicBool::new(false),
            next_fh: AtomicU64::new(1),
            cfg,
            wake: Arc::new((Mutex::new(false), Condvar::new())),
            committer: Mutex::new(None),
            reclaimer: Mutex::new(None),
            free_queue,
            wait_hook: std::sync::OnceLock::new(),
            drains: AtomicU64::new(0),
        });
        // The root is always known to the kernel.
        engine.lock()?.inode(Ino::ROOT)?;
        let weak = Arc::downgrade(&engine);
        let interval = engine.commit_interval();
        let wake = engine.wake.clone();
        let handle = std::thread::Builder::new()
            .name("churnfs-commit".into())
            .spawn(move || crate::journal::committer(weak, wake, interval))
            .map_err(|e| EngineError::Store(e.into()))?;
        *engine.committer.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
        Stats::set(&engine.stats.recovery_running, 1);
        let weak = Arc::downgrade(&engine);
        let wake = engine.wake.clone();
        let queue = engine.free_queue.clone();
        let handle = std::thread::Builder::new()
            .name("churnfs-reclaim".into())
            .spawn(move || crate::reclaim::reclaimer(weak, wake, queue))
            .map_err(|e| EngineError::Store(e.into()))?;
        *engine.reclaimer.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
        Ok(engine)
    }

    /// Commits everything and stops the committer and the reclaim (unmount;
    /// a reclaim not finished goes on at the next mount).
    pub fn shutdown(&self) -> Result<()> {
        {
            let (m, cv) = &*self.wake;
            *m.lock().unwrap_or_else(|p| p.into_inner()) = true;
            cv.notify_all();
        }
        self.free_queue.stop();
        let reclaimer = self
            .reclaimer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = reclaimer {
            let _ = h.join();
        }
        if let Some(h) = self
            .committer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = h.join();
        }
        self.sync_all()
    }
}
