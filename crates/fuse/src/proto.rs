//! The FUSE kernel protocol as types: opcodes, the `#[repr(C)]` structs of
//! include/uapi/linux/fuse.h (ABI 7.40) that churnfs reads and writes, and
//! the FUSE-over-io_uring command and entry layout. The /dev/fuse readers
//! (dev.rs), the io_uring queues (ring.rs), the request handlers (wire.rs)
//! and the bench's floor servers use these and no offsets of their own.
//!
//! Structs are read and written with `zerocopy` (no `unsafe` but the
//! io_uring SQE's length, below): `read`
//! takes a struct from the front of a byte slice (any alignment; `None` if
//! the slice is short), `put` writes one into a reply buffer. The kernel
//! speaks the machine's byte order. Every size is checked against the
//! header's at compile time.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Opcodes (`enum fuse_opcode`).
pub mod op {
    pub const LOOKUP: u32 = 1;
    pub const FORGET: u32 = 2;
    pub const GETATTR: u32 = 3;
    pub const SETATTR: u32 = 4;
    pub const READLINK: u32 = 5;
    pub const SYMLINK: u32 = 6;
    pub const MKNOD: u32 = 8;
    pub const MKDIR: u32 = 9;
    pub const UNLINK: u32 = 10;
    pub const RMDIR: u32 = 11;
    pub const RENAME: u32 = 12;
    pub const LINK: u32 = 13;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const WRITE: u32 = 16;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const FSYNC: u32 = 20;
    pub const SETXATTR: u32 = 21;
    pub const GETXATTR: u32 = 22;
    pub const LISTXATTR: u32 = 23;
    pub const REMOVEXATTR: u32 = 24;
    pub const FLUSH: u32 = 25;
    pub const INIT: u32 = 26;
    pub const OPENDIR: u32 = 27;
    pub const READDIR: u32 = 28;
    pub const RELEASEDIR: u32 = 29;
    pub const FSYNCDIR: u32 = 30;
    pub const ACCESS: u32 = 34;
    pub const CREATE: u32 = 35;
    pub const INTERRUPT: u32 = 36;
    pub const DESTROY: u32 = 38;
    pub const NOTIFY_REPLY: u32 = 41;
    pub const BATCH_FORGET: u32 = 42;
    pub const FALLOCATE: u32 = 43;
    pub const READDIRPLUS: u32 = 44;
    pub const RENAME2: u32 = 45;
    pub const LSEEK: u32 = 46;
    /// O_TMPFILE (Linux 6.1+; fuser 0.18 does not decode it, one reason
    /// /dev/fuse is read by dev.rs rather than by fuser's loop).
    pub const TMPFILE: u32 = 51;
}

/// Notification codes (`enum fuse_notify_code`), written as the error
/// field of an out header with unique 0.
pub mod notify {
    pub const INVAL_ENTRY: i32 = 3;
    pub const PRUNE: i32 = 9;
}

/// SETATTR's `valid` bits.
pub mod fattr {
    pub const MODE: u32 = 1 << 0;
    pub const UID: u32 = 1 << 1;
    pub const GID: u32 = 1 << 2;
    pub const SIZE: u32 = 1 << 3;
    pub const ATIME: u32 = 1 << 4;
    pub const MTIME: u32 = 1 << 5;
    pub const FH: u32 = 1 << 6;
    pub const ATIME_NOW: u32 = 1 << 7;
    pub const MTIME_NOW: u32 = 1 << 8;
    pub const CTIME: u32 = 1 << 10;
    pub const KILL_SUIDGID: u32 = 1 << 11;
}

/// INIT's `flags` (and, shifted down by 32, `flags2`) bits used here.
pub mod init {
    pub const ASYNC_READ: u32 = 1 << 0;
    pub const BIG_WRITES: u32 = 1 << 5;
    pub const MAX_PAGES: u32 = 1 << 22;
    pub const INIT_EXT: u32 = 1 << 30;
    /// `FUSE_OVER_IO_URING` is bit 41: bit 9 of `flags2`.
    pub const OVER_IO_URING_2: u32 = 1 << 9;
}

/// WRITE's `write_flags`: drop set-ID bits (FUSE_HANDLE_KILLPRIV_V2).
pub const WRITE_KILL_SUIDGID: u32 = 1 << 2;

/// The traits a wire struct has.
pub trait Wire: FromBytes + IntoBytes + KnownLayout + Immutable + Copy {}
impl<T: FromBytes + IntoBytes + KnownLayout + Immutable + Copy> Wire for T {}

/// The struct at the front of `b`, if `b` holds one.
pub fn read<T: Wire>(b: &[u8]) -> Option<T> {
    T::read_from_prefix(b).ok().map(|(t, _)| t)
}

/// The bytes of `v`, as the kernel reads them.
pub fn bytes<T: Wire>(v: &T) -> &[u8] {
    v.as_bytes()
}

