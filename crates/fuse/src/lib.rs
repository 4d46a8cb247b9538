//! churnfs FUSE adapter: maps kernel requests onto `churnfs_engine::Engine`.
//! It owns the protocol-facing decisions: errno mapping (one function,
//! `errno`), entry and attribute TTLs, the capabilities asked of the kernel,
//! and which replies take a kernel lookup reference.

mod convert;
pub mod cred;
pub mod errno;
pub mod negative;
pub mod workers;

use churnfs_engine::perm::{self, MAY_EXEC, MAY_READ, MAY_WRITE};
use churnfs_engine::stats::Stats;
use churnfs_engine::{
    Attr, Ctx, Engine, EngineError, FileKind, Ino, RenameFlags as ERenameFlags, SetAttr, SetTime,
};
use cred::ReqCaller;
use fuser::{
    AccessFlags, Config, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, SessionACL, TimeOrNow, WriteFlags,
};
use negative::KernelNegatives;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use workers::{Turn, Workers};

pub use errno::errno;

/// How the adapter talks to the kernel.
#[derive(Clone, Debug)]
pub struct AdapterConfig {
    /// How long the kernel may trust a name → inode answer.
    pub entry_ttl: Duration,
    /// How long the kernel may trust attributes.
    pub attr_ttl: Duration,
    /// How long the kernel may trust that a name does not exist (0: ask
    /// every time).
    pub negative_ttl: Duration,
    /// Most negative dentries the kernel may keep for this mount; beyond it
    /// the oldest are invalidated (0: no limit).
    pub kernel_negative_max: usize,
    /// Ask for the kernel's writeback cache (writes gathered in the page
    /// cache). Off by default: it costs more requests than it saves on
    /// small files (docs/design.md, "Writeback cache").
    pub writeback_cache: bool,
    /// Worker threads, each reading its own cloned /dev/fuse descriptor.
    pub threads: usize,
    /// While one caller at a time is served, how long the serving thread
    /// polls for its next request after a reply (workers.rs; zero: never).
    pub spin: Duration,
    /// Let every user reach the mount (`allow_other`).
    pub allow_other: bool,
    /// Who checks permissions. When the kernel does, the daemon also asks
    /// for no OPEN and OPENDIR (see `Adapter::opens`).
    pub permissions: Permissions,
    /// Serve extended attributes (off by default, docs/design.md "Extended
    /// attributes"). Without them every xattr call answers ENOSYS, the
    /// kernel stops asking (EOPNOTSUPP to callers), and the
    /// `getxattr(security.capability)` it sends before a new file's first
    /// write and before every truncate goes away.
    pub xattrs: bool,
    /// Shown as the mount's source in /proc/mounts.
    pub fsname: String,
}

impl Default for AdapterConfig {
    fn default() -> AdapterConfig {
        AdapterConfig {
            entry_ttl: Duration::from_secs(1),
            attr_ttl: Duration::from_secs(1),
            negative_ttl: Duration::from_secs(1),
            kernel_negative_max: 10_000,
            writeback_cache: false,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            spin: Duration::from_micros(50),
            allow_other: false,
            permissions: Permissions::Auto,
            xattrs: false,
            fsname: "churnfs".into(),
        }
    }
}

/// Who checks file permissions (docs/design.md, "Permissions").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Permissions {
    /// The daemon on a private mount, the kernel with `allow_other`.
    #[default]
    Auto,
    /// The kernel (`default_permissions`). It then asks for a directory's
    /// attributes again after every change in it: two GETATTRs per created
    /// and removed file.
    Kernel,
    /// The daemon. Only on a private mount: the kernel walks names it has
    /// cached without asking, so one user's lookup would let another user
    /// through a directory it may not search.
    Daemon,
}

impl AdapterConfig {
    /// Whether the daemon checks permissions itself.
    pub fn daemon_checks(&self) -> bool {
        match self.permissions {
            Permissions::Auto => !self.allow_other,
            Permissions::Kernel => false,
            Permissions::Daemon => true,
        }
    }
}

