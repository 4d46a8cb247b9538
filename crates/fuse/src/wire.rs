//! Requests and replies, answered by the adapter's operations (ops.rs):
//! one handler per opcode, each decoding its request's fixed part and
//! encoding its reply with proto.rs's types. Both transports use it: the
//! io_uring queues (ring.rs), whose entries hold a request's fixed part
//! and the rest apart, and the /dev/fuse readers (dev.rs), where they
//! follow each other after the in header. ABI 7.40, which fuser
//! negotiates at INIT.

use crate::latency::Latency;
use crate::ops::{self, DirItem, Res, SetattrIn, Who};
use crate::proto::{self, fattr, op, Wire};
use crate::stats::Stats;
use crate::{convert, Core};
use fuser::{Errno, FileAttr, FileType, TimeOrNow};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Largest write and read: INIT's `max_write`, and the size of a reply's
/// payload buffer on either transport.
pub(crate) const MAX_IO: u32 = 1 << 20;

/// `struct fuse_in_header` and `struct fuse_out_header`.
pub(crate) const IN_HEADER: usize = size_of::<proto::InHeader>();
pub(crate) const OUT_HEADER: usize = size_of::<proto::OutHeader>();

/// Writes notification `code` with its arguments `body` to the session's
/// descriptor: an out header (length, the code in the error field, unique
/// 0), then `body`. The kernel's answer comes back as is (fuser's notifier
/// turns ENOENT into success, which hides what the callers here need to
/// see).
pub(crate) fn notify(fd: &std::os::fd::OwnedFd, code: i32, body: &[u8]) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use zerocopy::IntoBytes;
    let mut msg = proto::out_header(0, code, body.len()).as_bytes().to_vec();
    msg.extend_from_slice(body);
    // SAFETY: `msg` is a live buffer of `msg.len()` bytes and `fd` an open
    // descriptor for the duration of the call.
    let n = unsafe { libc::write(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // A write to /dev/fuse takes the whole message or fails.
    if n as usize != msg.len() {
        return Err(std::io::Error::other("short write of a notification"));
    }
    Ok(())
}

/// The caller named in an in header.
pub(crate) fn who(h: &proto::InHeader) -> Who {
    Who {
        uid: h.uid,
        gid: h.gid,
        pid: h.pid,
    }
}

/// The out header at the start of `h`, for `n` bytes of arguments after
/// it. Every reply buffer holds one (both transports allocate them).
pub(crate) fn put_out_header(h: &mut [u8], unique: u64, err: i32, n: usize) {
    proto::put(h, 0, &proto::out_header(unique, err, n)).expect("a reply buffer holds its header");
}

/// A request's parts as the kernel laid them out.
pub(crate) struct In<'a> {
    pub(crate) opcode: u32,
    pub(crate) nodeid: u64,
    pub(crate) who: Who,
    pub(crate) fixed: &'a [u8],
    pub(crate) rest: &'a [u8],
}

impl In<'_> {
    /// The first NUL-terminated string of the rest, and what follows it.
    fn name(&self) -> Res<(&OsStr, &[u8])> {
        split_name(self.rest)
    }

    /// The operation's fixed part; EINVAL if the request is short.
    fn arg<T: Wire>(&self) -> Res<T> {
        proto::read(self.fixed).ok_or(Errno::EINVAL)
    }
}

pub(crate) fn split_name(b: &[u8]) -> Res<(&OsStr, &[u8])> {
    let end = b.iter().position(|c| *c == 0).ok_or(Errno::EINVAL)?;
    Ok((OsStr::from_bytes(&b[..end]), &b[end + 1..]))
}

/// Writes `v` at `out[o..]`: its length, or ERANGE if it does not fit.
fn put<T: Wire>(out: &mut [u8], o: usize, v: &T) -> Res<usize> {
    proto::put(out, o, v).ok_or(Errno::ERANGE)
}

fn time_of(sec: u64, nsec: u32) -> TimeOrNow {
    let sec = sec as i64;
    let t = if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs()) + Duration::from_nanos(nsec.into())
    };
    TimeOrNow::SpecificTime(t)
}

