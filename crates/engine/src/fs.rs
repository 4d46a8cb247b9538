//! The engine: namespace and file operations over the in-core caches.
//!
//! Lock order (the only locks the engine takes, outermost first):
//!   1. `Engine::commit` (`CommitCtl`): one commit at a time;
//!   2. `Engine::state` (`State`), a read-write lock: names, the unlinked
//!      set, inode numbers, and the `PARTS` parts;
//!   3. one `Part` lock: the inodes, dirty items and pending truncates of
//!      the inode numbers that hash to it.
//!
//! An operation on one inode's contents or attributes (read, write,
//! truncate, getattr, setattr, fallocate, lseek, readlink, xattrs) takes
//! `state` shared and then its inode's part: operations on files in
//! different parts never wait for each other. Every other operation, and a
//! commit's drain, takes `state` exclusively and reaches the parts without
//! their locks (`Mutex::get_mut`). Never two part locks at once. The journal
//! takes `commit`, then `state` exclusively to drain the dirty lists and the
//! pending names, then the staged slot of the store for writing
//! (inflight.rs, `Staging`), releases `state`, finishes and publishes the
//! batch (releasing the slot), then applies and syncs, then takes `state`
//! again, in short pieces, to put the names and inodes it wrote back into
//! the caches. A thread that holds `state` may wait for the slot; the
//! thread that holds the slot takes no lock and reads the store only past
//! the slot (`InFlightStore::base`). Nothing calls into the store's sync
//! while holding `state`.

pub use crate::config::EngineConfig;
use crate::dcache::{Child, Known};
use crate::error::{EngineError, Result};
use crate::format::{self, InodeRecord, NAME_MAX};
use crate::icache::Inode;
use crate::inflight::SharedWaitHook;
use crate::perm;
pub use crate::state::PARTS;
use crate::state::{FileCtx, NewInode, State};
use crate::stats::Stats;
use crate::store::KvStore;
pub use crate::types::LINK_MAX;
use crate::types::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{
    Arc, Condvar, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError,
};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The state lock held exclusively. When it is dropped (the operation is
/// over, everything it changed is dirty, so pinned) every part evicts its
/// idle inodes down to its share: what the operation loaded does not stay
/// over the bound until operations on those parts come.
///
/// A panic while it is held stops the engine (`PanicStop`).
pub(crate) struct StateGuard<'a> {
    state: RwLockWriteGuard<'a, State>,
    _stop: PanicStop<'a>,
}

/// Stops the engine when the operation that holds it panics: the state
/// may be half changed (a name moved but its count not, a dirty list
/// emptied into a batch that was never staged), and the next commit would
/// write that down, or an fsync report it durable. The front end answers
/// the panicking request EIO and goes on; from then on every operation
/// answers EIO too, as after a failed store write (`Engine::stop`).
pub(crate) struct PanicStop<'a>(pub(crate) &'a Engine);

impl Drop for PanicStop<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() && !self.0.stopped.swap(true, Ordering::AcqRel) {
            tracing::error!(
                "an operation panicked while changing the filesystem's state; engine stopped \
                 (every operation now answers EIO)"
            );
            Stats::set(&self.0.stats.engine_stopped, 1);
        }
    }
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.state.shrink_all();
        }
    }
}

/// Takes a lock: at once if `try_` got it, else by blocking (`block`), and
/// then also returns how many nanoseconds it waited. A poisoned lock is
/// taken as it is (a panic elsewhere already stopped that operation).
fn acquire<G>(
    try_: std::sync::TryLockResult<G>,
    block: impl FnOnce() -> std::sync::LockResult<G>,
) -> (G, Option<u64>) {
    match try_ {
        Ok(g) => (g, None),
        Err(TryLockError::Poisoned(p)) => (p.into_inner(), None),
        Err(TryLockError::WouldBlock) => {
            let t = Instant::now();
            let g = block().unwrap_or_else(PoisonError::into_inner);
            (g, Some(t.elapsed().as_nanos() as u64))
        }
    }
}

/// What the front end does before a request waits for a commit (the FUSE
/// adapter lets another worker thread read requests meanwhile).
pub use churnfs_vfs::WaitHook;

/// State of the commit pipeline, guarded by `Engine::commit`.
#[derive(Default)]
pub struct CommitCtl {
    /// Every commit numbered up to this one is durable.
    pub durable: u64,
    /// Batches were applied since the last sync.
    pub unsynced: bool,
}

pub struct Engine {
    pub(crate) state: RwLock<State>,
    pub(crate) commit: Mutex<CommitCtl>,
    /// The store behind the batch a commit is writing (`inflight`).
    pub(crate) store: Arc<crate::inflight::InFlightStore>,
    pub(crate) stats: Arc<Stats>,
    pub(crate) stopped: AtomicBool,
    pub(crate) next_fh: AtomicU64,
    pub(crate) cfg: EngineConfig,
    /// Set to stop the committer; shared with its thread, which holds no
    /// strong reference to the engine while it waits.
    pub(crate) wake: Arc<(Mutex<bool>, Condvar)>,
    pub(crate) committer: Mutex<Option<JoinHandle<()>>>,
    /// The thread freeing inodes a crash left unlinked, then the data of
    /// large files this mount frees.
    pub(crate) reclaimer: Mutex<Option<JoinHandle<()>>>,
    pub(crate) free_queue: Arc<crate::unlinked::FreeQueue>,
    /// Called before a request waits for a commit (`on_wait`).
    pub(crate) wait_hook: std::sync::OnceLock<SharedWaitHook>,
    /// `State::drained`, readable without the state lock (`drains`).
    pub(crate) drains: AtomicU64,
}

