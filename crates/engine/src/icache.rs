//! icache: inodes in memory, the kernel's lookup counts and open handles.
//!
//! States of an inode here:
//! `Absent → Clean → Dirty → Clean → Evicted`, and `Dirty → Freed → Absent`
//! once the journal has written its deletion (`Life`, with its transitions).
//! - `load` (a miss) moves Absent → Clean; any change moves it to Dirty and
//!   puts it on the journal's dirty list; a commit moves Dirty → Clean.
//! - An inode is *pinned* (never evicted) while it is dirty, open
//!   (`opens > 0`) or has `nlink == 0` (it is in `unlinked`).
//! - Clean unpinned inodes sit in an LRU; beyond `inodes_max` the least
//!   recently used are evicted. Pinned inodes may push the total past the
//!   bound; they are counted and the bound is restored as they unpin.
//! - Eviction (`shrink`) runs only once an operation is over (the exclusive
//!   state guard's drop, which ends every namespace operation and every
//!   commit; the end of `Engine::file` for its part), never while one runs: an operation may have changed
//!   an inode it loaded without dirtying it yet. One operation may therefore
//!   exceed the bound, while it runs, by the inodes it loads.
//!
//! The kernel's lookup counts live apart from the inode objects, in a compact
//! table (`kernel_refs`), so that inodes the kernel knows need not stay loaded.
//! Invariant: `nlink == 0 && (opens > 0 || kernel_refs > 0)` ⇔ the inode is
//! in `unlinked`; `nlink == 0` with neither ⇒ it is `freed` and dirty.
//!
//! Locking: the engine keeps one `ICache` per part of its state (state.rs,
//! `Part`), guarded by that part's lock or by the state lock held
//! exclusively.

use crate::format::{InodeRecord, Xattrs};
use crate::stats::Stats;
use crate::types::{Attr, FileKind, Ino, InoMap};
use lru::LruCache;
use std::collections::BTreeMap;
use std::sync::Arc;

/// An inode in memory.
#[derive(Debug)]
pub struct Inode {
    /// Attributes as they will be stored. For regular files `extra` is always
    /// `None` in memory: the bytes of a small file live in `blocks[0]`.
    pub rec: InodeRecord,
    pub opens: u32,
    /// Cached blocks: every dirty block, and block 0 of files no larger than
    /// `INLINE_MAX`. An empty vector is a hole (its key is deleted at commit).
    pub blocks: BTreeMap<u64, Vec<u8>>,
    /// Loaded on first use.
    pub xattrs: Option<Xattrs>,
    /// The inode record exists on the store.
    pub on_store: bool,
    /// The xattr record exists on the store.
    pub xattrs_on_store: bool,
    /// The unlinked record exists on the store.
    pub unlinked_on_store: bool,
    /// The store may hold blocks or a pending truncate range of it: set when
    /// a commit writes one, and for every inode loaded from the store. While
    /// false, a freed inode's deletion needs no scan of its blocks, and an
    /// unlinked one leaves nothing a crash would have to reclaim.
    pub blocks_on_store: bool,
    /// A commit kept it out of the store while unlinked (counted once in
    /// `unlinked_unstored`).
    pub kept_out: bool,
    /// Where it is in its life here: clean, dirty or freed (`Life`).
    life: Life,
}

/// An inode's life in memory (the header's states; `Absent` and `Evicted`
/// are its absence from the cache):
///
/// ```text
///   load / create ──► Clean ──change──► Dirty ──commit──► Clean ──► evicted
///                       │                 │
///                       └──── free ───────┴──► Freed ──commit──► removed
/// ```
///
/// Dirty and Freed inodes are on their part's dirty list and pinned; only a
/// commit (`written`) makes one clean again, and a freed inode is never
/// changed again (it has no name, no open and no kernel reference left).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Life {
    Clean,
    Dirty,
    Freed,
}

impl Inode {
    pub fn new(rec: InodeRecord, on_store: bool) -> Inode {
        let xattrs_on_store = on_store && rec.has_xattrs;
        Inode {
            rec,
            opens: 0,
            blocks: BTreeMap::new(),
            xattrs: None,
            on_store,
            xattrs_on_store,
            unlinked_on_store: false,
            blocks_on_store: on_store,
            kept_out: false,
            life: Life::Clean,
        }
    }