fn attr(a: &FileAttr) -> proto::Attr {
    let [at, mt, ct] = [a.atime, a.mtime, a.ctime].map(convert::timespec);
    proto::Attr {
        ino: a.ino.0,
        size: a.size,
        blocks: a.blocks,
        atime: at.sec as u64,
        mtime: mt.sec as u64,
        ctime: ct.sec as u64,
        atimensec: at.nsec,
        mtimensec: mt.nsec,
        ctimensec: ct.nsec,
        mode: type_bits(a.kind) | u32::from(a.perm),
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: a.blksize,
        flags: a.flags,
    }
}

/// `struct fuse_entry_out` at `o`; the kernel will hold the inode
/// (prune.rs notes it).
fn put_entry(core: &Core, b: &mut [u8], o: usize, e: &ops::Entry) -> Res<usize> {
    core.kernel_inodes.note(e.attr.ino.0);
    let out = proto::EntryOut {
        nodeid: e.attr.ino.0,
        generation: e.generation.0,
        entry_valid: e.entry_ttl.as_secs(),
        attr_valid: e.attr_ttl.as_secs(),
        entry_valid_nsec: e.entry_ttl.subsec_nanos(),
        attr_valid_nsec: e.attr_ttl.subsec_nanos(),
        attr: attr(&e.attr),
    };
    put(b, o, &out)
}

fn put_attr_out(b: &mut [u8], a: &ops::AttrOut) -> Res<usize> {
    let out = proto::AttrOut {
        attr_valid: a.ttl.as_secs(),
        attr_valid_nsec: a.ttl.subsec_nanos(),
        dummy: 0,
        attr: attr(&a.attr),
    };
    put(b, 0, &out)
}

fn put_open(b: &mut [u8], o: usize, op: &ops::Opened) -> Res<usize> {
    let out = proto::OpenOut {
        fh: op.fh,
        open_flags: op.flags.bits(),
        backing_id: 0,
    };
    put(b, o, &out)
}

fn put_bytes(b: &mut [u8], v: &[u8]) -> Res<usize> {
    let d = b.get_mut(..v.len()).ok_or(Errno::ERANGE)?;
    d.copy_from_slice(v);
    Ok(v.len())
}

fn put_xattr(b: &mut [u8], x: ops::Xattr) -> Res<usize> {
    match x {
        ops::Xattr::Size(size) => put(b, 0, &proto::GetxattrOut { size, padding: 0 }),
        ops::Xattr::Data(v) => put_bytes(b, &v),
    }
}

/// The `S_IFMT` bits of a file type: in `fuse_attr.mode`, and shifted
/// down by 12 as a `fuse_dirent`'s type.
fn type_bits(k: FileType) -> u32 {
    match k {
        FileType::NamedPipe => libc::S_IFIFO,
        FileType::CharDevice => libc::S_IFCHR,
        FileType::BlockDevice => libc::S_IFBLK,
        FileType::Directory => libc::S_IFDIR,
        FileType::RegularFile => libc::S_IFREG,
        FileType::Symlink => libc::S_IFLNK,
        FileType::Socket => libc::S_IFSOCK,
    }
}

/// The answer to a request whose handler is `served`: the errno to send
/// (0, or minus the error) and the length of the arguments it laid out. A
/// handler that panics is answered EIO and logged, as fuser's reply objects
/// did when dropped: its caller is not left waiting until the connection
/// ends, and the thread that serves it goes on. Both transports answer
/// through here. A panic that held the engine's state or one of its parts
/// has stopped the engine by then (`churnfs_engine`'s `PanicStop`): every
/// later request answers EIO, and nothing half done is committed.
pub(crate) fn outcome(
    lat: &Latency,
    opcode: u32,
    served: impl FnOnce() -> Res<usize>,
) -> (i32, usize) {
    let t0 = Instant::now();
    let r = catch_unwind(AssertUnwindSafe(served));
    lat.record(opcode, t0.elapsed());
    match r {
        Ok(Ok(n)) => (0, n),
        Ok(Err(e)) => (-e.code(), 0),
        Err(_) => {
            tracing::error!("the handler of opcode {opcode} panicked; answered EIO");
            (-libc::EIO, 0)
        }
    }
}

