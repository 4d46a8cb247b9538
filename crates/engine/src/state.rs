//! The engine's state, guarded by the state lock (fs.rs, `Engine::state`):
//! the names (the name cache and its pending table), the unlinked set, the
//! inode numbers and the superblock, and the `PARTS` parts that hold the
//! inodes, their dirty items and their pending truncates. Its fields are
//! this module's: the rest of the engine changes the state through the
//! methods here, each of which leaves it whole (a name and its count move
//! together, an inode with no link and no reference is freed or filed in
//! `unlinked`, a change puts its item on the dirty list). A commit takes
//! what it writes with `drain`, which marks it clean and hands the journal
//! a `Drained` to encode, stage and apply (journal.rs works on that, not on
//! the state). `FileCtx` is one part as an operation on one inode's
//! contents sees it (data.rs), under that part's lock.

use crate::dcache::{Child, DCache, Known};
use crate::dirty::{DirtyList, Drained, Filling, Item};
use crate::error::{EngineError, Result};
use crate::format::{self, InodeRecord, Superblock, BLOCK_SIZE, INLINE_MAX};
use crate::icache::{ICache, Inode};
use crate::stats::Stats;
use crate::store::KvStore;
use crate::types::*;
use crate::unlinked::{self, FreeQueue, Unlinked};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

/// What a new inode is made of.
pub(crate) struct NewInode<'a> {
    pub kind: FileKind,
    pub mode: u32,
    pub rdev: u32,
    pub target: Option<&'a [u8]>,
}

/// Parts the inodes are spread over (a power of two).
pub const PARTS: usize = 16;

/// The part inode `ino` belongs to (Fibonacci hashing: consecutive inode
/// numbers land in different parts).
pub(crate) fn part_of(ino: Ino) -> usize {
    (ino.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - PARTS.trailing_zeros())) as usize
}

/// The inodes whose numbers hash here, their dirty items, and their pending
/// truncate ranges. (Names are dirty on the name cache's pending table.)
pub struct Part {
    pub(crate) icache: ICache,
    pub(crate) dirty: DirtyList,
    /// Block ranges large shrinking truncates left to the reclaim thread.
    pub(crate) truncates: crate::orphan::PendingTruncates,
}

impl Part {
    /// Part `index` of `PARTS`: its share of the inode bound (the shares
    /// add up to `inodes_max`) and of the pending truncates.
    pub(crate) fn new(index: usize, inodes_max: usize, stats: &Arc<Stats>) -> Part {
        let share = inodes_max / PARTS + usize::from(index < inodes_max % PARTS);
        Part {
            icache: ICache::new(share, stats.clone()),
            dirty: DirtyList::default(),
            truncates: crate::orphan::PendingTruncates::new(
                crate::orphan::TRUNCATES_PENDING_MAX / PARTS,
            ),
        }
    }
}

/// A part reached through the exclusive state lock.
pub(crate) fn part_mut(parts: &mut [Mutex<Part>], ino: Ino) -> &mut Part {
    parts[part_of(ino)]
        .get_mut()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Everything guarded by the state lock.
pub struct State {
    parts: Box<[Mutex<Part>]>,
    dcache: DCache,
    unlinked: Unlinked,
    next_ino: u64,
    stored_next_ino: u64,
    sb: Superblock,
    /// Number of the last drained commit.
    drained: u64,
    store: Arc<crate::inflight::InFlightStore>,
    stats: Arc<Stats>,
    dirty_bytes_max: u64,
    truncate_inline_blocks: u64,
    /// Freed large files whose data the reclaim thread deletes.
    free_queue: Arc<crate::unlinked::FreeQueue>,
}

/// One part of the state as an operation on one of its inodes sees it
/// (data.rs works on this): under the part's own lock, with the state lock
/// shared (`Engine::file`).
pub(crate) struct FileCtx<'a> {
    pub icache: &'a mut ICache,
    pub dirty: &'a mut DirtyList,
    pub truncates: &'a mut crate::orphan::PendingTruncates,
    pub store: &'a Arc<crate::inflight::InFlightStore>,
    pub stats: &'a Arc<Stats>,
    pub dirty_bytes_max: u64,
    pub truncate_inline_blocks: u64,
}