    pub fn life(&self) -> Life {
        self.life
    }

    pub fn is_freed(&self) -> bool {
        self.life == Life::Freed
    }

    /// A change: Clean → Dirty (Dirty and Freed stay). True if it was
    /// clean: it must leave the idle list (`ICache::repin`).
    pub fn make_dirty(&mut self) -> bool {
        let was_clean = self.life == Life::Clean;
        if was_clean {
            self.life = Life::Dirty;
        }
        was_clean
    }

    /// No link, no open and no kernel reference left, and the store holds
    /// it: Dirty → Freed, for the next commit to delete. Made dirty first
    /// (`State::settle`), so that it is on the dirty list.
    pub fn free(&mut self) {
        assert_eq!(self.life, Life::Dirty, "freeing an inode that is not dirty");
        self.life = Life::Freed;
    }

    /// A commit wrote it: Dirty → Clean. (A freed one leaves the cache
    /// instead.)
    pub fn written(&mut self) {
        assert_eq!(
            self.life,
            Life::Dirty,
            "a commit wrote an inode that was not dirty"
        );
        self.life = Life::Clean;
    }

    /// Created and freed between two commits: it leaves memory with its
    /// dirty items, as if it had never been changed.
    pub fn discard(&mut self) {
        assert_ne!(self.life, Life::Freed, "discarding a freed inode");
        self.life = Life::Clean;
    }

    pub fn attr(&self, ino: Ino) -> Attr {
        let r = &self.rec;
        let blocks = match r.kind {
            FileKind::Directory => 8,
            _ => r.size.div_ceil(512),
        };
        Attr {
            ino,
            kind: r.kind,
            perm: r.perm,
            nlink: r.nlink,
            uid: r.uid,
            gid: r.gid,
            size: r.size,
            blocks,
            atime: r.atime,
            mtime: r.mtime,
            ctime: r.ctime,
            rdev: r.rdev,
            blksize: 4096,
        }
    }

    pub fn pinned(&self) -> bool {
        self.life != Life::Clean || self.opens > 0 || self.rec.nlink == 0
    }
}

/// The inode cache.
pub struct ICache {
    map: InoMap<Inode>,
    /// Clean, unpinned inodes in recency order (values unused).
    idle: LruCache<Ino, ()>,
    inodes_max: usize,
    /// Kernel lookup counts (ino → count > 0).
    kernel_refs: InoMap<u64>,
    /// Keeps the gauges `icache_inodes` and `kernel_known_inodes` as each
    /// entry comes and goes (the engine's inodes live in several caches,
    /// one per part of its state; the gauges are the sums).
    stats: Arc<Stats>,
}

impl ICache {
    /// A cache of at most `inodes_max` unpinned inodes (zero: a part of
    /// the engine's state whose share of a small bound is nothing; its
    /// inodes leave as soon as they are unpinned).
    pub fn new(inodes_max: usize, stats: Arc<Stats>) -> ICache {
        ICache {
            map: InoMap::default(),
            idle: LruCache::unbounded(),
            inodes_max,
            kernel_refs: InoMap::default(),
            stats,
        }
    }

    pub fn get(&mut self, ino: Ino, stats: &Stats) -> Option<&mut Inode> {
        match self.map.get_mut(&ino) {
            Some(i) => {
                Stats::inc(&stats.icache_hits);
                if self.idle.contains(&ino) {
                    self.idle.promote(&ino);
                }
                Some(i)
            }
            None => None,
        }
    }

    /// Looks without touching recency or counters.
    pub fn peek(&self, ino: Ino) -> Option<&Inode> {
        self.map.get(&ino)
    }

    pub fn peek_mut(&mut self, ino: Ino) -> Option<&mut Inode> {
        self.map.get_mut(&ino)
    }

    pub fn insert(&mut self, ino: Ino, inode: Inode) {
        let pinned = inode.pinned();
        let old = self.map.insert(ino, inode);
        assert!(old.is_none(), "{ino} inserted twice into the icache");
        Stats::inc(&self.stats.icache_inodes);
        if !pinned {
            self.idle.put(ino, ());
        }
    }

