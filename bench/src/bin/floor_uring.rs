//! `churnfs-bench-floor-uring MOUNTPOINT [files] [dev] [spin=US] [nopin]`: the FUSE floor
//! (`churnfs-bench-floor`) written against the kernel protocol directly, so
//! that it can be served over FUSE-over-io_uring, which fuser 0.18 cannot
//! serve (docs/design.md §12). It measures what that transport would give
//! churnfs before churnfs is ported to it.
//!
//! It answers like `churnfs-bench-floor`: the root holds `exists`, a missing
//! name gets a plain ENOENT with no negative entry, and every answer about
//! the root and `exists` has a zero TTL. With `files`, files can be created
//! in the root, written, truncated and removed; only their sizes are kept,
//! with 1 s TTLs (W3 outside the suite).
//!
//! Transport: by default one queue per possible CPU, each served by a
//! thread pinned to that CPU with its own 128-byte-SQE ring
//! (`FUSE_IO_URING_CMD_REGISTER`, then one `COMMIT_AND_FETCH` per reply). The
//! kernel puts a request on the queue of the CPU its caller runs on. This
//! needs `/sys/module/fuse/parameters/enable_uring` set to `Y` before the
//! mount; without it the kernel does not offer the flag and the server
//! stops with a message. With `spin=US`, a queue thread polls its
//! completion queue (shared memory, no system call) for up to US
//! microseconds after submitting its replies before it waits in the kernel;
//! `nopin` leaves the queue threads unpinned. Forgets and interrupts still arrive on
//! /dev/fuse; the main thread reads and drops them. With `dev`, the same
//! answers are served by two threads reading /dev/fuse (each on a cloned
//! descriptor), the control for "hand-written server, same transport as
//! fuser"; it does not poll.
//!
//! Root only (it calls mount(2) itself). Runs until unmounted
//! (`umount MOUNTPOINT`).

use churnfs_fuse::proto::uring::{
    self, CMD_COMMIT_AND_FETCH, CMD_REGISTER, ENT_IN_OUT, HEADER as RING_HEADER, OP_IN,
};
use churnfs_fuse::proto::{self, fattr, fixed_len, init as flag, op::*, Wire};
use io_uring::{cqueue, squeue, IoUring};
use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Mutex};

const IN_HEADER: usize = size_of::<proto::InHeader>();
const MAX_WRITE: u32 = 128 * 1024;
const MAX_PAGES: u16 = 32;
/// The kernel wants a payload buffer of at least max(8 KiB, max_write,
/// max_pages pages).
const PAYLOAD: usize = 128 * 1024;
/// Ring entries per queue.
const DEPTH: usize = 4;

const ROOT: u64 = 1;
const FILE_INO: u64 = 2;
const FILE_NAME: &[u8] = b"exists";
const FILE_TTL_S: u64 = 1;

/// Writes `v` at `b[o..]`, its length (every buffer here holds a reply).
fn put<T: Wire>(b: &mut [u8], o: usize, v: &T) -> usize {
    proto::put(b, o, v).expect("a reply buffer holds the reply")
}

/// The fixed part of a request, zeroes if it was cut short.
fn arg<T: Wire + Default>(fixed: &[u8]) -> T {
    proto::read(fixed).unwrap_or_default()
}

/// Files created in the root (FILES mode): name → node, node → size.
#[derive(Default)]
struct Files {
    names: HashMap<Vec<u8>, u64>,
    sizes: HashMap<u64, u64>,
    next: u64,
}

struct Floor {
    files: Option<Mutex<Files>>,
    /// Ring transport: how long a queue thread polls its completion queue
    /// after submitting its replies, before it waits in the kernel.
    spin: std::time::Duration,
    /// Ring transport: pin each queue's thread to its CPU.
    pin: bool,
}

/// One request: its header fields, the operation's fixed part and the rest
/// (names, written data).
struct Req<'a> {
    opcode: u32,
    nodeid: u64,
    fixed: &'a [u8],
    rest: &'a [u8],
}

