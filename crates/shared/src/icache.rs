//! Inode records this mount read or wrote recently, so that the reads an
//! operation makes for itself (a permission check, the parent of a create,
//! the child of an unlink) do not each cost a round trip to the engine.
//!
//! Why this keeps the consistency contract: an entry is served only while
//! younger than `max_age`, which is at most the kernel's attribute TTL. A
//! change another mount committed at time t is then never hidden from an
//! operation that starts after t + TTL: the entry it could be served from
//! was read after t. The watch drops entries of inodes other mounts
//! change, so most staleness ends far sooner; this mount's own commits
//! refresh the entries they write. Commits never trust an entry: they are
//! conditioned on the version it was read at, and a commit that fails
//! reads again (`fresh`).
//!
//! Bound: at most `entries_max` entries, evicted in LRU order
//! (`icache_entries`, `icache_hits`, `icache_misses`, `icache_evictions`).

use crate::schema::{DirTimes, Inode};
use crate::stats::Stats;
use churnfs_kv::Rev;
use churnfs_vfs::Ino;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone)]
pub(crate) struct Cached {
    pub rec: Inode,
    pub rev: Rev,
    pub times: Option<DirTimes>,
    at: Instant,
    /// When the record was read (the `stamp` taken before the read) or
    /// written (at the put).
    stamp: u64,
}

pub(crate) struct ICache {
    lru: Mutex<lru::LruCache<Ino, Cached>>,
    max_age: Duration,
    entries_max: usize,
    stats: Arc<Stats>,
    clock: std::sync::atomic::AtomicU64,
    /// The name (its hash) of the last lookup that missed, per directory
    /// (at most `WALKS_MAX` directories): lookups that miss in directory
    /// order are a walk, read ahead (backend.rs `read_ahead`).
    walks: Mutex<lru::LruCache<Ino, u64>>,
}

/// Directories whose last missed lookup is remembered.
const WALKS_MAX: usize = 64;

