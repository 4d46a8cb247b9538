//! Requests and replies as the kernel lays them out, answered by the
//! adapter's operations (ops.rs). Both transports use it: the io_uring
//! queues (ring.rs), whose entries hold a request's fixed part and the rest
//! apart, and the /dev/fuse readers (dev.rs), where they follow each other
//! after the in header. ABI 7.40, which fuser negotiates at INIT.

use crate::latency::Latency;
use crate::ops::{self, DirItem, Res, SetattrIn, Who};
use crate::stats::Stats;
use crate::{convert, Core};
use fuser::{Errno, FileAttr, FileType, TimeOrNow};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

// Opcodes (include/uapi/linux/fuse.h).
pub(crate) const LOOKUP: u32 = 1;
pub(crate) const GETATTR: u32 = 3;
pub(crate) const SETATTR: u32 = 4;
pub(crate) const READLINK: u32 = 5;
pub(crate) const SYMLINK: u32 = 6;
pub(crate) const MKNOD: u32 = 8;
pub(crate) const MKDIR: u32 = 9;
pub(crate) const UNLINK: u32 = 10;
pub(crate) const RMDIR: u32 = 11;
pub(crate) const RENAME: u32 = 12;
pub(crate) const LINK: u32 = 13;
pub(crate) const OPEN: u32 = 14;
pub(crate) const READ: u32 = 15;
pub(crate) const WRITE: u32 = 16;
pub(crate) const STATFS: u32 = 17;
pub(crate) const RELEASE: u32 = 18;
pub(crate) const FSYNC: u32 = 20;
pub(crate) const SETXATTR: u32 = 21;
pub(crate) const GETXATTR: u32 = 22;
pub(crate) const LISTXATTR: u32 = 23;
pub(crate) const REMOVEXATTR: u32 = 24;
pub(crate) const FLUSH: u32 = 25;
pub(crate) const OPENDIR: u32 = 27;
pub(crate) const READDIR: u32 = 28;
pub(crate) const RELEASEDIR: u32 = 29;
pub(crate) const FSYNCDIR: u32 = 30;
pub(crate) const ACCESS: u32 = 34;
pub(crate) const CREATE: u32 = 35;
pub(crate) const FALLOCATE: u32 = 43;
pub(crate) const READDIRPLUS: u32 = 44;
pub(crate) const RENAME2: u32 = 45;
pub(crate) const LSEEK: u32 = 46;
/// O_TMPFILE (Linux 6.1+; fuser 0.18 does not decode it, one reason
/// /dev/fuse is read by dev.rs rather than by fuser's loop).
pub(crate) const TMPFILE: u32 = 51;

// SETATTR's `valid` bits.
const FATTR_MODE: u32 = 1 << 0;
const FATTR_UID: u32 = 1 << 1;
const FATTR_GID: u32 = 1 << 2;
const FATTR_SIZE: u32 = 1 << 3;
const FATTR_ATIME: u32 = 1 << 4;
const FATTR_MTIME: u32 = 1 << 5;
const FATTR_FH: u32 = 1 << 6;
const FATTR_ATIME_NOW: u32 = 1 << 7;
const FATTR_MTIME_NOW: u32 = 1 << 8;
const FATTR_CTIME: u32 = 1 << 10;
const FATTR_KILL_SUIDGID: u32 = 1 << 11;
/// WRITE's `write_flags`: drop set-ID bits (FUSE_HANDLE_KILLPRIV_V2).
const FUSE_WRITE_KILL_SUIDGID: u32 = 1 << 2;

/// Largest write and read: INIT's `max_write`, and the size of a reply's
/// payload buffer on either transport.
pub(crate) const MAX_IO: u32 = 1 << 20;

/// Notifications the daemon writes to /dev/fuse by hand (`notify`).
pub(crate) const NOTIFY_INVAL_ENTRY: i32 = 3;
pub(crate) const NOTIFY_PRUNE: i32 = 9;

/// Writes notification `code` with its arguments `body` to the session's
/// descriptor: `fuse_out_header` (length, the code in the error field,
/// unique 0), then `body`. The kernel's answer comes back as is (fuser's
/// notifier turns ENOENT into success, which hides what the callers here
/// need to see).
pub(crate) fn notify(fd: &std::os::fd::OwnedFd, code: i32, body: &[u8]) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let len = 16 + body.len();
    let mut msg = Vec::with_capacity(len);
    msg.extend_from_slice(&(len as u32).to_ne_bytes());
    msg.extend_from_slice(&code.to_ne_bytes());
    msg.extend_from_slice(&0u64.to_ne_bytes());
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

pub(crate) fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
pub(crate) fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}
pub(crate) fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn put64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

