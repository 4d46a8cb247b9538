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
    /// Applies one batch of changes.
    pub fn apply_changes(&self, events: &[Event]) {
        for e in events {
            Stats::inc(&self.stats.watch_events);
            if lock(&self.own).contains(e.rev) {
                continue;
            }
            Stats::inc(&self.stats.watch_foreign);
            match self.keys.decode(&e.key) {
                Some(Key::Inode(ino)) | Some(Key::DirTimes(ino)) => self.changed_inode(ino),
                Some(Key::Dentry { parent, name, .. }) => {
                    let known = parent == Ino::ROOT || self.known(parent).is_some();
                    if known {
                        Stats::inc(&self.stats.inval_entries);
                        if let Some(k) = self.kernel() {
                            k.inval_entry(parent, &name);
                        }
                    }
                }
                Some(Key::Session(s)) if e.value.is_none() => {
                    if s != self.session.id() {
                        self.bg.reclaim_later(s);
                    }
                }
                _ => {}
            }
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
        let all: Vec<Ino> = lock(&self.known).keys().copied().collect();
        for ino in all {
            self.changed_inode(ino);
        }
    }
}

/// Starts the watch thread.
pub(crate) fn start(fs: &Arc<SharedFs>) -> Result<()> {
    // Everything committed before the mount is in what the mount reads.
    let (_, at) = fs.get_many(&[&fs.keys.superblock()])?;
    let weak: Weak<SharedFs> = Arc::downgrade(fs);
    let h = std::thread::Builder::new()
        .name("churnfs-watch".into())
        .spawn(move || follow(weak, at))
        .map_err(|e| EngineError::Store(StoreError::Io(e)))?;
    lock(&fs.threads).push(h);
    Ok(())
}

fn follow(weak: Weak<SharedFs>, mut at: Rev) {
    let mut stream = None;
    loop {
        let Some(fs) = weak.upgrade() else { return };
        if fs.stopping.load(Relaxed) {
            return;
        }
        if stream.is_none() {
            match fs.kv.watch(fs.keys.prefix(), at) {
                Ok(s) => stream = Some(s),
                Err(KvError::Compacted(_)) => {
                    fs.changed_everything();
                    match fs.get_many(&[&fs.keys.superblock()]) {
                        Ok((_, r)) => at = r,
                        Err(_) => std::thread::sleep(Duration::from_millis(500)),
                    }
                    continue;
                }
                Err(e) => {
                    tracing::debug!("watch: {e}");
                    drop(fs);
                    std::thread::sleep(Duration::from_millis(500));
                    continue;
                }
            }
            Stats::inc(&fs.stats.watch_restarts);
        }
        let s = stream.as_mut().expect("made above");
        match s.next(Duration::from_millis(250)) {
            Ok(Some(WatchItem::Events(ev))) => {
                if let Some(last) = ev.last() {
                    at = at.max(last.rev);
                }
                fs.apply_changes(&ev);
            }
            Ok(Some(WatchItem::Progress(r))) => at = at.max(r),
            Ok(None) => {}
            Err(KvError::Compacted(_)) => {
                stream = None;
                fs.changed_everything();
                if let Ok((_, r)) = fs.get_many(&[&fs.keys.superblock()]) {
                    at = r;
                }
            }
            Err(e) => {
                tracing::debug!("watch ended: {e}");
                stream = None;
                drop(fs);
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}
