//! Helpers shared by the scenario and real-mount tests.
//!
//! `Fs` is a mounted engine on a fresh `MemStore` with a small configuration
//! (tiny caches so that eviction and store reads are exercised, a commit
//! interval of an hour so that tests decide when commits happen through
//! `fsync`). `remount` is a clean unmount and mount of the same store;
//! `crash` mounts what a power loss would have left of it.

pub mod reference;

use churnfs_engine::check;
use churnfs_engine::format::{self, Key};
use churnfs_engine::{
    Attr, Ctx, DirEntry, Engine, EngineConfig, FileKind, Ino, KvStore, MemStore, SetAttr,
};
use churnfs_vfs::Backend;
use std::collections::BTreeSet;
use std::sync::Arc;

pub mod etcd;
pub mod s3;
pub mod shared;

/// Caller of every operation in these tests.
pub const CTX: Ctx = Ctx::ROOT;

/// Asserts that an expression is `Err` matching a pattern of `EngineError`.
#[macro_export]
macro_rules! assert_err {
    ($e:expr, $p:pat) => {
        match $e {
            Err($p) => {}
            other => panic!(
                "{}: expected Err({}), got {:?}",
                stringify!($e),
                stringify!($p),
                other
            ),
        }
    };
}

/// A configuration small enough that caches evict and writers are throttled
/// in tests, with commits left to `fsync`.
pub fn small_config() -> EngineConfig {
    EngineConfig {
        commit_interval_ms: 3_600_000,
        inodes_max: 32,
        dentries_max: 64,
        negative_entries_max: 16,
        dirty_bytes_max: 1 << 20,
        dirty_items_max: 1 << 20,
        free_batch_keys: 64,
        truncate_inline_blocks: 64,
        statfs_path: None,
    }
}

/// One readdir entry with owned bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub ino: Ino,
    pub offset: u64,
    pub kind: FileKind,
    pub name: Vec<u8>,
    pub attr: Option<Attr>,
}

impl Entry {
    fn owned(e: &DirEntry<'_>) -> Entry {
        Entry {
            ino: e.ino,
            offset: e.offset,
            kind: e.kind,
            name: e.name.to_vec(),
            attr: e.attr,
        }
    }
}

/// A mounted engine on an in-memory store.
pub struct Fs {
    pub store: Arc<MemStore>,
    pub engine: Arc<Engine>,
    pub cfg: EngineConfig,
}

impl Default for Fs {
    fn default() -> Fs {
        Fs::new()
    }
}

impl Fs {
    pub fn new() -> Fs {
        Fs::with_config(small_config())
    }

    pub fn with_config(cfg: EngineConfig) -> Fs {
        let store = Arc::new(MemStore::new());
        Engine::mkfs(&*store, 0, 0).expect("mkfs");
        let engine = Engine::mount(store.clone(), cfg.clone()).expect("mount");
        Fs { store, engine, cfg }
    }

    pub fn e(&self) -> &Engine {
        &self.engine
    }

    /// Clean unmount (commits everything) and mount of the same store.
    pub fn remount(&mut self) {
        self.engine.shutdown().expect("shutdown before remount");
        self.engine = Engine::mount(self.store.clone(), self.cfg.clone()).expect("remount");
        self.engine.wait_reclaim();
    }

    /// Power loss now, keeping only what was synced: mounts a crash copy of
    /// the store. The old engine is shut down against the old store, which is
    /// then forgotten, so nothing it writes afterwards can leak in.
    pub fn crash(&mut self) {
        self.crash_keeping(0);
    }

    /// Power loss after the store wrote the first `keep_unsynced` batches
    /// applied since the last sync.
    pub fn crash_keeping(&mut self, keep_unsynced: usize) {
        let copy = Arc::new(self.store.crash_copy(keep_unsynced));
        let _ = self.engine.shutdown();
        self.store = copy;
        self.engine =
            Engine::mount(self.store.clone(), self.cfg.clone()).expect("mount after crash");
        // Tests look at the store right after: let the background reclaim
        // of orphans finish first (unlink_while_open tests it unfinished).
        self.engine.wait_reclaim();
    }

    /// Asserts that fsck finds nothing wrong with the live store.
    pub fn fsck(&self) {
        fsck_clean(&*self.store);
    }

    /// A counter or gauge of the engine by name.
    pub fn stat(&self, name: &str) -> u64 {
        stat(&self.engine, name)
    }

    // ---- namespace helpers (each leaves no kernel reference behind) -------

    /// Creates `name` in `parent` holding `data`, closes and forgets it.
    pub fn mkfile(&self, parent: Ino, name: &[u8], data: &[u8]) -> Ino {
        let (attr, _fh) = self.e().create(CTX, parent, name, 0o644).expect("create");
        if !data.is_empty() {
            let n = self.e().write(attr.ino, 0, data).expect("write");
            assert_eq!(n as usize, data.len());
        }
        self.e().release(attr.ino).expect("release");
        self.e().forget(attr.ino, 1);
        attr.ino
    }

