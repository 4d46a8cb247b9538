//! The kernel's negative dentries for this mount, kept within a budget.
//!
//! The kernel keeps a dentry for every name a lookup found missing and for
//! every name we unlinked, rmdir'ed or renamed away, until memory pressure
//! (DESIGN.md §1, pathology 3). We track those names in arrival order; when
//! more than `budget` are tracked, the oldest are handed to a side thread
//! that sends FUSE_NOTIFY_INVAL_ENTRY for each, so the kernel drops them.
//!
//! States of a name here: `Absent → Tracked → Invalidating → Absent`.
//! - `note` (ENOENT lookup, unlink, rmdir, rename source) moves Absent →
//!   Tracked; a name already tracked stays where it is.
//! - `forget_name` (the name was created again: a positive dentry now)
//!   removes it from the set; its queue slot is skipped when popped.
//! - Beyond the budget, the oldest are sent to the side thread in one batch.
//!
//! The notifications never come from a request handler: a handler that
//! sent one for its own directory would wait for the directory lock its own
//! request holds. The side thread only starts once the session exists.
//!
//! Bound: `budget` names tracked and `2 × budget + 64` queue slots
//! (asserted), plus at most one batch queued. Counter
//! `kernel_negative_compactions`: how often stale slots were dropped.
//! Locking: one mutex around the queue and set; never held while notifying.

use churnfs_engine::stats::Stats;
use fuser::{INodeNo, Notifier};
use std::collections::{HashMap, VecDeque};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};

type Name = (u64, Box<[u8]>);

/// Names in arrival order. A name that leaves (`forget_name`) and comes
/// back gets a new slot with a new generation; a slot is live only while
/// its generation is the name's current one, so stale slots of a name used
/// again are dropped at compaction instead of kept (before 2026-11-25 they
/// were kept, and a spool reusing 1,000 names made every unlink walk the
/// whole queue: W1 with repeated rounds, 1.4 ms per UNLINK).
struct Tracked {
    order: VecDeque<(Name, u64)>,
    set: HashMap<Name, u64>,
    next_gen: u64,
}

pub struct KernelNegatives {
    tracked: Mutex<Tracked>,
    budget: usize,
    tx: Mutex<Option<SyncSender<Vec<Name>>>>,
    stats: Arc<Stats>,
}

impl KernelNegatives {
    /// `budget == 0` turns tracking off (the kernel keeps what it keeps).
    pub fn new(budget: usize, stats: Arc<Stats>) -> KernelNegatives {
        Stats::set(&stats.kernel_negative_budget, budget as u64);
        KernelNegatives {
            tracked: Mutex::new(Tracked {
                order: VecDeque::new(),
                set: HashMap::new(),
                next_gen: 0,
            }),
            budget,
            tx: Mutex::new(None),
            stats,
        }
    }

    /// Starts the side thread that sends the invalidations.
    pub fn start(&self, notifier: Notifier) -> std::io::Result<()> {
        // A few batches may wait; beyond that `note` sends nothing rather
        // than block a request handler (the names are dropped from tracking
        // and counted).
        let (tx, rx) = sync_channel::<Vec<Name>>(8);
        let stats = self.stats.clone();
        std::thread::Builder::new()
            .name("churnfs-inval".into())
            .spawn(move || {
                for batch in rx {
                    for (parent, name) in batch {
                        match notifier.inval_entry(INodeNo(parent), OsStr::from_bytes(&name)) {
                            Ok(()) => Stats::inc(&stats.kernel_negative_invalidated),
                            // The connection is gone: unmounting.
                            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => return,
                            Err(_) => Stats::inc(&stats.kernel_negative_inval_failed),
                        }
                    }
                }
            })?;
        *self.tx.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        Ok(())
    }

