//! The inodes the kernel holds for this mount, kept within a bound.
//!
//! Every entry the daemon answers (lookup, create, mkdir, readdirplus...)
//! gives the kernel a reference on an inode, which it keeps until memory
//! pressure evicts the inode (then FORGET): after a million files were
//! created and listed the kernel holds a million inodes, and the backend
//! state for each: memory that grows with history (docs/design.md §8). Linux
//! 6.18 added FUSE_NOTIFY_PRUNE: the daemon names inodes, the kernel drops
//! the unused dentries of each (`d_prune_aliases`) and, with them, the
//! inode, which it then forgets.
//!
//! The adapter notes each node id it hands out and removes it at FORGET;
//! past `max` ids, for every `BATCH` new ones it asks the kernel to prune
//! the `BATCH` it has known longest. An id the kernel keeps (an open file,
//! a working directory, a directory whose children are still cached) stays
//! noted and goes to the back of the line, asked again a round later: the
//! work is one prune per new entry at most, whatever is held. On a kernel
//! without FUSE_NOTIFY_PRUNE (EINVAL) the adapter stops asking and notes
//! nothing more: the kernel's own reclaim under memory pressure is all an
//! older kernel offers.
//!
//! Bounds: `max` ids noted plus those above it waiting for their FORGET
//! (the prunes keep them near `max`), the line at most `2 × noted + 64`
//! (compacted, asserted), 4 batches queued for the side thread (more are
//! dropped and counted). Locking: `inner` alone; never held while writing
//! to /dev/fuse.

use crate::stats::Stats;
use foldhash::{HashSet, HashSetExt};
use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

/// Ids asked about per notification (and new ids between two of them).
pub const BATCH: usize = 256;

/// What to send next: the ids to prune, oldest known first.
type Batch = Vec<u64>;

#[derive(Default)]
struct Inner {
    /// Ids the kernel holds as far as the adapter knows.
    noted: HashSet<u64>,
    /// The order they were noted in; an id may appear more than once, or
    /// after its FORGET (skipped when popped).
    line: VecDeque<u64>,
    /// New ids since the last batch.
    credit: usize,
}

pub struct KernelInodes {
    max: usize,
    inner: Mutex<Inner>,
    tx: Mutex<Option<SyncSender<Batch>>>,
    /// False once the kernel refused FUSE_NOTIFY_PRUNE.
    supported: Arc<AtomicBool>,
    stats: Arc<Stats>,
}

impl KernelInodes {
    /// `max` 0: no bound (nothing is noted).
    pub fn new(max: usize, stats: Arc<Stats>) -> KernelInodes {
        Stats::set(&stats.kernel_inodes_max, max as u64);
        KernelInodes {
            max,
            inner: Mutex::new(Inner {
                noted: HashSet::new(),
                ..Inner::default()
            }),
            tx: Mutex::new(None),
            supported: Arc::new(AtomicBool::new(true)),
            stats,
        }
    }

    fn active(&self) -> bool {
        self.max > 0 && self.supported.load(Relaxed)
    }

    /// The kernel was given a reference on `ino` (an entry in a reply).
    pub fn note(&self, ino: u64) {
        if ino <= 1 || !self.active() {
            return;
        }
        let batch = {
            let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            if !g.noted.insert(ino) {
                return;
            }
            g.line.push_back(ino);
            g.credit += 1;
            let batch = if g.noted.len() > self.max && g.credit >= BATCH {
                g.credit = 0;
                Some(take_batch(&mut g))
            } else {
                None
            };
            if g.line.len() > 2 * g.noted.len() + 64 {
                compact(&mut g);
            }
            assert!(g.line.len() <= 2 * g.noted.len() + 64 + 1);
            Stats::set(&self.stats.kernel_inodes_noted, g.noted.len() as u64);
            batch
        };
        if let Some(b) = batch {
            self.send(b);
        }
    }

    /// The kernel forgot `ino` (FORGET, BATCH_FORGET).
    pub fn forget(&self, ino: u64) {
        if self.max == 0 {
            return;
        }
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if g.noted.remove(&ino) {
            Stats::set(&self.stats.kernel_inodes_noted, g.noted.len() as u64);
        }
    }

