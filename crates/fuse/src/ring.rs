//! FUSE over io_uring (kernel 6.14+, docs/design.md §12): the adapter's
//! operations (ops.rs) served from per-CPU ring queues instead of
//! /dev/fuse reads.
//!
//! fuser 0.18 mounts and answers INIT (asking for `FUSE_OVER_IO_URING`
//! when the kernel offers it); the /dev/fuse readers (dev.rs) keep
//! serving /dev/fuse, where FORGET, INTERRUPT and our notifications still
//! go. Requests are decoded and answered by wire.rs. Every other request
//! arrives here: the kernel queues it on the ring queue of the CPU its caller runs
//! on. One thread per possible CPU, pinned to it, owns that queue's ring
//! (128-byte SQEs) and `DEPTH` entries, each a header buffer (in/out
//! header, the operation's fixed part, the entry's commit id and payload
//! size) and a payload buffer (names, data, the reply's arguments). A reply
//! is written into the entry and committed with `COMMIT_AND_FETCH`, which
//! also hands the entry back for the next request: one system call per
//! request. After submitting its replies a thread polls its completion
//! queue (shared memory) for up to `spin` before it sleeps in the kernel.
//!
//! Registration needs the kernel to have taken INIT's reply, which fuser
//! sends after `init` returns; a queue thread retries while the kernel
//! answers EAGAIN. If registration fails the kernel turns the ring off and
//! goes back to /dev/fuse (`fc->io_uring = 0`), which the readers serve.

use crate::policy::Backoff;
use crate::proto::uring::{self, CMD_COMMIT_AND_FETCH, CMD_REGISTER, ENT_IN_OUT, HEADER, OP_IN};
use crate::proto::{self, fixed_len, op};
use crate::stats::Stats;
use crate::wire::{outcome, put_out_header, serve, serve_wait, who, In, MAX_IO};
use crate::Core;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Entries per queue: requests one CPU's callers can have in flight before
/// the kernel holds the next in its queue.
pub(crate) const DEPTH: usize = 4;
/// Polls a queue thread judges its polling by (see `serve_queue`).
const POLL_WINDOW: u32 = 64;
/// A payload buffer: the largest write, or a reply.
const PAYLOAD: usize = MAX_IO as usize;

/// One ring entry: the buffers registered for it and the iovecs that
/// describe them (their addresses must not move while registered).
struct Ent {
    header: Box<[u8]>,
    payload: Box<[u8]>,
    iov: Box<[libc::iovec; 2]>,
}

// SAFETY: the iovecs point into the entry's own boxed buffers; the entry
// moves to its queue thread with them and only that thread touches them.
unsafe impl Send for Ent {}

/// Whether the kernel offers FUSE over io_uring to new connections.
pub(crate) fn kernel_enabled() -> bool {
    std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring")
        .is_ok_and(|v| v.trim() == "Y")
}

/// The queue threads: how many are still running.
pub(crate) struct Queues(Arc<(Mutex<usize>, Condvar)>);

impl Queues {
    /// Waits up to `limit` for every queue thread to end (they end when
    /// the connection does).
    pub(crate) fn wait(&self, limit: Duration) {
        let (m, cv) = &*self.0;
        let left = m.lock().unwrap_or_else(|p| p.into_inner());
        let (left, _) = cv
            .wait_timeout_while(left, limit, |n| *n > 0)
            .unwrap_or_else(|p| p.into_inner());
        if *left > 0 {
            tracing::warn!("{} io_uring queue threads still running", *left);
        }
    }
}

type Ring = IoUring<squeue::Entry128, cqueue::Entry>;

/// Rings and buffers made before the kernel is asked for the ring: once
/// it has accepted, requests wait for the queues, so nothing that can fail
/// for lack of resources (io_uring_setup refused, memory) may come after.
pub(crate) struct Prepared {
    queues: Vec<(Ring, Vec<Ent>)>,
}

