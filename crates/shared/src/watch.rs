//! Following the volume's changes: one watch on the volume's prefix per
//! mount, from the revision it mounted at. For each change another mount
//! committed (this mount's own revisions are skipped):
//!
//! - an inode's record or times → the kernel drops that inode's attributes
//!   and pages, and the open file's cached record is read again;
//! - a directory entry → the kernel drops that name in that directory (if
//!   it may have the directory: the root, or an inode it holds);
//! - a session's `E` key deleted → that session ended: reclaim it.
//!
//! Work per change is O(1) and nothing is kept per change: the queue to
//! the kernel is bounded (the adapter's), and a watch that falls behind
//! past the engine's compaction drops every inode this kernel holds
//! instead of replaying. Staleness ends at the TTLs whatever happens here.

use crate::fs::{lock, SharedFs};
use crate::schema::Key;
use crate::stats::Stats;
use churnfs_kv::{Event, KvError, Rev, WatchItem};
use churnfs_vfs::{EngineError, Ino, Result, StoreError};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};
use std::time::Duration;

impl SharedFs {
    /// Applies one batch of changes. A revision whose changes include a
    /// slot of this mount's session is this mount's own commit (every
    /// commit writes one): skipped.
    pub fn apply_changes(&self, events: &[Event]) {
        let me = self.session.id();
        let mut at = 0;
        while at < events.len() {
            let rev = events[at].rev;
            let end = at + events[at..].iter().take_while(|e| e.rev == rev).count();
            let batch = &events[at..end];
            at = end;
            Stats::add(&self.stats.watch_events, batch.len() as u64);
            let own = lock(&self.own).contains(rev)
                || batch
                    .iter()
                    .any(|e| matches!(self.keys.decode(&e.key), Some(Key::Slot(s, _)) if s == me));
            if own {
                continue;
            }
            Stats::add(&self.stats.watch_foreign, batch.len() as u64);
            for e in batch {
                self.foreign_change(e);
            }
        }
    }

    fn foreign_change(&self, e: &Event) {
        match self.keys.decode(&e.key) {
            Some(Key::Inode(ino)) | Some(Key::DirTimes(ino)) => {
                self.icache.forget(ino);
                self.changed_inode(ino);
            }
            Some(Key::Dentry { parent, name, .. }) => {
                let known = parent == Ino::ROOT || self.known(parent).is_some();
                if known {
                    Stats::inc(&self.stats.inval_entries);
                    if let Some(k) = self.kernel() {
                        k.inval_entry(parent, &name);
                    }
                }
            }
            Some(Key::Session(s)) if e.value.is_none() && s != self.session.id() => {
                self.bg.reclaim_later(s);
            }
            Some(Key::Recall(dir)) if e.value.is_some() => self.delegs.recalled(dir),
            _ => {}
        }
    }

    fn changed_inode(&self, ino: Ino) {
        if self.known(ino).is_none() {
            return;
        }
        self.known_mut(ino, |k| k.page_rev = None);
        self.forget_cached(ino);
        Stats::inc(&self.stats.inval_inodes);
        if let Some(k) = self.kernel() {
            k.inval_inode(ino);
        }
    }

    /// Every inode the kernel holds is stale (the watch lost its place).
    fn changed_everything(&self) {
        self.icache.clear();
        let all: Vec<Ino> = lock(&self.known).keys().copied().collect();
        for ino in all {
            self.changed_inode(ino);
        }
    }
}

/// Where a mount's watch stands: its stream and the last revision seen.
pub(crate) struct Follower {
    stream: Option<Box<dyn churnfs_kv::WatchStream>>,
    at: Rev,
}

impl Follower {
    pub(crate) fn new(at: Rev) -> Follower {
        Follower { stream: None, at }
    }
}

impl SharedFs {
    /// Takes what the watch has, waiting at most `wait` for the first
    /// item; Ok(true) if anything came.
    pub(crate) fn follow(&self, wait: Duration) -> std::result::Result<bool, KvError> {
        let mut f = lock(&self.follower);
        if f.stream.is_none() {
            match self.kv.watch(self.keys.prefix(), f.at) {
                Ok(s) => {
                    f.stream = Some(s);
                    Stats::inc(&self.stats.watch_restarts);
                }
                Err(KvError::Compacted(_)) => {
                    // The changes since `at` are gone: everything held is
                    // stale; follow from now.
                    self.changed_everything();
                    if let Ok((_, r)) = self.get_many(&[&self.keys.superblock()]) {
                        f.at = r;
                    }
                    return Ok(true);
                }
                Err(e) => return Err(e),
            }
        }
        let mut any = false;
        let mut wait = wait;
        loop {
            let s = f.stream.as_mut().expect("made above");
            match s.next(wait) {
                Ok(Some(WatchItem::Events(ev))) => {
                    if let Some(last) = ev.last() {
                        f.at = f.at.max(last.rev);
                    }
                    self.apply_changes(&ev);
                    any = true;
                }
                Ok(Some(WatchItem::Progress(r))) => f.at = f.at.max(r),
                Ok(None) => return Ok(any),
                Err(KvError::Compacted(r)) => {
                    f.stream = None;
                    self.changed_everything();
                    f.at = r.max(f.at);
                    return Ok(true);
                }
                Err(e) => {
                    f.stream = None;
                    return Err(e);
                }
            }
            wait = Duration::ZERO;
        }
    }

    /// Applies every change the watch can deliver now (simulation and
    /// tests, where no thread follows the watch).
    pub fn catch_up(&self) -> Result<()> {
        self.follow(Duration::ZERO)
            .map(|_| ())
            .map_err(crate::fs::kv_err)
    }
}

/// Starts the watch thread.
pub(crate) fn start(fs: &Arc<SharedFs>) -> Result<()> {
    let weak: Weak<SharedFs> = Arc::downgrade(fs);
    let h = std::thread::Builder::new()
        .name("churnfs-watch".into())
        .spawn(move || loop {
            let Some(fs) = weak.upgrade() else { return };
            if fs.stopping.load(Relaxed) {
                return;
            }
            if let Err(e) = fs.follow(Duration::from_millis(250)) {
                tracing::debug!("watch: {e}");
                drop(fs);
                std::thread::sleep(Duration::from_millis(200));
            }
        })
        .map_err(|e| EngineError::Store(StoreError::Io(e)))?;
    lock(&fs.threads).push(h);
    Ok(())
}