/// Answers a request that waits for a commit (`waits`): on a queue's
/// waiter thread, or in `serve`.
pub(crate) fn serve_wait(core: &Core, opcode: u32, nodeid: u64) -> Res<()> {
    let st = &core.stats;
    Stats::inc(if opcode == op::FSYNC {
        &st.op_fsync
    } else {
        &st.op_fsyncdir
    });
    core.do_fsync(nodeid)
}

/// A request's handler: the reply's arguments laid out in `out`, Ok(their
/// length) or Err(errno).
type Handler = fn(&Core, &In, &mut [u8]) -> Res<usize>;

/// Answers one request into `out` (the reply's arguments): Ok(their
/// length) or Err(errno).
pub(crate) fn serve(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    let handler: Handler = match r.opcode {
        op::LOOKUP => lookup,
        op::GETATTR => getattr,
        op::SETATTR => setattr,
        op::READLINK => readlink,
        op::SYMLINK => symlink,
        op::MKNOD => mknod,
        op::MKDIR => mkdir,
        op::UNLINK => unlink,
        op::RMDIR => rmdir,
        op::RENAME | op::RENAME2 => rename,
        op::LINK => link,
        op::OPEN => open,
        op::READ => read,
        op::WRITE => write,
        op::STATFS => statfs,
        op::RELEASE => release,
        op::FSYNC | op::FSYNCDIR => fsync,
        op::SETXATTR => setxattr,
        op::GETXATTR => getxattr,
        op::LISTXATTR => listxattr,
        op::REMOVEXATTR => removexattr,
        op::FLUSH => flush,
        op::OPENDIR => opendir,
        op::READDIR | op::READDIRPLUS => readdir,
        op::RELEASEDIR => releasedir,
        op::ACCESS => access,
        op::CREATE => create,
        op::TMPFILE => tmpfile,
        op::FALLOCATE => fallocate,
        op::LSEEK => lseek,
        _ => return Err(Errno::ENOSYS),
    };
    handler(core, r, out)
}

fn lookup(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_lookup);
    let (name, _) = r.name()?;
    put_entry(core, out, 0, &core.do_lookup(r.who, r.nodeid, name)?)
}

fn getattr(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_getattr);
    put_attr_out(out, &core.do_getattr(r.nodeid)?)
}

fn setattr(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_setattr);
    let a: proto::SetattrIn = r.arg()?;
    let has = |bit: u32| a.valid & bit != 0;
    let time = |now: u32, given: u32, sec: u64, nsec: u32| {
        if has(now) {
            Some(TimeOrNow::Now)
        } else if has(given) {
            Some(time_of(sec, nsec))
        } else {
            None
        }
    };
    let s = SetattrIn {
        mode: has(fattr::MODE).then_some(a.mode),
        uid: has(fattr::UID).then_some(a.uid),
        gid: has(fattr::GID).then_some(a.gid),
        size: has(fattr::SIZE).then_some(a.size),
        atime: time(fattr::ATIME_NOW, fattr::ATIME, a.atime, a.atimensec),
        mtime: time(fattr::MTIME_NOW, fattr::MTIME, a.mtime, a.mtimensec),
        ctime: has(fattr::CTIME).then(|| match time_of(a.ctime, a.ctimensec) {
            TimeOrNow::SpecificTime(t) => t,
            TimeOrNow::Now => SystemTime::now(),
        }),
        fh: has(fattr::FH).then_some(a.fh),
        kill_suidgid: has(fattr::KILL_SUIDGID),
    };
    put_attr_out(out, &core.do_setattr(r.who, r.nodeid, s)?)
}

fn readlink(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_readlink);
    put_bytes(out, &core.do_readlink(r.nodeid)?)
}

fn symlink(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_symlink);
    let (name, rest) = r.name()?;
    let (target, _) = split_name(rest)?;
    let e = core.do_symlink(r.who, r.nodeid, name, target.as_bytes())?;
    put_entry(core, out, 0, &e)
}

fn mknod(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_mknod);
    let a: proto::MknodIn = r.arg()?;
    let (name, _) = r.name()?;
    let e = core.do_mknod(r.who, r.nodeid, name, a.mode, a.rdev)?;
    put_entry(core, out, 0, &e)
}