impl ICache {
    pub fn new(entries_max: usize, max_age: Duration, stats: Arc<Stats>) -> ICache {
        Stats::set(&stats.icache_entries_max, entries_max as u64);
        ICache {
            lru: Mutex::new(lru::LruCache::unbounded()),
            max_age,
            entries_max: entries_max.max(1),
            stats,
            clock: std::sync::atomic::AtomicU64::new(1),
            walks: Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(WALKS_MAX).expect("WALKS_MAX is not zero"),
            )),
        }
    }

    /// Is there a fresh enough entry? (Counts neither a hit nor a miss.)
    pub fn contains(&self, ino: Ino) -> bool {
        !self.max_age.is_zero()
            && self
                .lock()
                .peek(&ino)
                .is_some_and(|c| c.at.elapsed() < self.max_age)
    }

    /// A lookup in `dir` of the name hashed `hash` found no entry here:
    /// true when the last such lookup there was of an earlier name in
    /// directory order (someone walks the directory as listed).
    pub fn walking(&self, dir: Ino, hash: u64) -> bool {
        let mut w = self.walks.lock().unwrap_or_else(|p| p.into_inner());
        w.put(dir, hash).is_some_and(|prev| prev < hash)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, lru::LruCache<Ino, Cached>> {
        self.lru.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh enough entry.
    pub fn get(&self, ino: Ino) -> Option<Cached> {
        if self.max_age.is_zero() {
            return None;
        }
        let mut g = self.lock();
        let hit = match g.get(&ino) {
            Some(c) if c.at.elapsed() < self.max_age => Some(c.clone()),
            Some(_) => {
                g.pop(&ino);
                None
            }
            None => None,
        };
        Stats::inc(if hit.is_some() {
            &self.stats.icache_hits
        } else {
            &self.stats.icache_misses
        });
        Stats::set(&self.stats.icache_entries, g.len() as u64);
        hit
    }

    /// A stamp to take before reading a record that will be put here: a
    /// record read before a newer one was put never replaces it.
    pub fn stamp(&self) -> u64 {
        self.clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Records what was read (`read_at`: the stamp taken before the read)
    /// or written (None) at `rev`, never over a newer record: one of a
    /// higher version of the same kind, or one put after this was read.
    /// Versions from a delegated directory's image and the engine's do
    /// not compare (an image's change is newer than the engine record it
    /// was made on; the engine's record after a batch is newer than the
    /// image's): between them, the order of reads and puts decides.
    pub fn put(
        &self,
        ino: Ino,
        rec: Inode,
        rev: Rev,
        times: Option<DirTimes>,
        read_at: Option<u64>,
    ) {
        let stamp = read_at.unwrap_or_else(|| self.stamp());
        let mut g = self.lock();
        let local = |r: Rev| r >= crate::deleg::LOCAL_REV_BASE;
        if g.peek(&ino).is_some_and(|c| {
            (local(c.rev) == local(rev) && c.rev > rev) || (read_at.is_some() && c.stamp > stamp)
        }) {
            return;
        }
        g.put(
            ino,
            Cached {
                rec,
                rev,
                times,
                at: Instant::now(),
                stamp,
            },
        );
        while g.len() > self.entries_max {
            g.pop_lru();
            Stats::inc(&self.stats.icache_evictions);
        }
        assert!(g.len() <= self.entries_max, "inode cache over its bound");
        Stats::set(&self.stats.icache_entries, g.len() as u64);
    }

    /// A directory's times as just written, on its entry if there is one
    /// (the entry's version is its record's, which the times key does not
    /// change).
    pub fn put_times(&self, ino: Ino, times: DirTimes) {
        let mut g = self.lock();
        if let Some(c) = g.peek_mut(&ino) {
            c.times = Some(times);
        }
    }

    pub fn forget(&self, ino: Ino) {
        let mut g = self.lock();
        g.pop(&ino);
        Stats::set(&self.stats.icache_entries, g.len() as u64);
    }

    pub fn clear(&self) {
        self.lock().clear();
        Stats::set(&self.stats.icache_entries, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deleg::LOCAL_REV_BASE;
    use churnfs_vfs::{FileKind, Timespec};

    fn rec(nlink: u32) -> Inode {
        let t = Timespec::now();
        Inode {
            kind: FileKind::Regular,
            perm: 0o644,
            nlink,
            uid: 0,
            gid: 0,
            size: 0,
            atime: t,
            mtime: t,
            ctime: t,
            rdev: 0,
            parent: 0,
            has_xattrs: false,
            inline: true,
            dseq: 0,
            garbage: None,
            extra: Vec::new(),
        }
    }

    fn nlink(c: &ICache, ino: Ino) -> u32 {
        c.get(ino).expect("cached").rec.nlink
    }

    /// A read from an image (local version) that started before an
    /// unlink there and a batch after it must not put the old record back
    /// over the batch's (engine version): the versions do not compare,
    /// the order of the read and the puts does.
    #[test]
    fn a_record_read_before_a_newer_put_never_replaces_it() {
        let c = ICache::new(16, Duration::from_secs(60), Arc::new(Stats::default()));
        let ino = Ino(7);
        let read_at = c.stamp();
        c.put(ino, rec(0), LOCAL_REV_BASE + 2, None, None);
        c.put(ino, rec(0), 40, None, None);
        c.put(ino, rec(1), LOCAL_REV_BASE + 1, None, Some(read_at));
        assert_eq!(nlink(&c, ino), 0);
        // The same kinds still order by version, whatever the order.
        c.put(ino, rec(3), 39, None, None);
        assert_eq!(nlink(&c, ino), 0);
        // A read started after the last put replaces it.
        let later = c.stamp();
        c.put(ino, rec(5), LOCAL_REV_BASE + 9, None, Some(later));
        assert_eq!(nlink(&c, ino), 5);
    }
}