    /// Drops an inode whose deletion the journal has written.
    pub fn remove(&mut self, ino: Ino) -> Option<Inode> {
        self.idle.pop(&ino);
        let i = self.map.remove(&ino);
        if i.is_some() {
            Stats::sub(&self.stats.icache_inodes, 1);
        }
        i
    }

    /// Re-files an inode after its pin state may have changed.
    pub fn repin(&mut self, ino: Ino) {
        match self.map.get(&ino) {
            Some(i) if !i.pinned() => {
                self.idle.put(ino, ());
            }
            _ => {
                self.idle.pop(&ino);
            }
        }
    }

    /// Evicts idle inodes until the cache is within its bound (or nothing idle is left).
    pub fn shrink(&mut self, stats: &Stats) {
        while self.map.len() > self.inodes_max {
            let Some((ino, ())) = self.idle.pop_lru() else {
                break;
            };
            let pinned = self.map.get(&ino).is_some_and(|i| i.pinned());
            debug_assert!(!pinned, "{ino} on the idle list was pinned");
            if pinned {
                continue;
            }
            self.map.remove(&ino);
            Stats::sub(&stats.icache_inodes, 1);
            Stats::inc(&stats.icache_evictions);
        }
    }

    pub fn inodes_max(&self) -> usize {
        self.inodes_max
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    // ---- kernel lookup counts -------------------------------------------

    pub fn hold(&mut self, ino: Ino) {
        let c = self.kernel_refs.entry(ino).or_insert(0);
        if *c == 0 {
            Stats::inc(&self.stats.kernel_known_inodes);
        }
        *c += 1;
    }

    /// Drops `n` kernel references; returns the count left. A count from the
    /// kernel larger than what we hold is clamped and logged, not trusted.
    pub fn release(&mut self, ino: Ino, n: u64) -> u64 {
        let Some(c) = self.kernel_refs.get_mut(&ino) else {
            if ino != Ino::ROOT {
                tracing::warn!("FORGET of {ino} that the kernel does not hold");
            }
            return 0;
        };
        if n > *c {
            tracing::warn!("FORGET of {n} references on {ino} that holds {c}; clamped");
        }
        *c -= n.min(*c);
        let left = *c;
        if left == 0 {
            self.kernel_refs.remove(&ino);
            Stats::sub(&self.stats.kernel_known_inodes, 1);
        }
        left
    }

    pub fn refs(&self, ino: Ino) -> u64 {
        self.kernel_refs.get(&ino).copied().unwrap_or(0)
    }

    /// Checks the idle list against the map (O(n); debug builds and tests).
    pub fn debug_check(&self) {
        for (ino, ()) in self.idle.iter() {
            let i = self.map.get(ino);
            debug_assert!(
                i.is_some_and(|i| !i.pinned()),
                "{ino} idle but pinned or absent"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tests::file;

    #[test]
    fn an_inode_goes_clean_dirty_clean_or_dirty_freed() {
        let mut i = Inode::new(file(3), true);
        assert_eq!(i.life(), Life::Clean);
        assert!(!i.pinned());
        assert!(i.make_dirty(), "clean → dirty leaves the idle list");
        assert!(!i.make_dirty(), "a second change is the same dirt");
        assert!(i.pinned());
        i.written();
        assert_eq!(i.life(), Life::Clean);
        assert!(!i.pinned());
        assert!(i.make_dirty());
        i.free();
        assert!(i.is_freed() && i.pinned());
        assert!(!i.make_dirty(), "a freed inode stays freed");
        assert_eq!(i.life(), Life::Freed);
        // Created and freed between commits: it leaves as if unchanged.
        let mut j = Inode::new(file(0), false);
        assert!(j.make_dirty());
        j.discard();
        assert_eq!(j.life(), Life::Clean);
    }

    #[test]
    #[should_panic(expected = "freeing an inode that is not dirty")]
    fn a_clean_inode_is_not_freed_off_the_dirty_list() {
        Inode::new(file(3), true).free();
    }

    #[test]
    #[should_panic(expected = "a commit wrote an inode that was not dirty")]
    fn a_commit_writes_only_dirty_inodes() {
        let mut i = Inode::new(file(3), true);
        assert!(i.make_dirty());
        i.free();
        i.written();
    }
}
