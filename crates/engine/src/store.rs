//! The store: a narrow ordered key-value trait and its implementations.
//! Only the journal and the background reclaims (reclaim.rs)
//! write through it; everything above reads through it on a
//! cache miss. `FjallStore` is the embedded default, `MemStore` serves tests.
//!
//! What the engine assumes of a store (docs/design.md, "Store contract"):
//! - `apply` is atomic: after a crash either all of a batch is visible or none;
//! - batches become visible to `get`/`scan` in the order they were applied;
//! - `sync` makes every batch applied before it durable;
//! - a failed `apply` or `sync` may have left the store in any prefix state
//!   of the batches applied, so the engine stops writing after one.

use crate::error::StoreError;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, RwLock};

/// One write in a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

/// An atomic group of writes.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub ops: Vec<BatchOp>,
}

impl Batch {
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.ops.push(BatchOp::Put(key, value));
    }
    pub fn delete(&mut self, key: Vec<u8>) {
        self.ops.push(BatchOp::Delete(key));
    }
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
    pub fn bytes(&self) -> usize {
        self.ops
            .iter()
            .map(|op| match op {
                BatchOp::Put(k, v) => k.len() + v.len(),
                BatchOp::Delete(k) => k.len(),
            })
            .sum()
    }
}

pub type KvPair = (Vec<u8>, Vec<u8>);

/// The keys of `pairs`, in order.
pub fn keys(pairs: Vec<KvPair>) -> Vec<Vec<u8>> {
    pairs.into_iter().map(|(k, _)| k).collect()
}

/// The narrow interface every store provides.
pub trait KvStore: Send + Sync {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Up to `limit` pairs with keys `>= start` that begin with `prefix`, in key order.
    fn scan(&self, prefix: &[u8], start: &[u8], limit: usize) -> Result<Vec<KvPair>, StoreError>;
    /// The keys `scan` would return, without copying the values (block
    /// deletions page through 64 KiB values they never look at).
    fn scan_keys(
        &self,
        prefix: &[u8],
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        Ok(keys(self.scan(prefix, start, limit)?))
    }
    fn apply(&self, batch: &Batch) -> Result<(), StoreError>;
    fn sync(&self) -> Result<(), StoreError>;
    /// Times the store was opened again after a failure of its own
    /// (`FjallStore`); a gauge in `churnfs stats`. No default: a wrapper
    /// must pass it on.
    fn reopens(&self) -> u64;
}

/// Name of the fjall database directory inside a store directory.
pub const DB_DIR: &str = "db";

/// Bytes of fjall's memtable before it is written out as a table: what a
/// mount after a crash replays from the journal is at most about this much
/// (docs/design.md §7). Set when the store is made.
pub const MEMTABLE_BYTES: u64 = 8 << 20;

/// Values at least this large are kept apart from fjall's tables (its blob
/// files). Set when the store is made.
pub const KV_SEPARATION_BYTES: u32 = 16 << 10;

/// fjall's background workers (flushes, compactions, blob collection) on a
/// machine of `cores` CPUs: half of them, at least one and at most fjall's
/// own cap of four. fjall's default is every core up to four, and on two
/// cores its two workers could take both CPUs from the threads that answer
/// requests: with one, W5 ran 10 % faster, W2, W3 and W4 as fast
/// (docs/design.md §10).
pub fn store_workers(cores: usize) -> usize {
    (cores / 2).clamp(1, 4)
}

/// Reopens after a worker failure one `FjallStore` makes at most: a failure
/// that keeps coming back is not one a reopen cures.
pub const REOPENS_MAX: u64 = 8;

