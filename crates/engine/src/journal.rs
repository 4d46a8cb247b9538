//! journal: dirty items, written as one atomic store batch per commit
//! (group commit), and the engine's mount and unmount.
//!
//! Every operation changes in-memory items and adds them to a dirty list
//! (`DirtyList`, one per part of the state, fs.rs; a set: an item is on it
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

use crate::dcache::{DCache, PendingNames};
use crate::dirty::Item;
use crate::error::{EngineError, Result};
use crate::format::{self, InodeRecord, Superblock, BLOCK_SIZE, FORMAT_VERSION, INLINE_MAX};
use crate::fs::{part_of, CommitCtl, Engine, EngineConfig, Part, State, PARTS};
use crate::icache::Inode;
use crate::inflight::InFlightStore;
use crate::orphan;
use crate::stats::Stats;
use crate::store::{Batch, KvStore};
use crate::types::{BlockNo, FileKind, Ino, Timespec};
use crate::unlinked::{self, FreeQueue, Freer, Next, Unlinked};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Names put back into the name cache per hold of the state lock after a
/// commit (`Engine::hand_back`): about half a millisecond of work here.
const RECACHE_CHUNK: usize = 1024;

/// Inodes a commit wrote put back on the idle list per hold of the state
/// lock (`Engine::hand_back`): about half a millisecond of work here.
const REPIN_CHUNK: usize = 2048;

/// A commit's batch while the drain fills it under the state lock. Inode
/// records are copied there and encoded after the lock is let go
/// (`Filling::finish`): each takes a placeholder op, so the batch's order
/// is the drain's.
#[derive(Default)]
struct Filling {
    batch: Batch,
    /// (position of the record's placeholder in `batch`, inode, record).
    records: Vec<(usize, Ino, InodeRecord)>,
}

impl Filling {
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.batch.put(key, value);
    }

    fn delete(&mut self, key: Vec<u8>) {
        self.batch.delete(key);
    }

    /// `ino`'s record goes into the batch here, encoded by `finish`.
    fn put_record(&mut self, ino: Ino, rec: InodeRecord) {
        self.records.push((self.batch.len(), ino, rec));
        self.batch.put(Vec::new(), Vec::new());
    }

    /// Encodes (and so validates) the records into their places. Runs
    /// outside the state lock.
    fn finish(self) -> Result<Batch> {
        let Filling { mut batch, records } = self;
        for (at, ino, rec) in records {
            let crate::store::BatchOp::Put(k, v) = &mut batch.ops[at] else {
                unreachable!("an inode record's place holds a delete");
            };
            assert!(
                k.is_empty() && v.is_empty(),
                "an inode record's place reused"
            );
            *v = rec.encode(ino)?;
            *k = format::inode_key(ino);
        }
        Ok(batch)
    }
}

/// What a drain took from the state (`State::drain`).
struct Drained {
    /// The batch, its inode records not yet encoded.
    batch: Filling,
    /// The pending names, taken whole: `put_names` adds them to the batch.
    names: Arc<PendingNames>,
    /// The inodes the batch writes that are still cached: clean now, they
    /// go back on the idle list after the commit (`ICache::repin`).
    inodes: Vec<Ino>,
    /// Freed inodes whose records the commit finds by a scan of the store
    /// and deletes before it publishes the batch (`Engine::delete_scanned`).
    scanned_frees: Vec<Ino>,
}

