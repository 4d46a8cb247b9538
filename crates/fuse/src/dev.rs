//! The /dev/fuse transport: reader threads of our own, each on its own
//! cloned descriptor, answering requests through wire.rs as the io_uring
//! queues do.
//!
//! fuser 0.18 mounts, answers INIT (inside `Session::new`), sends our
//! notifications and unmounts; its request loop is not run. Why
//! (docs/design.md, "The /dev/fuse readers"):
//! - it cannot receive FUSE_TMPFILE: opcode 51 is answered ENOSYS before
//!   any method of ours runs, and the kernel then refuses O_TMPFILE for the
//!   rest of the mount;
//! - it writes every reply as two iovecs (out header, arguments), and the
//!   kernel pins the page of each iovec on its own (`fuse_copy_fill`):
//!   about 0.3 µs more per LOOKUP answer than one buffer (W7);
//! - its decoding and dispatch cost about 0.5 µs per request in fuser's own
//!   floor server, which answers without doing anything.
//!
//! One thread per configured worker (`AdapterConfig::threads`): the first
//! reads a duplicate of the session's descriptor, the others descriptors
//! cloned from it (FUSE_DEV_IOC_CLONE), as fuser's `clone_fd` did. A thread
//! reads one request, answers it with one `write` of the out header and
//! the arguments from one buffer, and takes a turn at the worker gate
//! (workers.rs) while it does, for every request `wire::serve` answers
//! (the forgets, which take no answer, and the requests answered here
//! without the engine take none).
//! The notes for the kernel's negative-dentry budget that a request makes
//! (negative.rs) are made after its answer is written, while the caller
//! reads it.
//! A thread ends when the connection does (ENODEV).
//!
//! Bound: two buffers per thread, a request (`MAX_IO` of data and a page
//! for the headers) and a reply (`MAX_IO` and the out header).

use crate::proto::{self, fixed_len, op};
use crate::stats::Stats;
use crate::wire::{outcome, put_out_header, serve, who, In, IN_HEADER, MAX_IO, OUT_HEADER};
use crate::Core;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// A request buffer: the largest write's data (INIT's `max_write` is
/// `MAX_IO`) and a page for the headers before it. The kernel refuses to
/// hand a request to a smaller read.
const READ_BUF: usize = MAX_IO as usize + 4096;

/// `FUSE_DEV_IOC_CLONE`: `_IOR(229, 0, uint32_t)`.
const FUSE_DEV_IOC_CLONE: libc::c_ulong = 0x8004_e500;

/// A new descriptor on /dev/fuse attached to the connection of `session`:
/// it reads requests of its own and answers them.
fn clone_fd(session: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: a plain open of a NUL-terminated path.
    let fd = unsafe { libc::open(c"/dev/fuse".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut source = session.as_raw_fd() as u32;
    // SAFETY: the ioctl reads one u32 from a live variable.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), FUSE_DEV_IOC_CLONE, &mut source) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Serves the session's requests on `threads` threads until the connection
/// ends (the filesystem was unmounted or the connection aborted).
pub(crate) fn run(core: &Arc<Core>, session: BorrowedFd<'_>, threads: usize) -> io::Result<()> {
    let mut fds = vec![session.try_clone_to_owned()?];
    for _ in 1..threads.max(1) {
        match clone_fd(session) {
            Ok(fd) => fds.push(fd),
            // Fewer readers serve the same requests, more slowly.
            Err(e) => {
                tracing::warn!(
                    "/dev/fuse descriptor not cloned ({e}); {} readers",
                    fds.len()
                );
                break;
            }
        }
    }
    std::thread::scope(|s| {
        let mut readers = Vec::new();
        for (i, fd) in fds.into_iter().enumerate() {
            let spawned = std::thread::Builder::new()
                .name(format!("churnfs-dev{i}"))
                .spawn_scoped(s, move || reader(core, fd));
            match spawned {
                Ok(h) => readers.push(h),
                Err(e) => tracing::warn!("/dev/fuse reader {i} not started: {e}"),
            }
        }
        if readers.is_empty() {
            return Err(io::Error::other("no /dev/fuse reader could be started"));
        }
        let mut result = Ok(());
        for h in readers {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("a /dev/fuse reader panicked")));
            if let (Err(e), Ok(())) = (r, &result) {
                result = Err(e);
            }
        }
        result
    })
}

/// One reader: requests from `fd` until the connection ends.
fn reader(core: &Core, fd: OwnedFd) -> io::Result<()> {
    core.serving_thread_policy();
    crate::negative::defer_notes();
    let mut req = vec![0u8; READ_BUF];
    let mut out = vec![0u8; OUT_HEADER + MAX_IO as usize];
    let mut send = |reply: &[u8]| write_reply(&fd, reply);
    loop {
        // SAFETY: reads into a live buffer of `req.len()` bytes.
        let n = unsafe { libc::read(fd.as_raw_fd(), req.as_mut_ptr().cast(), req.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // ENOENT: the request was interrupted before we read it.
                Some(libc::EINTR | libc::EAGAIN | libc::ENOENT) => continue,
                // ECONNABORTED: the connection was aborted after a
                // request was taken off its queue.
                Some(libc::ENODEV | libc::ECONNABORTED) => return Ok(()),
                _ => return Err(e),
            }
        }
        if answer(core, &req[..n as usize], &mut out, &mut send)? == Read::Stop {
            return Ok(());
        }
    }
}

/// Writes one answer; a request the kernel gave up on (interrupted, or the
/// connection aborted) refuses it, which changes nothing here.
fn write_reply(fd: &OwnedFd, reply: &[u8]) {
    // SAFETY: writes from a live buffer of `reply.len()` bytes.
    let n = unsafe { libc::write(fd.as_raw_fd(), reply.as_ptr().cast(), reply.len()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if !matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENODEV)) {
            tracing::warn!("a reply was refused: {e}");
        }
    }
}