/// Makes one ring and its entries per possible CPU.
pub(crate) fn prepare() -> std::io::Result<Prepared> {
    let queues = (0..uring::possible_cpus())
        .map(|_| {
            let ring = IoUring::builder().build((2 * DEPTH) as u32)?;
            let ents = (0..DEPTH)
                .map(|_| {
                    let mut header = vec![0u8; HEADER].into_boxed_slice();
                    let mut payload = vec![0u8; PAYLOAD].into_boxed_slice();
                    let iov = Box::new([
                        libc::iovec {
                            iov_base: header.as_mut_ptr().cast(),
                            iov_len: HEADER,
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
            Ok((ring, ents))
        })
        .collect::<std::io::Result<_>>()?;
    Ok(Prepared { queues })
}

/// Starts one thread per queue, pinned to its CPU. They register on a
/// duplicate of the session's descriptor, which `fd` receives once the
/// session exists (fuser answers INIT while it makes the session, before
/// the descriptor can be had).
pub(crate) fn start(
    core: Arc<Core>,
    p: Prepared,
    fd: Arc<OnceLock<OwnedFd>>,
    spin: Duration,
) -> std::io::Result<Queues> {
    let running = Arc::new((Mutex::new(p.queues.len()), Condvar::new()));
    for (q, (ring, ents)) in p.queues.into_iter().enumerate() {
        let (core, fd, running) = (core.clone(), fd.clone(), running.clone());
        std::thread::Builder::new()
            .name(format!("churnfs-ring{q}"))
            .spawn(move || {
                let t = Instant::now();
                while fd.get().is_none() && t.elapsed() < Duration::from_secs(10) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let r = match fd.get() {
                    Some(fd) => queue(&core, fd.as_raw_fd(), q as u16, ring, ents, spin),
                    None => Err(std::io::Error::other("no session descriptor after 10 s")),
                };
                if let Err(e) = r {
                    tracing::warn!("io_uring queue {q}: {e}");
                }
                let (m, cv) = &*running;
                *m.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
                cv.notify_all();
            })?;
    }
    Ok(Queues(running))
}

/// Writes a reply's out header (length, errno, unique) and its payload size
/// into an entry's header buffer.
fn reply_header(h: &mut [u8], unique: u64, err: i32, n: usize) {
    put_out_header(h, unique, err, n);
    let ent = proto::UringEntInOut {
        payload_sz: n as u32,
        ..proto::UringEntInOut::default()
    };
    proto::put(h, ENT_IN_OUT, &ent).expect("an entry's header buffer holds fuse_uring_ent_in_out");
}

/// The user data of the eventfd read armed on every ring.
const WAKE: u64 = u64::MAX;

/// Requests whose handler waits for a commit (milliseconds on a disk).
/// A queue hands them to its waiter thread, so that the requests queued
/// behind them on the same CPU go on being served; over /dev/fuse the
/// worker gate wakes a spare reader for the same reason.
fn waits(opcode: u32) -> bool {
    matches!(opcode, op::FSYNC | op::FSYNCDIR)
}

/// A waiting request for the waiter: its entry, opcode, node id, unique
/// and commit id.
type Job = (usize, u32, u64, u64, u64);

/// A waiting request's answer: its entry, unique, commit id and errno.
type Answer = (usize, u64, u64, i32);

/// A queue's side of its waiter thread: where waiting requests go (entry,
/// unique, commit id), where their answers come back, and the eventfd
/// that says they did.
struct Waiter<'a> {
    fd: i32,
    answers: &'a Mutex<Vec<Answer>>,
    jobs: std::sync::mpsc::Sender<Job>,
    /// Where the armed read puts the eventfd's count. It belongs to
    /// `queue`, so it outlives the ring (dropped when `serve_queue`
    /// returns) and the waiter that writes the eventfd.
    buf: &'a mut u64,
}

/// Serves one queue; the waiting requests (`waits`) go to a second thread
/// of the queue, whose answers come back through an eventfd whose read is
/// kept armed on the ring.
fn queue(
    core: &Core,
    fd: i32,
    qid: u16,
    ring: Ring,
    ents: Vec<Ent>,
    spin: Duration,
) -> std::io::Result<()> {
    // SAFETY: plain system call; the descriptor is owned below.
    let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if wake < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `wake` is a new descriptor nobody else owns.
    let wake = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(wake) };
    let answers: Mutex<Vec<Answer>> = Mutex::new(Vec::with_capacity(DEPTH));
    let mut wake_buf = 0u64;
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    std::thread::scope(|s| {
        let (answers, wake_fd) = (&answers, wake.as_raw_fd());
        std::thread::Builder::new()
            .name(format!("churnfs-wait{qid}"))
            .spawn_scoped(s, move || {
                for (i, opcode, nodeid, unique, commit_id) in rx {
                    let (err, _) = outcome(&core.latency, opcode, || {
                        serve_wait(core, opcode, nodeid).map(|()| 0)
                    });
                    answers
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((i, unique, commit_id, err));
                    let one = 1u64;
                    // SAFETY: writes 8 bytes from a live u64 to an eventfd.
                    unsafe { libc::write(wake_fd, (&one as *const u64).cast(), 8) };
                }
            })?;
        // `tx` moves into the loop and is dropped when it ends, which ends
        // the waiter.
        let waiter = Waiter {
            fd: wake_fd,
            answers,
            jobs: tx,
            buf: &mut wake_buf,
        };
        serve_queue(core, fd, qid, ring, ents, spin, waiter)
    })
}

fn serve_queue(
    core: &Core,
    fd: i32,
    qid: u16,
    mut ring: Ring,
    mut ents: Vec<Ent>,
    spin: Duration,
    waiter: Waiter<'_>,
) -> std::io::Result<()> {
    // A queue thread the kernel refuses to keep to its CPU serves from
    // wherever it runs.
    let _ = crate::cpus::keep_this_thread_to(qid as usize);
    core.serving_thread_policy();
    let Waiter {
        fd: wake_fd,
        answers,
        jobs,
        buf: wake_buf,
    } = waiter;
    let arm = |ring: &mut Ring, buf: &mut u64| {
        let sqe: squeue::Entry128 =
            opcode::Read::new(types::Fd(wake_fd), (buf as *mut u64).cast(), 8)
                .build()
                .user_data(WAKE)
                .into();
        // SAFETY: `buf` is `Waiter::buf`, which outlives the ring.
        unsafe { ring.submission().push(&sqe) }.map_err(|_| std::io::Error::other("ring full"))
    };
    arm(&mut ring, wake_buf)?;
    // Hands entry `i`'s reply back and fetches its next request.
    let commit = |ring: &mut Ring, i: usize, commit_id: u64| {
        let sqe =
            uring::command(fd, CMD_COMMIT_AND_FETCH, qid, commit_id, None).user_data(i as u64);
        // SAFETY: as at registration.
        unsafe { ring.submission().push(&sqe) }.map_err(|_| std::io::Error::other("ring full"))
    };
    let register = |ring: &mut Ring, i: usize, e: &Ent| {
        let sqe = uring::command(fd, CMD_REGISTER, qid, 0, Some(e.iov.as_ptr() as u64))
            .user_data(i as u64);
        // SAFETY: the iovecs and buffers outlive the ring (`ents` is
        // declared after it and dropped first only when the ring is done).
        unsafe { ring.submission().push(&sqe) }.map_err(|_| std::io::Error::other("ring full"))
    };
    for (i, e) in ents.iter().enumerate() {
        register(&mut ring, i, e)?;
    }
    let mut out = vec![0u8; PAYLOAD];
    let mut done: Vec<(u64, i32)> = Vec::with_capacity(2 * DEPTH);
    let started = Instant::now();
    let mut registered = false;
    // Polling backs off (policy.rs's `Backoff`) when more than half of a
    // window of polls missed. Misses come in runs even while a caller is
    // served well (one poll in twelve missed in W7, where polling made the
    // first miss 2.3 times faster), so a single miss, or a few in a row,
    // must not stop it; a queue whose polls keep missing spends at most
    // one window of polls before it stops.
    let mut backoff = Backoff::new(POLL_WINDOW);
    loop {
        if !spin.is_zero() && ring.completion().is_empty() && backoff.try_spin() {
            ring.submit()?;
            let hit = uring::poll(&mut ring, spin);
            if hit {
                Stats::inc(&core.stats.ring_spin_hits);
            } else {
                Stats::inc(&core.stats.ring_spin_misses);
            }
            backoff.record(hit);
        }
        let want = if ring.completion().is_empty() { 1 } else { 0 };
        if let Err(e) = ring.submit_and_wait(want) {
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
        done.extend(ring.completion().map(|c| (c.user_data(), c.result())));
        for (ud, res) in done.drain(..) {
            if ud == WAKE {
                let ready = std::mem::take(&mut *answers.lock().unwrap_or_else(|p| p.into_inner()));
                for (i, unique, commit_id, err) in ready {
                    reply_header(&mut ents[i].header, unique, err, 0);
                    commit(&mut ring, i, commit_id)?;
                }
                arm(&mut ring, wake_buf)?;
                continue;
            }
            let i = ud as usize;
            let Some(e) = ents.get_mut(i) else { continue };
            if res == -libc::EAGAIN && started.elapsed() < Duration::from_secs(10) {
                // INIT's reply not taken yet.
                std::thread::sleep(Duration::from_millis(1));
                register(&mut ring, i, e)?;
                continue;
            }
            if !registered && res >= 0 {
                // A first request: the kernel took this queue's entries.
                registered = true;
                Stats::inc(&core.stats.ring_queues);
            }
            if res < 0 {
                // ENOTCONN: the mount is gone.
                if res == -libc::ENOTCONN {
                    return Ok(());
                }
                return Err(std::io::Error::from_raw_os_error(-res));
            }
            let (h, rest) = e.header.split_at(OP_IN);
            let (op_in, ent) = rest.split_at(ENT_IN_OUT - OP_IN);
            let (Some(ent), Some(h)) = (
                proto::read::<proto::UringEntInOut>(ent),
                proto::read::<proto::InHeader>(h),
            ) else {
                return Err(std::io::Error::other(
                    "an entry's header buffer is too short",
                ));
            };
            let commit_id = ent.commit_id;
            let payload_sz = (ent.payload_sz as usize).min(PAYLOAD);
            let (opcode, unique, nodeid) = (h.opcode, h.unique, h.nodeid);
            let r = In {
                opcode,
                nodeid,
                who: who(&h),
                fixed: &op_in[..fixed_len(opcode).min(OP_IN)],
                rest: &e.payload[..payload_sz],
            };
            Stats::inc(&core.stats.ring_requests);
            if waits(opcode) {
                Stats::inc(&core.stats.ring_handed_off);
                // The waiter ends only after this loop does.
                let _ = jobs.send((i, opcode, nodeid, unique, commit_id));
                continue;
            }
            let (err, n) = outcome(&core.latency, opcode, || serve(core, &r, &mut out));
            e.payload[..n].copy_from_slice(&out[..n]);
            reply_header(&mut e.header, unique, err, n);
            commit(&mut ring, i, commit_id)?;
        }
    }
}