impl<'a> FileCtx<'a> {
    pub(crate) fn new(part: &'a mut Part, s: &'a State) -> FileCtx<'a> {
        FileCtx {
            icache: &mut part.icache,
            dirty: &mut part.dirty,
            truncates: &mut part.truncates,
            store: &s.store,
            stats: &s.stats,
            dirty_bytes_max: s.dirty_bytes_max,
            truncate_inline_blocks: s.truncate_inline_blocks,
        }
    }

    /// The inode, loading it from the store on a miss. Freed inodes are gone.
    pub(crate) fn inode(&mut self, ino: Ino) -> Result<&mut Inode> {
        load_inode(self.icache, &**self.store, self.stats, ino)
    }

    /// Puts an inode on the dirty list (pinning it).
    pub(crate) fn dirty_inode(&mut self, ino: Ino) {
        mark_dirty(self.icache, self.dirty, self.stats, ino);
    }

    /// Whether dirty data, counted over every part, is over its bound.
    pub(crate) fn over_dirty_bytes(&self) -> bool {
        over_dirty_bytes(self.stats, self.dirty_bytes_max)
    }
}

fn over_dirty_bytes(stats: &Stats, max: u64) -> bool {
    stats.dirty_blocks.load(Ordering::Relaxed) * format::BLOCK_SIZE > max
}

fn load_inode<'a>(
    icache: &'a mut ICache,
    store: &dyn KvStore,
    stats: &Stats,
    ino: Ino,
) -> Result<&'a mut Inode> {
    if icache.peek(ino).is_none() {
        Stats::inc(&stats.icache_misses);
        Stats::inc(&stats.store_gets);
        let Some(bytes) = store.get(&format::inode_key(ino))? else {
            return Err(EngineError::NotFound);
        };
        let mut rec = InodeRecord::decode(ino, &bytes)?;
        let mut inode_blocks = std::collections::BTreeMap::new();
        if rec.kind == FileKind::Regular {
            if let Some(data) = rec.extra.take() {
                if !data.is_empty() {
                    inode_blocks.insert(0, data);
                }
            }
        }
        let mut inode = Inode::new(rec, true);
        inode.blocks = inode_blocks;
        inode.unlinked_on_store = inode.rec.nlink == 0;
        // No eviction here: an operation may hold changes to inodes it
        // loaded earlier that are not dirty yet. Eviction runs between
        // operations instead (`Engine::lock_state`, `Engine::file`).
        icache.insert(ino, inode);
    }
    match icache.get(ino, stats) {
        Some(i) if !i.is_freed() => Ok(i),
        _ => Err(EngineError::NotFound),
    }
}

fn mark_dirty(icache: &mut ICache, dirty: &mut DirtyList, stats: &Stats, ino: Ino) {
    if let Some(i) = icache.peek_mut(ino) {
        if i.make_dirty() {
            icache.repin(ino);
        }
        dirty.add(Item::Inode(ino), stats);
    } else {
        panic!("dirtying {ino} that is not in the icache");
    }
}

impl State {
    /// The state a mount starts from: `parts` as the store left them (their
    /// pending truncates restored), the superblock `sb`.
    pub(crate) fn new(
        parts: Vec<Part>,
        sb: Superblock,
        cfg: &crate::config::EngineConfig,
        store: Arc<crate::inflight::InFlightStore>,
        stats: Arc<Stats>,
        free_queue: Arc<FreeQueue>,
    ) -> State {
        assert_eq!(parts.len(), PARTS, "a state of {} parts", parts.len());
        State {
            parts: parts.into_iter().map(Mutex::new).collect(),
            dcache: DCache::new(cfg.dentries_max, cfg.negative_entries_max),
            unlinked: Unlinked::default(),
            next_ino: sb.next_ino,
            stored_next_ino: sb.next_ino,
            sb,
            drained: 0,
            store,
            stats,
            dirty_bytes_max: cfg.dirty_bytes_max,
            truncate_inline_blocks: cfg.truncate_inline_blocks,
            free_queue,
        }
    }

