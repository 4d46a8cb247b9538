//! `churnfs-bench-floor MOUNTPOINT`: the W7 floor, a FUSE server that answers
//! every request at once from constants. The root holds one file, `exists`.
//! Every answer has a zero TTL and a missing name gets a plain ENOENT (no
//! negative entry), so each stat() is a full round trip to this process: what
//! FUSE itself costs, with no filesystem behind it.
//!
//! Runs in the foreground until unmounted (`fusermount3 -u MOUNTPOINT`).

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, INodeNo, MountOption, ReplyAttr,
    ReplyDirectory, ReplyEntry, Request,
};
use std::ffi::OsStr;
use std::time::{Duration, UNIX_EPOCH};

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

struct Floor;

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
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match ino {
            INodeNo::ROOT => reply.attr(&ZERO, &attr(ino, FileType::Directory)),
            FILE_INO => reply.attr(&ZERO, &attr(ino, FileType::RegularFile)),
            _ => reply.error(Errno::ENOENT),
        }
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
    let Some(mnt) = std::env::args_os().nth(1) else {
        eprintln!("usage: churnfs-bench-floor MOUNTPOINT");
        return std::process::ExitCode::from(2);
    };
    let mut cfg = Config::default();
    cfg.mount_options = vec![
        MountOption::FSName("churnfs-bench-floor".into()),
        MountOption::Subtype("floor".into()),
    ];
    if let Err(e) = fuser::mount(Floor, &mnt, &cfg) {
        eprintln!("churnfs-bench-floor: {e}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}
