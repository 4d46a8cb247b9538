//! `churnfs-bench-floor MOUNTPOINT [SPIN_US [files]]`: the W7 floor, a FUSE server
//! that answers every request at once from constants. The root holds one
//! file, `exists`. Every answer has a zero TTL and a missing name gets a
//! plain ENOENT (no negative entry), so each stat() is a full round trip to
//! this process: what FUSE itself costs, with no filesystem behind it.
//!
//! With SPIN_US (target `floor-spin`), after each reply the thread polls its
//! /dev/fuse descriptor for up to that many microseconds before it goes
//! back to the blocking read, as churnfs does for a lone caller: the floor
//! of a server that avoids the wake-up on the request side.
//!
//! With FILES (target `floor-files`, for W3): files can also be created in
//! the root, written, truncated, looked up and removed. Their sizes are
//! kept in memory and nothing else: W3's truncates then cost what FUSE
//! costs. Two threads serve the session (as churnfs's default on two
//! cores), each with its own cloned descriptor; created files' entries and
//! attributes carry a 1 s TTL, as churnfs's do.
//!
//! With `FLOOR_DELAY_NS=N` in its environment (experiments only, no bench
//! target sets it), it busy-waits N ns before it answers a missing name: a
//! server as slow as a real one, without touching any memory meanwhile.
//!
//! Runs in the foreground until unmounted (`fusermount3 -u MOUNTPOINT`).

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, LockOwner,
    MountOption, OpenFlags, ReplyAttr, ReplyCreate, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const ZERO: Duration = Duration::ZERO;
/// TTL of created files' entries and attributes (churnfs's default).
const FILE_TTL: Duration = Duration::from_secs(1);
const FILE_INO: INodeNo = INodeNo(2);
const FILE_NAME: &str = "exists";

fn attr(ino: INodeNo, kind: FileType) -> FileAttr {
    let dir = kind == FileType::Directory;
    FileAttr {
        ino,
        size: if dir { 0 } else { 2 },
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind,
        perm: if dir { 0o755 } else { 0o644 },
        nlink: if dir { 2 } else { 1 },
        uid: 0,
        gid: 0,
        rdev: 0,
        flags: 0,
        blksize: 4096,
    }
}

struct Floor {
    /// How long to poll for the next request after a reply (zero: never).
    spin: Duration,
    /// Busy-wait before answering a missing name (`FLOOR_DELAY_NS`).
    delay: Duration,
    /// A duplicate of the session's descriptor, to poll.
    probe: Arc<OnceLock<OwnedFd>>,
    /// Created files (FILES mode only).
    files: Option<Mutex<Files>>,
}

/// Files created in the root: name → node, node → size.
#[derive(Default)]
struct Files {
    names: HashMap<OsString, INodeNo>,
    sizes: HashMap<INodeNo, u64>,
    next: u64,
}

fn file_attr(ino: INodeNo, size: u64) -> FileAttr {
    FileAttr {
        size,
        ..attr(ino, FileType::RegularFile)
    }
}

impl Floor {
    /// A created file's size.
    fn size(&self, ino: INodeNo) -> Option<u64> {
        let f = self
            .files
            .as_ref()?
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        f.sizes.get(&ino).copied()
    }

    /// Polls for a pending request for up to `spin`.
    fn spin(&self) {
        let Some(fd) = self.probe.get().filter(|_| !self.spin.is_zero()) else {
            return;
        };
        let start = Instant::now();
        while start.elapsed() < self.spin {
            let mut p = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, zero timeout.
            if unsafe { libc::poll(&mut p, 1, 0) } != 0 {
                return;
            }
            std::hint::spin_loop();
        }
    }
}

