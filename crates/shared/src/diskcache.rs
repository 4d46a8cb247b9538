//! The read cache on local disk: whole objects, as files under the mount's
//! own directory, at most `max_bytes` and `max_entries`, evicted in LRU
//! order. Objects never change once written, so an entry is valid until
//! evicted; every read is checked against the slice's size and checksum (a
//! damaged file is dropped and the object read from the store again).
//!
//! Each mount has its own directory, `<cache_dir>/<volume uuid>.<session>`,
//! locked (flock) while the mount lives. The cache does not outlive the
//! mount: at start a background thread removes the directories of mounts
//! that are gone (their lock is free), so a mount's start never waits on
//! what earlier mounts left (docs/design.md §15, "Caches").

use crate::schema::{ObjId, ObjRef};
use crate::stats::Stats;
use bytes::Bytes;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Bytes an entry of the index costs in memory, for its bound.
const ENTRY_COST: u64 = 96;

pub struct DiskCache {
    dir: PathBuf,
    /// Held for the mount's life: tells a sweeper this directory is live.
    _lock: File,
    index: Mutex<lru::LruCache<ObjId, u32>>,
    state: Mutex<u64>,
    max_bytes: u64,
    max_entries: usize,
    stats: Arc<Stats>,
}

fn flock_nb(f: &File) -> bool {
    // SAFETY: flock on a descriptor this process owns.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

impl DiskCache {
    /// Opens this mount's cache under `root`: `name` is unique to the
    /// mount. Directories of dead mounts under `root` with the same volume
    /// prefix are removed in the background.
    pub fn open(
        root: &Path,
        volume_uuid: &str,
        name: &str,
        max_bytes: u64,
        stats: Arc<Stats>,
    ) -> std::io::Result<DiskCache> {
        std::fs::create_dir_all(root)?;
        let dir = root.join(format!("{volume_uuid}.{name}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        let lock = File::create(dir.join("lock"))?;
        if !flock_nb(&lock) {
            return Err(std::io::Error::other(format!(
                "cache directory {} is in use by another mount",
                dir.display()
            )));
        }
        sweep_in_background(root.to_path_buf(), dir.clone());
        let max_entries = ((max_bytes / 4096).max(16) as usize).min(1 << 20);
        Stats::set(&stats.disk_cache_bytes_max, max_bytes);
        Stats::set(&stats.disk_cache_entries_max, max_entries as u64);
        Ok(DiskCache {
            dir,
            _lock: lock,
            index: Mutex::new(lru::LruCache::unbounded()),
            state: Mutex::new(0),
            max_bytes,
            max_entries,
            stats,
        })
    }

    /// Memory the index may take at most.
    pub fn index_bytes_max(&self) -> u64 {
        self.max_entries as u64 * ENTRY_COST
    }

    fn path(&self, id: ObjId) -> PathBuf {
        self.dir
            .join(format!("{:016x}-{:016x}", id.session, id.seq))
    }

    fn lock_index(&self) -> std::sync::MutexGuard<'_, lru::LruCache<ObjId, u32>> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The object's bytes if cached and intact.
    pub fn get(&self, r: &ObjRef) -> Option<Bytes> {
        let known = self.lock_index().get(&r.id).is_some();
        if !known {
            Stats::inc(&self.stats.disk_cache_misses);
            return None;
        }
        match std::fs::read(self.path(r.id)) {
            Ok(b) if b.len() == r.size as usize && xxhash_rust::xxh3::xxh3_64(&b) == r.sum => {
                Stats::inc(&self.stats.disk_cache_hits);
                Some(Bytes::from(b))
            }
            Ok(_) => {
                tracing::warn!(
                    "read cache: {} is damaged; reading the object again",
                    self.path(r.id).display()
                );
                Stats::inc(&self.stats.disk_cache_errors);
                self.remove(r.id);
                None
            }
            Err(_) => {
                // Evicted between the index and the read.
                Stats::inc(&self.stats.disk_cache_misses);
                None
            }
        }
    }

    /// Keeps an object, evicting the least recently used past the bounds.
    pub fn put(&self, id: ObjId, b: &[u8]) {
        if b.len() as u64 > self.max_bytes / 8 || self.lock_index().contains(&id) {
            return;
        }
        let path = self.path(id);
        let tmp = path.with_extension("tmp");
        let written = File::create(&tmp)
            .and_then(|mut f| f.write_all(b))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            Stats::inc(&self.stats.disk_cache_errors);
            tracing::debug!("read cache: {}: {e}", path.display());
            return;
        }
        let mut victims = Vec::new();
        {
            let mut bytes = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let mut idx = self.lock_index();
            if let Some(old) = idx.put(id, b.len() as u32) {
                *bytes -= old as u64;
            }
            *bytes += b.len() as u64;
            while *bytes > self.max_bytes || idx.len() > self.max_entries {
                match idx.pop_lru() {
                    Some((vid, n)) => {
                        *bytes -= n as u64;
                        victims.push(vid);
                    }
                    None => break,
                }
            }
            assert!(
                *bytes <= self.max_bytes && idx.len() <= self.max_entries,
                "read cache over its bound"
            );
            Stats::set(&self.stats.disk_cache_bytes, *bytes);
            Stats::set(&self.stats.disk_cache_entries, idx.len() as u64);
        }
        Stats::add(&self.stats.disk_cache_evictions, victims.len() as u64);
        for v in victims {
            let _ = std::fs::remove_file(self.path(v));
        }
    }

    /// Drops objects that no record names any more.
    pub fn forget(&self, ids: &[ObjId]) {
        for id in ids {
            self.remove(*id);
        }
    }

    fn remove(&self, id: ObjId) {
        let mut bytes = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut idx = self.lock_index();
        if let Some(n) = idx.pop(&id) {
            *bytes -= n as u64;
            let _ = std::fs::remove_file(self.path(id));
        }
        Stats::set(&self.stats.disk_cache_bytes, *bytes);
        Stats::set(&self.stats.disk_cache_entries, idx.len() as u64);
    }

    /// Removes the mount's directory (at unmount).
    pub fn remove_all(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Removes, in a thread of its own, every cache directory under `root`
/// except `own` whose lock no live mount holds.
fn sweep_in_background(root: PathBuf, own: PathBuf) {
    let spawned = std::thread::Builder::new()
        .name("churnfs-cache-sweep".into())
        .spawn(move || {
            let Ok(entries) = std::fs::read_dir(&root) else {
                return;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p == own || !p.is_dir() {
                    continue;
                }
                let dead = match File::open(p.join("lock")) {
                    Ok(f) => flock_nb(&f),
                    Err(_) => true,
                };
                if dead {
                    if let Err(err) = std::fs::remove_dir_all(&p) {
                        tracing::warn!("read cache: removing {}: {err}", p.display());
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("read cache: no sweeper thread: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    fn r(seq: u64, b: &[u8]) -> ObjRef {
        ObjRef {
            id: ObjId { session: 7, seq },
            size: b.len() as u32,
            sum: xxhash_rust::xxh3::xxh3_64(b),
        }
    }

    #[test]
    fn keeps_to_its_bound_in_lru_order_and_drops_damaged_files() {
        let root = tempfile::tempdir().unwrap();
        let stats = Arc::new(Stats::default());
        let c = DiskCache::open(root.path(), "u", "1", 8 * 4096, stats.clone()).unwrap();
        let blob = |n: u8| vec![n; 4096];
        for n in 0..8u8 {
            c.put(r(n as u64, &blob(n)).id, &blob(n));
        }
        assert_eq!(stats.disk_cache_bytes.load(Relaxed), 8 * 4096);
        assert_eq!(&c.get(&r(0, &blob(0))).unwrap()[..], &blob(0)[..]);
        c.put(r(8, &blob(8)).id, &blob(8));
        assert!(c.get(&r(1, &blob(1))).is_none(), "least recently used goes");
        assert!(c.get(&r(0, &blob(0))).is_some(), "recently read stays");
        assert_eq!(stats.disk_cache_evictions.load(Relaxed), 1);
        assert!(stats.disk_cache_bytes.load(Relaxed) <= 8 * 4096);
        // A file damaged on disk is never returned.
        std::fs::write(c.path(r(2, &blob(2)).id), vec![9u8; 4096]).unwrap();
        assert!(c.get(&r(2, &blob(2))).is_none());
        assert_eq!(stats.disk_cache_errors.load(Relaxed), 1);
        assert!(
            c.get(&r(2, &blob(2))).is_none(),
            "and is gone from the index"
        );
    }

    #[test]
    fn directories_of_dead_mounts_are_swept_and_live_ones_kept() {
        let root = tempfile::tempdir().unwrap();
        let stats = Arc::new(Stats::default());
        // The dead mount's directory is there before any sweep can run (an
        // open starts one).
        let dead = root.path().join("u.2");
        std::fs::create_dir_all(&dead).unwrap();
        std::fs::write(dead.join("lock"), b"").unwrap();
        let live = DiskCache::open(root.path(), "u", "1", 1 << 20, stats.clone()).unwrap();
        let _second = DiskCache::open(root.path(), "u", "3", 1 << 20, stats).unwrap();
        let t0 = std::time::Instant::now();
        while dead.exists() && t0.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!dead.exists(), "a dead mount's directory is removed");
        assert!(live.dir.exists(), "a live mount's directory stays");
    }
}
