//! `SharedFs`: one mount of a shared volume. It owns the mount's session,
//! the inodes its kernel holds (`known`), its open files' buffers
//! (data.rs), and the machinery every operation goes through: reads from
//! the metadata engine retried until the operation's deadline, and commits
//! conditioned on what was read (`transact`), so that an operation is
//! atomic in the engine whatever other mounts do at the same time.
//!
//! Lifecycles:
//! - a session: `Alive(id, lease)` → `Fenced` (its lease expired: every
//!   commit fails its `E` condition) → `Alive(new id)`; session.rs.
//! - an inode this kernel holds: `Known { lookups, opens }`, created by the
//!   first reply naming it, dropped when both reach zero; one with
//!   `unlinked` set has nlink 0 and an `O` record of this session, and is
//!   freed (reclaim.rs) when it is dropped.
//!
//! Locks: `known`, `files`, `own`, `inos` are leaves (never held across a
//! call to the engine, except `inos` while a range is taken); a file's
//! `FileState` lock (data.rs) is held across its flush, and is the only
//! lock held across engine calls.

use crate::data::FileState;
use crate::icache::ICache;
use crate::objects::{open_store, Blobs, ObjCache};
use crate::schema::{self, DirTimes, Inode, Key, Keys, Superblock};
use crate::session::Session;
use crate::stats::Stats;
use churnfs_kv::{Cond, Entry, KvError, LeaseId, MetaKv, Op, Outcome, Rev, Txn};
use churnfs_vfs::{
    Attr, EngineError, FileKind, Ino, InoMap, KernelCache, Result, StoreError, Timespec,
};
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How a mount behaves; every bound is here.
#[derive(Clone, Debug)]
pub struct SharedConfig {
    /// How long the session's lease lasts without renewal: a mount that
    /// dies is noticed, and its open-unlinked files reclaimed, this long
    /// after.
    pub session_ttl: Duration,
    /// How long an operation waits for the metadata engine or the object
    /// store (no quorum, unreachable) before it answers EIO.
    pub op_timeout: Duration,
    /// Most bytes of file data written here and not yet uploaded; a writer
    /// that would pass it flushes its file first.
    pub dirty_bytes_max: u64,
    /// A file flushes once this many of its bytes are dirty.
    pub file_flush_bytes: u64,
    /// Most bytes of objects kept in memory for reads.
    pub object_cache_bytes: usize,
    /// Where the read cache on local disk lives (a directory per mount
    /// under it); None: no disk cache.
    pub cache_dir: Option<std::path::PathBuf>,
    /// Most bytes the disk cache holds.
    pub disk_cache_bytes: u64,
    /// How long an inode record read or written here may serve this
    /// mount's own reads; at most the kernel's attribute TTL (icache.rs
    /// says why that keeps the contract). Zero: never.
    pub attr_cache: Duration,
    /// Most inode records cached.
    pub icache_entries_max: usize,
    /// Inode numbers a mount takes from the volume's counter at a time.
    pub ino_batch: u64,
    /// Most frees of unlinked inodes waiting for the background; beyond it
    /// the last close frees inline.
    pub frees_queued_max: usize,
    /// Where this mount is (shown in the session record).
    pub mountpoint: String,
    /// How long a chunk queued for compaction must go without a flush into
    /// it before the background rewrites it (a chunk still being written
    /// would only make the rewrite lose to the writer, its upload wasted).
    pub compact_quiet: Duration,
    /// Commit concurrent operations of this mount together (group.rs).
    pub group_commit: bool,
    /// Take the delegation of a directory this mount alone is changing
    /// (deleg.rs).
    pub delegation: bool,
    /// How long a delegated directory's changes wait before they go to the
    /// engine (at most; fsync sends them at once).
    pub delegation_flush: Duration,
    /// How often the holder of delegations lists the recalls itself (the
    /// watch tells it of each at once; this is for a watch that fell
    /// behind, and for the simulation, which has no watch thread).
    pub delegation_poll: Duration,
    /// How long a recalled directory is left alone (doubling while it
    /// keeps being recalled).
    pub delegation_hold_off: Duration,
    /// Most keys the images of delegated directories hold together.
    pub delegation_keys_max: usize,
    /// Run the background threads (session renewal, watch, reclaim). Off
    /// only in simulation, which drives them step by step.
    pub background: bool,
}