/// The size of each operation's fixed part (ABI 7.40, which fuser
/// negotiates). On the ring the kernel sends it in the entry's header
/// buffer and the rest (names, data) in the payload; over /dev/fuse both
/// follow the in header.
pub(crate) fn fixed_len(op: u32) -> usize {
    match op {
        GETATTR => 16,
        SETATTR => 88,
        MKNOD | RENAME2 | CREATE | TMPFILE | FSYNC | FSYNCDIR => 16,
        MKDIR | RENAME | LINK | OPEN | OPENDIR | ACCESS => 8,
        SETXATTR | GETXATTR | LISTXATTR => 8,
        READ | WRITE | READDIR | READDIRPLUS => 40,
        RELEASE | RELEASEDIR | FLUSH | LSEEK => 24,
        FALLOCATE => 32,
        _ => 0,
    }
}

/// `struct fuse_out_header`: length, errno, unique.
pub(crate) const OUT_HEADER: usize = 16;

/// What the adapter reads of `struct fuse_in_header` (40 bytes, at the
/// start of `h` on both transports): opcode, unique, node and caller.
pub(crate) fn in_header(h: &[u8]) -> (u32, u64, u64, Who) {
    let who = Who {
        uid: u32_at(h, 24),
        gid: u32_at(h, 28),
        pid: u32_at(h, 32),
    };
    (u32_at(h, 4), u64_at(h, 8), u64_at(h, 16), who)
}

/// `struct fuse_out_header` at the start of `h`, for `n` bytes of
/// arguments after it.
pub(crate) fn put_out_header(h: &mut [u8], unique: u64, err: i32, n: usize) {
    put32(h, 0, (OUT_HEADER + n) as u32);
    put32(h, 4, err as u32);
    put64(h, 8, unique);
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
}

