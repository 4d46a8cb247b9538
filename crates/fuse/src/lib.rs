//! churnfs FUSE adapter: maps kernel requests onto a `Backend` (churnfs-vfs):
//! the local engine or the shared-mode one, without knowing which.
//! It owns the protocol-facing decisions: errno mapping (one function,
//! `errno`), entry and attribute TTLs, the capabilities asked of the kernel,
//! and which replies take a kernel lookup reference.

mod convert;
mod cpus;
pub mod cred;
mod dev;
pub mod errno;
mod inval;
pub mod latency;
pub mod negative;
mod ops;
mod policy;
pub mod proto;
mod prune;
mod ring;
pub mod stats;
mod wire;
pub mod workers;

use churnfs_vfs::counters::Desc;
use churnfs_vfs::perm::{self, MAY_EXEC, MAY_READ, MAY_WRITE};
use churnfs_vfs::{Attr, Backend, Coherence, EngineError, Ino};
use cred::ReqCaller;
use fuser::{
    Config, Filesystem, FopenFlags, Generation, InitFlags, KernelConfig, MountOption, Request,
    SessionACL,
};
use latency::{Latency, OpLatency};
use negative::KernelNegatives;
use ops::Who;
use stats::Stats;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use workers::Workers;

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
    /// Most inodes the kernel may hold for this mount; beyond it the
    /// longest known are pruned (FUSE_NOTIFY_PRUNE, Linux 6.18+; 0: no
    /// limit).
    pub kernel_inodes_max: usize,
    /// Ask for the kernel's writeback cache (writes gathered in the page
    /// cache). Off by default: it costs more requests than it saves on
    /// small files (docs/design.md, "Writeback cache").
    pub writeback_cache: bool,
    /// Worker threads, each reading its own cloned /dev/fuse descriptor;
    /// which of them read, park or spin is workers.rs's policy, not an
    /// option (docs/design.md "Worker threads").
    pub threads: usize,
    /// Let every user reach the mount (`allow_other`).
    pub allow_other: bool,
    /// Who checks permissions. When the kernel does, the daemon also asks
    /// for no OPEN and OPENDIR (see `Adapter::opens`).
    pub permissions: Permissions,
    /// Serve extended attributes (on by default, docs/design.md "Extended
    /// attributes"). Without them every xattr call answers ENOSYS, the
    /// kernel stops asking (EOPNOTSUPP to callers), and the
    /// `getxattr(security.capability)` it sends before a new file's first
    /// write and before every truncate goes away.
    pub xattrs: bool,
    /// Whether requests come over FUSE-over-io_uring (ring.rs,
    /// docs/design.md §12).
    pub uring: Uring,
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
            kernel_inodes_max: 100_000,
            writeback_cache: false,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            allow_other: false,
            permissions: Permissions::Auto,
            xattrs: true,
            uring: Uring::default(),
            fsname: "churnfs".into(),
        }
    }
}

/// Whether requests come over FUSE-over-io_uring (docs/design.md §12).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Uring {
    /// Never: /dev/fuse only.
    Off,
    /// When the kernel offers it (root has set
    /// /sys/module/fuse/parameters/enable_uring to Y); /dev/fuse otherwise,
    /// without a word. The default: it was ahead or level on every
    /// workload of the suite (docs/design.md §12).
    #[default]
    Auto,
    /// Asked for; a kernel that does not offer it is logged, and /dev/fuse
    /// serves.
    On,
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

/// What fuser's session holds (its `Filesystem`, for INIT): a handle on the
/// state both transports serve (the /dev/fuse readers of dev.rs, and the
/// io_uring queues of ring.rs when the kernel offers them).
pub struct Adapter {
    core: Arc<Core>,
    /// A duplicate of the session's descriptor for the ring queues, set
    /// once the session exists.
    ring_fd: Arc<std::sync::OnceLock<std::os::fd::OwnedFd>>,
    /// The ring queues' threads, waited for when the adapter goes (after
    /// the session ended).
    ring: Option<ring::Queues>,
}

impl std::ops::Deref for Adapter {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.core
    }
}

impl Drop for Adapter {
    fn drop(&mut self) {
        if let Some(q) = self.ring.take() {
            q.wait(Duration::from_secs(5));
        }
    }
}