impl State {
    /// Puts every dirty item's final state into one batch and marks the
    /// items clean. Runs under the state lock. Inode records are copied,
    /// and encoded after the lock is let go (`Filling::finish`). The
    /// pending names are taken whole and returned apart (lookups read them
    /// from the name cache's `committing` table meanwhile): the commit
    /// encodes them into the batch after it let go of the lock
    /// (`put_names`), while other store readers wait for the batch.
    fn drain(&mut self) -> Result<Drained> {
        let stats = self.stats.clone();
        let mut items = Vec::new();
        for p in self.parts_mut() {
            items.extend(p.dirty.take(&stats));
        }
        let mut batch = Filling::default();
        Stats::add(&stats.commit_items, items.len() as u64);
        let mut committed_inodes = Vec::new();
        let mut scanned_frees = Vec::new();
        for item in items {
            match item {
                Item::Inode(ino) => {
                    self.drain_inode(ino, &mut batch, &mut scanned_frees);
                    committed_inodes.push(ino);
                }
                Item::Block(ino, n) => {
                    let Some(i) = self.part(ino).icache.peek_mut(ino) else {
                        continue;
                    };
                    if i.freed {
                        continue;
                    }
                    let key = format::block_key(ino, crate::types::BlockNo(n));
                    let size = i.rec.size;
                    if size <= INLINE_MAX {
                        // The bytes travel inline in the inode record.
                        batch.delete(key);
                        if n != 0 {
                            i.blocks.remove(&n);
                        }
                        continue;
                    }
                    // Moved into the batch, not copied: the block leaves
                    // memory with this commit anyway.
                    let mut data = i.blocks.remove(&n).unwrap_or_default();
                    let end = size.saturating_sub(n * BLOCK_SIZE).min(BLOCK_SIZE) as usize;
                    if data.is_empty() || end == 0 {
                        batch.delete(key);
                    } else {
                        data.truncate(end);
                        format::validate_block(ino, &data)?;
                        batch.put(key, data);
                        back_on_store(i, ino, &mut batch);
                        i.blocks_on_store = true;
                    }
                }
                Item::Truncate(ino) => {
                    // Freed since: its record goes with its other records.
                    let part = self.part(ino);
                    let live = part.icache.peek(ino).is_some_and(|i| !i.freed);
                    match part.truncates.get(ino) {
                        Some((from, to)) if live => {
                            batch.put(format::truncate_key(ino), format::encode_truncate(from, to));
                            // The reclaim thread works on a range once the
                            // store has it (it takes the commit lock first).
                            self.free_queue.push_truncate(ino);
                        }
                        _ => batch.delete(format::truncate_key(ino)),
                    }
                }
                Item::Xattr(ino) => {
                    let Some(i) = self.part(ino).icache.peek_mut(ino) else {
                        continue;
                    };
                    if i.freed {
                        continue;
                    }
                    let x = i.xattrs.as_ref().expect("dirty xattrs not loaded");
                    if x.is_empty() {
                        if i.xattrs_on_store {
                            batch.delete(format::xattr_key(ino));
                        }
                        i.xattrs_on_store = false;
                    } else {
                        batch.put(format::xattr_key(ino), format::encode_xattrs(ino, x)?);
                        i.xattrs_on_store = true;
                        back_on_store(i, ino, &mut batch);
                    }
                }
            }
        }
        let names = self.dcache.take_pending();
        Stats::add(&stats.commit_items, names.len() as u64);
        if self.next_ino != self.stored_next_ino {
            self.sb.next_ino = self.next_ino;
            batch.put(format::super_key(), self.sb.encode());
            self.stored_next_ino = self.next_ino;
        }
        // The committed inodes, clean now, stay off the idle list (so the
        // cache holds them past its bound) until the commit hands them back
        // after its write: filing 5,000 of them took 1–2.7 ms of the hold.
        #[cfg(debug_assertions)]
        for p in self.parts_mut() {
            p.icache.debug_check();
        }
        self.dcache.publish(&stats);
        Ok(Drained {
            batch,
            names,
            inodes: committed_inodes,
            scanned_frees,
        })
    }

    /// Copies inode `ino`'s final state into `batch`. A freed inode whose
    /// blocks must be found by a scan of the store goes on `scanned_frees`
    /// instead: the commit deletes its records after it let go of the
    /// state lock (`Engine::delete_scanned`).
    fn drain_inode(&mut self, ino: Ino, batch: &mut Filling, scanned_frees: &mut Vec<Ino>) {
        // Missing: created and freed between two commits (`State::settle`).
        let part = crate::fs::part_mut(&mut self.parts, ino);
        let Some(i) = part.icache.peek_mut(ino) else {
            return;
        };
        i.dirty = false;
        if i.freed {
            if i.on_store {
                if !i.blocks_on_store {
                    // No block or `T` record was ever stored, whatever its
                    // size (a sparse file): its records are known without
                    // a scan, and there is no data to reclaim.
                    Stats::inc(&self.stats.frees_unscanned);
                    batch.delete(format::inode_key(ino));
                    if i.xattrs_on_store {
                        batch.delete(format::xattr_key(ino));
                    }
                    if i.unlinked_on_store {
                        batch.delete(format::unlinked_key(ino));
                    }
                } else if i.rec.size > unlinked::FREE_INLINE_MAX && self.free_queue.push(ino) {
                    // A large file: this batch keeps its `U` record (and its
                    // inode record, now with no link); the reclaim thread
                    // deletes its data in bounded batches, after this
                    // commit (it takes the commit lock first).
                    batch.put_record(ino, record_without_extra(i));
                    if !i.unlinked_on_store {
                        batch.put(format::unlinked_key(ino), format::encode_unlinked());
                    }
                    Stats::inc(&self.stats.large_frees_queued);
                } else {
                    if i.rec.size > unlinked::FREE_INLINE_MAX {
                        Stats::inc(&self.stats.large_frees_inline);
                    }
                    scanned_frees.push(ino);
                }
            }
            part.icache.remove(ino);
            return;
        }
        if unstored(i) {
            // Unlinked, and nothing of it but its inode record would be
            // left after a crash, when nothing can reach it any more: the
            // store forgets it now (memory holds it while it is open or
            // known to the kernel) and a crash has nothing to reclaim.
            if i.on_store {
                batch.delete(format::inode_key(ino));
                i.on_store = false;
            }
            if !i.kept_out {
                i.kept_out = true;
                Stats::inc(&self.stats.unlinked_unstored);
            }
            return;
        }
        put_inode(i, ino, batch);
    }
}

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