impl Filesystem for Floor {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let made = self.files.as_ref().and_then(|f| {
            let f = f.lock().unwrap_or_else(|p| p.into_inner());
            let ino = *f.names.get(name)?;
            Some((ino, f.sizes[&ino]))
        });
        if let Some((ino, size)) = made.filter(|_| parent == INodeNo::ROOT) {
            reply.entry(&FILE_TTL, &file_attr(ino, size), fuser::Generation(0));
        } else if parent == INodeNo::ROOT && name == FILE_NAME {
            reply.entry(
                &ZERO,
                &attr(FILE_INO, FileType::RegularFile),
                fuser::Generation(0),
            );
        } else {
            if !self.delay.is_zero() {
                let t = Instant::now();
                while t.elapsed() < self.delay {}
            }
            reply.error(Errno::ENOENT);
        }
        self.spin();
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if let Some(size) = self.size(ino) {
            reply.attr(&FILE_TTL, &file_attr(ino, size));
            self.spin();
            return;
        }
        match ino {
            INodeNo::ROOT => reply.attr(&ZERO, &attr(ino, FileType::Directory)),
            FILE_INO => reply.attr(&ZERO, &attr(ino, FileType::RegularFile)),
            _ => reply.error(Errno::ENOENT),
        }
        self.spin();
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let now = self.files.as_ref().and_then(|f| {
            let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
            let s = f.sizes.get_mut(&ino)?;
            if let Some(n) = size {
                *s = n;
            }
            Some(*s)
        });
        match now {
            Some(n) => reply.attr(&FILE_TTL, &file_attr(ino, n)),
            None => reply.error(Errno::EPERM),
        }
        self.spin();
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let Some(files) = self.files.as_ref().filter(|_| parent == INodeNo::ROOT) else {
            reply.error(Errno::ENOSYS);
            return;
        };
        let mut f = files.lock().unwrap_or_else(|p| p.into_inner());
        let ino = match f.names.get(name) {
            Some(i) => *i,
            None => {
                f.next += 1;
                let ino = INodeNo(FILE_INO.0 + f.next);
                f.names.insert(name.to_owned(), ino);
                f.sizes.insert(ino, 0);
                ino
            }
        };
        let size = f.sizes[&ino];
        drop(f);
        reply.created(
            &FILE_TTL,
            &file_attr(ino, size),
            fuser::Generation(0),
            FileHandle(0),
            FopenFlags::empty(),
        );
        self.spin();
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let ok = self.files.as_ref().is_some_and(|f| {
            let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
            f.sizes
                .get_mut(&ino)
                .map(|s| *s = (*s).max(offset + data.len() as u64))
                .is_some()
        });
        if ok {
            reply.written(data.len() as u32);
        } else {
            reply.error(Errno::EBADF);
        }
        self.spin();
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let gone = self
            .files
            .as_ref()
            .filter(|_| parent == INodeNo::ROOT)
            .and_then(|f| {
                let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
                let ino = f.names.remove(name)?;
                f.sizes.remove(&ino)
            });
        match gone {
            Some(_) => reply.ok(),
            None => reply.error(Errno::ENOENT),
        }
        self.spin();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino != INodeNo::ROOT {
            reply.error(Errno::ENOTDIR);
            return;
        }
        let entries = [
            (INodeNo::ROOT, FileType::Directory, "."),
            (INodeNo::ROOT, FileType::Directory, ".."),
            (FILE_INO, FileType::RegularFile, FILE_NAME),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(*ino, (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }
}

fn main() -> std::process::ExitCode {
    let usage = || {
        eprintln!("usage: churnfs-bench-floor MOUNTPOINT [SPIN_US [files]]");
        std::process::ExitCode::from(2)
    };
    let Some(mnt) = std::env::args_os().nth(1) else {
        return usage();
    };
    let spin_us = match std::env::args().nth(2).map(|v| v.parse::<u64>()) {
        None => 0,
        Some(Ok(us)) => us,
        Some(Err(_)) => return usage(),
    };
    let files = match std::env::args().nth(3).as_deref() {
        None => false,
        Some("files") => true,
        Some(_) => return usage(),
    };
    let mut cfg = Config::default();
    if files {
        cfg.n_threads = Some(2);
        cfg.clone_fd = true;
    }
    cfg.mount_options = vec![
        MountOption::FSName("churnfs-bench-floor".into()),
        MountOption::Subtype("floor".into()),
    ];
    let probe = Arc::new(OnceLock::new());
    let delay_ns = match std::env::var("FLOOR_DELAY_NS").map(|v| v.parse::<u64>()) {
        Err(_) => 0,
        Ok(Ok(ns)) => ns,
        Ok(Err(_)) => return usage(),
    };
    let floor = Floor {
        spin: Duration::from_micros(spin_us),
        delay: Duration::from_nanos(delay_ns),
        probe: probe.clone(),
        files: files.then(|| Mutex::new(Files::default())),
    };
    let served = fuser::Session::new(floor, &mnt, &cfg).and_then(|session| {
        let _ = probe.set(session.as_fd().try_clone_to_owned()?);
        session.run()
    });
    if let Err(e) = served {
        eprintln!("churnfs-bench-floor: {e}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}