/// The adapter's state and operations (ops.rs).
pub struct Core {
    backend: Arc<dyn Backend>,
    /// Whether other mounts change the namespace (`Backend::coherence`).
    shared: bool,
    cfg: AdapterConfig,
    stats: Arc<Stats>,
    /// How long requests take to answer, per opcode (latency.rs).
    latency: Latency,
    /// The inodes the kernel holds, kept within a bound (prune.rs).
    kernel_inodes: prune::KernelInodes,
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
    opens: AtomicBool,
    /// The kernel leaves dropping set-ID bits to the daemon
    /// (FUSE_HANDLE_KILLPRIV_V2): it then sends no GETATTR before every
    /// chown, truncate and unprivileged write (docs/design.md, "Set-ID
    /// bits").
    killpriv: AtomicBool,
}

const GEN: Generation = Generation(0);

/// The access an open asks for: read, write or both by its access mode, and
/// execute alone for exec(2), which opens with `__FMODE_EXEC` (0x20).
fn open_mask_bits(flags: i32) -> u32 {
    const FMODE_EXEC: i32 = 0x20;
    if flags & FMODE_EXEC != 0 {
        return MAY_EXEC;
    }
    match flags & libc::O_ACCMODE {
        libc::O_RDONLY => MAY_READ,
        libc::O_WRONLY => MAY_WRITE,
        _ => MAY_READ | MAY_WRITE,
    }
}

/// The backend's answers about directories, for `KernelNegatives`.
struct BackendDirs(Arc<dyn Backend>);

impl negative::DirProbe for BackendDirs {
    fn shape(&self, dir: u64) -> Option<churnfs_vfs::DirShape> {
        self.0.dir_shape(Ino(dir)).ok()
    }

    fn child(&self, parent: u64, name: &[u8]) -> Option<u64> {
        self.0.child_attr(Ino(parent), name).ok().map(|a| a.ino.0)
    }

    fn missing(&self, parent: u64, name: &[u8], missed_at: Option<u64>) -> bool {
        matches!(self.0.name_missing(Ino(parent), name, missed_at), Ok(true))
    }
}

impl Adapter {
    pub fn new(backend: Arc<dyn Backend>, cfg: AdapterConfig) -> Adapter {
        let stats = Arc::new(Stats::default());
        let shared = backend.coherence() == Coherence::CloseToOpen;
        let negatives = Arc::new(KernelNegatives::new(
            cfg.kernel_negative_max,
            stats.clone(),
            Some(Box::new(BackendDirs(backend.clone()))),
        ));
        let checks = cfg.daemon_checks();
        let workers = Arc::new(Workers::for_mount(cfg.threads.max(1), stats.clone()));
        let w = workers.clone();
        backend.on_wait(Box::new(move || w.before_wait()));
        let kernel_inodes = prune::KernelInodes::new(cfg.kernel_inodes_max, stats.clone());
        // 1: the kernel deletes an unlinked name's dentry rather than keep
        // it negative (Linux 6.12+; older kernels, without the file, keep
        // it, as 0 says).
        let dentry_negative = std::fs::read_to_string("/proc/sys/fs/dentry-negative")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        Stats::set(&stats.kernel_dentry_negative_sysctl, dentry_negative);
        Adapter {
            core: Arc::new(Core {
                backend,
                shared,
                cfg,
                stats,
                latency: Latency::default(),
                kernel_inodes,
                negatives,
                workers,
                checks,
                // A shared namespace needs every open (close-to-open).
                opens: AtomicBool::new(checks || shared),
                killpriv: AtomicBool::new(false),
            }),
            ring_fd: Arc::default(),
            ring: None,
        }
    }
}

