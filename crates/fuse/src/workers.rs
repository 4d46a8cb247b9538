//! Which worker threads wait on /dev/fuse: two while requests come one at
//! a time (one, spinning, while the kernel also sends requests of its own),
//! one per CPU while several callers send them, all of them when they
//! queue. The decisions are policy.rs's pure functions; this module feeds
//! them the clock and what it sees on /dev/fuse, and does the polling,
//! parking and `sched_setaffinity`. None of it is a mount option: the
//! reasons and the measurements are in docs/design.md, "Worker threads".
//!
//! The kernel hands each request to the reader that has waited longest
//! (the readers of one connection share one wait queue, cloned descriptors
//! included). With two readers and one caller at a time, requests
//! therefore alternate between the two threads: for a caller that waits
//! for each answer that keeps it on one CPU with its serving thread, faster
//! than one spinning reader; a caller whose requests overlap the kernel's
//! own (tar's RELEASE after each close) would wait for a reader to be woken
//! where one spinning reader is already running.
//!
//! - Two callers: every request from a process other than the previous
//!   request's notes the time (`last_multi_us`). Requests the kernel sends
//!   on its own behalf (pid 0) are not callers, and neither are our own:
//!   the negative-dentry thread checks the mount with a stat now and then
//!   (`own_thread`; the kernel names the thread in a request, not the
//!   process).
//! - A spare (every thread after the readers that stay awake) parks after
//!   a request when no two callers have been seen for `IDLE`. While several
//!   callers are seen, one reader per CPU stays reading (`several_awake`)
//!   and the spares beyond it park too: with every thread reading, the
//!   kernel sent each request to another of a shared volume's 16 threads,
//!   woken cold (docs/design.md §15, "W9"). A parked thread reads nothing
//!   until woken, or until `PATROL` has passed (then it goes back to
//!   reading, which is also how it sees the session end).
//! - Waking, while a spare is parked: after each request its thread polls
//!   a duplicate of the session's descriptor with a zero timeout. A request
//!   already pending may be the same caller's next one, or another
//!   caller's, waiting behind us: the thread remembers the caller it just
//!   served, and if the next request it reads comes from another, that is
//!   backlog and one parked spare is woken. The engine calls `before_wait`
//!   before a request waits for a commit or for a batch a commit is
//!   putting together: a parked spare is woken so that other callers are
//!   served meanwhile.
//! - Spinning: the one reader left for a lone caller (and a pool of one
//!   thread, after every reply) polls for the next request for up to
//!   `SPIN` before it goes back to sleep in read, so a caller that sends
//!   its next request within that time finds the thread awake. A spin that
//!   catches nothing makes the thread skip spinning for a while
//!   (policy.rs's `Backoff`). With two readers awake a spin would catch
//!   nothing: the pending request goes to the other reader.
//! - A CPU each while several callers send requests: the kernel wakes a
//!   sleeping thread on the CPU it last ran on while that CPU is idle, so
//!   two readers could stay on one CPU and two callers on the other, every
//!   request and reply a wake-up of an idle CPU. So while two callers have
//!   been seen within `IDLE`, reader `i` keeps to the `i`-th CPU the pool
//!   may use (`sched_setaffinity` of its own thread, once); after `IDLE`
//!   without, it may run on all of them again.
//!
//! Bound: at most `threads - 1` parked, at most one thread spinning, at
//! most `threads` kept to a CPU; gauges `workers_parked`, `workers_spread`,
//! counters `worker_parks`, `worker_wakes`, `worker_backlogs`,
//! `worker_spin_hits`, `worker_spin_misses`, `worker_spread_moves`.

use crate::policy::{Backoff, Caller, Policy, Seen, Step};
use crate::stats::Stats;
use std::cell::Cell;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long without two callers before a spare parks.
const IDLE: Duration = Duration::from_millis(10);
/// How long a parked spare waits before it reads again on its own.
const PATROL: Duration = Duration::from_millis(50);
/// How long the one reader left for a lone caller polls for its next
/// request after a reply (the io_uring queue threads poll as long).
pub(crate) const SPIN: Duration = Duration::from_micros(50);

static NEXT_POOL: AtomicU64 = AtomicU64::new(1);

#[derive(Clone, Copy)]
struct Local {
    pool: u64,
    index: usize,
    /// A request was pending when this thread had served this caller's.
    pending_after: Option<Caller>,
    /// When this thread's next spin is worth trying.
    backoff: Backoff,
    /// Several callers were seen when this thread last looked (`Spread`),
    /// and whether it keeps to a CPU of its own.
    spread: bool,
    pinned: bool,
}