    /// Makes directory `name` in `parent` and forgets it.
    pub fn mkdir(&self, parent: Ino, name: &[u8]) -> Ino {
        let attr = self.e().mkdir(CTX, parent, name, 0o755).expect("mkdir");
        self.e().forget(attr.ino, 1);
        attr.ino
    }

    /// Looks a name up without keeping the kernel reference.
    pub fn ino(&self, parent: Ino, name: &[u8]) -> churnfs_engine::Result<Ino> {
        ino(&*self.engine, parent, name)
    }

    /// Resolves a `/`-separated path from the root.
    pub fn resolve(&self, path: &str) -> churnfs_engine::Result<Ino> {
        resolve(&*self.engine, path)
    }

    /// The whole contents of a file (see `read_all`).
    pub fn read_all(&self, ino: Ino) -> Vec<u8> {
        read_all(&*self.engine, ino)
    }

    /// Lists a directory (see `list`).
    pub fn list(&self, dir: Ino, plus: bool, per_call: usize) -> Vec<Entry> {
        list(&*self.engine, dir, plus, per_call)
    }

    /// Sorted names of a directory with their inode and kind.
    pub fn names(&self, dir: Ino) -> Vec<(Vec<u8>, Ino, FileKind)> {
        names(&*self.engine, dir)
    }

    /// Sets a directory's or file's mtime and ctime to a fixed past instant.
    pub fn age(&self, ino: Ino, sec: i64) {
        let t = churnfs_engine::Timespec { sec, nsec: 0 };
        self.e()
            .setattr(
                ino,
                SetAttr {
                    mtime: Some(churnfs_engine::SetTime::At(t)),
                    ctime: Some(t),
                    ..SetAttr::default()
                },
            )
            .expect("setattr times");
    }
}

impl Drop for Fs {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = self.engine.shutdown();
        }
    }
}

/// Looks a name up without keeping the kernel reference.
pub fn ino(b: &dyn Backend, parent: Ino, name: &[u8]) -> churnfs_engine::Result<Ino> {
    let attr = b.lookup(parent, name)?;
    b.forget(attr.ino, 1);
    Ok(attr.ino)
}

/// Resolves a `/`-separated path from the root.
pub fn resolve(b: &dyn Backend, path: &str) -> churnfs_engine::Result<Ino> {
    let mut at = Ino::ROOT;
    for part in path.split('/').filter(|p| !p.is_empty()) {
        at = ino(b, at, part.as_bytes())?;
    }
    Ok(at)
}

/// The whole contents of a file, checking that the read returns exactly
/// `size` bytes.
pub fn read_all(b: &dyn Backend, ino: Ino) -> Vec<u8> {
    let size = b.getattr(ino).expect("getattr").size;
    let mut out = Vec::with_capacity(size as usize);
    while (out.len() as u64) < size {
        let chunk = b.read(ino, out.len() as u64, 1 << 20).expect("read");
        assert!(
            !chunk.is_empty(),
            "{ino}: read at {} of {size} returned nothing",
            out.len()
        );
        out.extend_from_slice(&chunk);
    }
    assert_eq!(out.len() as u64, size, "{ino}: read past the size");
    assert!(b.read(ino, size, 16).expect("read at eof").is_empty());
    out
}

/// Lists a directory (without `.` and `..`) in readdir order, reading at
/// most `per_call` entries per readdir call and resuming from the last
/// returned entry's cookie. With `plus`, checks each entry's attributes
/// and drops the kernel references readdirplus took.
pub fn list(b: &dyn Backend, dir: Ino, plus: bool, per_call: usize) -> Vec<Entry> {
    assert!(per_call > 0);
    let mut out: Vec<Entry> = Vec::new();
    let mut offset = 0u64;
    loop {
        let mut got: Vec<Entry> = Vec::new();
        b.readdir(dir, offset, plus, &mut |e| {
            if got.len() == per_call {
                return false;
            }
            got.push(Entry::owned(e));
            true
        })
        .expect("readdir");
        let Some(last) = got.last() else { break };
        offset = last.offset;
        let short = got.len() < per_call;
        for e in got {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            if plus {
                let a = e.attr.expect("readdirplus entry without attributes");
                assert_eq!(a.ino, e.ino, "readdirplus attr of {:?}", e.name);
                assert_eq!(a.kind, e.kind, "readdirplus kind of {:?}", e.name);
                b.forget(e.ino, 1);
            } else {
                assert!(e.attr.is_none(), "plain readdir returned attributes");
            }
            out.push(e);
        }
        if short {
            break;
        }
    }
    let names: BTreeSet<&Vec<u8>> = out.iter().map(|e| &e.name).collect();
    assert_eq!(
        names.len(),
        out.len(),
        "readdir of {dir} returned a name twice"
    );
    out
}