fn attr(ino: u64, size: u64) -> proto::Attr {
    let dir = ino == ROOT;
    proto::Attr {
        ino,
        size,
        mode: if dir { 0o040755 } else { 0o100644 },
        nlink: if dir { 2 } else { 1 },
        blksize: 4096,
        ..proto::Attr::default()
    }
}

fn put_entry(b: &mut [u8], ino: u64, size: u64, ttl_s: u64) -> usize {
    let e = proto::EntryOut {
        nodeid: ino,
        entry_valid: ttl_s,
        attr_valid: ttl_s,
        attr: attr(ino, size),
        ..proto::EntryOut::default()
    };
    put(b, 0, &e)
}

fn put_attr_out(b: &mut [u8], ino: u64, size: u64, ttl_s: u64) -> usize {
    let a = proto::AttrOut {
        attr_valid: ttl_s,
        attr: attr(ino, size),
        ..proto::AttrOut::default()
    };
    put(b, 0, &a)
}

/// `struct fuse_open_out`, handle 0.
fn put_open(b: &mut [u8]) -> usize {
    put(b, 0, &proto::OpenOut::default())
}

fn name_of(rest: &[u8]) -> &[u8] {
    rest.split(|c| *c == 0).next().unwrap_or(rest)
}

impl Floor {
    fn files(&self) -> Option<std::sync::MutexGuard<'_, Files>> {
        Some(
            self.files
                .as_ref()?
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }

    /// Answers `r` into `out`: Ok(bytes of the reply's arguments) or
    /// Err(errno). Nothing is written for FORGET-like requests (never
    /// passed here).
    fn serve(&self, r: &Req, out: &mut [u8]) -> Result<usize, i32> {
        match r.opcode {
            LOOKUP => {
                let name = name_of(r.rest);
                if r.nodeid != ROOT {
                    return Err(libc::ENOENT);
                }
                if let Some(f) = self.files() {
                    if let Some(&ino) = f.names.get(name) {
                        return Ok(put_entry(out, ino, f.sizes[&ino], FILE_TTL_S));
                    }
                }
                if name == FILE_NAME {
                    return Ok(put_entry(out, FILE_INO, 2, 0));
                }
                Err(libc::ENOENT)
            }
            GETATTR => {
                if let Some(f) = self.files() {
                    if let Some(&s) = f.sizes.get(&r.nodeid) {
                        return Ok(put_attr_out(out, r.nodeid, s, FILE_TTL_S));
                    }
                }
                match r.nodeid {
                    ROOT => Ok(put_attr_out(out, ROOT, 0, 0)),
                    FILE_INO => Ok(put_attr_out(out, FILE_INO, 2, 0)),
                    _ => Err(libc::ENOENT),
                }
            }
            SETATTR => {
                let a: proto::SetattrIn = arg(r.fixed);
                let mut f = self.files().ok_or(libc::EPERM)?;
                let s = f.sizes.get_mut(&r.nodeid).ok_or(libc::EPERM)?;
                if a.valid & fattr::SIZE != 0 {
                    *s = a.size;
                }
                let now = *s;
                Ok(put_attr_out(out, r.nodeid, now, FILE_TTL_S))
            }
            CREATE => {
                if r.nodeid != ROOT {
                    return Err(libc::ENOSYS);
                }
                let mut f = self.files().ok_or(libc::ENOSYS)?;
                let name = name_of(r.rest);
                let ino = match f.names.get(name) {
                    Some(&i) => i,
                    None => {
                        f.next += 1;
                        let ino = FILE_INO + f.next;
                        f.names.insert(name.to_vec(), ino);
                        f.sizes.insert(ino, 0);
                        ino
                    }
                };
                let size = f.sizes[&ino];
                drop(f);
                let n = put_entry(out, ino, size, FILE_TTL_S);
                Ok(n + put_open(&mut out[n..]))
            }
            WRITE => {
                let a: proto::WriteIn = arg(r.fixed);
                let mut f = self.files().ok_or(libc::EBADF)?;
                let s = f.sizes.get_mut(&r.nodeid).ok_or(libc::EBADF)?;
                *s = (*s).max(a.offset + u64::from(a.size));
                Ok(put(
                    out,
                    0,
                    &proto::WriteOut {
                        size: a.size,
                        padding: 0,
                    },
                ))
            }
            UNLINK => {
                if r.nodeid != ROOT {
                    return Err(libc::ENOENT);
                }
                let mut f = self.files().ok_or(libc::ENOENT)?;
                let ino = f.names.remove(name_of(r.rest)).ok_or(libc::ENOENT)?;
                f.sizes.remove(&ino);
                Ok(0)
            }
            OPEN | OPENDIR => Ok(put_open(out)),
            READ => Ok(0),
            RELEASE | RELEASEDIR | FLUSH | FSYNC => Ok(0),
            STATFS => {
                let k = proto::Kstatfs {
                    bsize: 4096,
                    namelen: 255,
                    frsize: 4096,
                    ..proto::Kstatfs::default()
                };
                Ok(put(out, 0, &k))
            }
            READDIR => {
                if r.nodeid != ROOT {
                    return Err(libc::ENOTDIR);
                }
                let a: proto::ReadIn = arg(r.fixed);
                let (offset, size) = (a.offset as usize, (a.size as usize).min(out.len()));
                let entries: [(u64, u32, &[u8]); 3] =
                    [(ROOT, 4, b"."), (ROOT, 4, b".."), (FILE_INO, 8, FILE_NAME)];
                let mut n = 0;
                for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset) {
                    let head = size_of::<proto::Dirent>();
                    let len = (head + name.len()).next_multiple_of(8);
                    if n + len > size {
                        break;
                    }
                    out[n..n + len].fill(0);
                    let d = proto::Dirent {
                        ino: *ino,
                        off: (i + 1) as u64,
                        namelen: name.len() as u32,
                        typ: *kind,
                    };
                    put(out, n, &d);
                    out[n + head..n + head + name.len()].copy_from_slice(name);
                    n += len;
                }
                Ok(n)
            }
            _ => Err(libc::ENOSYS),
        }
    }
}