impl Core {
    /// Called by each thread that serves requests, before its first one:
    /// it becomes `SCHED_BATCH` (docs/design.md §5,
    /// "Serving threads as SCHED_BATCH"). A refusal (a seccomp filter, say)
    /// leaves it as it was, counted and logged: the mount serves the same.
    pub(crate) fn serving_thread_policy(&self) {
        let p = libc::sched_param { sched_priority: 0 };
        // SAFETY: sets the calling thread's policy; `p` outlives the call.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &p) } == 0 {
            Stats::inc(&self.stats.sched_batch_threads);
        } else {
            Stats::inc(&self.stats.sched_batch_refused);
            tracing::warn!(
                "serving thread left at its policy: SCHED_BATCH refused ({})",
                std::io::Error::last_os_error()
            );
        }
    }

    /// Runs a permission check when the daemon checks permissions; the
    /// error is the errno to reply with.
    fn permit(
        &self,
        who: Who,
        check: impl FnOnce(&mut ReqCaller<'_>) -> churnfs_vfs::Result<()>,
    ) -> Result<(), fuser::Errno> {
        if !self.checks {
            return Ok(());
        }
        Stats::inc(&self.stats.perm_checks);
        let mut caller = ReqCaller::new(who.uid, who.gid, who.pid, &self.stats);
        check(&mut caller).map_err(|e| {
            if matches!(e, EngineError::Access | EngineError::Perm) {
                Stats::inc(&self.stats.perm_denied);
            }
            errno(&e)
        })
    }

    fn attr(&self, i: u64) -> churnfs_vfs::Result<Attr> {
        self.backend.getattr(Ino(i))
    }

    /// Whether a SETATTR drops the file's set-ID bits, when the kernel left
    /// that to us (`killpriv`):
    /// - a chown (uid or gid given) drops them, whoever calls;
    /// - a SETATTR that changes nothing but perhaps ctime is a chown(-1,
    ///   -1), or the kernel's file_remove_privs before an unprivileged
    ///   write (both drop them on Linux; no other syscall sends one);
    /// - a truncate drops them when the kernel says so (`kill_suidgid`,
    ///   FATTR_KILL_SUIDGID: it sets the flag when the caller lacks
    ///   CAP_FSETID in the initial user namespace, as a local filesystem
    ///   decides).
    ///
    /// The engine keeps a directory's bits.
    fn kill_setid(&self, change: &perm::Change, size: Option<u64>, kill_suidgid: bool) -> bool {
        if !self.killpriv.load(Relaxed) || change.mode.is_some() {
            return false;
        }
        if change.uid.is_some() || change.gid.is_some() {
            return true;
        }
        let nothing = size.is_none() && !change.times_given && !change.times_now;
        nothing || (size.is_some() && kill_suidgid)
    }

    /// May the caller create a name in `dir`?
    fn may_create(&self, c: &mut ReqCaller<'_>, dir: u64) -> churnfs_vfs::Result<()> {
        perm::may_create(c, &self.attr(dir)?)
    }

    /// May the caller remove `name` from `dir`?
    fn may_delete(&self, c: &mut ReqCaller<'_>, dir: u64, name: &OsStr) -> churnfs_vfs::Result<()> {
        let d = self.attr(dir)?;
        perm::may_delete(c, &d, &mut || {
            self.backend.child_attr(Ino(dir), name.as_bytes())
        })
    }

    /// The keeper of the kernel's negative-dentry budget; `start` it with the
    /// session's notifier once the session exists.
    pub fn negatives(&self) -> Arc<KernelNegatives> {
        self.negatives.clone()
    }

    fn open_flags(&self) -> FopenFlags {
        // One mount owns the data, so the page cache stays valid across
        // opens; a shared backend says at each open whether it still is
        // (`do_open`).
        let mut f = FopenFlags::FOPEN_KEEP_CACHE;
        if !self.cfg.writeback_cache && !self.shared {
            // Without the writeback cache no dirty pages wait in the kernel
            // and our flush has nothing to do: close sends no request. (With
            // the writeback cache the kernel ignores this flag: its flush
            // writes the dirty pages.)
            f |= FopenFlags::FOPEN_NOFLUSH;
        }
        f
    }
}

