//! dcache: (parent, name) → child or *negative*, and the names not yet stored.
//!
//! Three tables:
//! - `positive`: clean names known to exist on the store, LRU, `positive_max`;
//! - `negative`: clean names known to be absent from the store, LRU, with its
//!   own bound `negative_max`; at the bound the oldest entry is recycled
//!   (the table reuses its node and the next key its buffer: no allocation);
//! - `pending`: names changed since the last commit, with their final state
//!   (`Some` = exists, `None` = removed) and whether the store holds the name.
//!   Pending names are pinned until the journal writes them; the journal
//!   takes them all out at each commit (`take_pending`) and, once it has
//!   released the state lock, puts each in `positive` or `negative`
//!   (`recache`), a thousand at a time. In between the taken table is
//!   `committing`, and a lookup reads a name there as the store will hold
//!   it (docs/design.md §6, §8). The pending table is also the names'
//!   dirty list: its size counts toward `dirty_items_max`.
//!
//! A store miss enters `negative` on its second occurrence: the first only
//! leaves its fingerprint in `first`, a fixed table of fingerprints (at
//! most `FIRST_SLOTS_MAX`, one slot per fingerprint, overwritten by the next
//! that falls there). Churn looks most names up once, just before it
//! creates them (a spool) or never again (a probe that the kernel's own
//! negative dentry answers): admitting those would evict an older entry
//! for each, for nothing. Counter `dcache_negative_deferred`. (Names this
//! mount removed enter at once: `drop_pending`, and `recache` after the
//! commit that removed them from the store.)
//!
//! A name is in at most one of `pending`, `positive` and `negative` (it may
//! be in `committing` too, which says what the store will hold, and which
//! `pending` overrides). Unlink removes a name from `positive` and
//! records `None` in `pending` when the store holds it; a name created and
//! removed between two commits leaves `pending` at once (`drop_pending`) and
//! becomes a clean negative entry, so churn leaves no state for readdir to
//! walk and nothing for the journal to write.
//! `pending` is ordered by (parent, hash, name) so readdir can merge it with
//! the store's pages of the same directory.
//!
//! Locking: guarded by the engine's state lock.

use crate::format::NAME_MAX;
use crate::stats::Stats;
use crate::types::{FileKind, Ino};
use lru::LruCache;
use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::ops::Bound;
use std::sync::Arc;

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

pub type Name = Vec<u8>;

/// Names that changed since the last commit, in (parent, hash, name) order.
pub type PendingNames = BTreeMap<(Ino, u64, Name), Pending>;

/// A clean table's key: the parent's number (8 bytes) then the name. One
/// flat byte string, so that a lookup borrows a key built on the stack and
/// allocates nothing.
type Flat = Vec<u8>;

/// Calls `f` with the flat key of `parent/name`, built on the stack.
fn with_flat<R>(parent: Ino, name: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
    if name.len() > NAME_MAX {
        // Refused before it gets here; still correct, just not on the stack.
        let mut v = parent.0.to_be_bytes().to_vec();
        v.extend_from_slice(name);
        return f(&v);
    }
    let mut buf = [0u8; 8 + NAME_MAX];
    buf[..8].copy_from_slice(&parent.0.to_be_bytes());
    buf[8..8 + name.len()].copy_from_slice(name);
    f(&buf[..8 + name.len()])
}

/// An LRU table that holds at most `cap` entries and evicts (reusing the
/// evicted node) at the bound. Its hash map has room for `cap` from the
/// start: one that grew as entries came rehashed every entry at each
/// doubling, inside whichever request inserted next, under the
/// state lock held exclusively (up to 20 ms at 100,000 names here;
/// docs/design.md §8). The room is 16 bytes a slot, touched as it is used.
fn bounded<V>(cap: NonZeroUsize) -> LruCache<Flat, V> {
    LruCache::new(cap)
}