fn mkdir(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_mkdir);
    let a: proto::MkdirIn = r.arg()?;
    let (name, _) = r.name()?;
    put_entry(core, out, 0, &core.do_mkdir(r.who, r.nodeid, name, a.mode)?)
}

fn unlink(core: &Core, r: &In, _: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_unlink);
    core.do_unlink(r.who, r.nodeid, r.name()?.0).map(|()| 0)
}

fn rmdir(core: &Core, r: &In, _: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_rmdir);
    core.do_rmdir(r.who, r.nodeid, r.name()?.0).map(|()| 0)
}

/// RENAME and RENAME2 (which adds flags).
fn rename(core: &Core, r: &In, _: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_rename);
    let (newdir, flags) = if r.opcode == op::RENAME2 {
        let a: proto::Rename2In = r.arg()?;
        (a.newdir, a.flags)
    } else {
        (r.arg::<proto::RenameIn>()?.newdir, 0)
    };
    let (name, rest) = r.name()?;
    let (newname, _) = split_name(rest)?;
    core.do_rename(r.who, r.nodeid, name, newdir, newname, flags)
        .map(|()| 0)
}

/// LINK: the request's node is the new parent.
fn link(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_link);
    let a: proto::LinkIn = r.arg()?;
    let (newname, _) = r.name()?;
    let e = core.do_link(r.who, a.oldnodeid, r.nodeid, newname)?;
    put_entry(core, out, 0, &e)
}

fn open(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_open);
    let a: proto::OpenIn = r.arg()?;
    put_open(out, 0, &core.do_open(r.who, r.nodeid, a.flags as i32)?)
}

fn read(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_read);
    let a: proto::ReadIn = r.arg()?;
    put_bytes(out, &core.do_read(r.nodeid, a.offset, a.size.min(MAX_IO))?)
}

fn write(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_write);
    let a: proto::WriteIn = r.arg()?;
    let data = r.rest.get(..a.size as usize).ok_or(Errno::EINVAL)?;
    let kill = a.write_flags & proto::WRITE_KILL_SUIDGID != 0;
    let size = core.do_write(r.nodeid, a.offset, data, kill)?;
    put(out, 0, &proto::WriteOut { size, padding: 0 })
}

fn statfs(core: &Core, _: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_statfs);
    let s = core.do_statfs()?;
    let k = proto::Kstatfs {
        blocks: s.blocks,
        bfree: s.bfree,
        bavail: s.bavail,
        files: s.files,
        ffree: s.ffree,
        bsize: s.bsize,
        namelen: s.namelen,
        frsize: s.frsize,
        ..proto::Kstatfs::default()
    };
    put(out, 0, &k)
}

fn release(core: &Core, r: &In, _: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_release);
    core.do_release(r.nodeid).map(|()| 0)
}

/// FSYNC and FSYNCDIR (on the ring, answered by a queue's waiter thread).
fn fsync(core: &Core, r: &In, _: &mut [u8]) -> Res<usize> {
    serve_wait(core, r.opcode, r.nodeid).map(|()| 0)
}

/// SETXATTR: the name, then the value.
fn setxattr(core: &Core, r: &In, _: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_xattr);
    let a: proto::SetxattrIn = r.arg()?;
    let (name, value) = r.name()?;
    let value = value.get(..a.size as usize).ok_or(Errno::EINVAL)?;
    core.do_setxattr(r.who, r.nodeid, name, value, a.flags as i32, 0)
        .map(|()| 0)
}

fn getxattr(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_xattr);
    let a: proto::GetxattrIn = r.arg()?;
    let (name, _) = r.name()?;
    put_xattr(out, core.do_getxattr(r.who, r.nodeid, name, a.size)?)
}

fn listxattr(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_xattr);
    let a: proto::GetxattrIn = r.arg()?;
    put_xattr(out, core.do_listxattr(r.nodeid, a.size)?)
}

fn removexattr(core: &Core, r: &In, _: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_xattr);
    core.do_removexattr(r.who, r.nodeid, r.name()?.0)
        .map(|()| 0)
}