    fn send(&self, b: Batch) {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let Some(tx) = tx.as_ref() else { return };
        match tx.try_send(b) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => Stats::inc(&self.stats.kernel_prune_dropped),
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Starts the side thread that writes the notifications to `fd` (the
    /// session's descriptor).
    pub fn start(&self, fd: OwnedFd) -> std::io::Result<()> {
        if self.max == 0 {
            return Ok(());
        }
        let (tx, rx) = sync_channel::<Batch>(4);
        let stats = self.stats.clone();
        let supported = self.supported.clone();
        std::thread::Builder::new()
            .name("churnfs-prune".into())
            .spawn(move || {
                for b in rx {
                    match prune_raw(&fd, &b) {
                        Ok(()) => {
                            Stats::inc(&stats.kernel_prunes);
                            Stats::add(&stats.kernel_prune_inodes, b.len() as u64);
                        }
                        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => return,
                        Err(e) => {
                            tracing::info!(
                                "the kernel refused FUSE_NOTIFY_PRUNE ({e}): the inodes it holds are left to its own reclaim"
                            );
                            Stats::set(&stats.kernel_prune_unsupported, 1);
                            supported.store(false, Relaxed);
                            return;
                        }
                    }
                }
            })?;
        *self.tx.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        Ok(())
    }
}

/// The `BATCH` ids noted longest ago (still noted), each put back at the
/// end of the line: it leaves only with its FORGET.
fn take_batch(g: &mut Inner) -> Batch {
    let mut b = Vec::with_capacity(BATCH);
    let mut seen = 0;
    let len = g.line.len();
    while b.len() < BATCH && seen < len {
        let Some(ino) = g.line.pop_front() else { break };
        seen += 1;
        if g.noted.contains(&ino) {
            b.push(ino);
            g.line.push_back(ino);
        }
    }
    b
}

/// The line without forgotten ids and with each id once (its oldest place).
fn compact(g: &mut Inner) {
    let mut kept = HashSet::with_capacity(g.noted.len());
    let noted = &g.noted;
    g.line.retain(|i| noted.contains(i) && kept.insert(*i));
}

/// FUSE_NOTIFY_PRUNE for `inos` (`wire::notify`): `fuse_notify_prune_out`
/// (count, padding, spare), then the node ids.
fn prune_raw(fd: &OwnedFd, inos: &[u64]) -> std::io::Result<()> {
    use crate::proto;
    use zerocopy::IntoBytes;
    let head = proto::NotifyPruneOut {
        count: inos.len() as u32,
        ..proto::NotifyPruneOut::default()
    };
    let mut body = Vec::with_capacity(size_of_val(&head) + 8 * inos.len());
    body.extend_from_slice(head.as_bytes());
    body.extend_from_slice(inos.as_bytes());
    crate::wire::notify(fd, proto::notify::PRUNE, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noted(k: &KernelInodes) -> usize {
        k.inner.lock().unwrap().noted.len()
    }

    #[test]
    fn past_the_bound_each_batch_of_new_ids_asks_for_the_oldest_and_forget_removes() {
        let stats = Arc::new(Stats::default());
        let k = KernelInodes::new(1000, stats.clone());
        let (tx, rx) = sync_channel(64);
        *k.tx.lock().unwrap() = Some(tx);
        for i in 2..1002 {
            k.note(i);
        }
        assert!(rx.try_recv().is_err(), "nothing asked within the bound");
        // Noting an id again changes nothing.
        k.note(5);
        assert_eq!(noted(&k), 1000);
        for i in 1002..1002 + BATCH as u64 {
            k.note(i);
        }
        let b = rx.try_recv().expect("one batch");
        assert_eq!(b, (2..2 + BATCH as u64).collect::<Vec<_>>());
        // The kernel kept some (held), forgot the rest.
        for i in &b[10..] {
            k.forget(*i);
        }
        assert_eq!(noted(&k), 1000 + BATCH - (BATCH - 10));
        assert_eq!(stats.kernel_inodes_noted.load(Relaxed), noted(&k) as u64);
        // The next batch starts past them: the ten kept come back a round
        // later, after the others noted before them.
        for i in 0..BATCH as u64 {
            k.note(5000 + i);
        }
        let b2 = rx.try_recv().expect("a second batch");
        assert_eq!(b2[0], 2 + BATCH as u64);
        assert!(!b2.iter().any(|i| b[..10].contains(i)));
    }

    #[test]
    fn the_line_stays_bounded_through_churn() {
        let stats = Arc::new(Stats::default());
        let k = KernelInodes::new(100, stats);
        for round in 0..50u64 {
            for i in 0..200 {
                k.note(10 + round * 1000 + i);
            }
            for i in 0..200 {
                k.forget(10 + round * 1000 + i);
            }
        }
        let g = k.inner.lock().unwrap();
        assert!(g.noted.is_empty());
        assert!(g.line.len() <= 2 * 200 + 65, "{} in line", g.line.len());
    }

    #[test]
    fn zero_is_no_bound_and_notes_nothing() {
        let k = KernelInodes::new(0, Arc::new(Stats::default()));
        for i in 2..10_000 {
            k.note(i);
        }
        assert_eq!(noted(&k), 0);
    }

    #[test]
    fn a_refusing_kernel_stops_the_noting() {
        let k = KernelInodes::new(10, Arc::new(Stats::default()));
        k.supported.store(false, Relaxed);
        k.note(7);
        assert_eq!(noted(&k), 0);
    }
}