    /// The kernel may now hold a negative dentry for `parent/name`.
    pub fn note(&self, parent: u64, name: &[u8]) {
        if self.budget == 0 {
            return;
        }
        let key: Name = (parent, name.into());
        let batch = {
            let mut t = self.tracked.lock().unwrap_or_else(|p| p.into_inner());
            if t.set.contains_key(&key) {
                return;
            }
            let gen = t.next_gen;
            t.next_gen += 1;
            t.set.insert(key.clone(), gen);
            t.order.push_back((key, gen));
            let mut batch = Vec::new();
            // Invalidate down to 7/8 of the budget, so that notifications go
            // out in batches rather than one per note.
            if t.set.len() > self.budget {
                let target = self.budget - self.budget / 8;
                while t.set.len() > target {
                    let Some((old, g)) = t.order.pop_front() else {
                        break;
                    };
                    if t.set.get(&old) == Some(&g) {
                        t.set.remove(&old);
                        batch.push(old);
                    }
                }
            }
            if t.order.len() > 2 * self.budget + 64 {
                // Stale slots (names created again); compact them away. What
                // is left is one slot per tracked name: the next compaction
                // is at least `budget + 64` notes away.
                let Tracked { order, set, .. } = &mut *t;
                order.retain(|(n, g)| set.get(n) == Some(g));
                Stats::inc(&self.stats.kernel_negative_compactions);
            }
            assert!(
                t.set.len() <= self.budget,
                "tracked negative names over the budget"
            );
            assert!(
                t.order.len() <= 2 * self.budget + 64,
                "tracked negative slots over their bound"
            );
            Stats::set(&self.stats.kernel_negative_tracked, t.set.len() as u64);
            batch
        };
        if batch.is_empty() {
            return;
        }
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let n = batch.len() as u64;
        match tx.as_ref().map(|tx| tx.try_send(batch)) {
            Some(Ok(())) => {}
            _ => Stats::add(&self.stats.kernel_negative_dropped, n),
        }
    }

    /// `parent/name` exists again: the kernel's dentry for it is positive.
    pub fn forget_name(&self, parent: u64, name: &[u8]) {
        if self.budget == 0 {
            return;
        }
        let key: Name = (parent, name.into());
        let mut t = self.tracked.lock().unwrap_or_else(|p| p.into_inner());
        if t.set.remove(&key).is_some() {
            Stats::set(&self.stats.kernel_negative_tracked, t.set.len() as u64);
        }
    }

    pub fn tracked(&self) -> usize {
        self.tracked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn tracking_stays_within_the_budget_and_skips_recreated_names() {
        let stats = Arc::new(Stats::default());
        let k = KernelNegatives::new(16, stats.clone());
        for i in 0..100u32 {
            k.note(1, &i.to_le_bytes());
            assert!(k.tracked() <= 16);
        }
        // No side thread: every batch beyond the budget was counted as dropped.
        assert_eq!(
            stats.kernel_negative_dropped.load(Relaxed) + k.tracked() as u64,
            100
        );
        k.note(1, b"again");
        let before = k.tracked();
        k.note(1, b"again");
        assert_eq!(k.tracked(), before, "a name is tracked once");
        k.forget_name(1, b"again");
        assert_eq!(k.tracked(), before - 1);
    }

    /// A spool that reuses its names: each name is noted (unlinked),
    /// forgotten (created again), noted again, over and over. The queue
    /// stays within its bound and is compacted once per `budget + 64`
    /// notes at most, not at every note.
    #[test]
    fn names_used_again_leave_no_stale_slots_behind() {
        let stats = Arc::new(Stats::default());
        let k = KernelNegatives::new(16, stats.clone());
        let rounds = 1_000u32;
        for _ in 0..rounds {
            for i in 0..10u32 {
                k.forget_name(1, &i.to_le_bytes());
                k.note(1, &i.to_le_bytes());
            }
        }
        assert_eq!(k.tracked(), 10);
        let slots = k.tracked.lock().unwrap().order.len();
        assert!(slots <= 2 * 16 + 64, "{slots} slots");
        let compactions = stats.kernel_negative_compactions.load(Relaxed);
        assert!(
            compactions <= u64::from(rounds) * 10 / (16 + 64),
            "{compactions} compactions for {} notes",
            rounds * 10
        );
        // Nothing over the budget: nothing was invalidated or dropped.
        assert_eq!(stats.kernel_negative_dropped.load(Relaxed), 0);
    }

    #[test]
    fn zero_budget_tracks_nothing() {
        let k = KernelNegatives::new(0, Arc::new(Stats::default()));
        k.note(1, b"x");
        assert_eq!(k.tracked(), 0);
    }
}