/// The entry of `parent/name` in a table of names, found among those of
/// its (parent, hash) without building a key.
fn find_name(names: &PendingNames, parent: Ino, hash: u64, name: &[u8]) -> Option<Pending> {
    let lo = (parent, hash, Vec::new());
    names
        .range((Bound::Included(lo), Bound::Unbounded))
        .take_while(|((d, h, _), _)| *d == parent && *h == hash)
        .find(|((_, _, n), _)| n.as_slice() == name)
        .map(|(_, p)| *p)
}

/// The first-miss table's largest size (512 KiB).
const FIRST_SLOTS_MAX: usize = 1 << 16;

pub struct DCache {
    positive: LruCache<Flat, Child>,
    negative: LruCache<Flat, ()>,
    pending: PendingNames,
    /// The names the running commit took from `pending` (`take_pending`),
    /// until it has handed them back (`end_commit`): what the store holds
    /// for them once the commit's batch is written. A lookup reads them
    /// here, so that no name waits for the batch while the commit puts it
    /// together outside the state lock (inflight.rs, `Staging`), and knows
    /// that the batch touches no other name (`is_committing`).
    committing: Option<Arc<PendingNames>>,
    positive_max: usize,
    negative_max: usize,
    /// The key of the last entry pushed out of a full table, reused for the
    /// next key made: at the bound, an insert allocates nothing (the table
    /// reuses the evicted entry's node, and this its key's buffer).
    spare: Flat,
    /// Fingerprints of names missed once on the store (0: empty), a power
    /// of two in length (empty when no negative entries are kept).
    first: Box<[u64]>,
}

impl DCache {
    pub fn new(positive_max: usize, negative_max: usize) -> DCache {
        let positive_cap =
            NonZeroUsize::new(positive_max).expect("positive dentry bound must be positive");
        DCache {
            positive: bounded(positive_cap),
            // A bound of zero keeps no negative entries (`put_clean`).
            negative: bounded(NonZeroUsize::new(negative_max).unwrap_or(NonZeroUsize::MIN)),
            pending: BTreeMap::new(),
            committing: None,
            positive_max,
            negative_max,
            spare: Vec::new(),
            first: if negative_max == 0 {
                Box::default()
            } else {
                vec![0; negative_max.next_power_of_two().min(FIRST_SLOTS_MAX)].into()
            },
        }
    }