impl Engine {
    /// Takes the state lock for one operation, first pushing back if the
    /// dirty list is over its bound. Never called with the commit lock held
    /// (the journal uses `lock_state`).
    pub(crate) fn lock(&self) -> Result<StateGuard<'_>> {
        self.push_back()?;
        self.lock_state()
    }

    /// The state lock, exclusively, with no push-back (the journal's own
    /// use). Idle inodes are evicted when the guard is dropped, once the
    /// operation is over, never while it runs: an inode the operation
    /// changed but has not dirtied yet must not be dropped under it.
    pub(crate) fn lock_state(&self) -> Result<StateGuard<'_>> {
        if self.stopped.load(Ordering::Acquire) {
            return Err(EngineError::Stopped);
        }
        Stats::inc(&self.stats.state_locks);
        let (s, waited) = acquire(self.state.try_write(), || self.state.write());
        self.state_waited(waited);
        Ok(StateGuard {
            state: s,
            _stop: PanicStop(self),
        })
    }

    /// The state lock, shared (an operation on one inode; see `file`).
    fn lock_shared(&self) -> Result<RwLockReadGuard<'_, State>> {
        if self.stopped.load(Ordering::Acquire) {
            return Err(EngineError::Stopped);
        }
        Stats::inc(&self.stats.state_locks);
        Stats::inc(&self.stats.state_locks_shared);
        let (s, waited) = acquire(self.state.try_read(), || self.state.read());
        self.state_waited(waited);
        Ok(s)
    }

    /// Counts a wait for the state lock (contention is measured, not
    /// guessed: docs/design.md §5).
    fn state_waited(&self, waited: Option<u64>) {
        if let Some(ns) = waited {
            Stats::inc(&self.stats.state_lock_waits);
            Stats::add(&self.stats.state_lock_wait_ns, ns);
            Stats::max(&self.stats.state_lock_wait_max_ns, ns);
        }
    }

    /// Runs `f` on `ino`'s part with the state lock shared and the part's
    /// lock held: for what reads or changes one inode's contents and
    /// attributes and nothing else (no names, link counts or opens).
    /// Operations on inodes of different parts run side by side. Pushes
    /// back first, as `lock` does, and evicts the part's idle inodes after
    /// `f` has run.
    pub(crate) fn file<R>(
        &self,
        ino: Ino,
        f: impl FnOnce(&mut FileCtx<'_>) -> Result<R>,
    ) -> Result<R> {
        self.push_back()?;
        let s = self.lock_shared()?;
        let lock = s.part_lock(ino);
        Stats::inc(&self.stats.part_locks);
        let (mut part, waited) = acquire(lock.try_lock(), || lock.lock());
        let _stop = PanicStop(self);
        if let Some(ns) = waited {
            Stats::inc(&self.stats.part_lock_waits);
            Stats::add(&self.stats.part_lock_wait_ns, ns);
        }
        let r = f(&mut FileCtx::new(&mut part, &s));
        // After the operation, not before: operations on other parts do
        // not evict here, so what this one loaded must not stay over the
        // part's share until the next operation on it. (Everything the
        // operation changed is dirty by now, so pinned.)
        part.icache.shrink(&self.stats);
        r
    }

    pub fn stats(&self) -> Vec<(&'static str, u64)> {
        Stats::set(&self.stats.store_reopens, self.store.reopens());
        Stats::set(&self.stats.staging_waits, self.store.staging_waits());
        self.stats.snapshot()
    }

    pub fn stats_handle(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    // ---- namespace -------------------------------------------------------

    /// Looks a name up and takes one kernel reference on the child.
    pub fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        if name.len() > NAME_MAX {
            return Err(EngineError::NameTooLong);
        }
        let mut s = self.lock()?;
        if name == b"." || name == b".." {
            let p = s.dir(parent)?;
            let ino = if name == b"." { parent } else { p.rec.parent };
            let attr = s.inode(ino)?.attr(ino);
            s.part(ino).icache.hold(ino);
            return Ok(attr);
        }
        let attr = s.child_attr(parent, name)?;
        s.part(attr.ino).icache.hold(attr.ino);
        Ok(attr)
    }

    /// The attributes of `name` in `parent`, without a kernel reference
    /// (for checks made before an operation on the name).
    pub fn child_attr(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        check_name(name)?;
        self.lock_state()?.child_attr(parent, name)
    }

    /// Whether `name` in `parent` names nothing, read under the shared
    /// state lock without changing any cache (a missing `parent` has no
    /// names). For probes made off a request's path, which should not hold
    /// back requests that take the lock exclusively.
    ///
    /// `missed_at`: `drains()` read before a lookup that found the name
    /// missing. If no commit has drained since, a name that no cache holds
    /// is still missing and the store is not read: a name is created only
    /// in the name cache's pending table (`DCache::set`), and it leaves
    /// that table for the store only through a drain, so a name made since
    /// the lookup is still pending; and the store's names change only
    /// through drains.
    pub fn name_missing(&self, parent: Ino, name: &[u8], missed_at: Option<u64>) -> Result<bool> {
        check_name(name)?;
        let s = self.lock_shared()?;
        let hash = format::dir_hash(name);
        if let Known::Yes { child, .. } = s.peek_name(parent, hash, name) {
            return Ok(child.is_none());
        }
        if missed_at == Some(s.drained()) {
            Stats::inc(&self.stats.names_missing_unread);
            return Ok(true);
        }
        Ok(s.stored_child(parent, hash, name)?.is_none())
    }

    /// How many commits have drained their items (read without the state
    /// lock: a value at most the current one).
    pub fn drains(&self) -> u64 {
        self.drains.load(Ordering::Acquire)
    }

    /// Where directory `ino` sits and how many names (and subdirectories)
    /// it holds.
    pub fn dir_shape(&self, ino: Ino) -> Result<DirShape> {
        let mut s = self.lock_state()?;
        let d = s.dir(ino)?;
        Ok(DirShape {
            parent: d.rec.parent,
            entries: d.rec.entries,
            subdirs: d.rec.nlink.saturating_sub(2),
        })
    }

    /// The kernel dropped `n` references (FORGET).
    pub fn forget(&self, ino: Ino, n: u64) {
        let Ok(mut s) = self.lock() else { return };
        if s.part(ino).icache.release(ino, n) == 0 {
            s.settle(ino);
            s.part(ino).icache.repin(ino);
        }
    }

    pub fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.file(ino, |f| Ok(f.inode(ino)?.attr(ino)))
    }

    pub fn setattr(&self, ino: Ino, set: SetAttr) -> Result<Attr> {
        let (attr, over) = self.file(ino, |f| f.setattr(ino, set))?;
        self.throttle(over)?;
        Ok(attr)
    }

    pub fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.file(ino, |f| {
            let i = f.inode(ino)?;
            match (&i.rec.kind, &i.rec.extra) {
                (FileKind::Symlink, Some(t)) => Ok(t.clone()),
                _ => Err(EngineError::Invalid("not a symlink")),
            }
        })
    }
}