impl Default for SharedConfig {
    fn default() -> SharedConfig {
        SharedConfig {
            session_ttl: Duration::from_secs(10),
            op_timeout: Duration::from_secs(20),
            dirty_bytes_max: 64 << 20,
            file_flush_bytes: 4 * schema::CHUNK_SIZE,
            object_cache_bytes: 64 << 20,
            cache_dir: None,
            disk_cache_bytes: 1 << 30,
            compact_quiet: Duration::from_secs(1),
            group_commit: true,
            delegation: true,
            delegation_flush: Duration::from_millis(100),
            delegation_poll: Duration::from_secs(1),
            delegation_hold_off: Duration::from_secs(1),
            delegation_keys_max: 131_072,
            attr_cache: Duration::from_secs(1),
            icache_entries_max: 65_536,
            ino_batch: 1024,
            frees_queued_max: 65_536,
            mountpoint: String::new(),
            background: true,
        }
    }
}

/// What this mount's kernel holds of an inode.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Known {
    /// Kernel references (LOOKUP-like replies minus FORGET).
    pub lookups: u64,
    /// Open handles.
    pub opens: u32,
    /// nlink reached 0 while held here: this session's `O` record keeps it.
    pub unlinked: bool,
    /// The inode's version whose pages the kernel's cache holds.
    pub page_rev: Option<Rev>,
}

impl Known {
    pub fn held(&self) -> bool {
        self.lookups > 0 || self.opens > 0
    }
}

/// Revisions of this mount's own commits, so the watch skips them
/// (at most `OWN_MAX`).
#[derive(Default)]
pub(crate) struct OwnRevs {
    set: HashSet<Rev>,
    order: VecDeque<Rev>,
}

const OWN_MAX: usize = 8192;