/// How long a reopen waits for the calls in flight to let go of the
/// database (a writer held up by fjall's write stall may never).
const REOPEN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The embedded default: one fjall keyspace holding every record.
///
/// fjall stops taking writes ("poisoned") once one of its background
/// workers fails, and stays so until the database is opened again. A batch
/// it refused that way was not written (it checks before it writes the
/// journal), so `apply` and `sync` then open the database again, at most
/// `REOPENS_MAX` times, and retry once: dropping the old handles persists
/// the journal, and opening replays it and removes table files no version
/// names (docs/design.md §10). fjall sets the same flag when one of our own
/// writes or syncs fails; after that no reopen is made, since what failed
/// to reach the disk would be taken for written. Store calls take a read
/// lock on the handles, a reopen the write lock.
pub struct FjallStore {
    path: std::path::PathBuf,
    cache_bytes: u64,
    open: RwLock<Option<Open>>,
    reopens: AtomicU64,
    /// One of our writes or syncs failed: no reopen from then on.
    own_failure: AtomicBool,
    /// The reopens are used up and that was logged.
    gave_up: AtomicBool,
}

struct Open {
    db: fjall::Database,
    ks: fjall::Keyspace,
}

fn fjall_err(e: fjall::Error) -> StoreError {
    match e {
        fjall::Error::Io(io) => StoreError::from_io(io),
        fjall::Error::Locked => StoreError::Locked,
        fjall::Error::Poisoned => StoreError::Poisoned,
        other => StoreError::Engine(other.to_string()),
    }
}

impl FjallStore {
    /// Opens (or, with `create`, creates) the database under `store_dir/db`.
    pub fn open(
        store_dir: &Path,
        create: bool,
        cache_bytes: u64,
    ) -> Result<FjallStore, StoreError> {
        let path = store_dir.join(DB_DIR);
        if !create && !path.is_dir() {
            return Err(StoreError::Engine(format!("{} is missing", path.display())));
        }
        if path.is_dir() {
            verify_manifests(&path)?;
        }
        let open = Self::open_db(&path, cache_bytes)?;
        Ok(FjallStore {
            path,
            cache_bytes,
            open: RwLock::new(Some(open)),
            reopens: AtomicU64::new(0),
            own_failure: AtomicBool::new(false),
            gave_up: AtomicBool::new(false),
        })
    }