    /// Whether a store miss of `parent/name` (`hash`: its `dir_hash`) is
    /// admitted to `negative`: yes when its fingerprint is the one left by
    /// an earlier miss in its slot (which it then clears), otherwise it
    /// leaves its own.
    fn admit(&mut self, parent: Ino, hash: u64) -> bool {
        let fp = (hash ^ parent.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)).rotate_left(17) | 1;
        let slot = (fp >> 1) as usize & (self.first.len() - 1);
        if self.first[slot] == fp {
            self.first[slot] = 0;
            true
        } else {
            self.first[slot] = fp;
            false
        }
    }

    /// An owned flat key for `parent/name`, in the spare buffer if there is one.
    fn flat(&mut self, parent: Ino, name: &[u8]) -> Flat {
        let mut k = std::mem::take(&mut self.spare);
        k.clear();
        k.extend_from_slice(&parent.0.to_be_bytes());
        k.extend_from_slice(name);
        k
    }

    /// The pending state of `parent/name`, found among the pending names of
    /// its (parent, hash) without building a key.
    fn pending_of(&self, parent: Ino, hash: u64, name: &[u8]) -> Option<Pending> {
        find_name(&self.pending, parent, hash, name)
    }

    /// What the running commit writes for `parent/name`, if it writes it.
    fn committing_of(&self, parent: Ino, hash: u64, name: &[u8]) -> Option<Known> {
        find_name(self.committing.as_ref()?, parent, hash, name).map(|p| Known::Yes {
            child: p.child,
            stored: p.child.is_some(),
        })
    }

    /// Whether a commit's names are between its drain and its hand-back:
    /// then a name not in `committing_of` is one the commit's batch does
    /// not touch, and the store can be read for it without the batch.
    pub fn is_committing(&self) -> bool {
        self.committing.is_some()
    }

    pub fn lookup(&mut self, parent: Ino, hash: u64, name: &[u8], stats: &Stats) -> Known {
        if let Some(p) = self.pending_of(parent, hash, name) {
            Stats::inc(&stats.dcache_hits);
            return Known::Yes {
                child: p.child,
                stored: p.stored,
            };
        }
        let (positive, negative) = (&mut self.positive, &mut self.negative);
        let known = with_flat(parent, name, |k| {
            if let Some(c) = positive.get(k) {
                return Some(Some(*c));
            }
            negative.get(k).map(|()| None)
        });
        match known {
            Some(Some(c)) => {
                Stats::inc(&stats.dcache_hits);
                Known::Yes {
                    child: Some(c),
                    stored: true,
                }
            }
            Some(None) => {
                Stats::inc(&stats.dcache_negative_hits);
                Known::Yes {
                    child: None,
                    stored: false,
                }
            }
            None => match self.committing_of(parent, hash, name) {
                Some(k) => {
                    Stats::inc(&stats.dcache_committing_hits);
                    k
                }
                None => {
                    Stats::inc(&stats.dcache_misses);
                    Known::Unknown
                }
            },
        }
    }

    /// What the tables know about `parent/name`, without touching their
    /// order or counters (for probes under the shared state lock).
    pub fn peek(&self, parent: Ino, hash: u64, name: &[u8]) -> Known {
        if let Some(p) = self.pending_of(parent, hash, name) {
            return Known::Yes {
                child: p.child,
                stored: p.stored,
            };
        }
        with_flat(parent, name, |k| {
            if let Some(c) = self.positive.peek(k) {
                Known::Yes {
                    child: Some(*c),
                    stored: true,
                }
            } else if self.negative.peek(k).is_some() {
                Known::Yes {
                    child: None,
                    stored: false,
                }
            } else {
                self.committing_of(parent, hash, name)
                    .unwrap_or(Known::Unknown)
            }
        })
    }

    /// Records what the store said about a name that was not cached: the
    /// caller's `lookup` just answered `Unknown` under the same lock, so the
    /// name is in no table and nothing needs to be removed first. An absent
    /// name is kept from its second miss on (`admit`).
    pub fn fill(
        &mut self,
        parent: Ino,
        hash: u64,
        name: &[u8],
        child: Option<Child>,
        stats: &Stats,
    ) {
        if child.is_none() {
            if self.negative_max == 0 {
                return;
            }
            if !self.admit(parent, hash) {
                Stats::inc(&stats.dcache_negative_deferred);
                return;
            }
        }
        debug_assert!(
            with_flat(parent, name, |k| !self.positive.contains(k)
                && !self.negative.contains(k)),
            "a name filled from the store was cached"
        );
        self.push_clean(parent, name, child, stats);
    }

    /// Removes `parent/name` from both clean tables.
    fn forget_clean(&mut self, parent: Ino, name: &[u8]) {
        let (positive, negative) = (&mut self.positive, &mut self.negative);
        with_flat(parent, name, |k| {
            positive.pop(k);
            negative.pop(k);
        });
    }

    fn put_clean(&mut self, parent: Ino, name: &[u8], child: Option<Child>, stats: &Stats) {
        self.forget_clean(parent, name);
        self.push_clean(parent, name, child, stats);
    }

    /// Adds a name that is in neither clean table.
    fn push_clean(&mut self, parent: Ino, name: &[u8], child: Option<Child>, stats: &Stats) {
        match child {
            Some(c) => {
                let k = self.flat(parent, name);
                if let Some((old, _)) = self.positive.push(k, c) {
                    // Not there before (just removed): the oldest went out.
                    Stats::inc(&stats.dcache_evictions);
                    self.spare = old;
                }
            }
            None => {
                if self.negative_max == 0 {
                    return;
                }
                let k = self.flat(parent, name);
                if let Some((old, ())) = self.negative.push(k, ()) {
                    // The oldest negative entry's node and key are reused.
                    Stats::inc(&stats.dcache_negative_recycled);
                    self.spare = old;
                }
            }
        }
        assert!(
            self.positive.len() <= self.positive_max,
            "positive dentries over their bound"
        );
        assert!(
            self.negative.len() <= self.negative_max,
            "negative dentries over their bound"
        );
        self.publish(stats);
    }

    /// Changes a name; the journal will write it. `stored` is whether the store
    /// holds the name now (known from the lookup that preceded the change).
    pub fn set(&mut self, parent: Ino, hash: u64, name: &[u8], child: Option<Child>, stored: bool) {
        self.forget_clean(parent, name);
        self.pending
            .insert((parent, hash, name.to_vec()), Pending { child, stored });
    }

    /// How many names are pending.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Takes every pending name for the journal, which writes them, in
    /// (parent, hash, name) order. The pending table is the dirty list of
    /// names (`State::set_name`), so a drain takes it whole. Lookups find
    /// them in `committing` until the commit's `end_commit`. The names are in no table
    /// until the commit hands them back (`recache`) or a lookup reads them.
    pub fn take_pending(&mut self) -> Arc<PendingNames> {
        // The commit lock orders commits; a stopped engine (which may have
        // left a commit's names here) drains no more.
        assert!(self.committing.is_none(), "two commits' names at once");
        let taken = Arc::new(std::mem::take(&mut self.pending));
        self.committing = Some(taken.clone());
        taken
    }

    /// The running commit has handed its names back (`recache`): the store
    /// holds them, and the clean tables those that fit.
    pub fn end_commit(&mut self) {
        self.committing = None;
    }

    /// A name a commit wrote goes back into its clean table, after the
    /// commit released the state lock (in pieces, so that no request waits
    /// long: journal.rs). Since the drain the name may have changed again
    /// (it is pending: the pending state wins and nothing is done) or been
    /// read from the store by a lookup (its clean entry says what the
    /// commit wrote: replaced). It cannot have a clean entry that says
    /// anything else: a clean entry is made only from the store, and from a
    /// removal of a name the store never held (`drop_pending`), which a
    /// committed name is not.
    pub fn recache(
        &mut self,
        parent: Ino,
        hash: u64,
        name: &[u8],
        child: Option<Child>,
        stats: &Stats,
    ) {
        if self.pending_of(parent, hash, name).is_some() {
            return;
        }
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
        match self.pending.remove(&(parent, hash, name.to_vec())) {
            Some(p) => {
                assert!(!p.stored, "dropping a pending name the store holds");
                // In neither clean table while it was pending (`set` took it
                // out, and `fill` follows only a lookup that found it nowhere).
                self.push_clean(parent, name, None, stats);
            }
            None => self.put_clean(parent, name, None, stats),
        }
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
    use crate::format::dir_hash;

    fn fill(d: &mut DCache, parent: Ino, name: &[u8], child: Option<Child>, st: &Stats) {
        d.fill(parent, dir_hash(name), name, child, st);
    }

    #[test]
    fn negative_entries_are_bounded_and_recycled() {
        let st = Stats::default();
        let mut d = DCache::new(10, 3);
        for i in 0..100u32 {
            // A first miss only leaves its fingerprint; the second enters.
            fill(&mut d, Ino(1), &i.to_le_bytes(), None, &st);
            assert_eq!(d.negative.len(), i.min(3) as usize);
            fill(&mut d, Ino(1), &i.to_le_bytes(), None, &st);
        }
        assert_eq!(d.negative.len(), 3);
        assert_eq!(
            st.dcache_negative_deferred
                .load(std::sync::atomic::Ordering::Relaxed),
            100
        );
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
    fn positive_entries_are_bounded_and_keys_of_other_parents_stay_apart() {
        let st = Stats::default();
        let mut d = DCache::new(4, 4);
        let c = |n: u64| Some((Ino(n), FileKind::Regular));
        for i in 0..10u64 {
            fill(&mut d, Ino(1), format!("f{i}").as_bytes(), c(100 + i), &st);
        }
        assert_eq!(d.positive.len(), 4);
        assert_eq!(
            st.dcache_evictions
                .load(std::sync::atomic::Ordering::Relaxed),
            6
        );
        // The same name under another parent, and a name that is a prefix
        // of another, are different entries.
        for _ in 0..2 {
            fill(&mut d, Ino(2), b"f9", None, &st);
            fill(&mut d, Ino(1), b"f", None, &st);
        }
        assert_eq!(
            d.lookup(Ino(1), 0, b"f9", &st),
            Known::Yes {
                child: c(109),
                stored: true
            }
        );
        assert_eq!(
            d.lookup(Ino(2), 0, b"f9", &st),
            Known::Yes {
                child: None,
                stored: false
            }
        );
        assert_eq!(
            d.lookup(Ino(1), 0, b"f", &st),
            Known::Yes {
                child: None,
                stored: false
            }
        );
        // A name that becomes positive leaves the negative table; while
        // its commit runs it is read from the commit's names, and after
        // that it is in no table until the store is read again.
        d.set(Ino(2), 0, b"f9", c(7), false);
        assert_eq!(d.negative.len(), 1);
        let taken = d.take_pending();
        assert_eq!(taken[&(Ino(2), 0, b"f9".to_vec())].child, c(7));
        assert_eq!(
            d.lookup(Ino(2), 0, b"f9", &st),
            Known::Yes {
                child: c(7),
                stored: true
            }
        );
        assert!(d.is_committing());
        d.end_commit();
        assert_eq!(d.lookup(Ino(2), 0, b"f9", &st), Known::Unknown);
        fill(&mut d, Ino(2), b"f9", c(7), &st);
        assert_eq!(
            d.lookup(Ino(2), 0, b"f9", &st),
            Known::Yes {
                child: c(7),
                stored: true
            }
        );
    }

    /// A name handed back after its commit goes into its clean table,
    /// unless it changed again since (pending wins); one a lookup read back
    /// meanwhile is replaced, not doubled.
    #[test]
    fn committed_names_come_back_unless_changed_since() {
        let st = Stats::default();
        let mut d = DCache::new(10, 10);
        let c = |n: u64| Some((Ino(n), FileKind::Regular));
        for (name, child) in [
            (&b"a"[..], c(5)),
            (b"b", c(6)),
            (b"c", c(7)),
            (b"gone", None),
        ] {
            d.set(Ino(1), 0, name, child, true);
        }
        let taken = d.take_pending();
        assert_eq!(taken.len(), 4);
        // Between the drain and the hand-back: "b" is read from the store,
        // "c" changes again.
        fill(&mut d, Ino(1), b"b", c(6), &st);
        d.set(Ino(1), 0, b"c", None, true);
        // Meanwhile every name reads as the commit writes it, except the
        // one pending again.
        assert_eq!(
            d.peek(Ino(1), 0, b"a"),
            Known::Yes {
                child: c(5),
                stored: true
            }
        );
        assert_eq!(
            d.peek(Ino(1), 0, b"gone"),
            Known::Yes {
                child: None,
                stored: false
            }
        );
        assert_eq!(
            d.peek(Ino(1), 0, b"c"),
            Known::Yes {
                child: None,
                stored: true
            }
        );
        assert_eq!(d.peek(Ino(1), 0, b"other"), Known::Unknown);
        for ((parent, hash, name), p) in taken.iter() {
            d.recache(*parent, *hash, name, p.child, &st);
        }
        d.end_commit();
        let yes = |child| Known::Yes {
            child,
            stored: child.is_some(),
        };
        assert_eq!(d.lookup(Ino(1), 0, b"a", &st), yes(c(5)));
        assert_eq!(d.lookup(Ino(1), 0, b"b", &st), yes(c(6)));
        assert_eq!(d.positive.len(), 2, "b once");
        assert_eq!(d.lookup(Ino(1), 0, b"gone", &st), yes(None));
        assert_eq!(
            d.lookup(Ino(1), 0, b"c", &st),
            Known::Yes {
                child: None,
                stored: true
            },
            "the pending removal, not the commit's c"
        );
    }

    #[test]
    fn pending_names_with_one_hash_are_told_apart() {
        let st = Stats::default();
        let mut d = DCache::new(10, 10);
        d.set(Ino(1), 42, b"a", Some((Ino(5), FileKind::Regular)), false);
        d.set(Ino(1), 42, b"b", None, true);
        assert_eq!(
            d.lookup(Ino(1), 42, b"b", &st),
            Known::Yes {
                child: None,
                stored: true
            }
        );
        assert_eq!(
            d.lookup(Ino(1), 42, b"a", &st),
            Known::Yes {
                child: Some((Ino(5), FileKind::Regular)),
                stored: false
            }
        );
        assert_eq!(d.lookup(Ino(1), 42, b"c", &st), Known::Unknown);
        assert_eq!(d.lookup(Ino(2), 42, b"a", &st), Known::Unknown);
    }

    #[test]
    fn pending_overrides_clean_and_a_name_lives_in_one_table() {
        let st = Stats::default();
        let mut d = DCache::new(10, 10);
        fill(&mut d, Ino(1), b"a", Some((Ino(5), FileKind::Regular)), &st);
        d.set(Ino(1), 7, b"a", None, true);
        assert_eq!(
            d.lookup(Ino(1), 7, b"a", &st),
            Known::Yes {
                child: None,
                stored: true
            }
        );
        assert_eq!(d.positive.len(), 0);
        let taken = d.take_pending();
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[&(Ino(1), 7, b"a".to_vec())].child, None);
        d.end_commit();
        assert_eq!(d.lookup(Ino(1), 7, b"a", &st), Known::Unknown);
        assert_eq!(d.positive.len() + d.negative.len(), 0);
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

    #[test]
    fn a_first_miss_is_forgotten_when_another_takes_its_slot() {
        let st = Stats::default();
        let mut d = DCache::new(10, 4);
        assert_eq!(d.first.len(), 4);
        // Names until one shares the first one's slot.
        let slot = |d: &DCache, n: &[u8]| {
            let fp = (dir_hash(n) ^ 1u64.wrapping_mul(0x9e37_79b9_7f4a_7c15)).rotate_left(17) | 1;
            (fp >> 1) as usize & (d.first.len() - 1)
        };
        let other = (0u32..)
            .map(|i| format!("o{i}"))
            .find(|n| slot(&d, n.as_bytes()) == slot(&d, b"a"))
            .unwrap();
        fill(&mut d, Ino(1), b"a", None, &st);
        fill(&mut d, Ino(1), other.as_bytes(), None, &st);
        fill(&mut d, Ino(1), b"a", None, &st);
        assert_eq!(d.negative.len(), 0, "the second miss of a came after o");
        fill(&mut d, Ino(1), b"a", None, &st);
        assert_eq!(
            d.lookup(Ino(1), 0, b"a", &st),
            Known::Yes {
                child: None,
                stored: false
            }
        );
        // With no negative entries kept there is no table either.
        let mut z = DCache::new(10, 0);
        assert!(z.first.is_empty());
        fill(&mut z, Ino(1), b"a", None, &st);
        fill(&mut z, Ino(1), b"a", None, &st);
        assert_eq!(z.negative.len(), 0);
    }
}