/// The `fuser::Filesystem` implementation.
pub struct Adapter {
    engine: Arc<Engine>,
    cfg: AdapterConfig,
    stats: Arc<Stats>,
    negatives: Arc<KernelNegatives>,
    /// Which worker threads read /dev/fuse (workers.rs).
    workers: Arc<Workers>,
    checks: bool,
    /// The daemon answers OPEN, OPENDIR and CREATE: only when it checks
    /// permissions, since an open is where it checks the access mode. When
    /// the kernel checks them, OPEN and OPENDIR answer ENOSYS, which the
    /// kernel takes as "succeed without asking" for the rest of the mount
    /// (no OPEN, RELEASE, OPENDIR or RELEASEDIR again), and CREATE answers
    /// ENOSYS so that the kernel creates with MKNOD and then opens, which
    /// makes it latch that at the first create. Files then live by the
    /// kernel's lookup count alone: an open file pins its inode, so FORGET
    /// comes after the last close (docs/design.md, "Opens").
    opens: bool,
    /// The kernel leaves dropping set-ID bits to the daemon
    /// (FUSE_HANDLE_KILLPRIV_V2): it then sends no GETATTR before every
    /// chown, truncate and unprivileged write (docs/design.md, "Set-ID
    /// bits").
    killpriv: bool,
}

const GEN: Generation = Generation(0);

fn ino(i: INodeNo) -> Ino {
    Ino(i.0)
}

fn ctx(req: &Request) -> Ctx {
    Ctx {
        uid: req.uid(),
        gid: req.gid(),
        pid: req.pid(),
    }
}

/// The access an open asks for: read, write or both by its access mode, and
/// execute alone for exec(2), which opens with `__FMODE_EXEC` (0x20).
fn open_mask(flags: OpenFlags) -> u32 {
    const FMODE_EXEC: i32 = 0x20;
    if flags.0 & FMODE_EXEC != 0 {
        return MAY_EXEC;
    }
    match flags.0 & libc::O_ACCMODE {
        libc::O_RDONLY => MAY_READ,
        libc::O_WRONLY => MAY_WRITE,
        _ => MAY_READ | MAY_WRITE,
    }
}

/// Replies with the errno of a refused permission check and returns.
macro_rules! permit {
    ($self:ident, $req:expr, $reply:ident, $check:expr) => {
        if let Err(e) = $self.permit($req, $check) {
            $reply.error(e);
            return;
        }
    };
}

fn set_time(t: TimeOrNow) -> SetTime {
    match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(st) => SetTime::At(convert::timespec(st)),
    }
}

/// The engine's answers about directories, for `KernelNegatives`.
struct EngineDirs(Arc<Engine>);

impl negative::DirProbe for EngineDirs {
    fn shape(&self, dir: u64) -> Option<churnfs_engine::DirShape> {
        self.0.dir_shape(Ino(dir)).ok()
    }

    fn child(&self, parent: u64, name: &[u8]) -> Option<u64> {
        self.0.child_attr(Ino(parent), name).ok().map(|a| a.ino.0)
    }
}

impl Adapter {
    pub fn new(engine: Arc<Engine>, cfg: AdapterConfig) -> Adapter {
        let stats = engine.stats_handle();
        let negatives = Arc::new(KernelNegatives::new(
            cfg.kernel_negative_max,
            stats.clone(),
            Some(Box::new(EngineDirs(engine.clone()))),
        ));
        let checks = cfg.daemon_checks();
        let workers = Arc::new(Workers::new(cfg.threads.max(1), cfg.spin, stats.clone()));
        let w = workers.clone();
        engine.on_wait(Box::new(move || w.before_wait()));
        Adapter {
            engine,
            cfg,
            stats,
            negatives,
            workers,
            checks,
            opens: checks,
            killpriv: false,
        }
    }

    /// Runs a permission check when the daemon checks permissions; the
    /// error is the errno to reply with.
    fn permit(
        &self,
        req: &Request,
        check: impl FnOnce(&mut ReqCaller<'_>) -> churnfs_engine::Result<()>,
    ) -> Result<(), fuser::Errno> {
        if !self.checks {
            return Ok(());
        }
        Stats::inc(&self.stats.perm_checks);
        let mut caller = ReqCaller::new(req.uid(), req.gid(), req.pid(), &self.stats);
        check(&mut caller).map_err(|e| {
            if matches!(e, EngineError::Access | EngineError::Perm) {
                Stats::inc(&self.stats.perm_denied);
            }
            errno(&e)
        })
    }

    /// Counts a request by opcode; the returned guard, dropped when the
    /// handler returns (after its reply), decides whether this worker
    /// thread goes on reading (workers.rs).
    fn turn(&self, req: &Request, op: &std::sync::atomic::AtomicU64) -> Turn<'_> {
        Stats::inc(op);
        self.workers.turn(req.pid())
    }