    fn open_db(path: &Path, cache_bytes: u64) -> Result<Open, StoreError> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let db = fjall::Database::builder(path)
            .worker_threads(store_workers(cores))
            .cache_size(cache_bytes)
            .manual_journal_persist(true)
            // Journal entries as written: fjall compresses values of 4 KiB
            // and more with LZ4 by default, and the replay after a crash
            // encodes every entry again to check its batch's checksum, so
            // each such block was compressed a second time while the mount
            // waited (docs/design.md §7).
            .journal_compression(fjall::CompressionType::None)
            .open()
            .map_err(fjall_err)?;
        let ks = db
            .keyspace("meta", || {
                fjall::KeyspaceCreateOptions::default()
                    .max_memtable_size(MEMTABLE_BYTES)
                    // Data blocks of 16 KiB and more go to blob files, so
                    // that compaction moves pointers instead of blocks; kept
                    // in the keyspace when the store is made (docs/design.md
                    // §10).
                    .with_kv_separation(Some(
                        fjall::KvSeparationOptions::default()
                            .separation_threshold(KV_SEPARATION_BYTES),
                    ))
            })
            .map_err(fjall_err)?;
        Ok(Open { db, ks })
    }

    /// Runs `f` on the open database.
    fn with<R>(&self, f: impl FnOnce(&Open) -> Result<R, StoreError>) -> Result<R, StoreError> {
        let g = self.open.read().unwrap_or_else(|p| p.into_inner());
        // `None`: a reopen failed, and nothing more is served.
        f(g.as_ref().ok_or(StoreError::Closed)?)
    }

    /// Runs the write `op`; if fjall refused it because the database was
    /// poisoned by a background worker, opens the database again and runs
    /// it once more.
    fn writing(&self, op: impl Fn(&Open) -> fjall::Result<()>) -> Result<(), StoreError> {
        let r = match self.with(|o| Ok(op(o)))? {
            Err(fjall::Error::Poisoned) => {
                self.reopen()?;
                self.with(|o| Ok(op(o)))?
            }
            r => r,
        };
        if r.as_ref()
            .is_err_and(|e| !matches!(e, fjall::Error::Poisoned))
        {
            self.own_failure.store(true, Relaxed);
        }
        r.map_err(fjall_err)
    }

    fn reopen(&self) -> Result<(), StoreError> {
        if self.own_failure.load(Relaxed) {
            return Err(StoreError::Poisoned);
        }
        let deadline = std::time::Instant::now() + REOPEN_WAIT;
        let mut g = loop {
            match self.open.try_write() {
                Ok(g) => break g,
                Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    if std::time::Instant::now() >= deadline {
                        tracing::error!(
                            "store {}: the database refused a write after an earlier failure, \
                             and calls in flight kept it busy for {REOPEN_WAIT:?}; not opened again",
                            self.path.display()
                        );
                        return Err(StoreError::Poisoned);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        };
        let Some(o) = g.as_ref() else {
            return Err(StoreError::Closed);
        };
        // Another thread may have reopened it while this one waited.
        match o.db.persist(fjall::PersistMode::Buffer) {
            Err(fjall::Error::Poisoned) => {}
            Ok(()) => return Ok(()),
            Err(e) => {
                self.own_failure.store(true, Relaxed);
                return Err(fjall_err(e));
            }
        }
        if self.reopens.load(Relaxed) >= REOPENS_MAX {
            if !self.gave_up.swap(true, Relaxed) {
                tracing::error!(
                    "store {}: the database refused a write after an earlier failure, and \
                     {REOPENS_MAX} reopens are used up; no more writes until it is mounted again",
                    self.path.display()
                );
            }
            return Err(StoreError::Poisoned);
        }
        tracing::error!(
            "store {}: the database refused a write after a failure in its background work; \
             opening it again",
            self.path.display()
        );
        // The old handles go first: they hold the database's lock, and
        // dropping the last one persists its journal. fjall waits for its
        // workers to end before it lets the lock go, so a `Locked` below is
        // reported, not waited out.
        drop(g.take());
        let open =
            verify_manifests(&self.path).and_then(|()| Self::open_db(&self.path, self.cache_bytes));
        match open {
            Ok(o) => {
                *g = Some(o);
                self.reopens.fetch_add(1, Relaxed);
                Ok(())
            }
            Err(e) => {
                tracing::error!(
                    "store {}: opening it again failed: {e}",
                    self.path.display()
                );
                Err(e)
            }
        }
    }
}

/// For tests of a failing store: puts an empty file at each of the next
/// `count` table names of every tree under the database directory `db`, so
/// that the next flush there fails with EEXIST; returns their paths.
#[doc(hidden)]
pub fn occupy_next_table_names(db: &Path, count: u64) -> std::io::Result<Vec<std::path::PathBuf>> {
    fn table_dirs(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
        for e in std::fs::read_dir(dir)? {
            let p = e?.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n == "tables") {
                    out.push(p.clone());
                }
                table_dirs(&p, out)?;
            }
        }
        Ok(())
    }
    let mut dirs = Vec::new();
    table_dirs(db, &mut dirs)?;
    let mut made = Vec::new();
    for d in dirs {
        let mut next = 0;
        for e in std::fs::read_dir(&d)? {
            if let Some(id) = e?.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) {
                next = next.max(id + 1);
            }
        }
        for id in next..next + count {
            let p = d.join(id.to_string());
            std::fs::write(&p, b"")?;
            made.push(p);
        }
    }
    Ok(made)
}