impl Local {
    const fn new(pool: u64, index: usize) -> Local {
        Local {
            pool,
            index,
            pending_after: None,
            backoff: Backoff::new(1),
            spread: false,
            pinned: false,
        }
    }
}

thread_local! {
    static LOCAL: Cell<Local> = const { Cell::new(Local::new(0, 0)) };
}

#[derive(Default)]
struct Parked {
    threads: usize,
    /// Wake-ups sent and not yet taken.
    tokens: usize,
}

pub struct Workers {
    id: u64,
    /// Which readers stay reading, park or spin (policy.rs).
    policy: Policy,
    probe: OnceLock<OwnedFd>,
    next: AtomicUsize,
    epoch: Instant,
    /// When two callers were last seen in a row (µs since `epoch`).
    last_multi_us: AtomicU64,
    /// The pid field (a thread id) of the last request from a caller.
    last_pid: AtomicU32,
    /// The thread of this daemon that calls into its own mount (the
    /// negative-dentry thread's checks, `own_thread`; 0 until it starts):
    /// its requests are no caller's, nor the kernel's.
    own_tid: AtomicU32,
    /// When the kernel last sent a request of its own (pid 0; µs since
    /// `epoch`; only kept with `adaptive`).
    last_kernel_us: AtomicU64,
    parked: Mutex<Parked>,
    parked_now: AtomicUsize,
    wake: Condvar,
    stats: Arc<Stats>,
    patrol: Duration,
    /// Longest spin for a lone caller's next request (only with one
    /// reader awake; `policy.spin` says whether there is one).
    spin: Duration,
    /// The CPUs readers keep to, one each, while several callers send
    /// requests (`None`: they never do).
    spread: Option<Spread>,
}

/// The CPUs the pool's threads may run on when it starts: while several
/// callers send requests, reader `i` keeps to the `i`-th of them (modulo
/// their number); once one caller is left, it may run on all again.
struct Spread {
    all: libc::cpu_set_t,
    cpus: Vec<usize>,
}

impl Spread {
    /// The calling thread's CPUs, if more than one.
    fn of_this_thread() -> Option<Spread> {
        let (all, cpus) = crate::cpus::of_this_thread()?;
        (cpus.len() > 1).then_some(Spread { all, cpus })
    }

    /// Keeps the calling thread to reader `index`'s CPU (`on`), or lets
    /// it run on all of them again. False if the kernel refused.
    fn set(&self, index: usize, on: bool) -> bool {
        if on {
            crate::cpus::keep_this_thread_to(self.cpus[index % self.cpus.len()])
        } else {
            crate::cpus::set_this_thread(&self.all)
        }
    }
}

/// Held while a request is served; its drop runs after the reply.
pub struct Turn<'a> {
    workers: &'a Workers,
    caller: Caller,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.workers.after_request(self.caller);
    }
}

/// How many readers stay reading while one caller at a time is served.
/// A mount uses `Auto`; the tests pin other shapes to see one mechanism
/// alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LoneReaders {
    /// This many (at least one, at most all).
    #[cfg_attr(not(test), allow(dead_code))]
    Fixed(usize),
    /// Two while only callers send requests, one (which spins) from the
    /// kernel's first request of its own until `IDLE` without one.
    Auto,
}

impl Workers {
    /// The pool a mount runs: `threads` readers, `Auto` of them awake for a
    /// lone caller, spinning for `SPIN`, a CPU each while several callers
    /// send requests (if this thread may run on more than one).
    pub fn for_mount(threads: usize, stats: Arc<Stats>) -> Workers {
        Workers::new(threads, LoneReaders::Auto, SPIN, true, stats)
    }