/// Sorted names of a directory with their inode and kind.
pub fn names(b: &dyn Backend, dir: Ino) -> Vec<(Vec<u8>, Ino, FileKind)> {
    let mut v: Vec<_> = list(b, dir, false, 1000)
        .into_iter()
        .map(|e| (e.name, e.ino, e.kind))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// What the reference driver runs its operations on: one mount of a local
/// store, or several mounts of one shared volume.
pub trait Target {
    /// How many mounts serve operations.
    fn mounts(&self) -> usize;
    /// Mount `m`.
    fn backend(&self, m: usize) -> Arc<dyn Backend>;
    /// Remounts (some or all mounts); returns the mounts whose open handles
    /// (and so held files) are gone.
    fn remount(&mut self, rng: &mut Rng) -> Vec<usize>;
    /// The backend's own bounds and counters, with `held[m]` files held
    /// open-unlinked by mount `m`.
    fn check(&self, held: &[u64], ctx: &str);
    /// Lets background work the backend owes finish (frees after a last
    /// close, in shared mode).
    fn settle(&self) {}
}

impl Target for Fs {
    fn mounts(&self) -> usize {
        1
    }

    fn backend(&self, _m: usize) -> Arc<dyn Backend> {
        self.engine.clone()
    }

    fn remount(&mut self, _rng: &mut Rng) -> Vec<usize> {
        Fs::remount(self);
        vec![0]
    }

    fn check(&self, held: &[u64], ctx: &str) {
        let held = held.iter().sum::<u64>();
        assert_eq!(
            self.stat("kernel_known_inodes"),
            0,
            "{ctx}: kernel references leaked"
        );
        assert_eq!(self.stat("open_handles"), held, "{ctx}: open handles");
        assert_eq!(self.stat("unlinked_inodes"), held, "{ctx}: unlinked set");
        // Caches stay within their bounds; only pinned inodes (dirty, open,
        // unlinked) may push the inode cache past its own.
        let inodes = self.stat("icache_inodes");
        let pinned_max = self.stat("dirty_items") + held;
        assert!(
            inodes <= self.cfg.inodes_max as u64 + pinned_max,
            "{ctx}: {inodes} cached inodes, bound {} + {pinned_max} pinned",
            self.cfg.inodes_max
        );
        assert!(
            self.stat("dcache_positive") <= self.cfg.dentries_max as u64,
            "{ctx}: positive dentries"
        );
        assert!(
            self.stat("dcache_negative") <= self.cfg.negative_entries_max as u64,
            "{ctx}: negative dentries"
        );
    }
}

/// A counter or gauge of an engine by name.
pub fn stat(engine: &Engine, name: &str) -> u64 {
    engine
        .stats()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no stat named {name}"))
        .1
}

/// Asserts that fsck finds nothing wrong, printing every problem otherwise.
pub fn fsck_clean(store: &dyn KvStore) {
    let report = check::check_store(store, &mut |_| {}).expect("fsck could not read the store");
    assert!(
        report.is_clean(),
        "fsck found {} problems:\n  {}",
        report.problems.len(),
        report.problems.join("\n  ")
    );
    assert!(report.inodes >= 1, "fsck saw no inode at all");
}

/// Every key the store holds that belongs to `ino` (inode, blocks, xattrs,
/// unlinked and truncate records, and names pointing at it).
pub fn keys_of(store: &MemStore, ino: Ino) -> Vec<Key> {
    let mut out = Vec::new();
    for (k, v) in store.dump() {
        let key = format::decode_key(&k).expect("store holds a malformed key");
        let mine = match &key {
            Key::Inode(i)
            | Key::Xattr(i)
            | Key::Unlinked(i)
            | Key::Truncate(i)
            | Key::Block(i, _) => *i == ino,
            Key::Dentry { parent, .. } => {
                *parent == ino
                    || matches!(format::decode_dentry(*parent, &v), Ok((c, _)) if c == ino)
            }
            Key::Super => false,
        };
        if mine {
            out.push(key);
        }
    }
    out
}

/// Does the store hold the name `name` in `dir`?
pub fn stored_name(store: &MemStore, dir: Ino, name: &[u8]) -> bool {
    let key = format::dentry_key(dir, format::dir_hash(name), name);
    store.dump().iter().any(|(k, _)| *k == key)
}

/// Prints how to replay a seeded run if the run panics.
pub struct SeedGuard {
    pub what: &'static str,
    pub var: &'static str,
    pub seed: u64,
}

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "{} failed with seed {}; replay with {}={}",
                self.what, self.seed, self.var, self.seed
            );
        }
    }
}

/// Deterministic bytes for tests: `len` bytes derived from `seed`.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng::new(seed);
    (0..len).map(|_| r.next_u64() as u8).collect()
}

/// xorshift64* — small, seedable, no dependencies.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Mix the seed so that small seeds give unrelated streams; never 0.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        self.next_u64() % n
    }

    /// True with probability `pct` percent.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}