fn die(msg: String) -> ! {
    eprintln!("churnfs-bench-floor-uring: {msg}");
    std::process::exit(1)
}

fn last_err() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Opens /dev/fuse and mounts it on `mnt`.
fn mount(mnt: &std::ffi::OsStr) -> OwnedFd {
    let dev = c"/dev/fuse";
    // SAFETY: a valid C string; the result is checked.
    let fd = unsafe { libc::open(dev.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        die(format!("/dev/fuse: {}", last_err()));
    }
    // SAFETY: fd was just opened and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let target = CString::new(mnt.as_bytes()).unwrap_or_else(|_| die("bad mountpoint".into()));
    let opts = CString::new(format!(
        "fd={},rootmode=40000,user_id=0,group_id=0",
        fd.as_raw_fd()
    ))
    .expect("no NUL");
    // SAFETY: valid C strings; the result is checked.
    let rc = unsafe {
        libc::mount(
            c"churnfs-bench-floor".as_ptr(),
            target.as_ptr(),
            c"fuse.floor-uring".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            opts.as_ptr().cast(),
        )
    };
    if rc != 0 {
        die(format!("{}: mount: {}", mnt.to_string_lossy(), last_err()));
    }
    let _ = MNT.set(target);
    fd
}

fn read_req(fd: RawFd, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = last_err();
        if e.raw_os_error() != Some(libc::EINTR) && e.raw_os_error() != Some(libc::ENOENT) {
            return Err(e);
        }
    }
}

