//! Invalidations a shared-mode backend asks for (`KernelCache`): another
//! mount changed a name or an inode this kernel may cache. They are queued
//! and sent from a thread of their own, never from a request handler: a
//! notification about a directory that a handler is working in would wait
//! for that handler.
//!
//! Bound: at most `QUEUE_MAX` notifications wait; beyond it they are
//! dropped and counted (`kernel_inval_dropped`), which costs staleness up
//! to the entry and attribute TTLs, never correctness of what the backend
//! answers.

use crate::stats::Stats;
use churnfs_vfs::{Ino, KernelCache};
use fuser::{INodeNo, Notifier};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;

/// Most notifications waiting for the sender thread.
pub const QUEUE_MAX: usize = 4096;

enum Inval {
    Entry(u64, Vec<u8>),
    Inode(u64),
}

/// The adapter's `KernelCache`: a bounded queue in front of the session's
/// notifier.
pub struct Invalidator {
    tx: SyncSender<Inval>,
    stats: Arc<Stats>,
    /// For `inval_attr_now`, sent from the calling thread.
    notifier: Notifier,
}

impl Invalidator {
    /// Starts the sender thread; it ends when the connection goes.
    pub fn start(notifier: Notifier, stats: Arc<Stats>) -> std::io::Result<Invalidator> {
        let (tx, rx) = sync_channel::<Inval>(QUEUE_MAX);
        let st = stats.clone();
        let own = notifier.clone();
        std::thread::Builder::new()
            .name("churnfs-coherence".into())
            .spawn(move || {
                for inval in rx {
                    let sent = match &inval {
                        Inval::Entry(parent, name) => {
                            notifier.inval_entry(INodeNo(*parent), OsStr::from_bytes(name))
                        }
                        // Attributes and every cached page.
                        Inval::Inode(ino) => notifier.inval_inode(INodeNo(*ino), 0, 0),
                    };
                    match sent {
                        Ok(()) => Stats::inc(match inval {
                            Inval::Entry(..) => &st.kernel_inval_entries,
                            Inval::Inode(_) => &st.kernel_inval_inodes,
                        }),
                        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => return,
                        // ENOENT: the kernel holds nothing under that name
                        // or number, which is what was wanted.
                        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                        Err(_) => Stats::inc(&st.kernel_inval_refused),
                    }
                }
            })?;
        Ok(Invalidator {
            tx,
            stats,
            notifier: own,
        })
    }

    fn push(&self, i: Inval) {
        match self.tx.try_send(i) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => Stats::inc(&self.stats.kernel_inval_dropped),
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

impl KernelCache for Invalidator {
    fn inval_entry(&self, parent: Ino, name: &[u8]) {
        self.push(Inval::Entry(parent.0, name.to_vec()));
    }

    fn inval_inode(&self, ino: Ino) {
        self.push(Inval::Inode(ino.0));
    }

    fn inval_attr_now(&self, ino: Ino) {
        // Offset -1: attributes only, no page is touched, so nothing in the
        // kernel waits on the request being served.
        match self.notifier.inval_inode(INodeNo(ino.0), -1, 0) {
            Ok(()) => Stats::inc(&self.stats.kernel_inval_inodes),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(_) => Stats::inc(&self.stats.kernel_inval_refused),
        }
    }
}
