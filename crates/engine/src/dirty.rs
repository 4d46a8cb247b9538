//! What a commit has to write: the dirty items of the state's parts
//! (state.rs, `Part`), and what a drain takes of them (`Drained`), which the
//! journal (journal.rs) encodes and writes.

use crate::dcache::PendingNames;
use crate::error::Result;
use crate::format::{self, InodeRecord};
use crate::stats::Stats;
use crate::store::Batch;
use crate::types::Ino;
use indexmap::IndexSet;
use std::sync::Arc;

/// One thing a commit writes (`State::drain` takes them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Item {
    Inode(Ino),
    Block(Ino, u64),
    Xattr(Ino),
    /// The file's pending truncate range (orphan.rs) changed.
    Truncate(Ino),
}

/// Dirty items (in no particular order): one list per part of the state (state.rs,
/// `Part`). The gauges `dirty_items` and `dirty_blocks` count every part's
/// items: each list adds what it gains and takes back what it gives up.
#[derive(Default)]
pub struct DirtyList {
    items: IndexSet<Item>,
    blocks: u64,
}

impl DirtyList {
    pub fn add(&mut self, item: Item, stats: &Stats) {
        let is_block = matches!(item, Item::Block(..));
        if self.items.insert(item) {
            if is_block {
                self.blocks += 1;
                Stats::inc(&stats.dirty_blocks);
            }
            Stats::inc(&stats.dirty_items);
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Takes `item` off the list, if it is on it. The order of the rest
    /// changes (the drain takes the whole list, so no order matters).
    pub fn remove(&mut self, item: &Item, stats: &Stats) {
        if self.items.swap_remove(item) {
            if matches!(item, Item::Block(..)) {
                self.blocks -= 1;
                Stats::sub(&stats.dirty_blocks, 1);
            }
            Stats::sub(&stats.dirty_items, 1);
        }
    }

    pub(crate) fn take(&mut self, stats: &Stats) -> IndexSet<Item> {
        Stats::sub(&stats.dirty_blocks, self.blocks);
        Stats::sub(&stats.dirty_items, self.items.len() as u64);
        self.blocks = 0;
        std::mem::take(&mut self.items)
    }
}

/// A commit's batch while the drain fills it under the state lock. Inode
/// records are copied there and encoded after the lock is let go
/// (`Filling::finish`): each takes a placeholder op, so the batch's order
/// is the drain's.
#[derive(Default)]
pub(crate) struct Filling {
    pub(crate) batch: Batch,
    /// (position of the record's placeholder in `batch`, inode, record).
    pub(crate) records: Vec<(usize, Ino, InodeRecord)>,
}

impl Filling {
    pub(crate) fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.batch.put(key, value);
    }

    pub(crate) fn delete(&mut self, key: Vec<u8>) {
        self.batch.delete(key);
    }

    /// `ino`'s record goes into the batch here, encoded by `finish`.
    pub(crate) fn put_record(&mut self, ino: Ino, rec: InodeRecord) {
        self.records.push((self.batch.len(), ino, rec));
        self.batch.put(Vec::new(), Vec::new());
    }

    /// Encodes (and so validates) the records into their places. Runs
    /// outside the state lock.
    pub(crate) fn finish(self) -> Result<Batch> {
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

/// What a drain took from the state (state.rs, `State::drain`): all the
/// journal works on.
pub(crate) struct Drained {
    /// The batch, its inode records not yet encoded.
    pub(crate) batch: Filling,
    /// The pending names, taken whole: `put_names` adds them to the batch.
    pub(crate) names: Arc<PendingNames>,
    /// The inodes the batch writes that are still cached: clean now, they
    /// go back on the idle list after the commit (`ICache::repin`).
    pub(crate) inodes: Vec<Ino>,
    /// Freed inodes whose records the commit finds by a scan of the store
    /// and deletes before it publishes the batch (`Engine::delete_scanned`).
    pub(crate) scanned_frees: Vec<Ino>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tests::file as record;
    use crate::store::BatchOp;

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
}