impl Adapter {
    /// Asks for FUSE over io_uring and starts its queues, which register
    /// once the kernel has taken INIT's reply. Without the kernel's offer
    /// (`enable_uring` off, or a kernel before 6.14) requests stay on
    /// /dev/fuse.
    fn start_ring(&mut self, config: &mut KernelConfig) {
        let prepared = match ring::prepare() {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("io_uring queues not made ({e}); serving /dev/fuse");
                return;
            }
        };
        if config
            .add_capabilities(InitFlags::FUSE_OVER_IO_URING)
            .is_err()
        {
            tracing::info!(
                "the kernel does not offer FUSE over io_uring \
                 (/sys/module/fuse/parameters/enable_uring); serving /dev/fuse"
            );
            return;
        }
        let fd = self.ring_fd.clone();
        match ring::start(self.core.clone(), prepared, fd, workers::SPIN) {
            Ok(q) => self.ring = Some(q),
            // The kernel waits for every queue; nothing here can undo the
            // flag. Say so loudly: the mount's requests will hang.
            Err(e) => tracing::error!("io_uring queue threads not started: {e}"),
        }
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
    // The ACL makes fuser pass `allow_other`; its check of each request's
    // user belonged to its loop, which does not run (dev.rs): the kernel
    // refuses other users itself without `allow_other`. Threads are ours
    // too (`AdapterConfig::threads`).
    c.acl = if cfg.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    c
}

/// A mounted churnfs: fuser's session (INIT's answer, the notifications;
/// the mount itself when this process may not mount, through
/// fusermount3) and the adapter whose readers serve it (dev.rs).
pub struct Session {
    fuse: fuser::Session<Adapter>,
    core: Arc<Core>,
    /// Mounted here (`mount_kernel`): unmounted here too.
    own_mount: Option<PathBuf>,
}

/// Unmounts a session's filesystem from another thread (a signal).
pub enum Unmounter {
    Fuser(fuser::SessionUnmounter),
    Own(PathBuf),
}

impl Unmounter {
    pub fn unmount(&mut self) -> std::io::Result<()> {
        match self {
            Unmounter::Fuser(u) => u.unmount(),
            Unmounter::Own(p) => umount(p, 0),
        }
    }
}

fn umount(p: &Path, flags: libc::c_int) -> std::io::Result<()> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
    if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The filesystem type the kernel shows (/proc/mounts, `df -T`, `findmnt`)
/// and that `mount -t` and fstab name: the kernel's `fuse` with our subtype.
pub const FS_TYPE: &str = "fuse.churnfs";

