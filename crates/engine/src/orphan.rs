//! orphan: the blocks a large shrinking truncate left behind, deleted in
//! the background.
//!
//! A truncate that shrinks a file by more than `TRUNCATE_INLINE_BLOCKS`
//! blocks does not delete them itself (that would be a store scan and one
//! deletion per block, inside the request and the commit that carries it).
//! It records the range of block numbers `from..to` whose stored blocks are
//! now garbage: in memory here, and on the store as a `T|ino` record that
//! the same commit writes with the new size. The reclaim thread
//! (journal.rs, `finish_truncate`) deletes the range's blocks in batches of
//! at most `free_batch_keys` keys, each batch moving `from` up in the same
//! store batch, and deletes the record with the last one.
//!
//! Invariant: a file with a pending range has `size <= from * BLOCK_SIZE`,
//! and no live block is numbered in the range. Reads never reach a garbage
//! block (they stop at the size). A size increase past `from` first turns
//! the blocks it reveals into holes whose keys the next commit deletes, then
//! moves `from` above them (`State::reveal` in data.rs): the extension pays
//! for what it exposes, never for the rest. A second large shrink merges its
//! range with the pending one (the blocks between them are holes already).
//!
//! Bound: at most `TRUNCATES_PENDING_MAX` files have a pending range
//! (asserted); when the set is full a truncate deletes its blocks inline,
//! as small ones do. So the store never holds more `T` records than the
//! bound, and mount reads them all before it returns: a bounded amount of
//! work, whatever the history. A crash leaves the records; the next mount
//! queues them again. Freeing a file deletes its record with its blocks.

use crate::error::{EngineError, Result};
use crate::format;
use crate::store::KvStore;
use crate::types::{Ino, InoMap};

/// A shrink by at most this many blocks deletes them in the request.
pub const TRUNCATE_INLINE_BLOCKS: u64 = 64;
/// Files whose truncated blocks wait for the reclaim thread.
pub const TRUNCATES_PENDING_MAX: usize = 1024;

/// Pending block ranges by inode; lives in `State` (the state lock).
#[derive(Default)]
pub struct PendingTruncates {
    ranges: InoMap<(u64, u64)>,
}

impl PendingTruncates {
    pub fn get(&self, ino: Ino) -> Option<(u64, u64)> {
        self.ranges.get(&ino).copied()
    }

    /// Room for one more file (or `ino` already has a range).
    pub fn has_room(&self, ino: Ino) -> bool {
        self.ranges.len() < TRUNCATES_PENDING_MAX || self.ranges.contains_key(&ino)
    }

    /// Sets `ino`'s range; `true` if it had none.
    pub fn set(&mut self, ino: Ino, from: u64, to: u64) -> bool {
        assert!(from < to, "empty truncate range {from}..{to} for {ino}");
        let new = self.ranges.insert(ino, (from, to)).is_none();
        assert!(
            self.ranges.len() <= TRUNCATES_PENDING_MAX,
            "pending truncates over their bound"
        );
        new
    }

    pub fn remove(&mut self, ino: Ino) -> bool {
        self.ranges.remove(&ino).is_some()
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
        let mut p = PendingTruncates::default();
        for i in 0..TRUNCATES_PENDING_MAX as u64 {
            assert!(p.has_room(Ino(i + 10)));
            assert!(p.set(Ino(i + 10), 1, 2));
        }
        assert!(!p.has_room(Ino(1)));
        assert!(p.has_room(Ino(10)), "a member may change its range");
        assert!(!p.set(Ino(10), 0, 5));
        assert_eq!(p.get(Ino(10)), Some((0, 5)));
        assert!(p.remove(Ino(10)));
        assert!(p.has_room(Ino(1)));
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