impl FileCtx<'_> {
    /// SETATTR: size, mode, owner, times. Returns the new attributes and
    /// whether dirty data is over its bound.
    fn setattr(&mut self, ino: Ino, set: SetAttr) -> Result<(Attr, bool)> {
        let now = Timespec::now();
        let s = self;
        let kind = s.inode(ino)?.rec.kind;
        if let Some(size) = set.size {
            match kind {
                FileKind::Regular => {}
                FileKind::Directory => return Err(EngineError::IsDir),
                _ => return Err(EngineError::Invalid("truncate of a special file")),
            }
            if size > format::MAX_FILE_SIZE {
                return Err(EngineError::FileTooBig);
            }
            s.truncate(ino, size)?;
        }
        let i = s.inode(ino)?;
        if let Some(mode) = set.mode {
            i.rec.perm = (mode & 0o7777) as u16;
        }
        if let Some(uid) = set.uid {
            i.rec.uid = uid;
        }
        if let Some(gid) = set.gid {
            i.rec.gid = gid;
        }
        let cleared = set.kill_setid
            && set.mode.is_none()
            && kind != FileKind::Directory
            && perm::drop_setid(&mut i.rec.perm);
        let resolve = |t: SetTime| match t {
            SetTime::Now => now,
            SetTime::At(t) => t,
        };
        if let Some(t) = set.atime {
            i.rec.atime = resolve(t);
        }
        if let Some(t) = set.mtime {
            i.rec.mtime = resolve(t);
        } else if set.size.is_some() {
            i.rec.mtime = now;
        }
        i.rec.ctime = set.ctime.unwrap_or(now);
        let attr = i.attr(ino);
        s.dirty_inode(ino);
        if cleared {
            Stats::inc(&s.stats.setid_cleared);
        }
        Ok((attr, s.over_dirty_bytes()))
    }
}

impl Engine {
    pub fn mknod(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32, rdev: u32) -> Result<Attr> {
        let kind = FileKind::from_mode(mode).ok_or(EngineError::Invalid("unknown file type"))?;
        if matches!(kind, FileKind::Directory | FileKind::Symlink) {
            return Err(EngineError::Invalid("mknod of a directory or symlink"));
        }
        let rdev = if matches!(kind, FileKind::CharDevice | FileKind::BlockDevice) {
            rdev
        } else {
            0
        };
        self.lock()?.make(
            ctx,
            parent,
            name,
            NewInode {
                kind,
                mode,
                rdev,
                target: None,
            },
        )
    }

    pub fn mkdir(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32) -> Result<Attr> {
        self.lock()?.make(
            ctx,
            parent,
            name,
            NewInode {
                kind: FileKind::Directory,
                mode,
                rdev: 0,
                target: None,
            },
        )
    }

    pub fn symlink(&self, ctx: Ctx, parent: Ino, name: &[u8], target: &[u8]) -> Result<Attr> {
        if target.is_empty() {
            return Err(EngineError::NotFound);
        }
        if target.len() > format::SYMLINK_MAX {
            return Err(EngineError::NameTooLong);
        }
        self.lock()?.make(
            ctx,
            parent,
            name,
            NewInode {
                kind: FileKind::Symlink,
                mode: 0o777,
                rdev: 0,
                target: Some(target),
            },
        )
    }