/// Mounts a FUSE filesystem at `mnt` with mount(2), as type `fuse.churnfs`
/// with `cfg.fsname` as its source (fuser's own mount says only `fuse`).
/// None when this process may not mount (not root): fuser mounts through
/// fusermount3 then.
fn mount_kernel(mnt: &Path, cfg: &AdapterConfig) -> std::io::Result<Option<std::os::fd::OwnedFd>> {
    use std::os::fd::FromRawFd;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let cstr = |b: &[u8]| {
        std::ffi::CString::new(b).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a NUL byte in a mount argument",
            )
        })
    };
    // SAFETY: a constant NUL-terminated path; the descriptor is owned below.
    let raw = unsafe { libc::open(c"/dev/fuse".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` was just opened and is owned by nothing else.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut data = format!("fd={raw},rootmode=40000,user_id={uid},group_id={gid}");
    if !cfg.daemon_checks() {
        data.push_str(",default_permissions");
    }
    if cfg.allow_other {
        data.push_str(",allow_other");
    }
    let source = cstr(cfg.fsname.as_bytes())?;
    let target = cstr(mnt.as_os_str().as_encoded_bytes())?;
    let fstype = cstr(FS_TYPE.as_bytes())?;
    let data = cstr(data.as_bytes())?;
    // SAFETY: every pointer is a valid NUL-terminated string for the call.
    let r = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOATIME,
            data.as_ptr().cast(),
        )
    };
    if r == 0 {
        return Ok(Some(fd));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EPERM) {
        return Ok(None);
    }
    Err(e)
}

impl Adapter {
    /// A handle that reads the counters of the adapter and of its backend.
    pub fn stats_source(&self) -> StatsSource {
        StatsSource(self.core.clone())
    }
}

/// Reads every counter and gauge of a mount: the backend's, then the
/// adapter's.
#[derive(Clone)]
pub struct StatsSource(Arc<Core>);

impl StatsSource {
    /// Every counter and gauge, the backend's first, as `(name, value)`.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        let mut v = self.0.backend.stats();
        v.extend(self.0.stats.snapshot());
        v
    }

    /// What each of `snapshot`'s names is, in the same order.
    pub fn catalogue(&self) -> Vec<Desc> {
        let mut v = self.0.backend.stats_catalogue().to_vec();
        v.extend_from_slice(Stats::catalogue());
        v
    }

    /// How long requests took to answer, per opcode served.
    pub fn latency(&self) -> Vec<OpLatency> {
        self.0.latency.snapshot()
    }
}

impl Session {
    /// Something another thread can unmount the filesystem with.
    pub fn unmount_callable(&mut self) -> Unmounter {
        match &self.own_mount {
            Some(p) => Unmounter::Own(p.clone()),
            None => Unmounter::Fuser(self.fuse.unmount_callable()),
        }
    }

    /// Serves requests until the filesystem is unmounted; then ends the
    /// session (the io_uring queues, if any, are waited for).
    pub fn run(self) -> std::io::Result<()> {
        let threads = self.core.cfg.threads.max(1);
        let served = dev::run(&self.core, std::os::fd::AsFd::as_fd(&self.fuse), threads);
        drop(self.fuse);
        if let (Err(_), Some(p)) = (&served, &self.own_mount) {
            // Serving failed with the filesystem still mounted: detached,
            // as fuser's own session does when it ends.
            let _ = umount(p, libc::MNT_DETACH);
        }
        served
    }
}

/// Mounts `adapter` at `mountpoint` (fuser mounts and answers INIT); the
/// returned session serves it when run. The side thread that keeps the
/// kernel's negative dentries within their budget starts here, with the
/// session's notifier.
pub fn session(adapter: Adapter, mountpoint: &Path) -> std::io::Result<Session> {
    let config = fuser_config(&adapter.cfg);
    // The side thread finds this filesystem's device by the mountpoint's
    // path later, whatever the working directory is then.
    let absolute = std::fs::canonicalize(mountpoint)?;
    let core = adapter.core.clone();
    let negatives = adapter.negatives();
    let workers = adapter.workers.clone();
    let ring_fd = adapter.ring_fd.clone();
    let (fuse, own_mount) = match mount_kernel(&absolute, &adapter.cfg)? {
        Some(fd) => {
            let acl = config.acl;
            match fuser::Session::from_fd(adapter, fd, acl, config) {
                Ok(f) => (f, Some(absolute.clone())),
                Err(e) => {
                    let _ = umount(&absolute, libc::MNT_DETACH);
                    return Err(e);
                }
            }
        }
        None => (fuser::Session::new(adapter, mountpoint, &config)?, None),
    };
    let started = (|| {
        let fd = std::os::fd::AsFd::as_fd(&fuse).try_clone_to_owned()?;
        let _ = ring_fd.set(fd.try_clone()?);
        // Its checks of the mount are requests of ours, not a second caller's.
        let own = workers.clone();
        core.kernel_inodes.start(fd.try_clone()?)?;
        negatives.start(fd, absolute, move || own.own_thread())?;
        if core.shared {
            let inval = inval::Invalidator::start(fuse.notifier(), core.stats.clone())?;
            core.backend.set_kernel_cache(Arc::new(inval));
        }
        workers.watch(std::os::fd::AsFd::as_fd(&fuse))
    })();
    if let Err(e) = started {
        if let Some(p) = &own_mount {
            let _ = umount(p, libc::MNT_DETACH);
        }
        return Err(e);
    }
    Ok(Session {
        fuse,
        core,
        own_mount,
    })
}

/// fuser calls `init` while it makes the session (INIT's answer); no other
/// method: requests are read by dev.rs, not by fuser's loop.
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
            self.opens.store(true, Relaxed);
        }
        let killpriv = config
            .add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2)
            .is_ok();
        self.killpriv.store(killpriv, Relaxed);
        let _ = config.set_max_background(64);
        // The largest write, and so the readers' request buffers (dev.rs)
        // and the ring's payload buffers.
        if let Err(e) = config.set_max_write(wire::MAX_IO) {
            tracing::warn!("max_write {}: kernel limit {e}", wire::MAX_IO);
        }
        match self.cfg.uring {
            Uring::Off => {}
            // Without the parameter on, the kernel does not offer the flag:
            // no rings are made only to be dropped.
            Uring::Auto if !ring::kernel_enabled() => {}
            Uring::Auto | Uring::On => self.start_ring(config),
        }
        Ok(())
    }
}