/// Whether a reader goes on after a request.
#[derive(Debug, PartialEq, Eq)]
enum Read {
    On,
    /// DESTROY was answered: the connection ends.
    Stop,
}

/// Serves one request `r` (as read): its answer, if it takes one, is laid
/// out in `out` and handed to `send`, within the request's turn at the
/// worker gate (whose end may spin or park this thread, which must come
/// after the answer). Err only for a request the kernel cannot have sent
/// (its header disagrees with what was read).
fn answer(core: &Core, r: &[u8], out: &mut [u8], send: &mut dyn FnMut(&[u8])) -> io::Result<Read> {
    let header = proto::read::<proto::InHeader>(r).filter(|h| h.len as usize == r.len());
    let Some(h) = header else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a request of {} bytes does not match its header", r.len()),
        ));
    };
    let (opcode, unique, nodeid, who) = (h.opcode, h.unique, h.nodeid, who(&h));
    let body = &r[IN_HEADER..];
    let mut reply = |out: &mut [u8], err: i32, n: usize| {
        put_out_header(out, unique, err, n);
        send(&out[..OUT_HEADER + n]);
    };
    match opcode {
        op::FORGET => {
            if let Some(f) = proto::read::<proto::ForgetIn>(body) {
                Stats::inc(&core.stats.op_forget);
                core.do_forget(nodeid, f.nlookup);
            }
        }
        op::BATCH_FORGET => {
            // `fuse_batch_forget_in`, then `count` of `fuse_forget_one`.
            let count = proto::read::<proto::BatchForgetIn>(body).map_or(0, |b| b.count as usize);
            let items = body
                .get(size_of::<proto::BatchForgetIn>()..)
                .unwrap_or_default();
            let one = size_of::<proto::ForgetOne>();
            for f in items
                .chunks_exact(one)
                .take(count)
                .filter_map(proto::read::<proto::ForgetOne>)
            {
                Stats::inc(&core.stats.op_forget);
                core.do_forget(f.nodeid, f.nlookup);
            }
        }
        op::NOTIFY_REPLY => {}
        // Interrupts are not acted on; ENOSYS as fuser answered (the
        // kernel looks the answer up on this descriptor's queue, where the
        // interrupted request mostly is not, and then ignores it).
        op::INTERRUPT => reply(out, -libc::ENOSYS, 0),
        op::INIT => reply(out, -libc::EIO, 0),
        op::DESTROY => {
            reply(out, 0, 0);
            return Ok(Read::Stop);
        }
        _ => {
            let fixed = fixed_len(opcode);
            let Some(f) = body.get(..fixed) else {
                reply(out, -libc::EINVAL, 0);
                return Ok(Read::On);
            };
            let req = In {
                opcode,
                nodeid,
                who,
                fixed: f,
                rest: &body[fixed..],
            };
            let _turn = core.workers.turn(who.pid);
            let (err, n) = outcome(&core.latency, opcode, || {
                serve(core, &req, &mut out[OUT_HEADER..])
            });
            reply(out, err, n);
            // The caller has its answer; the notes for the kernel's
            // negative dentries are made while it reads it.
            if catch_unwind(AssertUnwindSafe(|| core.negatives.note_deferred())).is_err() {
                tracing::error!("the negative-dentry notes of opcode {opcode} panicked");
            }
        }
    }
    Ok(Read::On)
}

#[cfg(test)]
mod tests {
    //! Requests laid out as /dev/fuse hands them over (in header, fixed
    //! part, names), answered by an engine on a memory store; what `send`
    //! is given is what would be written back.
    use super::*;
    use crate::proto::op::{BATCH_FORGET, DESTROY, FORGET, INTERRUPT, LOOKUP, TMPFILE};
    use crate::wire::tests::{core, put32, put64, u32_at, u64_at};
    use std::sync::atomic::Ordering::Relaxed;

