//! dcache: (parent, name) → child or *negative*, and the names not yet stored.
//!
//! Three tables:
//! - `positive`: clean names known to exist on the store, LRU, `positive_max`;
//! - `negative`: clean names known to be absent from the store, LRU, with its
//!   own bound `negative_max`; at the bound the oldest entry is recycled;
//! - `pending`: names changed since the last commit, with their final state
//!   (`Some` = exists, `None` = removed) and whether the store holds the name.
//!   Pending names are pinned until the journal writes them; the journal
//!   moves each into `positive` or `negative`.
//!
//! A name is in at most one table. Unlink removes a name from `positive` and
//! records `None` in `pending` when the store holds it; a name created and
//! removed between two commits leaves `pending` at once (`drop_pending`) and
//! becomes a clean negative entry, so churn leaves no state for readdir to
//! walk and nothing for the journal to write.
//! `pending` is ordered by (parent, hash, name) so readdir can merge it with
//! the store's pages of the same directory.
//!
//! Locking: guarded by the engine's state lock.

use crate::stats::Stats;
use crate::types::{FileKind, Ino};
use lru::LruCache;
use std::collections::BTreeMap;
use std::ops::Bound;

pub type Child = (Ino, FileKind);

/// A name changed since the last commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    pub child: Option<Child>,
    /// The store holds this name (as of the last commit).
    pub stored: bool,
}

/// What the caches know about one name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Known {
    /// The name's current state, and whether the store holds it.
    Yes { child: Option<Child>, stored: bool },
    /// Not cached: ask the store.
    Unknown,
}

type Name = Vec<u8>;

pub struct DCache {
    positive: LruCache<(Ino, Name), Child>,
    negative: LruCache<(Ino, Name), ()>,
    pending: BTreeMap<(Ino, u64, Name), Pending>,
    positive_max: usize,
    negative_max: usize,
}

impl DCache {
    pub fn new(positive_max: usize, negative_max: usize) -> DCache {
        assert!(positive_max > 0, "positive dentry bound must be positive");
        DCache {
            positive: LruCache::unbounded(),
            negative: LruCache::unbounded(),
            pending: BTreeMap::new(),
            positive_max,
            negative_max,
        }
    }

    pub fn lookup(&mut self, parent: Ino, hash: u64, name: &[u8], stats: &Stats) -> Known {
        let key = (parent, name.to_vec());
        if let Some(p) = self.pending.get(&(parent, hash, key.1.clone())) {
            Stats::inc(&stats.dcache_hits);
            return Known::Yes {
                child: p.child,
                stored: p.stored,
            };
        }
        if let Some(c) = self.positive.get(&key) {
            Stats::inc(&stats.dcache_hits);
            return Known::Yes {
                child: Some(*c),
                stored: true,
            };
        }
        if self.negative.get(&key).is_some() {
            Stats::inc(&stats.dcache_negative_hits);
            return Known::Yes {
                child: None,
                stored: false,
            };
        }
        Stats::inc(&stats.dcache_misses);
        Known::Unknown
    }

    /// Records what the store said about a name that was not cached.
    pub fn fill(&mut self, parent: Ino, name: &[u8], child: Option<Child>, stats: &Stats) {
        self.put_clean(parent, name.to_vec(), child, stats);
    }

    fn put_clean(&mut self, parent: Ino, name: Name, child: Option<Child>, stats: &Stats) {
        let key = (parent, name);
        match child {
            Some(c) => {
                self.negative.pop(&key);
                self.positive.put(key, c);
                while self.positive.len() > self.positive_max {
                    self.positive.pop_lru();
                    Stats::inc(&stats.dcache_evictions);
                }
            }
            None => {
                self.positive.pop(&key);
                if self.negative_max == 0 {
                    return;
                }
                if self.negative.len() >= self.negative_max && !self.negative.contains(&key) {
                    // Recycle the oldest negative entry rather than growing.
                    self.negative.pop_lru();
                    Stats::inc(&stats.dcache_negative_recycled);
                }
                self.negative.put(key, ());
            }
        }
        assert!(
            self.negative.len() <= self.negative_max,
            "negative dentries over their bound"
        );
        self.publish(stats);
    }