    fn attr(&self, i: INodeNo) -> churnfs_engine::Result<Attr> {
        self.engine.getattr(ino(i))
    }

    /// Whether a SETATTR drops the file's set-ID bits, when the kernel left
    /// that to us (`killpriv`). fuser does not pass FATTR_KILL_SUIDGID on,
    /// so this reads what the kernel does from the request itself:
    /// - a chown (uid or gid given) drops them, whoever calls;
    /// - a SETATTR that changes nothing but perhaps ctime is a chown(-1,
    ///   -1), or the kernel's file_remove_privs before an unprivileged
    ///   write (both drop them on Linux; no other syscall sends one);
    /// - a truncate drops them when the caller lacks CAP_FSETID (read from
    ///   /proc only when the file has a set-ID bit to lose). `seen`: the
    ///   attributes the permission check already read, if it ran.
    ///
    /// The engine keeps a directory's bits.
    fn kill_setid(
        &self,
        req: &Request,
        i: INodeNo,
        change: &perm::Change,
        size: Option<u64>,
        seen: Option<Attr>,
    ) -> churnfs_engine::Result<bool> {
        if !self.killpriv || change.mode.is_some() {
            return Ok(false);
        }
        if change.uid.is_some() || change.gid.is_some() {
            return Ok(true);
        }
        let nothing = size.is_none() && !change.times_given && !change.times_now;
        if nothing {
            return Ok(true);
        }
        if size.is_none() {
            return Ok(false);
        }
        let a = match seen {
            Some(a) => a,
            None => self.attr(i)?,
        };
        if perm::without_setid(a.perm) == a.perm {
            return Ok(false);
        }
        let mut caller = ReqCaller::new(req.uid(), req.gid(), req.pid(), &self.stats);
        Ok(!perm::Caller::capable(&mut caller, perm::Cap::Fsetid))
    }

    /// May the caller create a name in `dir`?
    fn may_create(&self, c: &mut ReqCaller<'_>, dir: INodeNo) -> churnfs_engine::Result<()> {
        perm::may_create(c, &self.attr(dir)?)
    }

    /// May the caller remove `name` from `dir`?
    fn may_delete(
        &self,
        c: &mut ReqCaller<'_>,
        dir: INodeNo,
        name: &OsStr,
    ) -> churnfs_engine::Result<()> {
        let d = self.attr(dir)?;
        perm::may_delete(c, &d, &mut || {
            self.engine.child_attr(ino(dir), name.as_bytes())
        })
    }

    /// The keeper of the kernel's negative-dentry budget; `start` it with the
    /// session's notifier once the session exists.
    pub fn negatives(&self) -> Arc<KernelNegatives> {
        self.negatives.clone()
    }

    /// Replies to a lookup that found nothing: a negative entry the kernel
    /// may keep for `negative_ttl` (counted against the budget), or ENOENT.
    ///
    /// The name is noted before the reply: a create of it can only come
    /// after the reply, so its `forget_name` always follows the note and no
    /// name the kernel holds as positive stays tracked. That matters: an
    /// invalidation of a positive dentry detaches any mount on it.
    fn negative(&self, reply: ReplyEntry, parent: INodeNo, name: &OsStr) {
        self.negatives.note(parent.0, name.as_bytes());
        if self.cfg.negative_ttl.is_zero() {
            reply.error(fuser::Errno::ENOENT);
            return;
        }
        // Node id 0 is the protocol's negative entry.
        let attr = convert::negative_attr();
        reply.entry_with_ttls(&Duration::ZERO, &self.cfg.negative_ttl, &attr, GEN);
    }

    /// A lookup or mkdir answered with a directory: remember its name, so
    /// that its cached names can be dropped with one notification.
    fn learn_dir(
        &self,
        r: &churnfs_engine::Result<churnfs_engine::Attr>,
        parent: INodeNo,
        name: &OsStr,
    ) {
        if let Ok(a) = r {
            // "." and ".." are not names the kernel caches.
            if a.kind == FileKind::Directory && name != "." && name != ".." {
                self.negatives.learn_dir(a.ino.0, parent.0, name.as_bytes());
            }
        }
    }

