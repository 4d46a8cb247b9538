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
}

pub(crate) struct ICache {
    lru: Mutex<lru::LruCache<Ino, Cached>>,
    max_age: Duration,
    entries_max: usize,
    stats: Arc<Stats>,
}

impl ICache {
    pub fn new(entries_max: usize, max_age: Duration, stats: Arc<Stats>) -> ICache {
        Stats::set(&stats.icache_entries_max, entries_max as u64);
        ICache {
            lru: Mutex::new(lru::LruCache::unbounded()),
            max_age,
            entries_max: entries_max.max(1),
            stats,
        }
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

    /// Records what was read or written at `rev` (never older than what is
    /// there).
    pub fn put(&self, ino: Ino, rec: Inode, rev: Rev, times: Option<DirTimes>) {
        let mut g = self.lock();
        if g.peek(&ino).is_some_and(|c| c.rev > rev) {
            return;
        }
        g.put(
            ino,
            Cached {
                rec,
                rev,
                times,
                at: Instant::now(),
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