fn flush(core: &Core, r: &In, _: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_flush);
    core.do_flush(r.nodeid).map(|()| 0)
}

fn opendir(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_opendir);
    let a: proto::OpenIn = r.arg()?;
    put_open(out, 0, &core.do_opendir(r.who, r.nodeid, a.flags as i32)?)
}

/// READDIR and READDIRPLUS (each entry preceded by its `fuse_entry_out`):
/// padded `fuse_dirent`s up to the size asked for.
fn readdir(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    let plus = r.opcode == op::READDIRPLUS;
    let st = &core.stats;
    Stats::inc(if plus {
        &st.op_readdirplus
    } else {
        &st.op_readdir
    });
    let a: proto::ReadIn = r.arg()?;
    let size = (a.size as usize).min(out.len());
    let head = if plus {
        size_of::<proto::EntryOut>()
    } else {
        0
    };
    let mut n = 0;
    let mut failed = None;
    core.do_readdir(r.nodeid, a.offset, plus, &mut |e: DirItem<'_>| {
        let name = e.name.as_bytes();
        let len = head + (size_of::<proto::Dirent>() + name.len()).next_multiple_of(8);
        if n + len > size {
            return true;
        }
        let dirent = proto::Dirent {
            ino: e.ino,
            off: e.offset,
            namelen: name.len() as u32,
            typ: type_bits(e.kind) >> 12,
        };
        let d = n + head;
        // With no entry before it the kernel reads node id 0: "none".
        let z = if e.entry.is_some() { d } else { n };
        out[z..n + len].fill(0);
        let laid = match &e.entry {
            Some(en) => put_entry(core, out, n, en).and(put(out, d, &dirent)),
            None => put(out, d, &dirent),
        };
        if let Err(err) = laid {
            failed = Some(err);
            return true;
        }
        let at = d + size_of::<proto::Dirent>();
        out[at..at + name.len()].copy_from_slice(name);
        n += len;
        false
    })?;
    failed.map_or(Ok(n), Err)
}

fn releasedir(core: &Core, _: &In, _: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_releasedir);
    Ok(0)
}

fn access(core: &Core, r: &In, _: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_access);
    let a: proto::AccessIn = r.arg()?;
    core.do_access(r.who, r.nodeid, a.mask).map(|()| 0)
}

fn create(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_create);
    let a: proto::CreateIn = r.arg()?;
    let (name, _) = r.name()?;
    let c = core.do_create(r.who, r.nodeid, name, a.mode)?;
    let n = put_entry(core, out, 0, &c.entry)?;
    Ok(n + put_open(out, n, &c.opened)?)
}

/// TMPFILE: `fuse_create_in`, then the dentry's name ("/"), unused.
fn tmpfile(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_tmpfile);
    let a: proto::CreateIn = r.arg()?;
    let c = core.do_tmpfile(r.who, r.nodeid, a.mode)?;
    let n = put_entry(core, out, 0, &c.entry)?;
    Ok(n + put_open(out, n, &c.opened)?)
}

fn fallocate(core: &Core, r: &In, _: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_fallocate);
    let a: proto::FallocateIn = r.arg()?;
    core.do_fallocate(r.nodeid, a.offset, a.length, a.mode as i32)
        .map(|()| 0)
}

fn lseek(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    Stats::inc(&core.stats.op_lseek);
    let a: proto::LseekIn = r.arg()?;
    let offset = core.do_lseek(r.nodeid, a.offset as i64, a.whence as i32)?;
    put(
        out,
        0,
        &proto::LseekOut {
            offset: offset as u64,
        },
    )
}

#[cfg(test)]
pub(crate) mod tests {
    //! Requests laid out as the kernel lays them out (the operation's
    //! fixed part apart from the names and data after it, as on the ring),
    //! answered by an engine on a memory store, and the replies read back
    //! at the protocol's offsets.
    use super::*;
    use crate::proto::{fattr::SIZE as FATTR_SIZE, fixed_len, op::*};
    use crate::{Adapter, AdapterConfig};
    use churnfs_engine::{Engine, EngineConfig, MemStore};
    use std::sync::Arc;