/// Checks each keyspace's manifest against the checksum its `current` file
/// records before fjall reads it. fjall 3.1 decodes a manifest without that
/// check, and a damaged length field in it makes it attempt an allocation of
/// tens of gigabytes, which aborts the process; a damaged store must be
/// refused with a message instead.
fn verify_manifests(db: &Path) -> Result<(), StoreError> {
    let damaged = |what: String| StoreError::Engine(format!("store manifest damaged: {what}"));
    let keyspaces = db.join("keyspaces");
    let Ok(dirs) = std::fs::read_dir(&keyspaces) else {
        return Ok(());
    };
    for dir in dirs {
        let dir = dir.map_err(StoreError::from_io)?.path();
        let current = dir.join("current");
        let has_manifest = std::fs::read_dir(&dir)
            .map_err(StoreError::from_io)?
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().starts_with('v'));
        let bytes = match std::fs::read(&current) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !has_manifest => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(damaged(format!("{} is missing", current.display())))
            }
            Err(e) => return Err(StoreError::from_io(e)),
        };
        if bytes.len() != 25 || bytes[24] != 0 {
            return Err(damaged(format!(
                "{} has the wrong size or checksum type",
                current.display()
            )));
        }
        let id = u64::from_le_bytes(bytes[..8].try_into().unwrap_or_default());
        let want = u128::from_le_bytes(bytes[8..24].try_into().unwrap_or_default());
        let manifest = dir.join(format!("v{id}"));
        let body = std::fs::read(&manifest)
            .map_err(|e| damaged(format!("{}: {e}", manifest.display())))?;
        if xxhash_rust::xxh3::xxh3_128(&body) != want {
            return Err(damaged(format!(
                "{} fails its checksum",
                manifest.display()
            )));
        }
    }
    Ok(())
}

impl FjallStore {
    /// At most `limit` items that `take` makes of the entries from key
    /// `max(start, prefix)` on that begin with `prefix` (`take` hands back
    /// the key too, for the prefix check).
    fn page<T>(
        &self,
        prefix: &[u8],
        start: &[u8],
        limit: usize,
        take: impl Fn(fjall::Guard) -> fjall::Result<(fjall::UserKey, T)>,
    ) -> Result<Vec<T>, StoreError> {
        let from = if start > prefix { start } else { prefix };
        let mut out = Vec::new();
        self.with(|o| {
            for guard in
                o.ks.range::<&[u8], _>((Bound::Included(from), Bound::Unbounded))
            {
                if out.len() >= limit {
                    break;
                }
                let (k, item) = take(guard).map_err(fjall_err)?;
                if !k.starts_with(prefix) {
                    break;
                }
                out.push(item);
            }
            Ok(out)
        })
    }
}

impl KvStore for FjallStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.with(|o| Ok(o.ks.get(key).map_err(fjall_err)?.map(|v| v.to_vec())))
    }

    fn scan(&self, prefix: &[u8], start: &[u8], limit: usize) -> Result<Vec<KvPair>, StoreError> {
        self.page(prefix, start, limit, |g| {
            let (k, v) = g.into_inner()?;
            let pair = (k.to_vec(), v.to_vec());
            Ok((k, pair))
        })
    }

    fn scan_keys(
        &self,
        prefix: &[u8],
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        self.page(prefix, start, limit, |g| {
            let k = g.key()?;
            let key = k.to_vec();
            Ok((k, key))
        })
    }

    fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
        self.writing(|o| {
            let mut b = o.db.batch();
            for op in &batch.ops {
                match op {
                    BatchOp::Put(k, v) => b.insert(&o.ks, k.as_slice(), v.as_slice()),
                    BatchOp::Delete(k) => b.remove(&o.ks, k.as_slice()),
                }
            }
            b.commit()
        })
    }

    fn sync(&self) -> Result<(), StoreError> {
        self.writing(|o| o.db.persist(fjall::PersistMode::SyncAll))
    }

    fn reopens(&self) -> u64 {
        self.reopens.load(Relaxed)
    }
}

/// An in-memory store that keeps what was synced apart from what was only
/// applied, so tests can "lose power" and keep only the durable state.
#[derive(Default)]
pub struct MemStore {
    inner: Mutex<MemInner>,
}

#[derive(Default, Clone)]
struct MemInner {
    /// What readers see.
    live: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Batches applied since the last sync, oldest first.
    unsynced: Vec<Batch>,
    /// State as of the last sync.
    durable: BTreeMap<Vec<u8>, Vec<u8>>,
    /// When set, every apply and sync fails with `NoSpace`.
    fail_writes: bool,
}