    pub fn create(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32) -> Result<(Attr, Fh)> {
        let mut s = self.lock()?;
        let attr = s.make(
            ctx,
            parent,
            name,
            NewInode {
                kind: FileKind::Regular,
                mode,
                rdev: 0,
                target: None,
            },
        )?;
        let i = s.inode(attr.ino)?;
        i.opens += 1;
        s.part(attr.ino).icache.repin(attr.ino);
        Stats::inc(&self.stats.open_handles);
        Ok((attr, Fh(self.next_fh.fetch_add(1, Ordering::Relaxed))))
    }

    /// O_TMPFILE: a regular file in no directory, open once and held by the
    /// kernel. `parent` only gives it its group (set-group-ID directories)
    /// and is where the caller was allowed to create. It has no link from
    /// birth, so it is an open-unlinked file like any other: the store
    /// holds nothing of it until a commit writes a block or an xattr of it
    /// (then its inode and `U` records too, and a crash leaves it to the
    /// reclaim; state.rs, `unstored`), and its last release and FORGET free
    /// it, unless `link` names it first (linkat of the descriptor). With `open` false (an
    /// adapter whose kernel sends no OPEN or RELEASE) it takes no open
    /// handle and lives on the kernel's reference alone; its handle is 0.
    pub fn tmpfile(&self, ctx: Ctx, parent: Ino, mode: u32, open: bool) -> Result<(Attr, Fh)> {
        let now = Timespec::now();
        let mut s = self.lock()?;
        let (pgid, psetgid) = {
            let p = s.dir(parent)?;
            (p.rec.gid, p.rec.perm & libc::S_ISGID as u16 != 0)
        };
        let ino = s.alloc_ino();
        let rec = InodeRecord {
            kind: FileKind::Regular,
            perm: (mode & 0o7777) as u16,
            nlink: 0,
            uid: ctx.uid,
            gid: if psetgid { pgid } else { ctx.gid },
            size: 0,
            atime: now,
            mtime: now,
            ctime: now,
            rdev: 0,
            parent: Ino(0),
            entries: 0,
            has_xattrs: false,
            extra: None,
        };
        s.part(ino).icache.insert(ino, Inode::new(rec, false));
        s.dirty_inode(ino);
        s.part(ino).icache.hold(ino);
        if open {
            s.inode(ino)?.opens += 1;
            s.part(ino).icache.repin(ino);
            Stats::inc(&self.stats.open_handles);
        }
        // No link, known to the kernel: it joins the unlinked set.
        s.settle(ino);
        debug_assert!(s.is_unlinked(ino), "{ino}: a tmpfile not unlinked");
        Stats::inc(&self.stats.tmpfiles);
        let attr = s.inode(ino)?.attr(ino);
        let fh = if open {
            self.next_fh.fetch_add(1, Ordering::Relaxed)
        } else {
            0
        };
        Ok((attr, Fh(fh)))
    }

    pub fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> {
        check_name(name)?;
        let now = Timespec::now();
        let mut s = self.lock()?;
        s.dir(parent)?;
        let (child, stored) = s.find(parent, name)?;
        let (ino, kind) = child.ok_or(EngineError::NotFound)?;
        if kind == FileKind::Directory {
            return Err(EngineError::IsDir);
        }
        s.set_name(parent, name, None, stored);
        s.inode(parent)?.rec.entries -= 1;
        s.touch_dir(parent, now)?;
        s.drop_link(ino, now)
    }

    pub fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> {
        if name == b"." {
            return Err(EngineError::Invalid("rmdir of ."));
        }
        if name == b".." {
            return Err(EngineError::NotEmpty);
        }
        check_name(name)?;
        let now = Timespec::now();
        let mut s = self.lock()?;
        s.dir(parent)?;
        let (child, stored) = s.find(parent, name)?;
        let (ino, kind) = child.ok_or(EngineError::NotFound)?;
        if kind != FileKind::Directory {
            return Err(EngineError::NotDir);
        }
        if s.inode(ino)?.rec.entries != 0 {
            return Err(EngineError::NotEmpty);
        }
        s.set_name(parent, name, None, stored);
        let p = s.inode(parent)?;
        p.rec.entries -= 1;
        p.rec.nlink -= 1;
        s.touch_dir(parent, now)?;
        s.drop_link(ino, now)
    }