    #[test]
    fn a_handler_that_panics_is_answered_eio_and_others_as_they_return() {
        let lat = Latency::default();
        assert_eq!(outcome(&lat, LOOKUP, || Ok(24)), (0, 24));
        assert_eq!(
            outcome(&lat, LOOKUP, || Err(Errno::ENOENT)),
            (-libc::ENOENT, 0)
        );
        let panicked = outcome(&lat, LOOKUP, || -> Res<usize> { panic!("a handler's bug") });
        assert_eq!(panicked, (-libc::EIO, 0));
        // The thread goes on: the next request is answered as usual.
        assert_eq!(outcome(&lat, FSYNC, || Ok(0)), (0, 0));
        // Every answer is timed, the panicked one too.
        let timed: Vec<(&str, u64)> = lat.snapshot().iter().map(|o| (o.name, o.count)).collect();
        assert_eq!(timed, vec![("lookup", 3), ("fsync", 1)]);
    }

    pub(crate) fn core() -> Arc<Core> {
        let store = Arc::new(MemStore::new());
        Engine::mkfs(&*store, 0, 0).expect("mkfs");
        let engine = Engine::mount(store, EngineConfig::default()).expect("mount");
        let cfg = AdapterConfig {
            // The daemon's permission checks need a caller in /proc: the
            // kernel's are what a private mount with them off relies on.
            permissions: crate::Permissions::Kernel,
            xattrs: true,
            ..AdapterConfig::default()
        };
        Adapter::new(engine, cfg).core.clone()
    }

    /// One of the backend's counters, by name.
    fn backend_stat(c: &Core, name: &str) -> u64 {
        let all = c.backend.stats();
        all.iter().find(|(n, _)| *n == name).expect("a counter").1
    }

    const ROOT: u64 = 1;
    const WHO: Who = Who {
        uid: 0,
        gid: 0,
        pid: 1,
    };

    /// Serves one request; Ok(reply bytes) or Err(errno).
    fn call(c: &Core, op: u32, nodeid: u64, fixed: &[u8], rest: &[u8]) -> Result<Vec<u8>, i32> {
        let mut op_in = [0u8; 128];
        op_in[..fixed.len()].copy_from_slice(fixed);
        let r = In {
            opcode: op,
            nodeid,
            who: WHO,
            fixed: &op_in[..fixed_len(op)],
            rest,
        };
        let mut out = vec![0u8; MAX_IO as usize];
        match serve(c, &r, &mut out) {
            Ok(n) => Ok(out[..n].to_vec()),
            Err(e) => Err(e.code()),
        }
    }

    // Replies are read back, and requests laid out, at fuse.h's offsets
    // written out here: a check of proto.rs's types that does not use them.
    pub(crate) fn u32_at(b: &[u8], o: usize) -> u32 {
        u32::from_ne_bytes(b[o..o + 4].try_into().unwrap())
    }
    pub(crate) fn u64_at(b: &[u8], o: usize) -> u64 {
        u64::from_ne_bytes(b[o..o + 8].try_into().unwrap())
    }
    pub(crate) fn put32(b: &mut [u8], o: usize, v: u32) {
        b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
    }
    pub(crate) fn put64(b: &mut [u8], o: usize, v: u64) {
        b[o..o + 8].copy_from_slice(&v.to_ne_bytes());
    }

    fn le32(v: u32) -> Vec<u8> {
        v.to_le_bytes().to_vec()
    }

    fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    #[test]
    fn a_tmpfile_is_answered_like_a_create() {
        use std::sync::atomic::Ordering::Relaxed;
        let c = core();
        // TMPFILE: fuse_create_in { flags, mode, umask, open_flags }, then
        // the name the kernel gives its dentry, "/".
        let fixed = cat(&[
            &le32((libc::O_RDWR | libc::O_TMPFILE) as u32),
            &le32(0o100600),
            &le32(0),
            &le32(0),
        ]);
        let r = call(&c, TMPFILE, ROOT, &fixed, b"/\0").unwrap();
        // fuse_entry_out (128 bytes), then fuse_open_out (16).
        assert_eq!(r.len(), 144);
        let ino = u64_at(&r, 0);
        assert!(ino > ROOT);
        assert_eq!(u32_at(&r, 40 + 60), libc::S_IFREG | 0o600);
        assert_eq!(u32_at(&r, 40 + 64), 0, "a tmpfile has no link");
        // This core's kernel sends no OPEN or RELEASE: no handle.
        assert_eq!(u64_at(&r, 128), 0);
        assert_eq!(backend_stat(&c, "unlinked_inodes"), 1);
        assert_eq!(c.stats.op_tmpfile.load(Relaxed), 1);
        // linkat names it.
        let e = call(&c, LINK, ROOT, &ino.to_le_bytes(), b"named\0").unwrap();
        assert_eq!(u64_at(&e, 0), ino);
        assert_eq!(u32_at(&e, 40 + 64), 1);
        assert_eq!(backend_stat(&c, "unlinked_inodes"), 0);
    }

