//! `churnfs-bench-floor MOUNTPOINT [SPIN_US]`: the W7 floor, a FUSE server
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
//! Runs in the foreground until unmounted (`fusermount3 -u MOUNTPOINT`).

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, INodeNo, MountOption, ReplyAttr,
    ReplyDirectory, ReplyEntry, Request,
};
use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, UNIX_EPOCH};

const ZERO: Duration = Duration::ZERO;
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
    /// A duplicate of the session's descriptor, to poll.
    probe: Arc<OnceLock<OwnedFd>>,
}

impl Floor {
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
        if parent == INodeNo::ROOT && name == FILE_NAME {
            reply.entry(
                &ZERO,
                &attr(FILE_INO, FileType::RegularFile),
                fuser::Generation(0),
            );
        } else {
            reply.error(Errno::ENOENT);
        }
        self.spin();
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match ino {
            INodeNo::ROOT => reply.attr(&ZERO, &attr(ino, FileType::Directory)),
            FILE_INO => reply.attr(&ZERO, &attr(ino, FileType::RegularFile)),
            _ => reply.error(Errno::ENOENT),
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
        eprintln!("usage: churnfs-bench-floor MOUNTPOINT [SPIN_US]");
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
    let mut cfg = Config::default();
    cfg.mount_options = vec![
        MountOption::FSName("churnfs-bench-floor".into()),
        MountOption::Subtype("floor".into()),
    ];
    let probe = Arc::new(OnceLock::new());
    let floor = Floor {
        spin: Duration::from_micros(spin_us),
        probe: probe.clone(),
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