fn write_reply(fd: RawFd, unique: u64, res: Result<&[u8], i32>) {
    let (err, body): (i32, &[u8]) = match res {
        Ok(b) => (0, b),
        Err(e) => (-e, &[]),
    };
    let header = proto::out_header(unique, err, body.len());
    let h = proto::bytes(&header);
    let iov = [
        libc::iovec {
            iov_base: h.as_ptr() as *mut _,
            iov_len: h.len(),
        },
        libc::iovec {
            iov_base: body.as_ptr() as *mut _,
            iov_len: body.len(),
        },
    ];
    // SAFETY: two valid iovecs. A failed reply (the caller was interrupted)
    // needs nothing more from a floor.
    unsafe { libc::writev(fd, iov.as_ptr(), 2) };
}

static MNT: std::sync::OnceLock<CString> = std::sync::OnceLock::new();

/// Detaches our own mount after a failed start.
fn unmount_self() {
    if let Some(m) = MNT.get() {
        // SAFETY: a valid C string.
        unsafe { libc::umount2(m.as_ptr(), libc::MNT_DETACH) };
    }
}

/// Reads INIT and answers it; returns whether the ring was accepted.
fn init(fd: RawFd, uring: bool) -> bool {
    let mut buf = vec![0u8; PAYLOAD + 4096];
    let n = read_req(fd, &mut buf).unwrap_or_else(|e| die(format!("reading INIT: {e}")));
    let h: Option<proto::InHeader> = proto::read(&buf[..n]);
    let Some(h) = h.filter(|h| h.opcode == INIT && n >= IN_HEADER + 16) else {
        die("the first request was not INIT".into());
    };
    // An older kernel's fuse_init_in is shorter: what it did not send is 0.
    let mut a = [0u8; size_of::<proto::InitIn>()];
    let got = (n - IN_HEADER).min(a.len());
    a[..got].copy_from_slice(&buf[IN_HEADER..IN_HEADER + got]);
    let a: proto::InitIn = arg(&a);
    let flags2 = if a.flags & flag::INIT_EXT != 0 {
        a.flags2
    } else {
        0
    };
    if a.major != 7 || a.minor < 31 {
        die(format!(
            "kernel FUSE ABI {}.{}: 7.31 or newer needed",
            a.major, a.minor
        ));
    }
    let offered_ring = flags2 & flag::OVER_IO_URING_2 != 0;
    if uring && !offered_ring {
        let refuse = proto::InitOut {
            major: 7,
            minor: 40,
            ..proto::InitOut::default()
        };
        write_reply(fd, h.unique, Ok(proto::bytes(&refuse)));
        unmount_self();
        die("the kernel does not offer FUSE_OVER_IO_URING: set \
             /sys/module/fuse/parameters/enable_uring to Y before mounting (kernel 6.14+)"
            .into());
    }
    let want = flag::ASYNC_READ | flag::BIG_WRITES | flag::MAX_PAGES | flag::INIT_EXT;
    let out = proto::InitOut {
        major: 7,
        minor: 40,
        max_readahead: a.max_readahead,
        flags: want & a.flags,
        max_background: 16,
        congestion_threshold: 12,
        max_write: MAX_WRITE,
        time_gran: 1,
        max_pages: MAX_PAGES,
        flags2: if uring { flag::OVER_IO_URING_2 } else { 0 },
        ..proto::InitOut::default()
    };
    write_reply(fd, h.unique, Ok(proto::bytes(&out)));
    uring
}

/// Serves /dev/fuse on `fd` until the mount goes away. With `answer`
/// false, only FORGET and INTERRUPT are expected (the ring serves the rest)
/// and anything else is dropped.
fn dev_loop(fd: RawFd, floor: &Floor, answer: bool) {
    let mut buf = vec![0u8; PAYLOAD + 4096];
    let mut out = vec![0u8; PAYLOAD];
    while let Ok(n) = read_req(fd, &mut buf) {
        let Some(h) = proto::read::<proto::InHeader>(&buf[..n]) else {
            continue;
        };
        let op = h.opcode;
        if matches!(op, FORGET | BATCH_FORGET | INTERRUPT) || !answer {
            continue;
        }
        if op == DESTROY {
            write_reply(fd, h.unique, Ok(&[]));
            continue;
        }
        let body = &buf[IN_HEADER..n];
        let fixed = fixed_len(op).min(body.len());
        let r = Req {
            opcode: op,
            nodeid: h.nodeid,
            fixed: &body[..fixed],
            rest: &body[fixed..],
        };
        let res = floor.serve(&r, &mut out);
        write_reply(fd, h.unique, res.map(|k| &out[..k]));
    }
}