    /// A name was created: the kernel's dentry for it is positive now.
    fn created(&self, parent: INodeNo, name: &OsStr, ok: bool) {
        if ok {
            self.negatives.forget_name(parent.0, name.as_bytes());
        }
    }

    fn entry(&self, reply: ReplyEntry, r: churnfs_engine::Result<churnfs_engine::Attr>) {
        match r {
            Ok(a) => reply.entry_with_ttls(
                &self.cfg.attr_ttl,
                &self.cfg.entry_ttl,
                &convert::attr(&a),
                GEN,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn empty(reply: ReplyEmpty, r: churnfs_engine::Result<()>) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn open_flags(&self) -> FopenFlags {
        // One mount owns the data, so the page cache stays valid across opens.
        let mut f = FopenFlags::FOPEN_KEEP_CACHE;
        if !self.cfg.writeback_cache {
            // Without the writeback cache no dirty pages wait in the kernel
            // and our flush has nothing to do: close sends no request. (With
            // the writeback cache the kernel ignores this flag: its flush
            // writes the dirty pages.)
            f |= FopenFlags::FOPEN_NOFLUSH;
        }
        f
    }
}

/// Mount options fuser passes to fusermount3 / the kernel.
pub fn fuser_config(cfg: &AdapterConfig) -> Config {
    let mut mount_options = vec![
        MountOption::FSName(cfg.fsname.clone()),
        MountOption::Subtype("churnfs".into()),
        MountOption::NoAtime,
    ];
    if !cfg.daemon_checks() {
        mount_options.push(MountOption::DefaultPermissions);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        mount_options.push(MountOption::Dev);
        mount_options.push(MountOption::Suid);
    }
    let mut c = Config::default();
    c.mount_options = mount_options;
    c.acl = if cfg.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    c.n_threads = Some(cfg.threads.max(1));
    c.clone_fd = true;
    c
}

/// Mounts `engine` at `mountpoint`; the returned session serves it when run.
/// The side thread that keeps the kernel's negative dentries within their
/// budget starts here, with the session's notifier.
pub fn session(
    engine: Arc<Engine>,
    mountpoint: &Path,
    cfg: AdapterConfig,
) -> std::io::Result<fuser::Session<Adapter>> {
    let config = fuser_config(&cfg);
    // The side thread finds this filesystem's device by the mountpoint's
    // path later, whatever the working directory is then.
    let absolute = std::fs::canonicalize(mountpoint)?;
    let adapter = Adapter::new(engine, cfg);
    let negatives = adapter.negatives();
    let workers = adapter.workers.clone();
    let session = fuser::Session::new(adapter, mountpoint, &config)?;
    let fd = std::os::fd::AsFd::as_fd(&session).try_clone_to_owned()?;
    negatives.start(session.notifier(), fd, absolute)?;
    workers.watch(std::os::fd::AsFd::as_fd(&session))?;
    Ok(session)
}

impl Filesystem for Adapter {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let mut wanted = InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_READDIRPLUS_AUTO
            | InitFlags::FUSE_CACHE_SYMLINKS;
        if self.cfg.writeback_cache {
            wanted |= InitFlags::FUSE_WRITEBACK_CACHE;
        }
        for flag in wanted.iter() {
            if config.add_capabilities(flag).is_err() {
                tracing::info!("kernel lacks capability {flag:?}");
            }
        }
        // Zero-message opens need a kernel that takes ENOSYS from OPEN and
        // OPENDIR as success (it says so with these flags; asking for them
        // changes nothing else).
        let zero_message_opens =
            InitFlags::FUSE_NO_OPEN_SUPPORT | InitFlags::FUSE_NO_OPENDIR_SUPPORT;
        if config.add_capabilities(zero_message_opens).is_err() {
            self.opens = true;
        }
        self.killpriv = config
            .add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2)
            .is_ok();
        let _ = config.set_max_background(64);
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _turn = self.turn(req, &self.stats.op_lookup);
        permit!(self, req, reply, |c| perm::access(
            c,
            &self.attr(parent)?,
            MAY_EXEC
        ));
        match self.engine.lookup(ino(parent), name.as_bytes()) {
            Err(EngineError::NotFound) => self.negative(reply, parent, name),
            r => {
                self.learn_dir(&r, parent, name);
                self.entry(reply, r)
            }
        }
    }

    fn forget(&self, _req: &Request, i: INodeNo, nlookup: u64) {
        Stats::inc(&self.stats.op_forget);
        self.engine.forget(ino(i), nlookup);
    }

    fn getattr(&self, req: &Request, i: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _turn = self.turn(req, &self.stats.op_getattr);
        match self.engine.getattr(ino(i)) {
            Ok(a) => reply.attr(&self.cfg.attr_ttl, &convert::attr(&a)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        i: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let _turn = self.turn(req, &self.stats.op_setattr);
        let given = |t: &Option<TimeOrNow>| matches!(t, Some(TimeOrNow::SpecificTime(_)));
        let times_given = given(&atime) || given(&mtime);
        let change = perm::Change {
            mode,
            uid,
            gid,
            size: size.is_some(),
            times_given,
            times_now: !times_given && (atime.is_some() || mtime.is_some()),
            through_handle: fh.is_some() && size.is_some(),
        };
        let mut mode = mode;
        let mut seen = None;
        permit!(self, req, reply, |c| {
            let a = self.attr(i)?;
            mode = perm::setattr(c, &a, &change)?;
            seen = Some(a);
            Ok(())
        });
        let kill_setid = match self.kill_setid(req, i, &change, size, seen) {
            Ok(k) => k,
            Err(e) => return reply.error(errno(&e)),
        };
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(set_time),
            mtime: mtime.map(set_time),
            ctime: ctime.map(convert::timespec),
            kill_setid,
        };
        match self.engine.setattr(ino(i), set) {
            Ok(a) => reply.attr(&self.cfg.attr_ttl, &convert::attr(&a)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readlink(&self, req: &Request, i: INodeNo, reply: ReplyData) {
        let _turn = self.turn(req, &self.stats.op_readlink);
        match self.engine.readlink(ino(i)) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let _turn = self.turn(req, &self.stats.op_mknod);
        permit!(self, req, reply, |c| self.may_create(c, parent));
        let r = self
            .engine
            .mknod(ctx(req), ino(parent), name.as_bytes(), mode, rdev);
        self.created(parent, name, r.is_ok());
        self.entry(reply, r);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let _turn = self.turn(req, &self.stats.op_mkdir);
        permit!(self, req, reply, |c| self.may_create(c, parent));
        let r = self
            .engine
            .mkdir(ctx(req), ino(parent), name.as_bytes(), mode);
        self.created(parent, name, r.is_ok());
        self.learn_dir(&r, parent, name);
        self.entry(reply, r);
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _turn = self.turn(req, &self.stats.op_unlink);
        permit!(self, req, reply, |c| self.may_delete(c, parent, name));
        let r = self.engine.unlink(ino(parent), name.as_bytes());
        // Noted before the reply, like a missing name (see `negative`).
        if r.is_ok() {
            self.negatives.note(parent.0, name.as_bytes());
        }
        Self::empty(reply, r);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _turn = self.turn(req, &self.stats.op_rmdir);
        permit!(self, req, reply, |c| self.may_delete(c, parent, name));
        let r = self.engine.rmdir(ino(parent), name.as_bytes());
        // Noted before the reply, like a missing name (see `negative`).
        if r.is_ok() {
            self.negatives.note(parent.0, name.as_bytes());
        }
        Self::empty(reply, r);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let _turn = self.turn(req, &self.stats.op_symlink);
        permit!(self, req, reply, |c| self.may_create(c, parent));
        let target = target.as_os_str().as_bytes();
        let r = self
            .engine
            .symlink(ctx(req), ino(parent), link_name.as_bytes(), target);
        self.created(parent, link_name, r.is_ok());
        self.entry(reply, r);
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let _turn = self.turn(req, &self.stats.op_rename);
        if flags.contains(RenameFlags::RENAME_WHITEOUT) {
            reply.error(fuser::Errno::EINVAL);
            return;
        }
        let f = ERenameFlags {
            noreplace: flags.contains(RenameFlags::RENAME_NOREPLACE),
            exchange: flags.contains(RenameFlags::RENAME_EXCHANGE),
        };
        permit!(self, req, reply, |c| {
            let src = self.engine.child_attr(ino(parent), name.as_bytes())?;
            perm::may_delete(c, &self.attr(parent)?, &mut || Ok(src))?;
            let moves = parent != newparent;
            match self.engine.child_attr(ino(newparent), newname.as_bytes()) {
                Ok(dst) => {
                    perm::may_delete(c, &self.attr(newparent)?, &mut || Ok(dst))?;
                    // An exchanged directory changes its "..", too.
                    if f.exchange && moves && dst.kind == FileKind::Directory {
                        perm::access(c, &dst, MAY_WRITE)?;
                    }
                }
                Err(EngineError::NotFound) => self.may_create(c, newparent)?,
                Err(e) => return Err(e),
            }
            if moves && src.kind == FileKind::Directory {
                perm::access(c, &src, MAY_WRITE)?;
            }
            Ok(())
        });
        let r = self.engine.rename(
            ino(parent),
            name.as_bytes(),
            ino(newparent),
            newname.as_bytes(),
            f,
        );
        if r.is_ok() {
            self.created(newparent, newname, true);
            if !f.exchange {
                self.negatives.note(parent.0, name.as_bytes());
            }
        }
        Self::empty(reply, r);
    }

    fn link(
        &self,
        req: &Request,
        i: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let _turn = self.turn(req, &self.stats.op_link);
        permit!(self, req, reply, |c| {
            perm::may_link(c, &self.attr(i)?)?;
            self.may_create(c, newparent)
        });
        let r = self.engine.link(ino(i), ino(newparent), newname.as_bytes());
        self.created(newparent, newname, r.is_ok());
        self.entry(reply, r);
    }

    fn open(&self, req: &Request, i: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _turn = self.turn(req, &self.stats.op_open);
        if !self.opens {
            // The kernel checked the access mode; it opens without us from now on.
            reply.error(fuser::Errno::ENOSYS);
            return;
        }
        permit!(self, req, reply, |c| perm::access(
            c,
            &self.attr(i)?,
            open_mask(flags)
        ));
        match self.engine.open(ino(i)) {
            Ok(fh) => reply.opened(FileHandle(fh.0), self.open_flags()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _turn = self.turn(req, &self.stats.op_read);
        match self.engine.read(ino(i), offset, size) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn write(
        &self,
        req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _turn = self.turn(req, &self.stats.op_write);
        // Set only with FUSE_HANDLE_KILLPRIV_V2, for a writer without
        // CAP_FSETID.
        let kill = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        match self.engine.write_as(ino(i), offset, data, kill) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn flush(
        &self,
        req: &Request,
        _i: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let _turn = self.turn(req, &self.stats.op_flush);
        // Dirty pages reach us as writes before flush (the kernel writes
        // them back before it sends FLUSH), durability is fsync's job, and
        // POSIX locks are the kernel's: nothing to do. ENOSYS tells the
        // kernel to stop sending FLUSH on close for the rest of the mount.
        reply.error(fuser::Errno::ENOSYS);
    }

    fn release(
        &self,
        req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _turn = self.turn(req, &self.stats.op_release);
        if !self.opens {
            // No open handle was handed out (see `opens`).
            reply.ok();
            return;
        }
        Self::empty(reply, self.engine.release(ino(i)));
    }

    fn fsync(
        &self,
        req: &Request,
        _i: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _turn = self.turn(req, &self.stats.op_fsync);
        Self::empty(reply, self.engine.fsync());
    }

    fn opendir(&self, req: &Request, i: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _turn = self.turn(req, &self.stats.op_opendir);
        if !self.opens {
            reply.error(fuser::Errno::ENOSYS);
            return;
        }
        permit!(self, req, reply, |c| perm::access(
            c,
            &self.attr(i)?,
            open_mask(flags)
        ));
        match self.engine.opendir(ino(i)) {
            Ok(fh) => reply.opened(FileHandle(fh.0), FopenFlags::empty()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &self,
        req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let _turn = self.turn(req, &self.stats.op_readdir);
        let r = self.engine.readdir(ino(i), offset, false, &mut |e| {
            !reply.add(
                INodeNo(e.ino.0),
                e.offset,
                convert::kind(e.kind),
                OsStr::from_bytes(e.name),
            )
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdirplus(
        &self,
        req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let _turn = self.turn(req, &self.stats.op_readdirplus);
        let ttl = self.cfg.entry_ttl;
        let r = self.engine.readdir(ino(i), offset, true, &mut |e| {
            let Some(a) = &e.attr else { return false };
            !reply.add(
                INodeNo(e.ino.0),
                e.offset,
                OsStr::from_bytes(e.name),
                &ttl,
                &convert::attr(a),
                GEN,
            )
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn releasedir(
        &self,
        req: &Request,
        _i: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let _turn = self.turn(req, &self.stats.op_releasedir);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        req: &Request,
        _i: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _turn = self.turn(req, &self.stats.op_fsyncdir);
        Self::empty(reply, self.engine.fsync());
    }

    fn statfs(&self, req: &Request, _i: INodeNo, reply: ReplyStatfs) {
        let _turn = self.turn(req, &self.stats.op_statfs);
        match self.engine.statfs() {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        i: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        let _turn = self.turn(req, &self.stats.op_xattr);
        if !self.cfg.xattrs {
            return reply.error(fuser::Errno::ENOSYS);
        }
        if position != 0 {
            reply.error(fuser::Errno::EINVAL);
            return;
        }
        permit!(self, req, reply, |c| perm::xattr(
            c,
            name.as_bytes(),
            true,
            &mut || self.attr(i)
        ));
        Self::empty(
            reply,
            self.engine.setxattr(ino(i), name.as_bytes(), value, flags),
        );
    }

    fn getxattr(&self, req: &Request, i: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _turn = self.turn(req, &self.stats.op_xattr);
        if !self.cfg.xattrs {
            return reply.error(fuser::Errno::ENOSYS);
        }
        permit!(self, req, reply, |c| perm::xattr(
            c,
            name.as_bytes(),
            false,
            &mut || self.attr(i)
        ));
        match self.engine.getxattr(ino(i), name.as_bytes()) {
            Ok(v) => xattr_reply(reply, &v, size),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn listxattr(&self, req: &Request, i: INodeNo, size: u32, reply: ReplyXattr) {
        let _turn = self.turn(req, &self.stats.op_xattr);
        if !self.cfg.xattrs {
            return reply.error(fuser::Errno::ENOSYS);
        }
        match self.engine.listxattr(ino(i)) {
            Ok(v) => xattr_reply(reply, &v, size),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn removexattr(&self, req: &Request, i: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _turn = self.turn(req, &self.stats.op_xattr);
        if !self.cfg.xattrs {
            return reply.error(fuser::Errno::ENOSYS);
        }
        permit!(self, req, reply, |c| perm::xattr(
            c,
            name.as_bytes(),
            true,
            &mut || self.attr(i)
        ));
        Self::empty(reply, self.engine.removexattr(ino(i), name.as_bytes()));
    }

    fn access(&self, req: &Request, i: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let _turn = self.turn(req, &self.stats.op_access);
        // With default_permissions the kernel checks modes itself and asks
        // only whether the inode exists.
        let a = match self.attr(i) {
            Ok(a) => a,
            Err(e) => return reply.error(errno(&e)),
        };
        let mask = mask.bits() as u32;
        permit!(self, req, reply, |c| perm::access(c, &a, mask));
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let _turn = self.turn(req, &self.stats.op_create);
        if !self.opens {
            // The kernel falls back to MKNOD and an open it no longer sends.
            reply.error(fuser::Errno::ENOSYS);
            return;
        }
        permit!(self, req, reply, |c| self.may_create(c, parent));
        match self
            .engine
            .create(ctx(req), ino(parent), name.as_bytes(), mode)
        {
            Ok((a, fh)) => {
                self.created(parent, name, true);
                reply.created(
                    &self.cfg.entry_ttl,
                    &convert::attr(&a),
                    GEN,
                    FileHandle(fh.0),
                    self.open_flags(),
                )
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fallocate(
        &self,
        req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let _turn = self.turn(req, &self.stats.op_fallocate);
        Self::empty(reply, self.engine.fallocate(ino(i), offset, length, mode));
    }

    fn lseek(
        &self,
        req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        let _turn = self.turn(req, &self.stats.op_lseek);
        if offset < 0 {
            reply.error(fuser::Errno::ENXIO);
            return;
        }
        match self.engine.lseek(ino(i), offset as u64, whence) {
            Ok(o) => reply.offset(o as i64),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

fn xattr_reply(reply: ReplyXattr, v: &[u8], size: u32) {
    if size == 0 {
        reply.size(v.len() as u32);
    } else if v.len() > size as usize {
        reply.error(fuser::Errno::ERANGE);
    } else {
        reply.data(v);
    }
}