    pub fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        check_name(newname)?;
        let now = Timespec::now();
        let mut s = self.lock()?;
        let i = s.inode(ino)?;
        if i.rec.kind == FileKind::Directory {
            return Err(EngineError::Perm);
        }
        if i.rec.nlink >= LINK_MAX {
            return Err(EngineError::TooManyLinks);
        }
        let kind = i.rec.kind;
        s.dir(newparent)?;
        let (existing, stored) = s.find(newparent, newname)?;
        if existing.is_some() {
            return Err(EngineError::Exists);
        }
        let i = s.inode(ino)?;
        i.rec.nlink += 1;
        i.rec.ctime = now;
        if i.rec.nlink == 1 {
            // A tmpfile given its first name (the kernel links no other
            // inode without a link).
            s.linked_again(ino);
        }
        s.dirty_inode(ino);
        s.set_name(newparent, newname, Some((ino, kind)), stored);
        s.inode(newparent)?.rec.entries += 1;
        s.touch_dir(newparent, now)?;
        s.part(ino).icache.hold(ino);
        Ok(s.inode(ino)?.attr(ino))
    }

    pub fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        check_name(name)?;
        check_name(newname)?;
        if flags.exchange && flags.noreplace {
            return Err(EngineError::Invalid(
                "RENAME_EXCHANGE with RENAME_NOREPLACE",
            ));
        }
        let now = Timespec::now();
        let mut s = self.lock()?;
        s.dir(parent)?;
        s.dir(newparent)?;
        let (src, src_stored) = s.find(parent, name)?;
        let (sino, skind) = src.ok_or(EngineError::NotFound)?;
        let (dst, dst_stored) = s.find(newparent, newname)?;
        if flags.exchange {
            let (dino, dkind) = dst.ok_or(EngineError::NotFound)?;
            if sino == dino {
                return Ok(());
            }
            if parent != newparent {
                if skind == FileKind::Directory && s.is_ancestor(sino, newparent)? {
                    return Err(EngineError::Invalid("directory moved into itself"));
                }
                if dkind == FileKind::Directory && s.is_ancestor(dino, parent)? {
                    return Err(EngineError::Invalid("directory moved into itself"));
                }
            }
            s.set_name(parent, name, Some((dino, dkind)), src_stored);
            s.set_name(newparent, newname, Some((sino, skind)), dst_stored);
            if parent != newparent {
                let sdir = (skind == FileKind::Directory) as u32;
                let ddir = (dkind == FileKind::Directory) as u32;
                let p = s.inode(parent)?;
                p.rec.nlink = p.rec.nlink + ddir - sdir;
                let np = s.inode(newparent)?;
                np.rec.nlink = np.rec.nlink + sdir - ddir;
                if sdir == 1 {
                    s.inode(sino)?.rec.parent = newparent;
                }
                if ddir == 1 {
                    s.inode(dino)?.rec.parent = parent;
                }
            }
            for ino in [sino, dino] {
                s.inode(ino)?.rec.ctime = now;
                s.dirty_inode(ino);
            }
            s.touch_dir(parent, now)?;
            s.touch_dir(newparent, now)?;
            return Ok(());
        }
        if let Some((dino, dkind)) = dst {
            if flags.noreplace {
                return Err(EngineError::Exists);
            }
            if dino == sino {
                return Ok(());
            }
            match (skind == FileKind::Directory, dkind == FileKind::Directory) {
                (true, false) => return Err(EngineError::NotDir),
                (false, true) => return Err(EngineError::IsDir),
                (true, true) if s.inode(dino)?.rec.entries != 0 => {
                    return Err(EngineError::NotEmpty)
                }
                _ => {}
            }
        }
        if skind == FileKind::Directory && parent != newparent && s.is_ancestor(sino, newparent)? {
            return Err(EngineError::Invalid("directory moved into itself"));
        }
        // The move itself.
        s.set_name(parent, name, None, src_stored);
        s.set_name(newparent, newname, Some((sino, skind)), dst_stored);
        s.inode(parent)?.rec.entries -= 1;
        if let Some((dino, dkind)) = dst {
            if dkind == FileKind::Directory {
                s.inode(newparent)?.rec.nlink -= 1;
            }
            s.drop_link(dino, now)?;
        } else {
            s.inode(newparent)?.rec.entries += 1;
        }
        if skind == FileKind::Directory && parent != newparent {
            s.inode(parent)?.rec.nlink -= 1;
            s.inode(newparent)?.rec.nlink += 1;
            s.inode(sino)?.rec.parent = newparent;
        }
        s.inode(sino)?.rec.ctime = now;
        s.dirty_inode(sino);
        s.touch_dir(parent, now)?;
        if newparent != parent {
            s.touch_dir(newparent, now)?;
        }
        Ok(())
    }

    // ---- handles ---------------------------------------------------------

    pub fn open(&self, ino: Ino) -> Result<Fh> {
        let mut s = self.lock()?;
        let i = s.inode(ino)?;
        if i.rec.kind == FileKind::Directory {
            return Err(EngineError::IsDir);
        }
        i.opens += 1;
        s.part(ino).icache.repin(ino);
        Stats::inc(&self.stats.open_handles);
        Ok(Fh(self.next_fh.fetch_add(1, Ordering::Relaxed)))
    }

    pub fn release(&self, ino: Ino) -> Result<()> {
        let mut s = self.lock()?;
        let i = s
            .part(ino)
            .icache
            .peek_mut(ino)
            .ok_or(EngineError::NotFound)?;
        assert!(i.opens > 0, "{ino}: release without an open handle");
        i.opens -= 1;
        self.stats.open_handles.fetch_sub(1, Ordering::Relaxed);
        if i.opens == 0 {
            s.settle(ino);
            s.part(ino).icache.repin(ino);
        }
        Ok(())
    }

    pub fn opendir(&self, ino: Ino) -> Result<Fh> {
        let mut s = self.lock()?;
        s.dir(ino)?;
        Ok(Fh(self.next_fh.fetch_add(1, Ordering::Relaxed)))
    }

    /// Lists `dir` from cookie `offset`. `emit` returns false when the
    /// caller's buffer is full; that entry is then not counted as returned.
    /// With `plus`, every returned entry but `.` and `..` takes a kernel reference.
    pub fn readdir(
        &self,
        dir: Ino,
        offset: u64,
        plus: bool,
        emit: &mut dyn FnMut(&DirEntry<'_>) -> bool,
    ) -> Result<()> {
        const PAGE: usize = 128;
        let mut s = self.lock()?;
        let parent = s.dir(dir)?.rec.parent;
        let mut dots: Vec<(u64, &[u8], Ino)> = Vec::new();
        if offset < 1 {
            dots.push((1, b".", dir));
        }
        if offset < 2 {
            dots.push((2, b"..", parent));
        }
        for (off, name, ino) in dots {
            let attr = if plus {
                Some(s.inode(ino)?.attr(ino))
            } else {
                None
            };
            let e = DirEntry {
                ino,
                offset: off,
                kind: FileKind::Directory,
                name,
                attr,
            };
            if !emit(&e) {
                return Ok(());
            }
        }
        let mut from = if offset < 3 { 0 } else { offset + 1 };
        let prefix = format::dentry_prefix(dir);
        loop {
            Stats::inc(&self.stats.store_scans);
            let page = self
                .store
                .scan(&prefix, &format::dentry_key(dir, from, b""), PAGE)?;
            let full = page.len() == PAGE;
            let mut merged: std::collections::BTreeMap<(u64, Vec<u8>), Option<Child>> =
                Default::default();
            // The page covers hashes [from, to]: up to the last stored entry
            // read (when the store has more) and up to the PAGE-th pending
            // name (when more are pending), whichever is lower.
            let mut to = u64::MAX;
            for (k, v) in &page {
                let format::Key::Dentry { hash, name, .. } = format::decode_key(k)? else {
                    return Err(EngineError::corrupt(
                        Some(dir),
                        "non-dentry key in a dentry scan",
                    ));
                };
                let child = format::decode_dentry(dir, v)?;
                if full {
                    to = hash;
                }
                merged.insert((hash, name), Some(child));
            }
            let pending = s.pending_names(dir, from, to, PAGE);
            if pending.len() == PAGE {
                to = to.min(pending[PAGE - 1].0);
            }
            merged.retain(|(h, _), _| *h <= to);
            for (h, n, c) in pending {
                if h <= to {
                    merged.insert((h, n), c);
                }
            }
            for ((hash, name), child) in merged {
                let Some((ino, kind)) = child else { continue };
                let attr = if plus {
                    Some(s.inode(ino)?.attr(ino))
                } else {
                    None
                };
                let e = DirEntry {
                    ino,
                    offset: hash,
                    kind,
                    name: &name,
                    attr,
                };
                if !emit(&e) {
                    return Ok(());
                }
                if plus {
                    s.part(ino).icache.hold(ino);
                }
            }
            if to == u64::MAX {
                return Ok(());
            }
            from = to + 1;
        }
    }

    // ---- xattrs ----------------------------------------------------------

    pub fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        if name.is_empty() || name.len() > format::XATTR_NAME_MAX {
            return Err(EngineError::Range);
        }
        if value.len() > format::XATTR_VALUE_MAX {
            return Err(EngineError::TooBig);
        }
        self.file(ino, |s| {
            let x = s.xattrs(ino)?;
            let exists = x.contains_key(name);
            if flags & xattr_flags::CREATE != 0 && exists {
                return Err(EngineError::Exists);
            }
            if flags & xattr_flags::REPLACE != 0 && !exists {
                return Err(EngineError::NoAttr);
            }
            let old = x.insert(name.to_vec(), value.to_vec());
            if format::xattrs_bytes(x) > format::XATTR_TOTAL_MAX {
                match old {
                    Some(v) => x.insert(name.to_vec(), v),
                    None => x.remove(name),
                };
                return Err(EngineError::NoSpace);
            }
            s.xattrs_changed(ino)
        })
    }

    pub fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.file(ino, |s| {
            if !s.inode(ino)?.rec.has_xattrs {
                return Err(EngineError::NoAttr);
            }
            s.xattrs(ino)?.get(name).cloned().ok_or(EngineError::NoAttr)
        })
    }

    /// Names, each followed by a NUL byte.
    pub fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        self.file(ino, |s| {
            if !s.inode(ino)?.rec.has_xattrs {
                return Ok(Vec::new());
            }
            let mut out = Vec::new();
            for k in s.xattrs(ino)?.keys() {
                out.extend_from_slice(k);
                out.push(0);
            }
            Ok(out)
        })
    }

    pub fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        self.file(ino, |s| {
            if s.xattrs(ino)?.remove(name).is_none() {
                return Err(EngineError::NoAttr);
            }
            s.xattrs_changed(ino)
        })
    }

    // ---- misc ------------------------------------------------------------

    pub fn statfs(&self) -> Result<StatFs> {
        let mut out = StatFs {
            blocks: 1 << 30,
            bfree: 1 << 30,
            bavail: 1 << 30,
            files: 1 << 40,
            ffree: 1 << 40,
            bsize: 4096,
            namelen: NAME_MAX as u32,
            frsize: 4096,
        };
        if let Some(p) = &self.cfg.statfs_path {
            use std::os::unix::ffi::OsStrExt;
            let c = std::ffi::CString::new(p.as_os_str().as_bytes())
                .map_err(|_| EngineError::Invalid("store path"))?;
            let mut v: libc::statvfs = unsafe { std::mem::zeroed() };
            // SAFETY: `c` is a valid NUL-terminated path and `v` a writable statvfs.
            if unsafe { libc::statvfs(c.as_ptr(), &mut v) } == 0 {
                out.blocks = v.f_blocks * v.f_frsize / 4096;
                out.bfree = v.f_bfree * v.f_frsize / 4096;
                out.bavail = v.f_bavail * v.f_frsize / 4096;
            }
        }
        Ok(out)
    }

    /// Makes everything done so far durable (fsync, fsyncdir, syncfs).
    pub fn fsync(&self) -> Result<()> {
        Stats::inc(&self.stats.fsync_requests);
        self.before_wait();
        self.sync_all()
    }

    /// Sets the hook called before a request waits for a commit, or for a
    /// batch a commit is putting together (once; later calls are ignored).
    pub fn on_wait(&self, hook: WaitHook) {
        let hook: SharedWaitHook = Arc::from(hook);
        if self.wait_hook.set(hook.clone()).is_ok() {
            self.store.on_wait(hook);
        }
    }

    pub(crate) fn before_wait(&self) {
        if let Some(h) = self.wait_hook.get() {
            h();
        }
    }

    /// Time the committer sleeps between commits.
    pub fn commit_interval(&self) -> Duration {
        Duration::from_millis(self.cfg.commit_interval_ms.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{part_of, Part};
    use crate::store::MemStore;
    use crate::types::Ctx;

    fn mounted() -> Arc<Engine> {
        mounted_with(EngineConfig::default())
    }

    fn mounted_with(cfg: EngineConfig) -> Arc<Engine> {
        let store = Arc::new(MemStore::default());
        Engine::mkfs(&*store, 0, 0).unwrap();
        let e = Engine::mount(store, cfg).unwrap();
        e.wait_reclaim();
        e
    }

    /// No periodic commit (it would take the state lock exclusively in
    /// the middle of a test that holds a part).
    fn mounted_quiet() -> Arc<Engine> {
        mounted_with(EngineConfig {
            commit_interval_ms: 3_600_000,
            ..EngineConfig::default()
        })
    }

    fn count(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    /// A panic while the state lock is held, or while a part is, stops the
    /// engine: what it changed may be half done, and nothing may commit it.
    #[test]
    fn a_panic_that_holds_the_state_or_a_part_stops_the_engine() {
        for in_part in [false, true] {
            let e = mounted_quiet();
            let (a, _fh) = e.create(Ctx::ROOT, Ino::ROOT, b"f", 0o600).unwrap();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if in_part {
                    let _ = e.file(a.ino, |_| -> Result<()> {
                        panic!("a bug in a file operation")
                    });
                } else {
                    let _g = e.lock_state().unwrap();
                    panic!("a bug in a namespace operation");
                }
            }));
            assert!(r.is_err());
            assert!(matches!(e.getattr(a.ino), Err(EngineError::Stopped)));
            assert!(matches!(
                e.lookup(Ino::ROOT, b"f"),
                Err(EngineError::Stopped)
            ));
            assert!(
                e.fsync().is_err(),
                "an fsync after the panic reported success"
            );
            assert_eq!(count(&e.stats.engine_stopped), 1);
        }
        // An operation that fails without a panic stops nothing.
        let e = mounted_quiet();
        assert!(e.lookup(Ino::ROOT, b"missing").is_err());
        assert!(e.getattr(Ino::ROOT).is_ok());
        assert_eq!(count(&e.stats.engine_stopped), 0);
    }

    /// A write and a truncate take the state lock once each (the dirty
    /// bound is read under it), and an uncontended lock counts no wait.
    #[test]
    fn a_write_and_a_truncate_take_the_state_lock_once() {
        let e = mounted();
        let (a, _fh) = e.create(Ctx::ROOT, Ino::ROOT, b"f", 0o600).unwrap();
        let before = count(&e.stats.state_locks);
        e.write(a.ino, 0, b"0123456789").unwrap();
        assert_eq!(count(&e.stats.state_locks), before + 1);
        let set = SetAttr {
            size: Some(3),
            ..SetAttr::default()
        };
        assert_eq!(e.setattr(a.ino, set).unwrap().size, 3);
        assert_eq!(count(&e.stats.state_locks), before + 2);
        assert_eq!(count(&e.stats.state_lock_waits), 0);
        e.shutdown().unwrap();
    }

    /// An operation that finds the state lock held counts one wait and the
    /// time it waited.
    #[test]
    fn waiting_for_the_state_lock_is_counted() {
        let e = mounted();
        let held = e.lock_state().unwrap();
        let taken = count(&e.stats.state_locks);
        let e2 = e.clone();
        let t = std::thread::spawn(move || e2.getattr(Ino::ROOT).map(|a| a.ino));
        while count(&e.stats.state_locks) == taken {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(20));
        drop(held);
        assert_eq!(t.join().unwrap().unwrap(), Ino::ROOT);
        // The committer could have waited too: at least this one wait.
        assert!(count(&e.stats.state_lock_waits) >= 1);
        let longest = count(&e.stats.state_lock_wait_max_ns);
        assert!(longest > 0 && count(&e.stats.state_lock_wait_ns) >= longest);
        e.shutdown().unwrap();
    }

    /// Makes regular files in the root until two share a part and one is
    /// in another; returns (a, b in a's part, c in another part).
    fn files_by_part(e: &Engine) -> (Ino, Ino, Ino) {
        let mut seen: Vec<Ino> = Vec::new();
        for n in 0.. {
            let (a, _fh) = e
                .create(Ctx::ROOT, Ino::ROOT, format!("f{n}").as_bytes(), 0o600)
                .unwrap();
            seen.push(a.ino);
            let first = seen[0];
            let same = seen[1..].iter().find(|i| part_of(**i) == part_of(first));
            let other = seen.iter().find(|i| part_of(**i) != part_of(first));
            if let (Some(&b), Some(&c)) = (same, other) {
                return (first, b, c);
            }
        }
        unreachable!()
    }

    /// With one file's part held by an operation that has not finished, a
    /// truncate and a write of a file in another part go through: they
    /// share no lock with it (the state lock is shared by both).
    #[test]
    fn truncates_of_files_in_different_parts_do_not_wait_for_each_other() {
        let e = mounted_quiet();
        let (a, _, c) = files_by_part(&e);
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let e2 = e.clone();
        let holder = std::thread::spawn(move || {
            e2.file(a, |f| {
                f.inode(a)?;
                entered_tx.send(()).unwrap();
                // Holds `a`'s part until told (or the test gives up).
                let _ = release_rx.recv_timeout(Duration::from_secs(30));
                Ok(())
            })
        });
        entered_rx.recv().unwrap();
        let waits = count(&e.stats.part_lock_waits) + count(&e.stats.state_lock_waits);
        // Were `c`'s part or the state lock taken exclusively, these would
        // wait for the holder, which waits for them: the test would hang
        // until the holder's timeout and then fail below.
        e.write(c, 0, &[7u8; 100_000]).unwrap();
        let set = SetAttr {
            size: Some(10),
            ..SetAttr::default()
        };
        assert_eq!(e.setattr(c, set).unwrap().size, 10);
        assert_eq!(
            count(&e.stats.part_lock_waits) + count(&e.stats.state_lock_waits),
            waits,
            "an operation on another part waited"
        );
        release_tx.send(()).unwrap();
        holder.join().unwrap().unwrap();
        e.shutdown().unwrap();
    }

    /// Two operations on files of one part take turns: the second waits
    /// for the first, and the wait is counted.
    #[test]
    fn operations_in_one_part_take_turns() {
        let e = mounted_quiet();
        let (a, b, _) = files_by_part(&e);
        let held = {
            let s = e.lock_shared().unwrap();
            let g = s.part_lock(a).lock().unwrap();
            let taken = count(&e.stats.part_locks);
            let e2 = e.clone();
            let t = std::thread::spawn(move || e2.getattr(b).map(|a| a.ino));
            while count(&e.stats.part_locks) == taken {
                std::thread::yield_now();
            }
            std::thread::sleep(Duration::from_millis(20));
            drop(g);
            drop(s);
            t
        };
        assert_eq!(held.join().unwrap().unwrap(), b);
        assert_eq!(count(&e.stats.part_lock_waits), 1);
        assert!(count(&e.stats.part_lock_wait_ns) > 0);
        e.shutdown().unwrap();
    }

    #[test]
    fn parts_share_the_inode_bound_exactly() {
        let stats = Arc::new(Stats::default());
        for max in [1, 3, 16, 17, 100_000] {
            let total: usize = (0..PARTS)
                .map(|i| Part::new(i, max, &stats).icache.inodes_max())
                .sum();
            assert_eq!(total, max);
        }
        // Consecutive inode numbers spread over every part.
        let mut hit = [false; PARTS];
        for n in 1..=64u64 {
            hit[part_of(Ino(n))] = true;
        }
        assert!(hit.iter().all(|h| *h));
    }

    /// A store written before the parts existed may hold many pending
    /// truncate records whose files share one part: the mount takes them
    /// all, and the reclaim thread finishes them, the gauges back to zero.
    #[test]
    fn a_crowded_part_of_restored_truncates_is_finished() {
        let store = Arc::new(MemStore::default());
        Engine::mkfs(&*store, 0, 0).unwrap();
        let crowded: Vec<Ino> = (1_000..)
            .map(Ino)
            .filter(|i| part_of(*i) == 0)
            .take(100)
            .collect();
        for &ino in &crowded {
            store.raw_put(&format::truncate_key(ino), &format::encode_truncate(0, 8));
        }
        let e = Engine::mount(store.clone(), EngineConfig::default()).unwrap();
        e.wait_reclaim();
        assert_eq!(count(&e.stats.truncates_pending), 0);
        assert_eq!(count(&e.stats.truncates_over_share), 0);
        assert_eq!(count(&e.stats.truncates_done), 100);
        e.shutdown().unwrap();
        let prefix = format::truncate_prefix();
        assert!(store.scan(&prefix, &prefix, 10).unwrap().is_empty());
    }
}