    #[test]
    fn a_directory_a_file_and_its_data_round_trip() {
        let c = core();
        // MKDIR: fuse_mkdir_in { mode, umask }, then the name.
        let e = call(&c, MKDIR, ROOT, &cat(&[&le32(0o40755), &le32(0)]), b"d\0").unwrap();
        assert_eq!(e.len(), 128);
        let dir = u64_at(&e, 0);
        assert!(dir > ROOT);
        assert_eq!(u64_at(&e, 16), 1, "entry TTL, seconds");
        assert_eq!(u32_at(&e, 40 + 60) & libc::S_IFMT, libc::S_IFDIR);

        // CREATE: fuse_create_in { flags, mode, umask, open_flags }.
        let fixed = cat(&[
            &le32(libc::O_RDWR as u32),
            &le32(0o100640),
            &le32(0),
            &le32(0),
        ]);
        let created = call(&c, CREATE, dir, &fixed, b"f\0");
        // The kernel checks permissions here, so opens answer ENOSYS and it
        // creates with MKNOD: fuse_mknod_in { mode, rdev, umask, padding }.
        assert_eq!(created, Err(libc::ENOSYS));
        let fixed = cat(&[&le32(0o100640), &le32(0), &le32(0), &le32(0)]);
        let e = call(&c, MKNOD, dir, &fixed, b"f\0").unwrap();
        let file = u64_at(&e, 0);
        assert_eq!(u32_at(&e, 40 + 60), libc::S_IFREG | 0o640);

        // WRITE: fuse_write_in { fh, offset, size, write_flags, lock_owner, flags, padding }.
        let mut w = vec![0u8; 40];
        put64(&mut w, 8, 3);
        put32(&mut w, 16, 5);
        let out = call(&c, WRITE, file, &w, b"hello").unwrap();
        assert_eq!(u32_at(&out, 0), 5);

        // READ: fuse_read_in { fh, offset, size, ... }.
        let mut r = vec![0u8; 40];
        put32(&mut r, 16, 100);
        assert_eq!(call(&c, READ, file, &r, b"").unwrap(), b"\0\0\0hello");

        // SETATTR size 2: fuse_setattr_in { valid, padding, fh, size, ... }.
        let mut s = vec![0u8; 88];
        put32(&mut s, 0, FATTR_SIZE);
        put64(&mut s, 16, 2);
        let a = call(&c, SETATTR, file, &s, b"").unwrap();
        assert_eq!(a.len(), 104);
        assert_eq!(u64_at(&a, 16 + 8), 2, "size in fuse_attr_out");
        let a = call(&c, GETATTR, file, &[0u8; 16], b"").unwrap();
        assert_eq!(u64_at(&a, 16), file);
        assert_eq!(u64_at(&a, 16 + 8), 2);

        // LOOKUP: no fixed part, the name after it.
        let e = call(&c, LOOKUP, dir, &[], b"f\0").unwrap();
        assert_eq!(u64_at(&e, 0), file);

        // READDIR from offset 0: ".", ".." and "f", each a padded fuse_dirent.
        let mut rd = vec![0u8; 40];
        put32(&mut rd, 16, 4096);
        let d = call(&c, READDIR, dir, &rd, b"").unwrap();
        let mut names = Vec::new();
        let mut o = 0;
        while o < d.len() {
            let len = u32_at(&d, o + 16) as usize;
            names.push(String::from_utf8(d[o + 24..o + 24 + len].to_vec()).unwrap());
            o += (24 + len).next_multiple_of(8);
        }
        assert!(names.contains(&"f".to_string()), "{names:?}");

        // RENAME2 with RENAME_NOREPLACE onto an existing name: fuse_rename2_in
        // { newdir, flags, padding }, then both names.
        call(&c, MKNOD, dir, &cat(&[&le32(0o100600), &[0u8; 12]]), b"g\0").unwrap();
        let mut rn = vec![0u8; 16];
        put64(&mut rn, 0, dir);
        put32(&mut rn, 8, libc::RENAME_NOREPLACE);
        assert_eq!(call(&c, RENAME2, dir, &rn, b"f\0g\0"), Err(libc::EEXIST));
        // RENAME: fuse_rename_in { newdir }; into the root.
        let mut rn = vec![0u8; 8];
        put64(&mut rn, 0, ROOT);
        call(&c, RENAME, dir, &rn, b"f\0moved\0").unwrap();
        assert_eq!(
            u64_at(&call(&c, LOOKUP, ROOT, &[], b"moved\0").unwrap(), 0),
            file
        );

        // UNLINK, then the name is a negative entry (node id 0) with the
        // negative TTL.
        call(&c, UNLINK, ROOT, &[], b"moved\0").unwrap();
        let neg = call(&c, LOOKUP, ROOT, &[], b"moved\0").unwrap();
        assert_eq!(u64_at(&neg, 0), 0);
        assert_eq!(u64_at(&neg, 16), 1);
    }