    /// A pool of `threads` readers, `lone` of which stay reading while one
    /// caller at a time is served. With `spread`, readers keep to a CPU
    /// each while several callers send requests.
    pub(crate) fn new(
        threads: usize,
        lone: LoneReaders,
        spin: Duration,
        spread: bool,
        stats: Arc<Stats>,
    ) -> Workers {
        let mut w = Workers::with_times(threads, lone, stats, IDLE, PATROL);
        let p = &mut w.policy;
        if p.awake == 1 || p.adaptive {
            w.spin = spin;
            p.spin = !spin.is_zero();
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        p.several_awake = cpus.max(p.awake).min(p.threads);
        if spread {
            w.spread_over(Spread::of_this_thread());
        }
        w
    }

    fn spread_over(&mut self, spread: Option<Spread>) {
        if self.policy.threads > 1 {
            self.spread = spread;
        }
        self.policy.spread = self.spread.is_some();
    }

    fn with_times(
        threads: usize,
        lone: LoneReaders,
        stats: Arc<Stats>,
        idle: Duration,
        patrol: Duration,
    ) -> Workers {
        let threads = threads.max(1);
        let (awake, adaptive) = match lone {
            LoneReaders::Fixed(n) => (n.clamp(1, threads), false),
            LoneReaders::Auto => (2.min(threads), threads > 1),
        };
        Workers {
            id: NEXT_POOL.fetch_add(1, Relaxed),
            policy: Policy {
                threads,
                awake,
                several_awake: threads,
                adaptive,
                idle_us: idle.as_micros() as u64,
                spin: false,
                spread: false,
            },
            probe: OnceLock::new(),
            next: AtomicUsize::new(0),
            epoch: Instant::now(),
            last_multi_us: AtomicU64::new(0),
            last_pid: AtomicU32::new(0),
            own_tid: AtomicU32::new(0),
            last_kernel_us: AtomicU64::new(0),
            parked: Mutex::new(Parked::default()),
            parked_now: AtomicUsize::new(0),
            wake: Condvar::new(),
            stats,
            patrol,
            spin: Duration::ZERO,
            spread: None,
        }
    }

    /// Gives the pool the session's /dev/fuse descriptor to poll (a
    /// duplicate; reading it is left to the session's threads).
    pub fn watch(&self, session_fd: BorrowedFd<'_>) -> std::io::Result<()> {
        let fd = session_fd.try_clone_to_owned()?;
        let _ = self.probe.set(fd);
        Ok(())
    }

    /// The calling thread is this daemon's own and may send requests to its
    /// mount (the kernel names the thread, not the process, in a request).
    pub fn own_thread(&self) {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        self.own_tid.store(tid as u32, Relaxed);
    }

    /// A request from `pid` is being served by this thread. The kernel puts
    /// the calling thread's id there, so two threads of one process are two
    /// callers; 0 is the kernel's own request.
    pub fn turn(&self, pid: u32) -> Turn<'_> {
        let caller = Caller::of(pid, self.own_tid.load(Relaxed));
        // One of our own neither makes a second caller (which would keep
        // spares awake and readers to a CPU each for `idle`) nor counts as
        // the kernel's, and nobody waits behind it.
        if self.policy.tracks() && caller != Caller::Own {
            match caller {
                Caller::Process(p) => {
                    let prev = self.last_pid.swap(p, Relaxed);
                    if prev != 0 && prev != p {
                        self.last_multi_us.store(self.now_us(), Relaxed);
                    }
                }
                _ if self.policy.adaptive => self.last_kernel_us.store(self.now_us(), Relaxed),
                _ => {}
            }
            let mut l = self.local();
            if let Some(served) = l.pending_after.take() {
                LOCAL.with(|c| c.set(l));
                if crate::policy::waited_behind(served, caller) {
                    Stats::inc(&self.stats.worker_backlogs);
                    self.wake_one();
                }
            }
        }
        Turn {
            workers: self,
            caller,
        }
    }

