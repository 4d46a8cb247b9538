//! What a commit has to write: the dirty items of the state's parts
//! (fs.rs, `Part`), drained by the journal (journal.rs).

use crate::stats::Stats;
use crate::types::Ino;
use indexmap::IndexSet;

/// One thing a commit writes (journal.rs drains them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Item {
    Inode(Ino),
    Block(Ino, u64),
    Xattr(Ino),
    /// The file's pending truncate range (orphan.rs) changed.
    Truncate(Ino),
}

/// Dirty items (in no particular order): one list per part of the state (fs.rs,
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