    /// The lock of `ino`'s part (the state lock held shared: `Engine::file`).
    pub(crate) fn part_lock(&self, ino: Ino) -> &Mutex<Part> {
        &self.parts[part_of(ino)]
    }

    /// The number of the last drain (a commit's), and the next one's.
    pub(crate) fn drained(&self) -> u64 {
        self.drained
    }

    pub(crate) fn next_drain(&mut self) -> u64 {
        self.drained += 1;
        self.drained
    }

    /// Whether a commit would write anything: pending names or dirty items.
    pub(crate) fn has_dirty(&mut self) -> bool {
        self.dcache.pending_len() > 0 || self.parts_mut().any(|p| !p.dirty.is_empty())
    }

    /// A tmpfile given its first name (the kernel links no other inode
    /// without a link) leaves the unlinked set.
    pub(crate) fn linked_again(&mut self, ino: Ino) {
        self.unlinked.remove(ino);
        Stats::set(&self.stats.unlinked_inodes, self.unlinked.len() as u64);
    }

    /// What the name cache knows of `dir/name`, changing nothing.
    pub(crate) fn peek_name(&self, dir: Ino, hash: u64, name: &[u8]) -> Known {
        self.dcache.peek(dir, hash, name)
    }

    /// Up to `limit` names of `dir` not yet committed, hashes `from..=to`.
    pub(crate) fn pending_names(
        &self,
        dir: Ino,
        from: u64,
        to: u64,
        limit: usize,
    ) -> Vec<(u64, crate::dcache::Name, Option<Child>)> {
        self.dcache.pending_range(dir, from, to, limit)
    }

    /// A name a commit wrote goes back into the name cache (unless it
    /// changed again since: then it is pending once more).
    pub(crate) fn recache_name(&mut self, dir: Ino, hash: u64, name: &[u8], child: Option<Child>) {
        self.dcache.recache(dir, hash, name, child, &self.stats);
    }

    /// The commit's names are all back in the cache.
    pub(crate) fn end_commit(&mut self) {
        self.dcache.end_commit();
    }

    /// Whether `ino` is unlinked and held (open or known to the kernel).
    pub(crate) fn is_unlinked(&self, ino: Ino) -> bool {
        self.unlinked.contains(ino)
    }

    // ---- parts -----------------------------------------------------------

    /// The part `ino` belongs to (exclusive state lock: no part lock taken).
    pub(crate) fn part(&mut self, ino: Ino) -> &mut Part {
        part_mut(&mut self.parts, ino)
    }

    /// Every part, exclusively.
    pub(crate) fn parts_mut(&mut self) -> impl Iterator<Item = &mut Part> {
        self.parts
            .iter_mut()
            .map(|p| p.get_mut().unwrap_or_else(PoisonError::into_inner))
    }

    /// Evicts idle inodes of every part down to its share of the bound.
    pub(crate) fn shrink_all(&mut self) {
        let stats = self.stats.clone();
        for p in self.parts_mut() {
            p.icache.shrink(&stats);
        }
    }

    // ---- inodes ----------------------------------------------------------

    /// The inode, loading it from the store on a miss. Freed inodes are gone.
    pub(crate) fn inode(&mut self, ino: Ino) -> Result<&mut Inode> {
        let part = part_mut(&mut self.parts, ino);
        load_inode(&mut part.icache, &*self.store, &self.stats, ino)
    }

    pub(crate) fn dir(&mut self, ino: Ino) -> Result<&mut Inode> {
        let i = self.inode(ino)?;
        if i.rec.kind != FileKind::Directory {
            return Err(EngineError::NotDir);
        }
        if i.rec.nlink == 0 {
            return Err(EngineError::NotFound);
        }
        Ok(i)
    }

    /// Puts an inode on the dirty list (pinning it).
    pub(crate) fn dirty_inode(&mut self, ino: Ino) {
        let part = part_mut(&mut self.parts, ino);
        mark_dirty(&mut part.icache, &mut part.dirty, &self.stats, ino);
    }

    pub(crate) fn touch_dir(&mut self, dir: Ino, now: Timespec) -> Result<()> {
        let d = self.inode(dir)?;
        d.rec.mtime = now;
        d.rec.ctime = now;
        self.dirty_inode(dir);
        Ok(())
    }