    #[test]
    fn xattrs_symlinks_and_links_decode_their_names() {
        let c = core();
        let f = u64_at(
            &call(
                &c,
                MKNOD,
                ROOT,
                &cat(&[&le32(0o100644), &[0u8; 12]]),
                b"f\0",
            )
            .unwrap(),
            0,
        );
        // SETXATTR: fuse_setxattr_in { size, flags }, then name and value.
        call(&c, SETXATTR, f, &cat(&[&le32(3), &le32(0)]), b"user.k\0abc").unwrap();
        // GETXATTR with size 0 asks for the size: fuse_getxattr_out { size, padding }.
        let out = call(&c, GETXATTR, f, &cat(&[&le32(0), &le32(0)]), b"user.k\0").unwrap();
        assert_eq!(out.len(), 8);
        assert_eq!(u32_at(&out, 0), 3);
        let out = call(&c, GETXATTR, f, &cat(&[&le32(16), &le32(0)]), b"user.k\0").unwrap();
        assert_eq!(out, b"abc");
        assert_eq!(
            call(&c, GETXATTR, f, &cat(&[&le32(2), &le32(0)]), b"user.k\0"),
            Err(libc::ERANGE)
        );
        call(&c, REMOVEXATTR, f, &[], b"user.k\0").unwrap();
        // SYMLINK: no fixed part, the link's name then its target.
        let s = call(&c, SYMLINK, ROOT, &[], b"s\0f\0").unwrap();
        assert_eq!(u32_at(&s, 40 + 60) & libc::S_IFMT, libc::S_IFLNK);
        assert_eq!(call(&c, READLINK, u64_at(&s, 0), &[], b"").unwrap(), b"f");
        // LINK: fuse_link_in { oldnodeid }; the request's node is the new parent.
        let l = call(&c, LINK, ROOT, &f.to_le_bytes(), b"h\0").unwrap();
        assert_eq!(u64_at(&l, 0), f);
        assert_eq!(u32_at(&l, 40 + 64), 2, "nlink");
    }

    #[test]
    fn malformed_and_unknown_requests_get_an_errno() {
        let c = core();
        // A name without its NUL.
        assert_eq!(call(&c, LOOKUP, ROOT, &[], b"abc"), Err(libc::EINVAL));
        // A write shorter than it says.
        let mut w = vec![0u8; 40];
        put32(&mut w, 16, 10);
        assert_eq!(call(&c, WRITE, ROOT, &w, b"abc"), Err(libc::EINVAL));
        // GETLK (31) is not served.
        assert_eq!(call(&c, 31, ROOT, &[], b""), Err(libc::ENOSYS));
    }
}