    /// `fuse_in_header` for `opcode` on `nodeid`, unique 77, pid 9, then
    /// `body`.
    fn request(opcode: u32, nodeid: u64, body: &[u8]) -> Vec<u8> {
        let mut r = vec![0u8; IN_HEADER];
        put32(&mut r, 0, (IN_HEADER + body.len()) as u32);
        put32(&mut r, 4, opcode);
        put64(&mut r, 8, 77);
        put64(&mut r, 16, nodeid);
        put32(&mut r, 32, 9);
        r.extend_from_slice(body);
        r
    }

    /// Serves `r`; what was sent (each reply whole) and whether the reader
    /// goes on.
    fn serve_one(c: &Core, r: &[u8]) -> (Vec<Vec<u8>>, Read) {
        let mut out = vec![0u8; OUT_HEADER + MAX_IO as usize];
        let mut sent = Vec::new();
        let then = answer(c, r, &mut out, &mut |b: &[u8]| sent.push(b.to_vec())).unwrap();
        (sent, then)
    }

    /// The out header's length, errno and unique.
    fn head(reply: &[u8]) -> (usize, i32, u64) {
        (
            u32_at(reply, 0) as usize,
            u32_at(reply, 4) as i32,
            u64_at(reply, 8),
        )
    }

    #[test]
    fn a_reply_is_one_buffer_of_header_and_arguments() {
        let c = core();
        // A missing name: a negative entry (node 0) with the negative TTL.
        let (sent, then) = serve_one(&c, &request(LOOKUP, 1, b"nope\0"));
        assert_eq!(then, Read::On);
        assert_eq!(sent.len(), 1);
        let r = &sent[0];
        assert_eq!(head(r), (OUT_HEADER + 128, 0, 77));
        assert_eq!(r.len(), OUT_HEADER + 128);
        assert_eq!(u64_at(r, OUT_HEADER), 0, "a negative entry");
        assert_eq!(u64_at(r, OUT_HEADER + 16), 1, "the negative TTL, 1 s");
        // A kernel that keeps the negative dentries it is asked to drop:
        // misses answer ENOENT, no entry to keep.
        c.negatives.refuse();
        let (sent, _) = serve_one(&c, &request(LOOKUP, 1, b"nope2\0"));
        assert_eq!(head(&sent[0]), (OUT_HEADER, -libc::ENOENT, 77));
        assert_eq!(sent[0].len(), OUT_HEADER);
        // O_TMPFILE, which fuser's loop could not receive.
        let create_in = [(libc::O_RDWR | libc::O_TMPFILE) as u32, 0o100600, 0, 0]
            .map(u32::to_le_bytes)
            .concat();
        let body = [create_in.as_slice(), b"/\0"].concat();
        let (sent, _) = serve_one(&c, &request(TMPFILE, 1, &body));
        assert_eq!(head(&sent[0]), (OUT_HEADER + 144, 0, 77));
        assert_eq!(c.stats.op_tmpfile.load(Relaxed), 1);
        // An operation nobody serves, and a fixed part cut short.
        let (sent, _) = serve_one(&c, &request(39, 1, &[0; 32]));
        assert_eq!(head(&sent[0]), (OUT_HEADER, -libc::ENOSYS, 77));
        let (sent, _) = serve_one(&c, &request(TMPFILE, 1, &[0; 4]));
        assert_eq!(head(&sent[0]), (OUT_HEADER, -libc::EINVAL, 77));
    }

    #[test]
    fn forgets_take_no_answer_and_destroy_ends_the_reader() {
        let c = core();
        let (sent, then) = serve_one(&c, &request(FORGET, 5, &3u64.to_le_bytes()));
        assert!(sent.is_empty());
        assert_eq!(then, Read::On);
        // Two forgets in one batch; a count larger than what follows is
        // cut to what is there.
        let mut body = 3u32.to_le_bytes().to_vec();
        body.extend_from_slice(&[0; 4]);
        for (node, n) in [(6u64, 1u64), (7, 2)] {
            body.extend_from_slice(&node.to_le_bytes());
            body.extend_from_slice(&n.to_le_bytes());
        }
        let (sent, _) = serve_one(&c, &request(BATCH_FORGET, 0, &body));
        assert!(sent.is_empty());
        assert_eq!(c.stats.op_forget.load(Relaxed), 3);
        let (sent, _) = serve_one(&c, &request(INTERRUPT, 0, &77u64.to_le_bytes()));
        assert_eq!(head(&sent[0]), (OUT_HEADER, -libc::ENOSYS, 77));
        let (sent, then) = serve_one(&c, &request(DESTROY, 0, &[]));
        assert_eq!(head(&sent[0]), (OUT_HEADER, 0, 77));
        assert_eq!(then, Read::Stop);
    }

    #[test]
    fn a_request_that_disagrees_with_its_header_is_refused() {
        let c = core();
        let mut out = vec![0u8; OUT_HEADER + 64];
        let mut send = |_: &[u8]| panic!("nothing may be sent");
        let mut r = request(LOOKUP, 1, b"x\0");
        assert!(answer(&c, &r[..20], &mut out, &mut send).is_err());
        r.push(0);
        assert!(answer(&c, &r, &mut out, &mut send).is_err());
    }
}