    pub(crate) fn alloc_ino(&mut self) -> Ino {
        let ino = Ino(self.next_ino);
        self.next_ino += 1;
        ino
    }

    /// Frees the inode if nothing references it any more, or files it in
    /// `unlinked` if only handles or kernel references keep it.
    pub(crate) fn settle(&mut self, ino: Ino) {
        let stats = self.stats.clone();
        let part = part_mut(&mut self.parts, ino);
        let refs = part.icache.refs(ino);
        let Some(i) = part.icache.peek_mut(ino) else {
            return;
        };
        if i.rec.nlink > 0 || i.is_freed() {
            return;
        }
        if i.opens > 0 || refs > 0 {
            self.unlinked.insert(ino);
        } else {
            self.unlinked.remove(ino);
            // Its blocks and `T` record go with it.
            part.truncates.remove(ino, &stats);
            Stats::inc(&stats.unlinked_freed);
            if i.on_store {
                i.blocks.clear();
                mark_dirty(&mut part.icache, &mut part.dirty, &stats, ino);
                if let Some(i) = part.icache.peek_mut(ino) {
                    i.free();
                }
            } else {
                // The store holds nothing of it (created and freed since the
                // last commit, or an unlinked file kept out of the store), so
                // it leaves memory now, and its dirty items with it, so that
                // churn does not fill the dirty list (a block of it that was
                // cut off by a truncate keeps its item; the drain skips it,
                // finding no inode).
                for n in i.blocks.keys() {
                    part.dirty.remove(&Item::Block(ino, *n), &stats);
                }
                for item in [Item::Inode(ino), Item::Xattr(ino), Item::Truncate(ino)] {
                    part.dirty.remove(&item, &stats);
                }
                i.discard();
                part.icache.remove(ino);
            }
        }
        Stats::set(&stats.unlinked_inodes, self.unlinked.len() as u64);
    }

    // ---- names -----------------------------------------------------------

    /// The child named `name` in `dir` and whether the store holds the name.
    pub(crate) fn find(&mut self, dir: Ino, name: &[u8]) -> Result<(Option<Child>, bool)> {
        let hash = format::dir_hash(name);
        if let Known::Yes { child, stored } = self.dcache.lookup(dir, hash, name, &self.stats) {
            return Ok((child, stored));
        }
        let child = self.stored_child(dir, hash, name)?;
        self.dcache.fill(dir, hash, name, child, &self.stats);
        Ok((child, child.is_some()))
    }

    /// What the store (a staged batch first) holds for `dir/name`.
    pub(crate) fn stored_child(&self, dir: Ino, hash: u64, name: &[u8]) -> Result<Option<Child>> {
        Stats::inc(&self.stats.store_gets);
        let key = format::dentry_key(dir, hash, name);
        // While a commit's names are out of `pending`, its batch touches no
        // other name, so the store needs no wait for the batch.
        let v = if self.dcache.is_committing() {
            self.store.get_untouched(&key)?
        } else {
            self.store.get(&key)?
        };
        match v {
            Some(v) => Ok(Some(format::decode_dentry(dir, &v)?)),
            None => Ok(None),
        }
    }

    pub(crate) fn set_name(&mut self, dir: Ino, name: &[u8], child: Option<Child>, stored: bool) {
        let hash = format::dir_hash(name);
        if child.is_none() && !stored {
            // Created and removed since the last commit: nothing to write.
            self.dcache.drop_pending(dir, hash, name, &self.stats);
            Stats::inc(&self.stats.names_never_stored);
        } else {
            self.dcache.set(dir, hash, name, child, stored);
        }
        // The pending table is the dirty list of names: it counts toward
        // `dirty_items_max` (`Engine::push_back`) and a commit takes it whole.
        Stats::set(
            &self.stats.pending_dentries,
            self.dcache.pending_len() as u64,
        );
    }

