//! orphan: the blocks a large shrinking truncate left behind, deleted in
//! the background.
//!
//! A truncate that shrinks a file by more than `TRUNCATE_INLINE_BLOCKS`
//! blocks does not delete them itself (that would be a store scan and one
//! deletion per block, inside the request and the commit that carries it).
//! It records the range of block numbers `from..to` whose stored blocks are
//! now garbage: in memory here, and on the store as a `T|ino` record that
//! the same commit writes with the new size. The reclaim thread
//! (reclaim.rs, `finish_truncate`) deletes the range's blocks in batches of
//! at most `free_batch_keys` keys, each batch moving `from` up in the same
//! store batch, and deletes the record with the last one.
//!
//! Invariant: a file with a pending range has `size <= from * BLOCK_SIZE`,
//! and no live block is numbered in the range. Reads never reach a garbage
//! block (they stop at the size). A size increase past `from` first turns
//! the blocks it reveals into holes whose keys the next commit deletes, then
//! moves `from` above them (`FileCtx::reveal` in data.rs): the extension pays
//! for what it exposes, never for the rest. A second large shrink merges its
//! range with the pending one (the blocks between them are holes already).
//!
//! Bound: at most `TRUNCATES_PENDING_MAX` files have a pending range, at
//! most `TRUNCATES_PENDING_MAX / PARTS` in each part of the engine's state
//! (asserted; the set lives in the part, state.rs, so truncates of files in
//! different parts share no lock); when a part's set is full a truncate
//! deletes its blocks inline, as small ones do. So the store never holds more `T` records than the
//! bound, and mount reads them all before it returns: a bounded amount of
//! work, whatever the history. A crash leaves the records; the next mount
//! queues them again. Freeing a file deletes its record with its blocks.

use crate::error::{EngineError, Result};
use crate::format;
use crate::stats::Stats;
use crate::store::KvStore;
use crate::types::{Ino, InoMap};
use std::sync::atomic::Ordering;

/// A shrink by at most this many blocks deletes them in the request.
pub const TRUNCATE_INLINE_BLOCKS: u64 = 64;
/// Files whose truncated blocks wait for the reclaim thread.
pub const TRUNCATES_PENDING_MAX: usize = 1024;

/// Pending block ranges by inode, one set per part of the engine's state
/// (state.rs, `Part`): truncates of files in different parts never share a
/// lock. Each part's set holds at most `TRUNCATES_PENDING_MAX / PARTS`
/// files, so all of them together at most `TRUNCATES_PENDING_MAX`. The
/// records a mount finds (`restore`, at most that many in all, spread as
/// their inode numbers hash) may put a part over its share; while any part
/// is (the gauge `truncates_over_share`, a sum over parts), no part takes a
/// new range, so the total never exceeds the bound. The set also keeps the
/// gauge `truncates_pending`.
pub struct PendingTruncates {
    /// `(from, to, generation)`: the generation changes with every `set`,
    /// so the reclaim thread can tell a range that was changed and changed
    /// back from one nobody touched (`stamp`).
    ranges: InoMap<(u64, u64, u64)>,
    next_gen: u64,
    max: usize,
}

impl PendingTruncates {
    /// A part's set, holding at most `max` new ranges.
    pub fn new(max: usize) -> PendingTruncates {
        PendingTruncates {
            ranges: InoMap::default(),
            next_gen: 0,
            max,
        }
    }

    pub fn get(&self, ino: Ino) -> Option<(u64, u64)> {
        self.ranges.get(&ino).map(|&(from, to, _)| (from, to))
    }

    /// The range with its generation: equal stamps at two moments mean no
    /// `set` or `remove` happened to it in between.
    pub fn stamp(&self, ino: Ino) -> Option<(u64, u64, u64)> {
        self.ranges.get(&ino).copied()
    }

    fn generation(&mut self) -> u64 {
        self.next_gen += 1;
        self.next_gen
    }

    /// Room for one more file (or `ino` already has a range). Checked
    /// before anything is changed: a truncate that finds no room deletes
    /// its blocks itself.
    pub fn has_room(&self, ino: Ino, stats: &Stats) -> bool {
        self.ranges.contains_key(&ino)
            || (self.ranges.len() < self.max
                && stats.truncates_over_share.load(Ordering::Relaxed) == 0)
    }

    /// Sets `ino`'s range; `true` if it had none. The caller checked
    /// `has_room`.
    pub fn set(&mut self, ino: Ino, from: u64, to: u64, stats: &Stats) -> bool {
        assert!(from < to, "empty truncate range {from}..{to} for {ino}");
        let gen = self.generation();
        let new = self.ranges.insert(ino, (from, to, gen)).is_none();
        if new {
            assert!(
                self.ranges.len() <= self.max,
                "pending truncates over their bound"
            );
            Stats::inc(&stats.truncates_pending);
        }
        new
    }