/// One ring entry: the header buffer, the payload buffer and the iovecs
/// registered for them (their addresses stay put while registered).
struct Ent {
    header: Box<[u8]>,
    payload: Box<[u8]>,
    iov: Box<[libc::iovec; 2]>,
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is an empty set; the call only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Serves queue `qid` until the connection ends. `ready` is told once the
/// entries are registered (or registering failed).
fn queue_loop(
    fd: RawFd,
    qid: u16,
    floor: &Floor,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
) {
    if floor.pin {
        pin(qid as usize);
    }
    let spin = floor.spin;
    let mut ring: IoUring<squeue::Entry128, cqueue::Entry> =
        match IoUring::builder().build((2 * DEPTH) as u32) {
            Ok(r) => r,
            Err(e) => {
                let _ = ready.send(Err(format!("io_uring_setup: {e}")));
                return;
            }
        };
    let mut ents: Vec<Ent> = (0..DEPTH)
        .map(|_| {
            let mut header = vec![0u8; 4096].into_boxed_slice();
            let mut payload = vec![0u8; PAYLOAD].into_boxed_slice();
            let iov = Box::new([
                libc::iovec {
                    iov_base: header.as_mut_ptr().cast(),
                    iov_len: RING_HEADER,
                },
                libc::iovec {
                    iov_base: payload.as_mut_ptr().cast(),
                    iov_len: PAYLOAD,
                },
            ]);
            Ent {
                header,
                payload,
                iov,
            }
        })
        .collect();
    for (i, e) in ents.iter().enumerate() {
        let sqe = uring::command(fd, CMD_REGISTER, qid, 0, Some(e.iov.as_ptr() as u64))
            .user_data(i as u64);
        // SAFETY: the iovecs and buffers live as long as the ring (ents
        // is dropped after it returns).
        if unsafe { ring.submission().push(&sqe) }.is_err() {
            let _ = ready.send(Err("submission queue full".into()));
            return;
        }
    }
    if let Err(e) = ring.submit() {
        let _ = ready.send(Err(format!("register: {e}")));
        return;
    }
    // A refused registration completes at once; a good one only when a
    // request comes.
    let mut first = Vec::new();
    for c in ring.completion() {
        first.push((c.user_data(), c.result()));
    }
    if let Some((_, res)) = first.iter().find(|(_, r)| *r < 0) {
        let _ = ready.send(Err(format!(
            "FUSE_IO_URING_CMD_REGISTER on queue {qid}: {}",
            std::io::Error::from_raw_os_error(-res)
        )));
        return;
    }
    let _ = ready.send(Ok(()));
    let mut done = first;
    let mut scratch = vec![0u8; PAYLOAD];
    loop {
        for (ud, res) in done.drain(..) {
            let i = ud as usize;
            if res < 0 {
                // ENOTCONN: the mount is gone; anything else ends the queue too.
                return;
            }
            let e = &mut ents[i];
            let h: proto::InHeader = arg(&e.header[..OP_IN]);
            let ent: proto::UringEntInOut = arg(&e.header[ENT_IN_OUT..]);
            let op_in = &e.header[OP_IN..ENT_IN_OUT];
            let payload_sz = (ent.payload_sz as usize).min(PAYLOAD);
            let fixed_n = fixed_len(h.opcode).min(OP_IN);
            let r = Req {
                opcode: h.opcode,
                nodeid: h.nodeid,
                fixed: &op_in[..fixed_n],
                rest: &e.payload[..payload_sz],
            };
            let (err, n) = match floor.serve(&r, &mut scratch) {
                Ok(n) => (0, n),
                Err(errno) => (-errno, 0),
            };
            e.payload[..n].copy_from_slice(&scratch[..n]);
            e.header[..OP_IN].fill(0);
            put(&mut e.header, 0, &proto::out_header(h.unique, err, n));
            let reply = proto::UringEntInOut {
                payload_sz: n as u32,
                ..proto::UringEntInOut::default()
            };
            put(&mut e.header, ENT_IN_OUT, &reply);
            let sqe =
                uring::command(fd, CMD_COMMIT_AND_FETCH, qid, ent.commit_id, None).user_data(ud);
            // SAFETY: as at registration.
            if unsafe { ring.submission().push(&sqe) }.is_err() {
                return;
            }
        }
        if !spin.is_zero() {
            if ring.submit().is_err() {
                return;
            }
            // As churnfs's ring.
            uring::poll(&mut ring, spin);
        }
        if ring.completion().is_empty() && ring.submit_and_wait(1).is_err() {
            let e = last_err();
            if e.raw_os_error() != Some(libc::EINTR) {
                return;
            }
        }
        for c in ring.completion() {
            done.push((c.user_data(), c.result()));
        }
    }
}

fn clone_fd(fd: RawFd) -> OwnedFd {
    const FUSE_DEV_IOC_CLONE: libc::c_ulong = 0x8004_e500;
    let dev = c"/dev/fuse";
    // SAFETY: checked open, then an ioctl with a pointer to a live u32.
    unsafe {
        let n = libc::open(dev.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if n < 0 {
            die(format!("/dev/fuse: {}", last_err()));
        }
        let mut src = fd as u32;
        if libc::ioctl(n, FUSE_DEV_IOC_CLONE, &mut src) != 0 {
            die(format!("FUSE_DEV_IOC_CLONE: {}", last_err()));
        }
        OwnedFd::from_raw_fd(n)
    }
}

const USAGE: &str =
    "usage: churnfs-bench-floor-uring MOUNTPOINT [files] [dev] [spin=MICROSECONDS] [nopin]";

fn main() -> std::process::ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(mnt) = args.next() else {
        eprintln!("{USAGE}");
        return std::process::ExitCode::from(2);
    };
    let (mut files, mut dev, mut spin_us, mut pin) = (false, false, 0, true);
    for a in args {
        let a = a.to_string_lossy();
        match (&*a, a.strip_prefix("spin=").map(str::parse::<u64>)) {
            ("files", _) => files = true,
            ("dev", _) => dev = true,
            ("nopin", _) => pin = false,
            (_, Some(Ok(us))) => spin_us = us,
            _ => {
                eprintln!("{USAGE}");
                return std::process::ExitCode::from(2);
            }
        }
    }
    let floor = Arc::new(Floor {
        files: files.then(|| Mutex::new(Files::default())),
        spin: std::time::Duration::from_micros(spin_us),
        pin,
    });
    let fd = mount(&mnt);
    let raw = fd.as_raw_fd();
    if !init(raw, !dev) {
        let second = clone_fd(raw);
        let f2 = floor.clone();
        let t = std::thread::spawn(move || dev_loop(second.as_raw_fd(), &f2, true));
        dev_loop(raw, &floor, true);
        let _ = t.join();
        return std::process::ExitCode::SUCCESS;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let queues = uring::possible_cpus();
    let mut threads = Vec::new();
    for q in 0..queues {
        let f = floor.clone();
        let tx = tx.clone();
        threads.push(std::thread::spawn(move || {
            queue_loop(raw, q as u16, &f, tx)
        }));
    }
    drop(tx);
    for _ in 0..queues {
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                unmount_self();
                die(e)
            }
            Err(_) => die("a queue thread ended before registering".into()),
        }
    }
    // Forgets and interrupts keep coming on /dev/fuse. Once it reports the
    // mount gone, the queue threads are ending too; nothing of theirs needs
    // to be waited for.
    dev_loop(raw, &floor, false);
    drop(threads);
    std::process::exit(0)
}