/// Whether an unlinked inode is kept out of the store: a regular file whose
/// bytes are all inline (in its inode record) and that has no extended
/// attribute and no `U` record yet. Once a block, an xattr record or a `U`
/// record of it is written it stays on the store until it is freed.
fn unstored(i: &Inode) -> bool {
    let r = &i.rec;
    r.nlink == 0
        && r.kind == FileKind::Regular
        && r.size <= INLINE_MAX
        && !r.has_xattrs
        && !i.unlinked_on_store
        && !i.blocks_on_store
        && !i.xattrs_on_store
}

/// A block or xattr record of `i` goes into `batch`: an unlinked inode the
/// store did not hold (`unstored`) now has something a crash must reclaim,
/// so its inode and `U` records go with it.
fn back_on_store(i: &mut Inode, ino: Ino, batch: &mut Filling) {
    if i.rec.nlink == 0 && !i.unlinked_on_store {
        put_inode(i, ino, batch);
    }
}

/// A copy of `i`'s record with no extra bytes, made without copying them
/// (a regular file's bytes in memory are not the record's).
fn record_without_extra(i: &mut Inode) -> InodeRecord {
    let extra = i.rec.extra.take();
    let rec = i.rec.clone();
    i.rec.extra = extra;
    rec
}

/// Adds the inode record to `batch`, with the `U` record an unlinked inode
/// needs (or the deletion of one it no longer needs).
fn put_inode(i: &mut Inode, ino: Ino, batch: &mut Filling) {
    let rec = if i.rec.kind == FileKind::Regular {
        let mut rec = record_without_extra(i);
        if rec.size <= INLINE_MAX {
            // The bytes travel inline: block 0, zero-filled to the size.
            let size = rec.size as usize;
            let mut d = Vec::with_capacity(size);
            if let Some(b) = i.blocks.get(&0) {
                d.extend_from_slice(&b[..b.len().min(size)]);
            }
            d.resize(size, 0);
            rec.extra = Some(d);
        }
        rec
    } else {
        i.rec.clone()
    };
    let nlink = rec.nlink;
    batch.put_record(ino, rec);
    i.on_store = true;
    if nlink == 0 && !i.unlinked_on_store {
        batch.put(format::unlinked_key(ino), format::encode_unlinked());
        i.unlinked_on_store = true;
    } else if nlink > 0 && i.unlinked_on_store {
        batch.delete(format::unlinked_key(ino));
        i.unlinked_on_store = false;
    }
}

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
        let state = State {
            parts: parts.into_iter().map(Mutex::new).collect(),
            dcache: DCache::new(cfg.dentries_max, cfg.negative_entries_max),
            unlinked: Unlinked::default(),
            next_ino: sb.next_ino,
            stored_next_ino: sb.next_ino,
            sb,
            drained: 0,
            store: store.clone(),
            stats: stats.clone(),
            dirty_bytes_max: cfg.dirty_bytes_max,
            truncate_inline_blocks: cfg.truncate_inline_blocks,
            free_queue: free_queue.clone(),
        };
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
            .spawn(move || committer(weak, wake, interval))
            .map_err(|e| EngineError::Store(e.into()))?;
        *engine.committer.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
        Stats::set(&engine.stats.recovery_running, 1);
        let weak = Arc::downgrade(&engine);
        let wake = engine.wake.clone();
        let queue = engine.free_queue.clone();
        let handle = std::thread::Builder::new()
            .name("churnfs-reclaim".into())
            .spawn(move || reclaimer(weak, wake, queue))
            .map_err(|e| EngineError::Store(e.into()))?;
        *engine.reclaimer.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
        Ok(engine)
    }

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
                    && !s.unlinked.contains(i)
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

    /// Makes every change acknowledged so far durable, sharing a running
    /// commit's sync when that commit already drained the caller's changes.
    pub(crate) fn sync_all(&self) -> Result<()> {
        let need = self.lock_state()?.drained + 1;
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

    fn commit_locked(&self, ctl: &mut CommitCtl, sync: bool) -> Result<()> {
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
            s.drained += 1;
            seq = s.drained;
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
                s.dcache.recache(*dir, *hash, name, p.child, &self.stats);
            }
            for ino in inodes.by_ref().take(REPIN_CHUNK) {
                s.part(ino).icache.repin(ino);
            }
            let done = names.peek().is_none() && inodes.peek().is_none();
            if done {
                s.dcache.end_commit();
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
    fn halt(&self, e: &dyn std::fmt::Display) {
        if !self.stopped.swap(true, Ordering::AcqRel) {
            tracing::error!(
                "store write failed, engine stopped (every operation now answers EIO): {e}"
            );
            Stats::set(&self.stats.engine_stopped, 1);
        }
    }

    /// Stops the engine after a failed store write; logged once.
    fn stop(&self, e: EngineError) -> EngineError {
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

/// The reclaim thread. First it frees the inodes a crash left unlinked, a
/// page of `RECOVERY_BATCH` `U` records at a time (progress:
/// `recovered_unlinked` grows per batch; `recovery_running` is 0 at the
/// end). Then, until shutdown, it deletes the data of the large files this
/// mount frees, as commits queue them. It holds the engine only while it
/// works.
fn reclaimer(
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

/// The committer thread: one commit per interval until shutdown. It holds
/// the engine only while committing, so an engine dropped without
/// `shutdown` goes away at once.
fn committer(
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
        let busy = e
            .lock_state()
            .map(|mut s| s.dcache.pending_len() > 0 || s.parts_mut().any(|p| !p.dirty.is_empty()))
            .unwrap_or(false);
        let unsynced = e.commit.lock().map(|c| c.unsynced).unwrap_or(false);
        if busy || unsynced {
            let mut ctl = e.commit.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(err) = e.commit_locked(&mut ctl, true) {
                tracing::error!("periodic commit failed: {err}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tests::file as record;
    use crate::store::{BatchOp, MemStore};
    use crate::types::Ctx;

    /// Records copied under the lock are encoded into the places the drain
    /// gave them, between the ops around them, so that a later op on the
    /// same key still wins when the batch is sorted.
    #[test]
    fn records_are_encoded_in_the_places_the_drain_gave_them() {
        let mut f = Filling::default();
        f.put(b"a".to_vec(), b"1".to_vec());
        f.put_record(Ino(7), record(3));
        f.delete(format::inode_key(Ino(9)));
        f.put_record(Ino(9), record(0));
        f.put_record(Ino(7), record(5));
        let b = f.finish().unwrap();
        let ops: Vec<(Vec<u8>, Option<InodeRecord>)> = b
            .ops
            .iter()
            .map(|op| match op {
                BatchOp::Put(k, _) if k.as_slice() == b"a" => (k.clone(), None),
                BatchOp::Put(k, v) => {
                    let ino = if *k == format::inode_key(Ino(7)) {
                        7
                    } else {
                        9
                    };
                    (k.clone(), Some(InodeRecord::decode(Ino(ino), v).unwrap()))
                }
                BatchOp::Delete(k) => (k.clone(), None),
            })
            .collect();
        let keys: Vec<&[u8]> = ops.iter().map(|(k, _)| k.as_slice()).collect();
        let (k7, k9) = (format::inode_key(Ino(7)), format::inode_key(Ino(9)));
        assert_eq!(keys, [b"a".as_slice(), &k7, &k9, &k9, &k7]);
        let sizes: Vec<Option<u64>> = ops
            .iter()
            .map(|(_, r)| r.as_ref().map(|r| r.size))
            .collect();
        assert_eq!(sizes, [None, Some(3), None, Some(0), Some(5)]);
    }

    /// A record that breaks its invariants fails the commit when it is
    /// encoded, as it did under the lock.
    #[test]
    fn a_bad_record_fails_when_encoded() {
        let mut f = Filling::default();
        let mut bad = record(3);
        bad.extra = Some(vec![0; 2]);
        f.put_record(Ino(7), bad);
        assert!(f.finish().is_err());
    }

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