    /// A range found on the store at mount.
    pub fn restore(&mut self, ino: Ino, from: u64, to: u64, stats: &Stats) {
        assert!(from < to, "empty truncate range {from}..{to} for {ino}");
        let gen = self.generation();
        if self.ranges.insert(ino, (from, to, gen)).is_none() {
            Stats::inc(&stats.truncates_pending);
            if self.ranges.len() > self.max {
                Stats::inc(&stats.truncates_over_share);
            }
        }
        assert!(
            self.ranges.len() <= TRUNCATES_PENDING_MAX,
            "restored truncates over their bound"
        );
    }

    pub fn remove(&mut self, ino: Ino, stats: &Stats) -> bool {
        let was = self.ranges.len();
        let had = self.ranges.remove(&ino).is_some();
        if had {
            Stats::sub(&stats.truncates_pending, 1);
            if was > self.max {
                Stats::sub(&stats.truncates_over_share, 1);
            }
        }
        had
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// Every `T` record on the store, validated, for the mount. More than the
/// bound cannot be written by churnfs: the store is refused as corrupt.
pub fn load(store: &dyn KvStore) -> Result<Vec<(Ino, u64, u64)>> {
    let prefix = format::truncate_prefix();
    let page = store.scan(&prefix, &prefix, TRUNCATES_PENDING_MAX + 1)?;
    if page.len() > TRUNCATES_PENDING_MAX {
        return Err(EngineError::corrupt(
            None,
            format!("more than {TRUNCATES_PENDING_MAX} pending truncate records"),
        ));
    }
    let mut out = Vec::with_capacity(page.len());
    for (k, v) in page {
        let format::Key::Truncate(ino) = format::decode_key(&k)? else {
            return Err(EngineError::corrupt(None, "truncate key malformed"));
        };
        let (from, to) = format::decode_truncate(ino, &v)?;
        out.push((ino, from, to));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Batch, MemStore};

    #[test]
    fn the_set_is_bounded_and_a_member_always_has_room() {
        let st = Stats::default();
        let mut p = PendingTruncates::new(64);
        for i in 0..64 {
            assert!(p.has_room(Ino(i + 10), &st));
            assert!(p.set(Ino(i + 10), 1, 2, &st));
        }
        assert!(!p.has_room(Ino(1), &st));
        assert!(p.has_room(Ino(10), &st), "a member may change its range");
        assert!(!p.set(Ino(10), 0, 5, &st));
        assert_eq!(p.get(Ino(10)), Some((0, 5)));
        assert_eq!(
            st.truncates_pending
                .load(std::sync::atomic::Ordering::Relaxed),
            64
        );
        assert!(p.remove(Ino(10), &st));
        assert!(p.has_room(Ino(1), &st));
        assert_eq!(
            st.truncates_pending
                .load(std::sync::atomic::Ordering::Relaxed),
            63
        );
    }

    #[test]
    fn restored_ranges_over_a_share_leave_no_part_room_until_they_are_done() {
        use std::sync::atomic::Ordering::Relaxed;
        let st = Stats::default();
        let mut full = PendingTruncates::new(4);
        let other = PendingTruncates::new(4);
        for i in 0..10 {
            full.restore(Ino(i + 10), 1, 2, &st);
        }
        assert_eq!(full.len(), 10);
        assert_eq!(st.truncates_over_share.load(Relaxed), 6);
        // Another part, empty, takes nothing new while one is over its share.
        assert!(!other.has_room(Ino(1), &st));
        assert!(!full.has_room(Ino(1), &st));
        assert!(full.has_room(Ino(10), &st), "a member may change its range");
        for i in 0..6 {
            assert!(full.remove(Ino(i + 10), &st));
        }
        assert_eq!(st.truncates_over_share.load(Relaxed), 0);
        assert!(other.has_room(Ino(1), &st));
        assert!(!full.has_room(Ino(1), &st), "still at its share");
        assert!(full.remove(Ino(19), &st));
        assert!(full.has_room(Ino(1), &st));
        assert_eq!(st.truncates_pending.load(Relaxed), 3);
    }

    #[test]
    fn load_validates_and_refuses_more_than_the_bound() {
        let s = MemStore::new();
        let mut b = Batch::default();
        b.put(format::truncate_key(Ino(5)), format::encode_truncate(2, 9));
        s.apply(&b).unwrap();
        assert_eq!(load(&s).unwrap(), vec![(Ino(5), 2, 9)]);
        s.raw_put(
            &format::truncate_key(Ino(6)),
            &format::encode_truncate(9, 2),
        );
        assert!(load(&s).is_err(), "an empty range is corrupt");
        let s = MemStore::new();
        let mut b = Batch::default();
        for i in 0..=TRUNCATES_PENDING_MAX as u64 {
            b.put(
                format::truncate_key(Ino(i + 2)),
                format::encode_truncate(0, 1),
            );
        }
        s.apply(&b).unwrap();
        assert!(load(&s).is_err());
    }
}