/// Writes `v` at `b[o..]`; its size, or `None` if it does not fit.
pub fn put<T: Wire>(b: &mut [u8], o: usize, v: &T) -> Option<usize> {
    v.write_to_prefix(b.get_mut(o..)?).ok()?;
    Some(size_of::<T>())
}

macro_rules! wire {
    ($($(#[$m:meta])* $name:ident ($size:expr) { $($(#[$fm:meta])* $f:ident: $t:ty),* $(,)? })*) => {$(
        $(#[$m])*
        #[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[repr(C)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }
        const _: () = assert!(size_of::<$name>() == $size);
    )*};
}

wire! {
    /// `struct fuse_in_header`.
    InHeader(40) {
        len: u32, opcode: u32, unique: u64, nodeid: u64,
        uid: u32, gid: u32, pid: u32, total_extlen: u16, padding: u16,
    }
    /// `struct fuse_out_header`.
    OutHeader(16) { len: u32, error: i32, unique: u64 }
    /// `struct fuse_attr`.
    Attr(88) {
        ino: u64, size: u64, blocks: u64, atime: u64, mtime: u64, ctime: u64,
        atimensec: u32, mtimensec: u32, ctimensec: u32, mode: u32, nlink: u32,
        uid: u32, gid: u32, rdev: u32, blksize: u32, flags: u32,
    }
    /// `struct fuse_entry_out`.
    EntryOut(128) {
        nodeid: u64, generation: u64, entry_valid: u64, attr_valid: u64,
        entry_valid_nsec: u32, attr_valid_nsec: u32, attr: Attr,
    }
    /// `struct fuse_attr_out`.
    AttrOut(104) { attr_valid: u64, attr_valid_nsec: u32, dummy: u32, attr: Attr }
    /// `struct fuse_getattr_in`.
    GetattrIn(16) { getattr_flags: u32, dummy: u32, fh: u64 }
    /// `struct fuse_setattr_in`.
    SetattrIn(88) {
        valid: u32, padding: u32, fh: u64, size: u64, lock_owner: u64,
        atime: u64, mtime: u64, ctime: u64,
        atimensec: u32, mtimensec: u32, ctimensec: u32, mode: u32, unused4: u32,
        uid: u32, gid: u32, unused5: u32,
    }
    /// `struct fuse_mknod_in`.
    MknodIn(16) { mode: u32, rdev: u32, umask: u32, padding: u32 }
    /// `struct fuse_mkdir_in`.
    MkdirIn(8) { mode: u32, umask: u32 }
    /// `struct fuse_rename_in`.
    RenameIn(8) { newdir: u64 }
    /// `struct fuse_rename2_in`.
    Rename2In(16) { newdir: u64, flags: u32, padding: u32 }
    /// `struct fuse_link_in`.
    LinkIn(8) { oldnodeid: u64 }
    /// `struct fuse_open_in`.
    OpenIn(8) { flags: u32, open_flags: u32 }
    /// `struct fuse_create_in` (also TMPFILE's).
    CreateIn(16) { flags: u32, mode: u32, umask: u32, open_flags: u32 }
    /// `struct fuse_open_out`.
    OpenOut(16) { fh: u64, open_flags: u32, backing_id: i32 }
    /// `struct fuse_release_in`.
    ReleaseIn(24) { fh: u64, flags: u32, release_flags: u32, lock_owner: u64 }
    /// `struct fuse_flush_in`.
    FlushIn(24) { fh: u64, unused: u32, padding: u32, lock_owner: u64 }
    /// `struct fuse_read_in` (READ, READDIR, READDIRPLUS).
    ReadIn(40) {
        fh: u64, offset: u64, size: u32, read_flags: u32, lock_owner: u64,
        flags: u32, padding: u32,
    }
    /// `struct fuse_write_in`.
    WriteIn(40) {
        fh: u64, offset: u64, size: u32, write_flags: u32, lock_owner: u64,
        flags: u32, padding: u32,
    }
    /// `struct fuse_write_out`.
    WriteOut(8) { size: u32, padding: u32 }
    /// `struct fuse_kstatfs` (FUSE_STATFS's whole answer).
    Kstatfs(80) {
        blocks: u64, bfree: u64, bavail: u64, files: u64, ffree: u64,
        bsize: u32, namelen: u32, frsize: u32, padding: u32, spare: [u32; 6],
    }
    /// `struct fuse_fsync_in` (FSYNC, FSYNCDIR).
    FsyncIn(16) { fh: u64, fsync_flags: u32, padding: u32 }
    /// `struct fuse_setxattr_in` without FUSE_SETXATTR_EXT.
    SetxattrIn(8) { size: u32, flags: u32 }
    /// `struct fuse_getxattr_in` (GETXATTR, LISTXATTR).
    GetxattrIn(8) { size: u32, padding: u32 }
    /// `struct fuse_getxattr_out`.
    GetxattrOut(8) { size: u32, padding: u32 }
    /// `struct fuse_access_in`.
    AccessIn(8) { mask: u32, padding: u32 }
    /// `struct fuse_fallocate_in`.
    FallocateIn(32) { fh: u64, offset: u64, length: u64, mode: u32, padding: u32 }
    /// `struct fuse_lseek_in`.
    LseekIn(24) { fh: u64, offset: u64, whence: u32, padding: u32 }
    /// `struct fuse_lseek_out`.
    LseekOut(8) { offset: u64 }
    /// `struct fuse_dirent` before its name (padded to 8 bytes after it).
    Dirent(24) { ino: u64, off: u64, namelen: u32, typ: u32 }
    /// `struct fuse_forget_in`.
    ForgetIn(8) { nlookup: u64 }
    /// `struct fuse_batch_forget_in`, then `count` of `ForgetOne`.
    BatchForgetIn(8) { count: u32, dummy: u32 }
    /// `struct fuse_forget_one`.
    ForgetOne(16) { nodeid: u64, nlookup: u64 }
    /// `struct fuse_init_in` (ABI 7.36+).
    InitIn(64) {
        major: u32, minor: u32, max_readahead: u32, flags: u32, flags2: u32,
        unused: [u32; 11],
    }
    /// `struct fuse_init_out`.
    InitOut(64) {
        major: u32, minor: u32, max_readahead: u32, flags: u32,
        max_background: u16, congestion_threshold: u16, max_write: u32,
        time_gran: u32, max_pages: u16, map_alignment: u16, flags2: u32,
        max_stack_depth: u32, request_timeout: u16, unused: [u16; 11],
    }
    /// `struct fuse_notify_inval_entry_out`, then the name and a NUL.
    NotifyInvalEntryOut(16) { parent: u64, namelen: u32, flags: u32 }
    /// `struct fuse_notify_prune_out`, then `count` node ids.
    NotifyPruneOut(16) { count: u32, padding: u32, spare: u64 }
    /// `struct fuse_uring_cmd_req`: the 80-byte command area of a
    /// FUSE-over-io_uring SQE starts with it.
    UringCmdReq(24) { flags: u64, commit_id: u64, qid: u16, padding: [u8; 6] }
    /// `struct fuse_uring_ent_in_out`.
    UringEntInOut(32) {
        flags: u64, commit_id: u64, payload_sz: u32, padding: u32, reserved: u64,
    }
}

/// The size of each operation's fixed part, after the in header (on the
/// ring: in the entry's header buffer, the rest in the payload).
pub fn fixed_len(opcode: u32) -> usize {
    use op::*;
    match opcode {
        GETATTR => size_of::<GetattrIn>(),
        SETATTR => size_of::<SetattrIn>(),
        MKNOD => size_of::<MknodIn>(),
        MKDIR => size_of::<MkdirIn>(),
        RENAME => size_of::<RenameIn>(),
        RENAME2 => size_of::<Rename2In>(),
        LINK => size_of::<LinkIn>(),
        OPEN | OPENDIR => size_of::<OpenIn>(),
        CREATE | TMPFILE => size_of::<CreateIn>(),
        READ | READDIR | READDIRPLUS => size_of::<ReadIn>(),
        WRITE => size_of::<WriteIn>(),
        RELEASE | RELEASEDIR => size_of::<ReleaseIn>(),
        FLUSH => size_of::<FlushIn>(),
        FSYNC | FSYNCDIR => size_of::<FsyncIn>(),
        SETXATTR => size_of::<SetxattrIn>(),
        GETXATTR | LISTXATTR => size_of::<GetxattrIn>(),
        ACCESS => size_of::<AccessIn>(),
        FALLOCATE => size_of::<FallocateIn>(),
        LSEEK => size_of::<LseekIn>(),
        FORGET => size_of::<ForgetIn>(),
        BATCH_FORGET => size_of::<BatchForgetIn>(),
        INIT => size_of::<InitIn>(),
        _ => 0,
    }
}

/// An out header for a reply with `n` bytes of arguments after it.
pub fn out_header(unique: u64, error: i32, n: usize) -> OutHeader {
    OutHeader {
        len: (size_of::<OutHeader>() + n) as u32,
        error,
        unique,
    }
}

/// FUSE-over-io_uring (Linux 6.14+): each entry registers two buffers, a
/// header buffer laid out as `struct fuse_uring_req_header` and a payload.
pub mod uring {
    use super::{put, UringCmdReq, UringEntInOut};
    use io_uring::{cqueue, opcode, squeue, types, IoUring};
    use std::time::{Duration, Instant};

    /// `FUSE_IO_URING_CMD_REGISTER`, `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`.
    pub const CMD_REGISTER: u32 = 1;
    pub const CMD_COMMIT_AND_FETCH: u32 = 2;
    /// The header buffer: the in (or out) header in 128 bytes, the
    /// operation's fixed part in the next 128, then `UringEntInOut`.
    pub const IN_OUT: usize = 0;
    pub const OP_IN: usize = 128;
    pub const ENT_IN_OUT: usize = 256;
    pub const HEADER: usize = ENT_IN_OUT + size_of::<UringEntInOut>();
    const _: () = assert!(HEADER == 288);

    /// The SQE of command `cmd` (`CMD_REGISTER` with the address of an
    /// entry's two iovecs, header and payload; `CMD_COMMIT_AND_FETCH` with
    /// the commit id of the request answered) on queue `qid` of the
    /// connection `fd`.
    pub fn command(
        fd: i32,
        cmd: u32,
        qid: u16,
        commit_id: u64,
        iov: Option<u64>,
    ) -> squeue::Entry128 {
        let req = UringCmdReq {
            commit_id,
            qid,
            ..UringCmdReq::default()
        };
        let mut area = [0u8; 80];
        put(&mut area, 0, &req).expect("the command area holds fuse_uring_cmd_req");
        let e = opcode::UringCmd80::new(types::Fd(fd), cmd)
            .cmd(area)
            .addr(iov)
            .build();
        if iov.is_none() {
            return e;
        }
        // Registration wants sqe->len = 2 (header and payload iovecs), which
        // io-uring 0.7 has no setter for on this opcode. Entry128 is
        // repr(C) and 128 bytes; `len` is the u32 at offset 24 of `struct
        // io_uring_sqe`.
        // SAFETY: same size, plain bytes both ways.
        let mut raw: [u8; 128] = unsafe { std::mem::transmute(e) };
        raw[24..28].copy_from_slice(&2u32.to_ne_bytes());
        // SAFETY: as above.
        unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(raw) }
    }

    /// Looks at `ring`'s completion queue (shared memory, no system call)
    /// until something is there or `spin` has passed; true if something
    /// came. The clock is read once per 32 looks: a read costs as much as
    /// a look (a VM's clock), and only the look decides how soon a request
    /// is seen.
    pub fn poll(ring: &mut IoUring<squeue::Entry128, cqueue::Entry>, spin: Duration) -> bool {
        let t = Instant::now();
        loop {
            for _ in 0..32 {
                if !ring.completion().is_empty() {
                    return true;
                }
                std::hint::spin_loop();
            }
            if t.elapsed() >= spin {
                return !ring.completion().is_empty();
            }
        }
    }

    /// The kernel makes one queue per possible CPU.
    pub fn possible_cpus() -> usize {
        // "0-1" or "0-3,5".
        let s = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
        s.trim()
            .split(',')
            .filter_map(|part| {
                let mut it = part.split('-');
                let lo: usize = it.next()?.parse().ok()?;
                let hi: usize = it.next().map_or(Some(lo), |h| h.parse().ok())?;
                Some(hi + 1)
            })
            .max()
            .unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_sit_where_the_kernel_puts_them() {
        // A few offsets of fuse.h, read through the types.
        let mut b = [0u8; 88];
        b[68..72].copy_from_slice(&0o644u32.to_ne_bytes());
        b[16..24].copy_from_slice(&7u64.to_ne_bytes());
        let s: SetattrIn = read(&b).unwrap();
        assert_eq!((s.mode, s.size), (0o644, 7));
        let e = EntryOut {
            attr: Attr {
                mode: 0o100600,
                ..Attr::default()
            },
            ..EntryOut::default()
        };
        let mut out = [0u8; 128];
        assert_eq!(put(&mut out, 0, &e), Some(128));
        assert_eq!(out[40 + 60..40 + 64], 0o100600u32.to_ne_bytes());
        let mut h = [0u8; 40];
        h[4..8].copy_from_slice(&op::LOOKUP.to_ne_bytes());
        h[32..36].copy_from_slice(&9u32.to_ne_bytes());
        let h: InHeader = read(&h).unwrap();
        assert_eq!((h.opcode, h.pid), (op::LOOKUP, 9));
    }

    #[test]
    fn short_input_and_full_output_are_refused_not_panicked_on() {
        assert_eq!(read::<WriteIn>(&[0u8; 39]), None);
        assert!(read::<WriteIn>(&[0u8; 41]).is_some(), "any longer slice");
        // Unaligned.
        let b = [0u8; 41];
        assert!(read::<ReadIn>(&b[1..]).is_some());
        let mut small = [0u8; 100];
        assert_eq!(put(&mut small, 0, &EntryOut::default()), None);
        assert_eq!(put(&mut small, 200, &WriteOut::default()), None);
        assert_eq!(put(&mut small, 92, &WriteOut::default()), Some(8));
    }
}