fn apply_to(map: &mut BTreeMap<Vec<u8>, Vec<u8>>, batch: &Batch) {
    for op in &batch.ops {
        match op {
            BatchOp::Put(k, v) => {
                map.insert(k.clone(), v.clone());
            }
            BatchOp::Delete(k) => {
                map.remove(k);
            }
        }
    }
}

impl MemStore {
    pub fn new() -> MemStore {
        MemStore::default()
    }

    /// A new store holding what would survive a power loss now: the durable
    /// state plus the first `keep_unsynced` unsynced batches (a store may have
    /// written some of them before the power went).
    pub fn crash_copy(&self, keep_unsynced: usize) -> MemStore {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut map = g.durable.clone();
        for b in g.unsynced.iter().take(keep_unsynced) {
            apply_to(&mut map, b);
        }
        MemStore {
            inner: Mutex::new(MemInner {
                live: map.clone(),
                unsynced: Vec::new(),
                durable: map,
                fail_writes: false,
            }),
        }
    }

    /// Number of batches applied but not yet synced.
    pub fn unsynced_batches(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unsynced
            .len()
    }

    /// Makes every later write fail as if the device were full.
    pub fn set_fail_writes(&self, fail: bool) {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .fail_writes = fail;
    }

    /// Writes a raw key directly (tests that corrupt or forge records).
    pub fn raw_put(&self, key: &[u8], value: &[u8]) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.live.insert(key.to_vec(), value.to_vec());
        g.durable.insert(key.to_vec(), value.to_vec());
    }

    /// Removes a raw key directly (tests that forge damage).
    pub fn raw_delete(&self, key: &[u8]) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.live.remove(key);
        g.durable.remove(key);
    }

    /// Every live pair (tests).
    pub fn dump(&self) -> Vec<KvPair> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.live.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