    /// Creates a new inode of `kind` named `name` in `parent`.
    pub(crate) fn make(
        &mut self,
        ctx: Ctx,
        parent: Ino,
        name: &[u8],
        new: NewInode<'_>,
    ) -> Result<Attr> {
        let NewInode {
            kind,
            mode,
            rdev,
            target,
        } = new;
        check_name(name)?;
        let now = Timespec::now();
        let (pgid, psetgid, pnlink) = {
            let p = self.dir(parent)?;
            (
                p.rec.gid,
                p.rec.perm & libc::S_ISGID as u16 != 0,
                p.rec.nlink,
            )
        };
        let (existing, stored) = self.find(parent, name)?;
        if existing.is_some() {
            return Err(EngineError::Exists);
        }
        if kind == FileKind::Directory && pnlink >= LINK_MAX {
            return Err(EngineError::TooManyLinks);
        }
        let mut perm = (mode & 0o7777) as u16;
        let gid = if psetgid { pgid } else { ctx.gid };
        if kind == FileKind::Directory && psetgid {
            perm |= libc::S_ISGID as u16;
        }
        let ino = self.alloc_ino();
        let rec = InodeRecord {
            kind,
            perm,
            nlink: if kind == FileKind::Directory { 2 } else { 1 },
            uid: ctx.uid,
            gid,
            size: target.map(|t| t.len() as u64).unwrap_or(0),
            atime: now,
            mtime: now,
            ctime: now,
            rdev,
            parent: if kind == FileKind::Directory {
                parent
            } else {
                Ino(0)
            },
            entries: 0,
            has_xattrs: false,
            extra: target.map(|t| t.to_vec()),
        };
        self.part(ino).icache.insert(ino, Inode::new(rec, false));
        self.dirty_inode(ino);
        self.set_name(parent, name, Some((ino, kind)), stored);
        let p = self.inode(parent)?;
        p.rec.entries += 1;
        if kind == FileKind::Directory {
            p.rec.nlink += 1;
        }
        self.touch_dir(parent, now)?;
        self.part(ino).icache.hold(ino);
        let attr = self.inode(ino)?.attr(ino);
        Ok(attr)
    }

    /// Drops one name of `child` (already removed from its directory).
    pub(crate) fn drop_link(&mut self, child: Ino, now: Timespec) -> Result<()> {
        let i = self.inode(child)?;
        assert!(
            i.rec.nlink > 0,
            "{child}: dropping a link of an inode with none"
        );
        if i.rec.kind == FileKind::Directory {
            i.rec.nlink = 0;
        } else {
            i.rec.nlink -= 1;
        }
        i.rec.ctime = now;
        self.dirty_inode(child);
        self.settle(child);
        Ok(())
    }

    /// Is `anc` an ancestor of (or equal to) directory `dir`?
    pub(crate) fn is_ancestor(&mut self, anc: Ino, mut dir: Ino) -> Result<bool> {
        let mut steps = 0u32;
        loop {
            if dir == anc {
                return Ok(true);
            }
            if dir == Ino::ROOT {
                return Ok(false);
            }
            dir = self.inode(dir)?.rec.parent;
            steps += 1;
            if steps > 1_000_000 {
                return Err(EngineError::corrupt(
                    Some(dir),
                    "directory parent chain loops",
                ));
            }
        }
    }

    /// The attributes of `name` in directory `parent`.
    pub(crate) fn child_attr(&mut self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.dir(parent)?;
        let (child, _) = self.find(parent, name)?;
        let (ino, _) = child.ok_or(EngineError::NotFound)?;
        Ok(self.inode(ino)?.attr(ino))
    }
}

impl State {
    /// Puts every dirty item's final state into one batch and marks the
    /// items clean. Runs under the state lock. Inode records are copied,
    /// and encoded after the lock is let go (`Filling::finish`). The
    /// pending names are taken whole and returned apart (lookups read them
    /// from the name cache's `committing` table meanwhile): the commit
    /// encodes them into the batch after it let go of the lock
    /// (`put_names`), while other store readers wait for the batch.
    pub(crate) fn drain(&mut self) -> Result<Drained> {
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
                    if i.is_freed() {
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
                    let live = part.icache.peek(ino).is_some_and(|i| !i.is_freed());
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
                    if i.is_freed() {
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
        let part = part_mut(&mut self.parts, ino);
        let Some(i) = part.icache.peek_mut(ino) else {
            return;
        };
        if i.is_freed() {
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
        i.written();
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