    /// Changes a name; the journal will write it. `stored` is whether the store
    /// holds the name now (known from the lookup that preceded the change).
    pub fn set(&mut self, parent: Ino, hash: u64, name: &[u8], child: Option<Child>, stored: bool) {
        let key = (parent, name.to_vec());
        self.positive.pop(&key);
        self.negative.pop(&key);
        self.pending
            .insert((parent, hash, key.1), Pending { child, stored });
    }

    /// Takes a pending name for the journal; returns its state.
    pub fn take_pending(&mut self, parent: Ino, hash: u64, name: &[u8]) -> Option<Pending> {
        self.pending.remove(&(parent, hash, name.to_vec()))
    }

    /// After a commit wrote a name: it is now clean.
    pub fn committed(&mut self, parent: Ino, name: Vec<u8>, child: Option<Child>, stats: &Stats) {
        self.put_clean(parent, name, child, stats);
    }

    /// Up to `limit` pending names of `dir` with hash in `[from, to]`, in order.
    pub fn pending_range(
        &self,
        dir: Ino,
        from: u64,
        to: u64,
        limit: usize,
    ) -> Vec<(u64, Name, Option<Child>)> {
        let lo = (dir, from, Vec::new());
        self.pending
            .range((Bound::Included(lo), Bound::Unbounded))
            .take_while(|((d, h, _), _)| *d == dir && *h <= to)
            .take(limit)
            .map(|((_, h, n), p)| (*h, n.clone(), p.child))
            .collect()
    }

    /// Forgets a pending name created since the last commit and removed
    /// again: the store never held it, so it is now a clean negative entry.
    pub fn drop_pending(&mut self, parent: Ino, hash: u64, name: &[u8], stats: &Stats) {
        let key = (parent, hash, name.to_vec());
        if let Some(p) = self.pending.remove(&key) {
            assert!(!p.stored, "dropping a pending name the store holds");
        }
        self.put_clean(parent, key.2, None, stats);
    }

    pub fn publish(&self, stats: &Stats) {
        Stats::set(&stats.dcache_positive, self.positive.len() as u64);
        Stats::set(&stats.dcache_negative, self.negative.len() as u64);
        Stats::set(&stats.dcache_positive_max, self.positive_max as u64);
        Stats::set(&stats.dcache_negative_max, self.negative_max as u64);
        Stats::set(&stats.pending_dentries, self.pending.len() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_entries_are_bounded_and_recycled() {
        let st = Stats::default();
        let mut d = DCache::new(10, 3);
        for i in 0..100u32 {
            d.fill(Ino(1), &i.to_le_bytes(), None, &st);
        }
        assert_eq!(d.negative.len(), 3);
        assert_eq!(
            st.dcache_negative_recycled
                .load(std::sync::atomic::Ordering::Relaxed),
            97
        );
        // Most recent names are the ones kept.
        assert!(matches!(
            d.lookup(Ino(1), 0, &99u32.to_le_bytes(), &st),
            Known::Yes { child: None, .. }
        ));
        assert_eq!(
            d.lookup(Ino(1), 0, &0u32.to_le_bytes(), &st),
            Known::Unknown
        );
    }

    #[test]
    fn pending_overrides_clean_and_a_name_lives_in_one_table() {
        let st = Stats::default();
        let mut d = DCache::new(10, 10);
        d.fill(Ino(1), b"a", Some((Ino(5), FileKind::Regular)), &st);
        d.set(Ino(1), 7, b"a", None, true);
        assert_eq!(
            d.lookup(Ino(1), 7, b"a", &st),
            Known::Yes {
                child: None,
                stored: true
            }
        );
        assert_eq!(d.positive.len(), 0);
        let p = d.take_pending(Ino(1), 7, b"a").unwrap();
        d.committed(Ino(1), b"a".to_vec(), p.child, &st);
        assert_eq!(
            d.lookup(Ino(1), 7, b"a", &st),
            Known::Yes {
                child: None,
                stored: false
            }
        );
    }

    #[test]
    fn pending_range_is_per_directory_and_ordered() {
        let mut d = DCache::new(10, 10);
        d.set(Ino(2), 9, b"x", Some((Ino(7), FileKind::Regular)), false);
        d.set(Ino(2), 4, b"y", None, true);
        d.set(Ino(3), 5, b"z", None, true);
        let r = d.pending_range(Ino(2), 0, u64::MAX, 100);
        assert_eq!(r.iter().map(|e| e.0).collect::<Vec<_>>(), vec![4, 9]);
        assert_eq!(d.pending_range(Ino(2), 5, 8, 100).len(), 0);
    }
}