impl OwnRevs {
    fn add(&mut self, r: Rev) {
        if self.set.insert(r) {
            self.order.push_back(r);
        }
        while self.order.len() > OWN_MAX {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
    }

    pub fn contains(&self, r: Rev) -> bool {
        self.set.contains(&r)
    }
}

thread_local! {
    /// When the oldest upload named by the step being built started.
    static OLDEST_UPLOAD: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// Notes that the step being built on this thread names an object whose
/// upload started at `at`: `transact` commits it only within the volume's
/// upload window of `at`.
pub(crate) fn note_upload(at: Instant) {
    OLDEST_UPLOAD.with(|c| c.set(Some(c.get().map_or(at, |o| o.min(at)))));
}

fn take_oldest_upload() -> Option<Instant> {
    OLDEST_UPLOAD.with(std::cell::Cell::take)
}

/// One step of a `transact`: nothing to write, or a commit to make.
pub(crate) enum Step<T> {
    Done(T),
    Commit(Txn, T),
}

/// A transaction under construction.
#[derive(Default)]
pub(crate) struct Tx {
    pub txn: Txn,
}

impl Tx {
    pub fn rev(&mut self, k: Vec<u8>, r: Rev) -> &mut Self {
        self.txn.conds.push(Cond::Rev(k, r));
        self
    }
    /// The key is as read: at `r`, or absent.
    pub fn as_read(&mut self, k: Vec<u8>, r: Option<Rev>) -> &mut Self {
        self.txn.conds.push(match r {
            Some(r) => Cond::Rev(k, r),
            None => Cond::Absent(k),
        });
        self
    }
    pub fn exists(&mut self, k: Vec<u8>) -> &mut Self {
        self.txn.conds.push(Cond::Exists(k));
        self
    }
    pub fn absent(&mut self, k: Vec<u8>) -> &mut Self {
        self.txn.conds.push(Cond::Absent(k));
        self
    }
    pub fn empty(&mut self, r: (Vec<u8>, Vec<u8>)) -> &mut Self {
        self.txn.conds.push(Cond::Empty(r.0, r.1));
        self
    }
    pub fn put(&mut self, k: Vec<u8>, v: Vec<u8>) -> &mut Self {
        self.txn.ops.push(Op::Put {
            key: k,
            value: v,
            lease: None,
        });
        self
    }
    pub fn put_leased(&mut self, k: Vec<u8>, v: Vec<u8>, lease: LeaseId) -> &mut Self {
        self.txn.ops.push(Op::Put {
            key: k,
            value: v,
            lease: Some(lease),
        });
        self
    }
    pub fn del(&mut self, k: Vec<u8>) -> &mut Self {
        self.txn.ops.push(Op::Delete(k));
        self
    }
    pub fn step<T>(self, v: T) -> Step<T> {
        Step::Commit(self.txn, v)
    }
}

/// One mount of a shared volume.
pub struct SharedFs {
    pub(crate) kv: Arc<dyn MetaKv>,
    pub(crate) blobs: Blobs,
    pub(crate) cache: ObjCache,
    pub(crate) disk: Option<crate::diskcache::DiskCache>,
    pub(crate) icache: ICache,
    pub(crate) keys: Keys,
    pub(crate) cfg: SharedConfig,
    pub(crate) sb: Superblock,
    pub(crate) stats: Arc<Stats>,
    pub(crate) session: Session,
    /// Inode numbers taken from the volume and not yet used: [next, end).
    inos: Mutex<(u64, u64)>,
    pub(crate) known: Mutex<InoMap<Known>>,
    pub(crate) files: Mutex<InoMap<Arc<FileState>>>,
    pub(crate) dirty_total: AtomicU64,
    pub(crate) kernel: OnceLock<Arc<dyn KernelCache>>,
    pub(crate) own: Mutex<OwnRevs>,
    /// The watch on the volume's changes (watch.rs).
    pub(crate) follower: Mutex<crate::watch::Follower>,
    pub(crate) stopping: AtomicBool,
    pub(crate) stopped: AtomicBool,
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
    pub(crate) bg: crate::reclaim::Background,
    pub(crate) group: crate::group::Group,
    pub(crate) delegs: crate::deleg::Delegations,
    /// Delete-queue sequence numbers of this process (unique per session
    /// with the session id in the key).
    pub(crate) queue_seq: AtomicU64,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The engine's error as the boundary's.
pub(crate) fn kv_err(e: KvError) -> EngineError {
    match e {
        KvError::Unavailable(m) => EngineError::Store(StoreError::Unavailable(m)),
        KvError::NoSpace(_) => EngineError::NoSpace,
        KvError::LeaseExpired(_) => EngineError::Store(StoreError::Fenced),
        other => EngineError::Store(StoreError::Engine(other.to_string())),
    }
}

pub(crate) fn is_unavailable(e: &EngineError) -> bool {
    matches!(e, EngineError::Store(StoreError::Unavailable(_)))
}

/// Attributes from an inode record (and a directory's times).
pub(crate) fn attr_of(ino: Ino, i: &Inode, times: Option<&DirTimes>) -> Attr {
    let (mtime, ctime) = match (i.kind, times) {
        (FileKind::Directory, Some(t)) => (t.mtime, t.ctime),
        _ => (i.mtime, i.ctime),
    };
    let size = match i.kind {
        FileKind::Directory => 4096,
        FileKind::Symlink => i.extra.len() as u64,
        _ => i.size,
    };
    Attr {
        ino,
        kind: i.kind,
        perm: i.perm,
        nlink: i.nlink,
        uid: i.uid,
        gid: i.gid,
        size,
        blocks: size.div_ceil(512),
        atime: i.atime,
        mtime,
        ctime,
        rdev: i.rdev,
        blksize: 4096,
    }
}

/// What `mount` needs besides the engine.
pub struct MountArgs<'a> {
    pub volume: &'a str,
    /// Where file data lives, when not where the superblock says.
    pub data_url: Option<&'a str>,
    pub cfg: SharedConfig,
}

impl SharedFs {
    /// Creates a volume: its superblock, counters and root directory, in
    /// one commit that fails if the volume exists.
    pub fn mkfs(
        kv: &dyn MetaKv,
        volume: &str,
        data_url: &str,
        upload_window_ms: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Superblock> {
        if upload_window_ms < schema::UPLOAD_WINDOW_MIN_MS {
            return Err(EngineError::NotAStore(format!(
                "an upload window of {upload_window_ms} ms is under the least, {} ms",
                schema::UPLOAD_WINDOW_MIN_MS
            )));
        }
        schema::check_volume_name(volume).map_err(EngineError::NotAStore)?;
        // The data URL must name a store this build can open.
        open_store(data_url).map_err(EngineError::NotAStore)?;
        let keys = Keys::new(volume);
        let now = Timespec::now();
        let sb = Superblock {
            version: schema::VOLUME_VERSION,
            uuid: *uuid::Uuid::new_v4().as_bytes(),
            created: now,
            data_url: data_url.to_string(),
            upload_window_ms,
        };
        let root = Inode {
            kind: FileKind::Directory,
            perm: 0o755,
            nlink: 2,
            uid,
            gid,
            size: 0,
            atime: now,
            mtime: now,
            ctime: now,
            rdev: 0,
            parent: Ino::ROOT.0,
            has_xattrs: false,
            inline: false,
            dseq: 0,
            garbage: None,
            extra: Vec::new(),
        };
        let mut t = Tx::default();
        t.absent(keys.superblock())
            .put(keys.superblock(), schema::encode_superblock(&sb))
            .put(keys.next_ino(), schema::encode_u64(Ino::ROOT.0 + 1))
            .put(keys.next_session(), schema::encode_u64(1))
            .put(
                keys.inode(Ino::ROOT),
                schema::encode_inode(Ino::ROOT, &root),
            )
            .put(
                keys.dir_times(Ino::ROOT),
                schema::encode_dir_times(&DirTimes {
                    mtime: now,
                    ctime: now,
                }),
            );
        match kv.commit(&t.txn).map_err(kv_err)? {
            Outcome::Committed(_) => Ok(sb),
            Outcome::Failed => Err(EngineError::Exists),
        }
    }

    /// Reads a volume's superblock: `NotAStore` when there is none.
    pub fn read_superblock(kv: &dyn MetaKv, volume: &str) -> Result<Superblock> {
        let keys = Keys::new(volume);
        let (got, _) = kv.get_many(&[&keys.superblock()]).map_err(kv_err)?;
        match &got[0] {
            Some(e) => schema::decode_superblock(&e.value),
            None => Err(EngineError::NotAStore(format!(
                "no churnfs volume named {volume:?} in this {} cluster",
                kv.name()
            ))),
        }
    }

    /// Mounts a volume: checks its superblock, opens its data store,
    /// starts a session and the background threads.
    pub fn mount(kv: Arc<dyn MetaKv>, args: MountArgs<'_>) -> Result<Arc<SharedFs>> {
        let sb = SharedFs::read_superblock(&*kv, args.volume)?;
        let url = args.data_url.unwrap_or(&sb.data_url).to_string();
        let store = open_store(&url).map_err(EngineError::NotAStore)?;
        let stats = Arc::new(Stats::default());
        let cfg = args.cfg;
        let keys = Keys::new(args.volume);
        let session = Session::start(&*kv, &keys, &cfg, &stats)?;
        // Everything committed before this revision is in what the mount
        // reads; the watch follows from it.
        let (_, at) = kv.get_many(&[&keys.superblock()]).map_err(kv_err)?;
        Stats::set(&stats.dirty_bytes_max, cfg.dirty_bytes_max);
        let disk = match &cfg.cache_dir {
            Some(root) if cfg.disk_cache_bytes > 0 => {
                let uuid: String = sb.uuid.iter().map(|b| format!("{b:02x}")).collect();
                let name = format!("{:016x}", session.id());
                Some(
                    crate::diskcache::DiskCache::open(
                        root,
                        &uuid,
                        &name,
                        cfg.disk_cache_bytes,
                        stats.clone(),
                    )
                    .map_err(|e| {
                        EngineError::NotAStore(format!("read cache under {}: {e}", root.display()))
                    })?,
                )
            }
            _ => None,
        };
        let fs = Arc::new(SharedFs {
            disk,
            blobs: Blobs::new(store, &url, args.volume, cfg.op_timeout, stats.clone()),
            cache: ObjCache::new(cfg.object_cache_bytes, stats.clone()),
            icache: ICache::new(cfg.icache_entries_max, cfg.attr_cache, stats.clone()),
            kv,
            keys,
            sb,
            stats,
            session,
            inos: Mutex::new((0, 0)),
            known: Mutex::default(),
            files: Mutex::default(),
            dirty_total: AtomicU64::new(0),
            kernel: OnceLock::new(),
            own: Mutex::default(),
            follower: Mutex::new(crate::watch::Follower::new(at)),
            stopping: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            threads: Mutex::default(),
            bg: Default::default(),
            group: Default::default(),
            delegs: Default::default(),
            queue_seq: AtomicU64::new(1),
            cfg,
        });
        if fs.cfg.background {
            crate::session::start_renewal(&fs)?;
            crate::watch::start(&fs)?;
            crate::reclaim::start(&fs)?;
        }
        if fs.cfg.delegation {
            // Recalls are answered even in simulation, where the other
            // threads are driven by the harness.
            crate::deleg::start(&fs)?;
        }
        Ok(fs)
    }

    /// The volume's upload window (schema::Superblock).
    pub(crate) fn upload_window(&self) -> Duration {
        Duration::from_millis(self.sb.upload_window_ms as u64)
    }

    pub fn superblock(&self) -> &Superblock {
        &self.sb
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    pub fn stats_snapshot(&self) -> Vec<(&'static str, u64)> {
        self.stats.snapshot()
    }

    pub fn session_id(&self) -> u64 {
        self.session.id()
    }

    pub(crate) fn check_running(&self) -> Result<()> {
        if self.stopped.load(Relaxed) {
            return Err(EngineError::Stopped);
        }
        Ok(())
    }

    // ---- reads ----------------------------------------------------------------

    /// Retries `f` while the engine is unavailable, until the operation's
    /// deadline.
    pub(crate) fn retry_reads<T>(&self, mut f: impl FnMut() -> Result<T>) -> Result<T> {
        let deadline = Instant::now() + self.cfg.op_timeout;
        let mut pause = Duration::from_millis(20);
        loop {
            match f() {
                Err(e) if is_unavailable(&e) && Instant::now() < deadline => {
                    Stats::inc(&self.stats.kv_unavailable);
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                Err(e) if is_unavailable(&e) => {
                    Stats::inc(&self.stats.op_timeouts);
                    return Err(e);
                }
                r => return r,
            }
        }
    }

    /// Reads keys from one snapshot: the engine's, with what this mount's
    /// delegated directories own from their images (deleg.rs).
    pub(crate) fn get_many(&self, keys: &[&[u8]]) -> Result<(Vec<Option<Entry>>, Rev)> {
        if self.cfg.delegation {
            return self.deleg_get_many(keys);
        }
        self.kv_get_many(keys)
    }

    /// Keys in a range (see `get_many`).
    pub(crate) fn scan(&self, range: &(Vec<u8>, Vec<u8>), limit: usize) -> Result<Vec<Entry>> {
        if self.cfg.delegation {
            return self.deleg_scan(range, limit);
        }
        self.kv_scan(range, limit)
    }

    /// Reads keys from the engine.
    pub(crate) fn kv_get_many(&self, keys: &[&[u8]]) -> Result<(Vec<Option<Entry>>, Rev)> {
        self.retry_reads(|| {
            Stats::inc(&self.stats.kv_reads);
            self.kv.get_many(keys).map_err(kv_err)
        })
    }

    pub(crate) fn kv_scan(&self, range: &(Vec<u8>, Vec<u8>), limit: usize) -> Result<Vec<Entry>> {
        self.retry_reads(|| {
            Stats::inc(&self.stats.kv_scans);
            self.kv
                .scan(&range.0, &range.1, limit)
                .map(|(v, _)| v)
                .map_err(kv_err)
        })
    }

    /// An inode's record, version and (for a directory) times: one read.
    pub(crate) fn inode(&self, ino: Ino) -> Result<(Inode, Rev, Option<DirTimes>)> {
        let r = self.keys.inode_range(ino);
        let read_at = self.icache.stamp();
        let got = self.scan(&r, 2)?;
        let rec_key = self.keys.inode(ino);
        let Some(rec) = got.iter().find(|e| e.key == rec_key) else {
            return Err(EngineError::NotFound);
        };
        let i = schema::decode_inode(ino, &rec.value)?;
        let times = match got.iter().find(|e| e.key != rec_key) {
            Some(t) => Some(schema::decode_dir_times(ino, &t.value)?),
            None => None,
        };
        if i.kind == FileKind::Directory && times.is_none() {
            return Err(EngineError::corrupt(
                Some(ino),
                "directory without its times",
            ));
        }
        self.icache
            .put(ino, i.clone(), rec.rev, times, Some(read_at));
        Ok((i, rec.rev, times))
    }

    /// Like `inode`, from the cache when it has a fresh enough entry.
    pub(crate) fn inode_cached(&self, ino: Ino) -> Result<(Inode, Rev, Option<DirTimes>)> {
        match self.icache.get(ino) {
            Some(c) => Ok((c.rec, c.rev, c.times)),
            None => self.inode(ino),
        }
    }

    /// The inode for attempt `n` of a commit: the cached record first, a
    /// fresh read once a commit failed.
    pub(crate) fn inode_at(&self, ino: Ino, n: u32) -> Result<(Inode, Rev, Option<DirTimes>)> {
        if n == 0 {
            self.inode_cached(ino)
        } else {
            self.inode(ino)
        }
    }

    /// A directory for attempt `n` (see `inode_at`).
    pub(crate) fn dir_at(&self, ino: Ino, n: u32) -> Result<(Inode, Rev)> {
        let (i, r, _) = self.inode_at(ino, n)?;
        if i.kind != FileKind::Directory {
            return Err(EngineError::NotDir);
        }
        Ok((i, r))
    }

    /// A directory's record and version, from the cache when it has a
    /// fresh enough entry (opendir, readdir: the entries themselves are
    /// always read); `NotDir` for anything else.
    pub(crate) fn dir(&self, ino: Ino) -> Result<(Inode, Rev)> {
        self.dir_at(ino, 0)
    }

    /// A name in a directory: the child, its kind and the entry's version.
    pub(crate) fn dentry(&self, parent: Ino, name: &[u8]) -> Result<Option<(Ino, FileKind, Rev)>> {
        let k = self.keys.dentry(parent, name);
        let (got, _) = self.get_many(&[&k])?;
        match &got[0] {
            Some(e) => {
                let (c, kind) = schema::decode_dentry(parent, &e.value)?;
                Ok(Some((c, kind, e.rev)))
            }
            None => Ok(None),
        }
    }

    // ---- commits ------------------------------------------------------------------

    /// Runs an operation: `attempt` reads what it needs and returns what to
    /// commit; a commit whose conditions fail (another mount, or another
    /// thread here, changed what was read) runs the attempt again. Gives up
    /// with EIO at the operation's deadline.
    pub(crate) fn transact<T>(
        &self,
        mut attempt: impl FnMut(u32) -> Result<Step<T>>,
    ) -> Result<(T, Option<Rev>)> {
        self.check_running()?;
        let deadline = Instant::now() + self.cfg.op_timeout;
        let mut pause = Duration::from_millis(1);
        let mut reread = false;
        for n in 0u32.. {
            take_oldest_upload();
            let step = match attempt(n) {
                Ok(s) => s,
                Err(e) if is_unavailable(&e) && Instant::now() < deadline => {
                    std::thread::sleep(pause.max(Duration::from_millis(20)));
                    continue;
                }
                Err(EngineError::Corrupt { .. }) if !reread => {
                    // A record this attempt read may have been replaced
                    // since, and the objects it named deleted (a compaction
                    // or an overwrite on any mount): run the attempt again
                    // on fresh records, once. Only then is it damage.
                    reread = true;
                    Stats::inc(&self.stats.stale_chunk_rereads);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let (txn, v) = match step {
                Step::Done(v) => return Ok((v, None)),
                Step::Commit(txn, v) => (txn, v),
            };
            // A commit naming objects lands within the upload window of
            // their uploads, or not at all (gc's grace rests on it).
            let mut until = deadline;
            let oldest = take_oldest_upload();
            if let Some(at) = oldest {
                let window = self.upload_window();
                if at.elapsed() >= window / 2 {
                    Stats::inc(&self.stats.upload_window_retries);
                    if Instant::now() >= deadline {
                        Stats::inc(&self.stats.op_timeouts);
                        return Err(EngineError::Store(StoreError::Unavailable(
                            "uploads outlived the volume's upload window".into(),
                        )));
                    }
                    continue;
                }
                until = deadline.min(at + window);
            }
            match self.route(txn, until, oldest)? {
                Some(rev) => return Ok((v, Some(rev))),
                None => {
                    Stats::inc(&self.stats.op_retries);
                    if Instant::now() >= deadline {
                        Stats::inc(&self.stats.op_timeouts);
                        return Err(EngineError::Store(StoreError::Unavailable(format!(
                            "an operation conflicted {n} times with other writers"
                        ))));
                    }
                    // Back off with jitter so two mounts that keep
                    // conflicting fall out of step.
                    let jitter = (n as u64 * 7919 + self.session.id()) % 5;
                    std::thread::sleep(pause + Duration::from_micros(jitter * 200));
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
            }
        }
        unreachable!("the attempt loop only ends by returning")
    }

    /// Commits `txn` under this mount's session: conditioned on the session
    /// being alive (a fenced mount writes nothing) and marked with a slot of
    /// the session, so that a commit whose answer was lost can be told
    /// applied or not. Some(revision) when applied; None when a condition
    /// failed (the caller reads again).
    pub(crate) fn commit_one(&self, mut txn: Txn, deadline: Instant) -> Result<Option<Rev>> {
        let (sid, lease) = self.session.current()?;
        let slot = self.session.take_slot();
        let seq = self.session.next_seq();
        let slot_key = self.keys.slot(sid, slot.0);
        dedup(&mut txn);
        txn.conds.push(Cond::Exists(self.keys.session(sid)));
        txn.ops.push(Op::Put {
            key: slot_key.clone(),
            value: schema::encode_u64(seq),
            lease: Some(lease),
        });
        let mut pause = Duration::from_millis(20);
        let r = loop {
            Stats::inc(&self.stats.kv_commits);
            match self.kv.commit(&txn) {
                Ok(Outcome::Committed(rev)) => break Ok(Some(rev)),
                Ok(Outcome::Failed) => {
                    Stats::inc(&self.stats.kv_conflicts);
                    break self.failed(sid).map(|()| None);
                }
                Err(KvError::Unavailable(m)) => {
                    Stats::inc(&self.stats.kv_unavailable);
                    // Applied or not? The slot says.
                    match self.resolve(&slot_key, seq, deadline) {
                        Ok(Some(rev)) => {
                            Stats::inc(&self.stats.kv_ambiguous_resolved);
                            break Ok(Some(rev));
                        }
                        Ok(None) if Instant::now() < deadline => {
                            std::thread::sleep(pause);
                            pause = (pause * 2).min(Duration::from_millis(500));
                            continue;
                        }
                        Ok(None) => {
                            Stats::inc(&self.stats.op_timeouts);
                            break Err(kv_err(KvError::Unavailable(m)));
                        }
                        Err(e) => break Err(e),
                    }
                }
                Err(KvError::LeaseExpired(_)) => {
                    self.session.fence(&self.stats);
                    break Err(EngineError::Store(StoreError::Fenced));
                }
                Err(e) => break Err(kv_err(e)),
            }
        };
        self.session.put_slot(slot);
        match r {
            Ok(Some(rev)) => {
                lock(&self.own).add(rev);
                self.cache_written(&txn, rev);
            }
            // What it read may be stale: read again.
            Ok(None) => self.uncache_read(&txn),
            Err(_) => {}
        }
        r
    }

    /// The inode records a commit wrote, into the cache; its delete-queue
    /// items, into the backlog.
    pub(crate) fn cache_written(&self, txn: &Txn, rev: Rev) {
        self.cache_ops(txn, rev, true)
    }

    /// `cache_written`; with `queued` false the delete-queue items are not
    /// counted (an operation applied to a delegated directory's image: they
    /// are counted when its batch is committed).
    pub(crate) fn cache_ops(&self, txn: &Txn, rev: Rev, queued: bool) {
        for op in &txn.ops {
            match (self.keys.decode(op.key()), op) {
                (Some(Key::Queue(..)), Op::Put { .. }) if queued => {
                    Stats::inc(&self.stats.delete_queued);
                    let queued = self.stats.delete_queued.load(Relaxed);
                    let done = self.stats.delete_done.load(Relaxed);
                    Stats::set(&self.stats.delete_backlog, queued.saturating_sub(done));
                    self.bg.queued();
                }
                (Some(Key::Inode(ino)), Op::Put { value, .. }) => {
                    let times = self.icache.get(ino).and_then(|c| c.times);
                    match schema::decode_inode(ino, value) {
                        Ok(i) => {
                            let times = if i.kind == FileKind::Directory {
                                times.or_else(|| {
                                    txn.ops.iter().find_map(|o| {
                                        match (self.keys.decode(o.key()), o) {
                                            (Some(Key::DirTimes(d)), Op::Put { value, .. })
                                                if d == ino =>
                                            {
                                                schema::decode_dir_times(ino, value).ok()
                                            }
                                            _ => None,
                                        }
                                    })
                                })
                            } else {
                                None
                            };
                            if i.kind == FileKind::Directory && times.is_none() {
                                self.icache.forget(ino);
                            } else {
                                self.icache.put(ino, i, rev, times, None);
                            }
                        }
                        Err(_) => self.icache.forget(ino),
                    }
                }
                (Some(Key::Inode(ino)), Op::Delete(_)) => self.icache.forget(ino),
                (Some(Key::DirTimes(ino)), Op::Put { value, .. }) => {
                    match schema::decode_dir_times(ino, value) {
                        Ok(t) => self.icache.put_times(ino, t),
                        Err(_) => self.icache.forget(ino),
                    }
                }
                _ => {}
            }
        }
    }

    /// After a failed commit: the inodes it was conditioned on leave the
    /// cache.
    fn uncache_read(&self, txn: &Txn) {
        for c in &txn.conds {
            if let Cond::Rev(k, _) | Cond::Exists(k) | Cond::Absent(k) = c {
                if let Some(Key::Inode(ino)) = self.keys.decode(k) {
                    self.icache.forget(ino);
                }
            }
        }
    }

    /// After a commit's conditions failed: a conflict, unless this mount's
    /// session is gone (then it is fenced).
    fn failed(&self, sid: u64) -> Result<()> {
        let k = self.keys.session(sid);
        let (got, _) = self.get_many(&[&k])?;
        if got[0].is_none() {
            self.session.fence(&self.stats);
            return Err(EngineError::Store(StoreError::Fenced));
        }
        Ok(())
    }

    /// Reads a commit's slot until the engine answers or the deadline:
    /// Some(revision) if the commit was applied.
    fn resolve(&self, slot_key: &[u8], seq: u64, deadline: Instant) -> Result<Option<Rev>> {
        let mut pause = Duration::from_millis(20);
        loop {
            match self.kv.get_many(&[slot_key]) {
                Ok((got, _)) => {
                    return Ok(match &got[0] {
                        Some(e) if schema::decode_u64(&e.value, "slot").ok() == Some(seq) => {
                            Some(e.rev)
                        }
                        _ => None,
                    })
                }
                Err(KvError::Unavailable(m)) => {
                    if Instant::now() >= deadline {
                        Stats::inc(&self.stats.op_timeouts);
                        return Err(kv_err(KvError::Unavailable(m)));
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                Err(e) => return Err(kv_err(e)),
            }
        }
    }

    /// A fresh inode number: from this mount's range, taking a new range
    /// from the volume's counter when it runs out (one commit per
    /// `ino_batch` creates).
    pub(crate) fn alloc_ino(&self) -> Result<Ino> {
        let mut g = lock(&self.inos);
        if g.0 < g.1 {
            g.0 += 1;
            return Ok(Ino(g.0 - 1));
        }
        let batch = self.cfg.ino_batch.max(1);
        let key = self.keys.next_ino();
        let (start, _) = self.transact(|_| {
            let (got, _) = self.get_many(&[&key])?;
            let Some(e) = &got[0] else {
                return Err(EngineError::corrupt(None, "volume has no inode counter"));
            };
            let next = schema::decode_u64(&e.value, "inode counter")?;
            let mut t = Tx::default();
            t.rev(key.clone(), e.rev)
                .put(key.clone(), schema::encode_u64(next + batch));
            Ok(t.step(next))
        })?;
        Stats::inc(&self.stats.ino_ranges_taken);
        *g = (start + 1, start + batch);
        Ok(Ino(start))
    }

    /// A new delete-queue key of this session.
    pub(crate) fn queue_key(&self) -> Result<Vec<u8>> {
        let (sid, _) = self.session.current()?;
        Ok(self.keys.queue(sid, self.queue_seq.fetch_add(1, Relaxed)))
    }

    // ---- what the kernel holds ----------------------------------------------------------

    /// One more kernel reference on `ino`.
    pub(crate) fn hold(&self, ino: Ino) {
        let mut k = lock(&self.known);
        k.entry(ino).or_default().lookups += 1;
        Stats::set(&self.stats.kernel_known_inodes, k.len() as u64);
    }

    pub(crate) fn known(&self, ino: Ino) -> Option<Known> {
        lock(&self.known).get(&ino).copied()
    }

    pub(crate) fn known_mut<T>(&self, ino: Ino, f: impl FnOnce(&mut Known) -> T) -> T {
        let mut k = lock(&self.known);
        let r = f(k.entry(ino).or_default());
        Stats::set(&self.stats.kernel_known_inodes, k.len() as u64);
        r
    }

    /// Changes `ino`'s entry in `known` if it has one.
    pub(crate) fn known_if(&self, ino: Ino, f: impl FnOnce(&mut Known)) {
        if let Some(k) = lock(&self.known).get_mut(&ino) {
            f(k);
        }
    }

    /// Drops `ino` from `known` once the kernel holds it no more; a dropped
    /// unlinked inode goes to be freed.
    pub(crate) fn settle(&self, ino: Ino) {
        let dropped = {
            let mut k = lock(&self.known);
            let gone = match k.get(&ino) {
                Some(e) if !e.held() => k.remove(&ino),
                _ => None,
            };
            Stats::set(&self.stats.kernel_known_inodes, k.len() as u64);
            gone
        };
        if let Some(e) = dropped {
            if e.unlinked {
                self.queue_free(ino);
            }
        }
    }

    pub(crate) fn kernel(&self) -> Option<&Arc<dyn KernelCache>> {
        self.kernel.get()
    }
}

/// Drops repeated conditions on one key, keeping the first (a key read
/// twice in one attempt was read at one version, or the commit fails
/// anyway); `Exists` yields to a version condition on the same key.
pub(crate) fn dedup(txn: &mut Txn) {
    let key = |c: &Cond| -> Vec<u8> {
        match c {
            Cond::Rev(k, _) | Cond::Exists(k) | Cond::Absent(k) => k.clone(),
            Cond::Empty(a, b) => [a.as_slice(), b.as_slice()].concat(),
        }
    };
    let versioned: std::collections::HashSet<Vec<u8>> = txn
        .conds
        .iter()
        .filter(|c| matches!(c, Cond::Rev(..)))
        .map(key)
        .collect();
    let mut seen = std::collections::HashSet::new();
    txn.conds.retain(|c| {
        if matches!(c, Cond::Exists(_)) && versioned.contains(&key(c)) {
            return false;
        }
        seen.insert(key(c))
    });
    // A key written twice: the last write wins, as the engine applies them
    // in order; etcd refuses duplicate keys in one commit, so keep the last.
    // (A range deletion stays: whoever makes one keeps every other write
    // of the commit out of it.)
    let mut last = std::collections::HashMap::new();
    for (n, op) in txn.ops.iter().enumerate() {
        if !matches!(op, Op::DeleteRange { .. }) {
            last.insert(op.key().to_vec(), n);
        }
    }
    let mut n = 0;
    txn.ops.retain(|op| {
        let keep = matches!(op, Op::DeleteRange { .. }) || last.get(op.key()) == Some(&n);
        n += 1;
        keep
    });
}