    /// This thread's state in this pool (an index on first use).
    fn local(&self) -> Local {
        LOCAL.with(|c| {
            let l = c.get();
            if l.pool == self.id {
                return l;
            }
            let l = Local::new(self.id, self.next.fetch_add(1, Relaxed));
            c.set(l);
            l
        })
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    fn seen(&self) -> Seen {
        Seen {
            now: self.now_us(),
            last_multi: self.last_multi_us.load(Relaxed),
            last_kernel: self.last_kernel_us.load(Relaxed),
        }
    }

    /// Is a request waiting for a reader?
    fn pending(&self) -> bool {
        let Some(fd) = self.probe.get() else {
            return false;
        };
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n == 1 && p.revents & libc::POLLIN != 0 && p.revents & libc::POLLERR == 0
    }

    fn after_request(&self, caller: Caller) {
        let mut l = self.local();
        // The poll is asked only where its answer can matter.
        let queued = self.policy.gate() && self.parked_now.load(Relaxed) > 0 && self.pending();
        // A pool that neither parks nor keeps readers to CPUs (one thread)
        // decides without the clock.
        let seen = if self.policy.tracks() {
            self.seen()
        } else {
            Seen::default()
        };
        let (step, follow) = self.policy.after(l.index, seen, queued);
        if let Some(several) = follow {
            self.follow_callers(&mut l, several);
        }
        match step {
            Step::Note => l.pending_after = Some(caller),
            Step::Read => {}
            Step::Spin => self.spin_for_next(&mut l),
            Step::Park => {}
        }
        LOCAL.with(|c| c.set(l));
        if step == Step::Park {
            self.park();
        }
    }

    /// Keeps this thread to a CPU of its own while several callers send
    /// requests, and lets it go once one is left.
    fn follow_callers(&self, l: &mut Local, several: bool) {
        let Some(sp) = &self.spread else {
            return;
        };
        if l.spread == several {
            return;
        }
        // A thread the kernel refuses stays where it may run and does not
        // ask again until the callers change.
        l.spread = several;
        if several && !l.pinned && sp.set(l.index, true) {
            l.pinned = true;
            Stats::inc(&self.stats.worker_spread_moves);
            Stats::add(&self.stats.workers_spread, 1);
            let kept = self.stats.workers_spread.load(Relaxed);
            assert!(
                kept <= self.policy.threads as u64,
                "{kept} of {} worker threads kept to a CPU",
                self.policy.threads
            );
        } else if !several && l.pinned && sp.set(l.index, false) {
            l.pinned = false;
            Stats::inc(&self.stats.worker_spread_moves);
            Stats::sub(&self.stats.workers_spread, 1);
        }
    }

    /// Polls for the next request for up to `spin`, unless backing off.
    fn spin_for_next(&self, l: &mut Local) {
        if !l.backoff.try_spin() {
            return;
        }
        let start = Instant::now();
        let hit = loop {
            if self.pending() {
                break true;
            }
            if start.elapsed() >= self.spin {
                break false;
            }
            std::hint::spin_loop();
        };
        if hit {
            Stats::inc(&self.stats.worker_spin_hits);
        } else {
            Stats::inc(&self.stats.worker_spin_misses);
        }
        l.backoff.record(hit);
    }

    /// A request is about to wait (for a commit): let a spare read meanwhile.
    pub fn before_wait(&self) {
        if self.policy.gate() {
            self.last_multi_us.store(self.now_us(), Relaxed);
            self.wake_one();
        }
    }

    fn wake_one(&self) {
        if self.parked_now.load(Relaxed) == 0 {
            return;
        }
        let mut p = self.parked.lock().unwrap_or_else(|e| e.into_inner());
        if p.threads > p.tokens {
            p.tokens += 1;
            Stats::inc(&self.stats.worker_wakes);
            self.wake.notify_one();
        }
    }

    fn park(&self) {
        let mut p = self.parked.lock().unwrap_or_else(|e| e.into_inner());
        p.threads += 1;
        let fewest_awake = self.policy.fewest_awake();
        assert!(
            p.threads <= self.policy.threads - fewest_awake && p.threads < self.next.load(Relaxed),
            "{} of {} worker threads parked, {} must stay awake",
            p.threads,
            self.policy.threads,
            fewest_awake
        );
        self.parked_now.store(p.threads, Relaxed);
        Stats::set(&self.stats.workers_parked, p.threads as u64);
        Stats::inc(&self.stats.worker_parks);
        let deadline = Instant::now() + self.patrol;
        while p.tokens == 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            p = self
                .wake
                .wait_timeout(p, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if p.tokens > 0 {
            p.tokens -= 1;
        }
        p.threads -= 1;
        self.parked_now.store(p.threads, Relaxed);
        Stats::set(&self.stats.workers_parked, p.threads as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::BACKOFF_MIN;
    use std::sync::atomic::Ordering::Relaxed;
    use LoneReaders::Fixed;

    /// Two workers whose patrol is too long to end a park: only a wake-up
    /// can.
    fn patient() -> (Arc<Stats>, Arc<Workers>) {
        let stats = Arc::new(Stats::default());
        let w = Workers::with_times(2, Fixed(1), stats.clone(), IDLE, Duration::from_secs(3600));
        (stats, Arc::new(w))
    }

    /// Serves a request on this thread (the one that never parks), then
    /// one on a spare after `IDLE`; returns once the spare has parked.
    fn park_a_spare(w: &Arc<Workers>, stats: &Stats) -> std::thread::JoinHandle<()> {
        drop(w.turn(7));
        assert_eq!(stats.worker_parks.load(Relaxed), 0);
        let w2 = w.clone();
        let spare = std::thread::spawn(move || {
            std::thread::sleep(IDLE);
            drop(w2.turn(7));
        });
        while stats.worker_parks.load(Relaxed) == 0 {
            std::thread::yield_now();
        }
        spare
    }

    #[test]
    fn a_spare_parks_when_idle_and_a_wait_wakes_it() {
        let (stats, w) = patient();
        let spare = park_a_spare(&w, &stats);
        w.before_wait();
        spare.join().unwrap();
        assert_eq!(stats.worker_parks.load(Relaxed), 1);
        assert_eq!(stats.worker_wakes.load(Relaxed), 1);
        assert_eq!(stats.workers_parked.load(Relaxed), 0);
        assert_eq!(w.parked.lock().unwrap().tokens, 0, "the wake-up was taken");
    }

    #[test]
    fn a_parked_spare_reads_again_after_its_patrol() {
        let stats = Arc::new(Stats::default());
        let w = Arc::new(Workers::new(
            2,
            Fixed(1),
            Duration::ZERO,
            false,
            stats.clone(),
        ));
        // Nobody wakes it: the join returns once its patrol has passed.
        park_a_spare(&w, &stats).join().unwrap();
        assert_eq!(stats.worker_parks.load(Relaxed), 1);
        assert_eq!(stats.worker_wakes.load(Relaxed), 0);
        assert_eq!(stats.workers_parked.load(Relaxed), 0);
    }

    /// A pipe stands in for /dev/fuse: a byte in it is a pending request.
    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: fds has room for the two descriptors pipe() returns.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        use std::os::fd::FromRawFd;
        // SAFETY: both descriptors were just opened and are owned here.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    /// Puts a byte in the pipe: from then on a request is pending.
    fn make_pending(tx: &OwnedFd) {
        // SAFETY: writes one byte from a valid buffer to the pipe.
        assert_eq!(
            unsafe { libc::write(tx.as_raw_fd(), b"x".as_ptr().cast(), 1) },
            1
        );
    }

    #[test]
    fn another_caller_waiting_behind_a_request_wakes_a_parked_spare() {
        use std::os::fd::AsFd;
        let (stats, w) = patient();
        let (rx, tx) = pipe();
        w.watch(rx.as_fd()).unwrap();
        let spare = park_a_spare(&w, &stats);
        // Nothing pending after a request: the next one, from anyone, wakes
        // nobody.
        drop(w.turn(7));
        drop(w.turn(8));
        assert_eq!(stats.worker_wakes.load(Relaxed), 0);
        // Pending after pid 7's request, and the next comes from pid 7:
        // the same caller was only quick. Still nobody woken.
        make_pending(&tx);
        drop(w.turn(7));
        drop(w.turn(7));
        assert_eq!(stats.worker_wakes.load(Relaxed), 0);
        assert_eq!(stats.worker_backlogs.load(Relaxed), 0);
        // Pending after pid 7's, and the next is the kernel's own (pid 0).
        drop(w.turn(0));
        assert_eq!(stats.worker_wakes.load(Relaxed), 0);
        // Pending after pid 7's, and pid 8 was waiting: backlog.
        drop(w.turn(7));
        drop(w.turn(8));
        assert_eq!(stats.worker_backlogs.load(Relaxed), 1);
        assert_eq!(stats.worker_wakes.load(Relaxed), 1);
        spare.join().unwrap();
        assert_eq!(stats.workers_parked.load(Relaxed), 0);
    }

    #[test]
    fn with_several_callers_readers_beyond_one_per_cpu_park_until_needed() {
        let stats = Arc::new(Stats::default());
        let mut w =
            Workers::with_times(4, Fixed(1), stats.clone(), IDLE, Duration::from_secs(3600));
        w.policy.several_awake = 2;
        let w = Arc::new(w);
        // Two readers serve callers 7 and 8 in turn: both go on reading.
        drop(w.turn(7));
        let w1 = w.clone();
        std::thread::spawn(move || drop(w1.turn(8))).join().unwrap();
        assert_eq!(stats.worker_parks.load(Relaxed), 0);
        // A third, with the callers still changing, parks after its request
        // until a request about to wait for a commit needs it.
        let w2 = w.clone();
        let third = std::thread::spawn(move || drop(w2.turn(7)));
        let until = Instant::now() + Duration::from_secs(10);
        while stats.worker_parks.load(Relaxed) == 0 && Instant::now() < until {
            std::thread::yield_now();
        }
        assert_eq!(
            stats.workers_parked.load(Relaxed),
            1,
            "the third reader did not park"
        );
        w.before_wait();
        third.join().unwrap();
        assert_eq!(stats.worker_wakes.load(Relaxed), 1);
        assert_eq!(stats.workers_parked.load(Relaxed), 0);
    }

    #[test]
    fn two_callers_keep_a_spare_reading() {
        let stats = Arc::new(Stats::default());
        let mut w = Workers::new(2, Fixed(1), Duration::ZERO, false, stats.clone());
        // Whatever this machine's CPUs: both readers are wanted.
        w.policy.several_awake = 2;
        let w = Arc::new(w);
        drop(w.turn(7));
        let w2 = w.clone();
        std::thread::spawn(move || {
            std::thread::sleep(IDLE);
            // Callers 7 and 8 in turn: the spare goes on reading.
            for pid in [8, 7, 8, 7] {
                drop(w2.turn(pid));
            }
        })
        .join()
        .unwrap();
        assert_eq!(stats.worker_parks.load(Relaxed), 0);
    }

    /// A pool of two whose first thread spins for up to `spin`, watching a
    /// pipe that stands in for /dev/fuse.
    fn spinning(spin: Duration) -> (Arc<Stats>, Workers, OwnedFd, OwnedFd) {
        use std::os::fd::AsFd;
        let stats = Arc::new(Stats::default());
        let w = Workers::new(2, Fixed(1), spin, false, stats.clone());
        let (rx, tx) = pipe();
        w.watch(rx.as_fd()).unwrap();
        // A new pool has seen no caller for less than IDLE.
        std::thread::sleep(IDLE);
        (stats, w, rx, tx)
    }

    #[test]
    fn a_lone_callers_thread_spins_until_its_next_request_is_pending() {
        // A spin of an hour ends only because a request is pending.
        let (stats, w, _rx, tx) = spinning(Duration::from_secs(3600));
        make_pending(&tx);
        drop(w.turn(7));
        drop(w.turn(7));
        assert_eq!(stats.worker_spin_hits.load(Relaxed), 2);
        assert_eq!(stats.worker_spin_misses.load(Relaxed), 0);
    }

    #[test]
    fn a_spin_that_catches_nothing_backs_off() {
        let (stats, w, _rx, _tx) = spinning(Duration::from_millis(1));
        drop(w.turn(7));
        assert_eq!(stats.worker_spin_misses.load(Relaxed), 1);
        for _ in 0..BACKOFF_MIN {
            drop(w.turn(7));
        }
        assert_eq!(
            stats.worker_spin_misses.load(Relaxed),
            1,
            "no spin while backing off"
        );
        drop(w.turn(7));
        assert_eq!(stats.worker_spin_misses.load(Relaxed), 2);
        // The back-off doubled: the next 2 × MIN requests do not spin.
        for _ in 0..2 * BACKOFF_MIN {
            drop(w.turn(7));
        }
        assert_eq!(stats.worker_spin_misses.load(Relaxed), 2);
        assert_eq!(stats.worker_spin_hits.load(Relaxed), 0);
    }

    #[test]
    fn two_callers_are_not_spun_for() {
        // A request always pending: every spin would catch one at once.
        let (stats, w, _rx, tx) = spinning(Duration::from_secs(3600));
        make_pending(&tx);
        drop(w.turn(7));
        assert_eq!(stats.worker_spin_hits.load(Relaxed), 1, "one caller so far");
        for pid in [8, 7, 8] {
            drop(w.turn(pid));
        }
        assert_eq!(stats.worker_spin_hits.load(Relaxed), 1);
        assert_eq!(stats.worker_spin_misses.load(Relaxed), 0);
    }

    #[test]
    fn a_lone_thread_spins_too() {
        use std::os::fd::AsFd;
        let stats = Arc::new(Stats::default());
        let w = Workers::new(1, Fixed(2), Duration::from_secs(3600), false, stats.clone());
        let (rx, tx) = pipe();
        w.watch(rx.as_fd()).unwrap();
        // A spin of an hour ends only because a request is pending, from
        // whichever caller.
        make_pending(&tx);
        for pid in [7, 8, 7] {
            drop(w.turn(pid));
        }
        assert_eq!(stats.worker_spin_hits.load(Relaxed), 3);
        assert_eq!(stats.worker_parks.load(Relaxed), 0);
    }

    #[test]
    fn two_readers_stay_awake_for_a_lone_caller_and_neither_spins() {
        use std::os::fd::AsFd;
        let stats = Arc::new(Stats::default());
        // Two threads, both awake. A spin of an hour would
        // catch the pending request at once and count a hit.
        let w = Arc::new(Workers::new(
            2,
            Fixed(2),
            Duration::from_secs(3600),
            false,
            stats.clone(),
        ));
        let (rx, tx) = pipe();
        w.watch(rx.as_fd()).unwrap();
        make_pending(&tx);
        std::thread::sleep(IDLE);
        drop(w.turn(7));
        let w2 = w.clone();
        std::thread::spawn(move || {
            for _ in 0..3 {
                drop(w2.turn(7));
            }
        })
        .join()
        .unwrap();
        drop(w.turn(7));
        assert_eq!(stats.worker_parks.load(Relaxed), 0);
        assert_eq!(stats.worker_spin_hits.load(Relaxed), 0);
        assert_eq!(stats.worker_spin_misses.load(Relaxed), 0);
    }

    #[test]
    fn spares_beyond_the_awake_readers_park() {
        let stats = Arc::new(Stats::default());
        let w = Arc::new(Workers::with_times(
            3,
            Fixed(2),
            stats.clone(),
            IDLE,
            Duration::from_secs(3600),
        ));
        std::thread::sleep(IDLE);
        // The first two threads to serve stay awake.
        drop(w.turn(7));
        let w2 = w.clone();
        let second = std::thread::spawn(move || drop(w2.turn(7)));
        while !second.is_finished() && stats.worker_parks.load(Relaxed) == 0 {
            std::thread::yield_now();
        }
        let parked = stats.worker_parks.load(Relaxed);
        if parked > 0 {
            w.before_wait();
        }
        second.join().unwrap();
        assert_eq!(parked, 0, "the second reader parked");
        // The third parks until a wait wakes it.
        let w3 = w.clone();
        let spare = std::thread::spawn(move || drop(w3.turn(7)));
        while stats.worker_parks.load(Relaxed) == 0 {
            std::thread::yield_now();
        }
        assert_eq!(stats.workers_parked.load(Relaxed), 1);
        w.before_wait();
        spare.join().unwrap();
        assert_eq!(stats.worker_wakes.load(Relaxed), 1);
        assert_eq!(stats.workers_parked.load(Relaxed), 0);
    }

    #[test]
    fn auto_keeps_two_readers_until_the_kernel_sends_its_own() {
        use std::os::fd::AsFd;
        use std::sync::mpsc;
        let stats = Arc::new(Stats::default());
        let mut w = Workers::with_times(
            2,
            LoneReaders::Auto,
            stats.clone(),
            IDLE,
            Duration::from_secs(3600),
        );
        // A spin of an hour ends at once on the pending request (a hit).
        w.spin = Duration::from_secs(3600);
        w.policy.spin = true;
        let w = Arc::new(w);
        let (rx, tx) = pipe();
        w.watch(rx.as_fd()).unwrap();
        make_pending(&tx);
        std::thread::sleep(IDLE);
        // This thread is the first reader; the second serves one request
        // of pid 7 for each message, on one thread (its index).
        drop(w.turn(7));
        let (ask, asked) = mpsc::channel::<()>();
        let (done_tx, done) = mpsc::channel::<()>();
        let w2 = w.clone();
        let second = std::thread::spawn(move || {
            for () in asked {
                drop(w2.turn(7));
                done_tx.send(()).unwrap();
            }
        });
        // A reader that parks stays parked for its patrol (an hour).
        let served = |done: &mpsc::Receiver<()>| {
            done.recv_timeout(Duration::from_secs(10))
                .expect("the second reader parked")
        };
        // Only a caller so far: both readers stay awake, neither spins.
        ask.send(()).unwrap();
        served(&done);
        assert_eq!(stats.worker_parks.load(Relaxed), 0);
        assert_eq!(stats.worker_spin_hits.load(Relaxed), 0);
        // The kernel's own request (a RELEASE): one reader, which spins.
        drop(w.turn(0));
        assert_eq!(stats.worker_spin_hits.load(Relaxed), 1);
        drop(w.turn(7));
        assert_eq!(stats.worker_spin_hits.load(Relaxed), 2);
        // ... and the second reader parks after its next request.
        ask.send(()).unwrap();
        while stats.worker_parks.load(Relaxed) == 0 {
            std::thread::yield_now();
        }
        assert_eq!(stats.workers_parked.load(Relaxed), 1);
        w.before_wait();
        done.recv().unwrap();
        // `IDLE` without the kernel's: two readers again, no spin. (The
        // wait above also counted as two callers; that too has passed.)
        std::thread::sleep(IDLE);
        drop(w.turn(7));
        ask.send(()).unwrap();
        served(&done);
        drop(ask);
        second.join().unwrap();
        assert_eq!(stats.worker_parks.load(Relaxed), 1);
        assert_eq!(stats.worker_spin_hits.load(Relaxed), 2);
        assert_eq!(stats.worker_spin_misses.load(Relaxed), 0);
    }

    /// The CPUs the calling thread may run on.
    fn allowed_cpus() -> Vec<usize> {
        crate::cpus::of_this_thread().expect("sched_getaffinity").1
    }

    #[test]
    fn readers_keep_to_a_cpu_each_while_several_callers_send() {
        let stats = Arc::new(Stats::default());
        let all = allowed_cpus();
        let several_cpus = all.len() > 1;
        let mut w = Workers::with_times(
            2,
            LoneReaders::Auto,
            stats.clone(),
            IDLE,
            Duration::from_secs(3600),
        );
        w.spread_over(Spread::of_this_thread());
        assert_eq!(w.spread.is_some(), several_cpus);
        assert_eq!(w.policy.spread, several_cpus);
        let moves = || stats.worker_spread_moves.load(Relaxed);
        let spread = || stats.workers_spread.load(Relaxed);
        // On a thread of its own, which the test leaves as it found it.
        std::thread::scope(|s| {
            s.spawn(|| {
                // A new pool has seen no caller for less than IDLE.
                std::thread::sleep(IDLE);
                // One caller: this reader (the pool's first) may run anywhere.
                drop(w.turn(7));
                drop(w.turn(7));
                assert_eq!(allowed_cpus(), all);
                assert_eq!(moves(), 0);
                // Two callers in a row: it keeps to the first CPU.
                drop(w.turn(8));
                if several_cpus {
                    assert_eq!(allowed_cpus(), vec![all[0]]);
                    assert_eq!((moves(), spread()), (1, 1));
                } else {
                    assert_eq!((moves(), spread()), (0, 0));
                }
                drop(w.turn(7));
                assert_eq!(moves(), u64::from(several_cpus));
                // One caller for IDLE: it may run anywhere again.
                std::thread::sleep(IDLE);
                drop(w.turn(7));
                assert_eq!(allowed_cpus(), all);
                assert_eq!((moves(), spread()), (2 * u64::from(several_cpus), 0));
            });
        });
        // Off: two callers move nobody.
        let stats = Arc::new(Stats::default());
        let w = Workers::new(2, LoneReaders::Auto, Duration::ZERO, false, stats.clone());
        std::thread::scope(|s| {
            s.spawn(|| {
                drop(w.turn(7));
                drop(w.turn(8));
                drop(w.turn(7));
                assert_eq!(allowed_cpus(), all);
            });
        });
        assert_eq!(stats.worker_spread_moves.load(Relaxed), 0);
    }

    #[test]
    fn the_daemons_own_requests_are_no_second_caller() {
        let stats = Arc::new(Stats::default());
        let w = Workers::with_times(
            2,
            LoneReaders::Auto,
            stats.clone(),
            IDLE,
            Duration::from_secs(3600),
        );
        let multi = || w.last_multi_us.load(Relaxed);
        std::thread::scope(|s| {
            s.spawn(|| w.own_thread());
        });
        let own = w.own_tid.load(Relaxed);
        assert_ne!(own, 0);
        drop(w.turn(9));
        let before = multi();
        std::thread::sleep(Duration::from_millis(1));
        // A request of the thread that said it is ours, between two of one
        // caller: no second caller, and not the kernel's.
        drop(w.turn(own));
        drop(w.turn(9));
        assert_eq!(multi(), before, "our own request made a second caller");
        assert_eq!(w.last_kernel_us.load(Relaxed), 0, "taken for the kernel's");
        // Another process's request does make one.
        drop(w.turn(8));
        assert!(multi() > before);
    }

    #[test]
    fn one_thread_never_parks() {
        let stats = Arc::new(Stats::default());
        let w = Workers::new(1, Fixed(2), Duration::ZERO, false, stats.clone());
        for _ in 0..3 {
            drop(w.turn(1));
        }
        w.before_wait();
        assert_eq!(stats.worker_parks.load(Relaxed), 0);
    }
}