pub(crate) fn split_name(b: &[u8]) -> Res<(&OsStr, &[u8])> {
    let end = b.iter().position(|c| *c == 0).ok_or(Errno::EINVAL)?;
    Ok((OsStr::from_bytes(&b[..end]), &b[end + 1..]))
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

/// Writes `struct fuse_attr` (88 bytes) at `o`.
fn put_attr(b: &mut [u8], o: usize, a: &FileAttr) {
    let b = &mut b[o..o + 88];
    b.fill(0);
    put64(b, 0, a.ino.0);
    put64(b, 8, a.size);
    put64(b, 16, a.blocks);
    let times = [a.atime, a.mtime, a.ctime].map(convert::timespec);
    for (k, t) in times.iter().enumerate() {
        put64(b, 24 + 8 * k, t.sec as u64);
        put32(b, 48 + 4 * k, t.nsec);
    }
    put32(b, 60, type_bits(a.kind) | u32::from(a.perm));
    put32(b, 64, a.nlink);
    put32(b, 68, a.uid);
    put32(b, 72, a.gid);
    put32(b, 76, a.rdev);
    put32(b, 80, a.blksize);
    put32(b, 84, a.flags);
}

/// Writes `struct fuse_entry_out` (128 bytes) at `o`; the kernel will hold
/// the inode (prune.rs notes it).
fn put_entry(core: &Core, b: &mut [u8], o: usize, e: &ops::Entry) -> usize {
    core.kernel_inodes.note(e.attr.ino.0);
    b[o..o + 40].fill(0);
    put64(b, o, e.attr.ino.0);
    put64(b, o + 8, e.generation.0);
    put64(b, o + 16, e.entry_ttl.as_secs());
    put64(b, o + 24, e.attr_ttl.as_secs());
    put32(b, o + 32, e.entry_ttl.subsec_nanos());
    put32(b, o + 36, e.attr_ttl.subsec_nanos());
    put_attr(b, o + 40, &e.attr);
    128
}

fn put_attr_out(b: &mut [u8], a: &ops::AttrOut) -> usize {
    b[..16].fill(0);
    put64(b, 0, a.ttl.as_secs());
    put32(b, 8, a.ttl.subsec_nanos());
    put_attr(b, 16, &a.attr);
    104
}

fn put_open(b: &mut [u8], o: usize, op: &ops::Opened) -> usize {
    b[o..o + 16].fill(0);
    put64(b, o, op.fh);
    put32(b, o + 8, op.flags.bits());
    16
}

fn put_bytes(b: &mut [u8], v: &[u8]) -> Res<usize> {
    let d = b.get_mut(..v.len()).ok_or(Errno::ERANGE)?;
    d.copy_from_slice(v);
    Ok(v.len())
}

fn put_xattr(b: &mut [u8], x: ops::Xattr) -> Res<usize> {
    match x {
        ops::Xattr::Size(n) => {
            b[..8].fill(0);
            put32(b, 0, n);
            Ok(8)
        }
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
    Stats::inc(if opcode == FSYNC {
        &st.op_fsync
    } else {
        &st.op_fsyncdir
    });
    core.do_fsync(nodeid)
}

/// Answers one request into `out` (the reply's arguments): Ok(their
/// length) or Err(errno).
pub(crate) fn serve(core: &Core, r: &In, out: &mut [u8]) -> Res<usize> {
    let st = &core.stats;
    let f = r.fixed;
    let i = r.nodeid;
    match r.opcode {
        LOOKUP => {
            Stats::inc(&st.op_lookup);
            let (name, _) = r.name()?;
            Ok(put_entry(core, out, 0, &core.do_lookup(r.who, i, name)?))
        }
        GETATTR => {
            Stats::inc(&st.op_getattr);
            Ok(put_attr_out(out, &core.do_getattr(i)?))
        }
        SETATTR => {
            Stats::inc(&st.op_setattr);
            let valid = u32_at(f, 0);
            let has = |bit: u32| valid & bit != 0;
            let time = |now: u32, given: u32, s: usize, ns: usize| {
                if has(now) {
                    Some(TimeOrNow::Now)
                } else if has(given) {
                    Some(time_of(u64_at(f, s), u32_at(f, ns)))
                } else {
                    None
                }
            };
            let s = SetattrIn {
                mode: has(FATTR_MODE).then(|| u32_at(f, 68)),
                uid: has(FATTR_UID).then(|| u32_at(f, 76)),
                gid: has(FATTR_GID).then(|| u32_at(f, 80)),
                size: has(FATTR_SIZE).then(|| u64_at(f, 16)),
                atime: time(FATTR_ATIME_NOW, FATTR_ATIME, 32, 56),
                mtime: time(FATTR_MTIME_NOW, FATTR_MTIME, 40, 60),
                ctime: has(FATTR_CTIME).then(|| match time_of(u64_at(f, 48), u32_at(f, 64)) {
                    TimeOrNow::SpecificTime(t) => t,
                    TimeOrNow::Now => SystemTime::now(),
                }),
                fh: has(FATTR_FH).then(|| u64_at(f, 8)),
                kill_suidgid: has(FATTR_KILL_SUIDGID),
            };
            Ok(put_attr_out(out, &core.do_setattr(r.who, i, s)?))
        }
        READLINK => {
            Stats::inc(&st.op_readlink);
            put_bytes(out, &core.do_readlink(i)?)
        }
        SYMLINK => {
            Stats::inc(&st.op_symlink);
            let (name, rest) = r.name()?;
            let (target, _) = split_name(rest)?;
            let e = core.do_symlink(r.who, i, name, target.as_bytes())?;
            Ok(put_entry(core, out, 0, &e))
        }
        MKNOD => {
            Stats::inc(&st.op_mknod);
            let (name, _) = r.name()?;
            let e = core.do_mknod(r.who, i, name, u32_at(f, 0), u32_at(f, 4))?;
            Ok(put_entry(core, out, 0, &e))
        }
        MKDIR => {
            Stats::inc(&st.op_mkdir);
            let (name, _) = r.name()?;
            Ok(put_entry(
                core,
                out,
                0,
                &core.do_mkdir(r.who, i, name, u32_at(f, 0))?,
            ))
        }
        UNLINK => {
            Stats::inc(&st.op_unlink);
            core.do_unlink(r.who, i, r.name()?.0).map(|()| 0)
        }
        RMDIR => {
            Stats::inc(&st.op_rmdir);
            core.do_rmdir(r.who, i, r.name()?.0).map(|()| 0)
        }
        RENAME | RENAME2 => {
            Stats::inc(&st.op_rename);
            let flags = if r.opcode == RENAME2 { u32_at(f, 8) } else { 0 };
            let (name, rest) = r.name()?;
            let (newname, _) = split_name(rest)?;
            core.do_rename(r.who, i, name, u64_at(f, 0), newname, flags)
                .map(|()| 0)
        }
        LINK => {
            Stats::inc(&st.op_link);
            let (newname, _) = r.name()?;
            let e = core.do_link(r.who, u64_at(f, 0), i, newname)?;
            Ok(put_entry(core, out, 0, &e))
        }
        OPEN => {
            Stats::inc(&st.op_open);
            Ok(put_open(
                out,
                0,
                &core.do_open(r.who, i, u32_at(f, 0) as i32)?,
            ))
        }
        READ => {
            Stats::inc(&st.op_read);
            let size = u32_at(f, 16).min(MAX_IO);
            put_bytes(out, &core.do_read(i, u64_at(f, 8), size)?)
        }
        WRITE => {
            Stats::inc(&st.op_write);
            let size = u32_at(f, 16) as usize;
            let data = r.rest.get(..size).ok_or(Errno::EINVAL)?;
            let kill = u32_at(f, 20) & FUSE_WRITE_KILL_SUIDGID != 0;
            let n = core.do_write(i, u64_at(f, 8), data, kill)?;
            out[..8].fill(0);
            put32(out, 0, n);
            Ok(8)
        }
        STATFS => {
            Stats::inc(&st.op_statfs);
            let s = core.do_statfs()?;
            out[..80].fill(0);
            for (k, v) in [s.blocks, s.bfree, s.bavail, s.files, s.ffree]
                .iter()
                .enumerate()
            {
                put64(out, 8 * k, *v);
            }
            put32(out, 40, s.bsize);
            put32(out, 44, s.namelen);
            put32(out, 48, s.frsize);
            Ok(80)
        }
        RELEASE => {
            Stats::inc(&st.op_release);
            core.do_release(i).map(|()| 0)
        }
        FSYNC | FSYNCDIR => serve_wait(core, r.opcode, i).map(|()| 0),
        SETXATTR => {
            Stats::inc(&st.op_xattr);
            let (name, value) = r.name()?;
            let size = u32_at(f, 0) as usize;
            let value = value.get(..size).ok_or(Errno::EINVAL)?;
            core.do_setxattr(r.who, i, name, value, u32_at(f, 4) as i32, 0)
                .map(|()| 0)
        }
        GETXATTR => {
            Stats::inc(&st.op_xattr);
            let (name, _) = r.name()?;
            put_xattr(out, core.do_getxattr(r.who, i, name, u32_at(f, 0))?)
        }
        LISTXATTR => {
            Stats::inc(&st.op_xattr);
            put_xattr(out, core.do_listxattr(i, u32_at(f, 0))?)
        }
        REMOVEXATTR => {
            Stats::inc(&st.op_xattr);
            core.do_removexattr(r.who, i, r.name()?.0).map(|()| 0)
        }
        FLUSH => {
            Stats::inc(&st.op_flush);
            core.do_flush(i).map(|()| 0)
        }
        OPENDIR => {
            Stats::inc(&st.op_opendir);
            Ok(put_open(
                out,
                0,
                &core.do_opendir(r.who, i, u32_at(f, 0) as i32)?,
            ))
        }
        READDIR | READDIRPLUS => {
            let plus = r.opcode == READDIRPLUS;
            Stats::inc(if plus {
                &st.op_readdirplus
            } else {
                &st.op_readdir
            });
            let size = (u32_at(f, 16) as usize).min(out.len());
            let mut n = 0;
            core.do_readdir(i, u64_at(f, 8), plus, &mut |e: DirItem<'_>| {
                let name = e.name.as_bytes();
                let head = if plus { 128 } else { 0 };
                let len = head + (24 + name.len()).next_multiple_of(8);
                if n + len > size {
                    return true;
                }
                if let Some(en) = &e.entry {
                    put_entry(core, out, n, en);
                }
                let d = n + head;
                out[d..n + len].fill(0);
                put64(out, d, e.ino);
                put64(out, d + 8, e.offset);
                put32(out, d + 16, name.len() as u32);
                put32(out, d + 20, type_bits(e.kind) >> 12);
                out[d + 24..d + 24 + name.len()].copy_from_slice(name);
                n += len;
                false
            })?;
            Ok(n)
        }
        RELEASEDIR => {
            Stats::inc(&st.op_releasedir);
            Ok(0)
        }
        ACCESS => {
            Stats::inc(&st.op_access);
            core.do_access(r.who, i, u32_at(f, 0)).map(|()| 0)
        }
        CREATE => {
            Stats::inc(&st.op_create);
            let (name, _) = r.name()?;
            let c = core.do_create(r.who, i, name, u32_at(f, 4))?;
            let n = put_entry(core, out, 0, &c.entry);
            Ok(n + put_open(out, n, &c.opened))
        }
        TMPFILE => {
            // fuse_create_in, then the dentry's name ("/"), unused.
            Stats::inc(&st.op_tmpfile);
            let c = core.do_tmpfile(r.who, i, u32_at(f, 4))?;
            let n = put_entry(core, out, 0, &c.entry);
            Ok(n + put_open(out, n, &c.opened))
        }
        FALLOCATE => {
            Stats::inc(&st.op_fallocate);
            core.do_fallocate(i, u64_at(f, 8), u64_at(f, 16), u32_at(f, 24) as i32)
                .map(|()| 0)
        }
        LSEEK => {
            Stats::inc(&st.op_lseek);
            let o = core.do_lseek(i, u64_at(f, 8) as i64, u32_at(f, 16) as i32)?;
            out[..8].copy_from_slice(&o.to_le_bytes());
            Ok(8)
        }
        _ => Err(Errno::ENOSYS),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! Requests laid out as the kernel lays them out (the operation's
    //! fixed part apart from the names and data after it, as on the ring),
    //! answered by an engine on a memory store, and the replies read back
    //! at the protocol's offsets.
    use super::*;
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