impl KvStore for MemStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Ok(g.live.get(key).cloned())
    }

    fn scan(&self, prefix: &[u8], start: &[u8], limit: usize) -> Result<Vec<KvPair>, StoreError> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let from = if start > prefix { start } else { prefix };
        Ok(g.live
            .range::<[u8], _>((Bound::Included(from), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if g.fail_writes {
            return Err(StoreError::NoSpace);
        }
        apply_to(&mut g.live, batch);
        g.unsynced.push(batch.clone());
        Ok(())
    }

    fn sync(&self) -> Result<(), StoreError> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if g.fail_writes {
            return Err(StoreError::NoSpace);
        }
        let pending = std::mem::take(&mut g.unsynced);
        for b in &pending {
            apply_to(&mut g.durable, b);
        }
        Ok(())
    }

    fn reopens(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memstore_crash_keeps_only_synced_prefix() {
        let s = MemStore::new();
        let mut b = Batch::default();
        b.put(b"a".to_vec(), b"1".to_vec());
        s.apply(&b).unwrap();
        s.sync().unwrap();
        let mut b = Batch::default();
        b.put(b"b".to_vec(), b"2".to_vec());
        s.apply(&b).unwrap();
        assert_eq!(s.get(b"b").unwrap(), Some(b"2".to_vec()));
        let lost = s.crash_copy(0);
        assert_eq!(lost.get(b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(lost.get(b"b").unwrap(), None);
        let kept = s.crash_copy(1);
        assert_eq!(kept.get(b"b").unwrap(), Some(b"2".to_vec()));
    }

    #[test]
    fn scan_stays_inside_prefix_and_limit() {
        let s = MemStore::new();
        let mut b = Batch::default();
        for k in [&b"a1"[..], b"a2", b"a3", b"b1"] {
            b.put(k.to_vec(), vec![]);
        }
        s.apply(&b).unwrap();
        let r = s.scan(b"a", b"a2", 10).unwrap();
        assert_eq!(
            r.iter().map(|p| p.0.clone()).collect::<Vec<_>>(),
            vec![b"a2".to_vec(), b"a3".to_vec()]
        );
        assert_eq!(s.scan(b"a", b"", 1).unwrap().len(), 1);
    }

    /// A flush that fails (here: a file is already where its table goes, an
    /// EEXIST seen under W1) poisons fjall; the store opens the
    /// database again and loses nothing it had taken.
    #[test]
    fn a_failed_background_flush_reopens_the_database_and_keeps_every_write() {
        let dir = tempfile::tempdir().unwrap();
        let s = FjallStore::open(dir.path(), true, 1 << 20).unwrap();
        fn value(i: u32) -> Vec<u8> {
            vec![(i % 251) as u8; 1000]
        }
        fn put(s: &FjallStore, n: &mut u32, count: u32) {
            let mut b = Batch::default();
            for _ in 0..count {
                b.put(format!("key{n:08}").into_bytes(), value(*n));
                *n += 1;
            }
            s.apply(&b).unwrap();
        }
        let mut n = 0u32;
        put(&s, &mut n, 1000);
        let taken = occupy_next_table_names(&dir.path().join(DB_DIR), 64).unwrap();
        assert!(!taken.is_empty(), "no tables directory under the database");
        assert_eq!(s.reopens(), 0);
        // Well past one memtable (MEMTABLE_BYTES): its flush runs into the
        // files above, and the writes after it meet the poisoned database.
        let t = std::time::Instant::now();
        while s.reopens() == 0 {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(60),
                "no reopen after {n} writes"
            );
            put(&s, &mut n, 1000);
            s.sync().unwrap();
            if n as u64 * 1000 > 2 * MEMTABLE_BYTES {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        put(&s, &mut n, 10);
        s.sync().unwrap();
        assert_eq!(s.reopens(), 1);
        // The reopen removed the files in the way (tables made since, some
        // still being written, take a few of their names again).
        assert!(
            taken.iter().any(|p| !p.exists()),
            "every file in the way is still there"
        );
        for i in (0..n).step_by(97).chain([n - 1]) {
            assert_eq!(
                s.get(format!("key{i:08}").as_bytes()).unwrap(),
                Some(value(i)),
                "key {i} of {n}"
            );
        }
        assert_eq!(
            s.scan_keys(b"key", b"", usize::MAX).unwrap().len(),
            n as usize
        );
        drop(s);
        // What was synced is there after a fresh open too.
        let s = FjallStore::open(dir.path(), false, 1 << 20).unwrap();
        assert_eq!(
            s.scan_keys(b"key", b"", usize::MAX).unwrap().len(),
            n as usize
        );
    }

    #[test]
    fn fjall_roundtrip_and_lock() {
        let dir = tempfile::tempdir().unwrap();
        let s = FjallStore::open(dir.path(), true, 1 << 20).unwrap();
        let mut b = Batch::default();
        b.put(b"k".to_vec(), b"v".to_vec());
        b.put(b"k2".to_vec(), vec![7; 70_000]);
        b.put(b"l".to_vec(), b"w".to_vec());
        s.apply(&b).unwrap();
        s.sync().unwrap();
        assert_eq!(s.get(b"k").unwrap(), Some(b"v".to_vec()));
        assert_eq!(
            s.scan_keys(b"k", b"", 10).unwrap(),
            vec![b"k".to_vec(), b"k2".to_vec()]
        );
        assert_eq!(s.scan_keys(b"k", b"k1", 10).unwrap(), vec![b"k2".to_vec()]);
        assert_eq!(s.scan_keys(b"", b"", 2).unwrap().len(), 2);
        assert!(matches!(
            FjallStore::open(dir.path(), false, 1 << 20),
            Err(StoreError::Locked)
        ));
    }

    #[test]
    fn half_the_cores_work_for_the_store() {
        assert_eq!(
            [1, 2, 3, 4, 8, 16, 64].map(store_workers),
            [1, 1, 1, 2, 4, 4, 4]
        );
    }
}
