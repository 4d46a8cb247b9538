//! The reader policy, as pure functions: which caller a request comes from,
//! whether it waited behind another caller's, what a reader does after a
//! reply (read again, spin for the next request, park), and when a spin
//! backs off. `workers.rs` feeds them the clock (µs since the pool
//! started), what it saw on /dev/fuse and the reader's index, and does the
//! I/O (poll, park, `sched_setaffinity`); the tests here drive them with
//! made-up times. docs/design.md §9, "Worker threads", has the reasons.

/// Polls that find nothing make a spin skip this many requests at first,
/// doubling up to `BACKOFF_MAX` while spins keep missing.
pub(crate) const BACKOFF_MIN: u32 = 8;
pub(crate) const BACKOFF_MAX: u32 = 1024;

/// Who sent a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Caller {
    /// A thread of a process (the kernel puts the thread id in a request:
    /// two threads of one process are two callers).
    Process(u32),
    /// The kernel, on its own behalf (pid 0: the RELEASE after a close).
    Kernel,
    /// One of this daemon's threads calling into its own mount (the
    /// negative-dentry thread's checks): neither a caller nor the kernel.
    Own,
}

impl Caller {
    /// `own` is the daemon's own thread id (0 until it has one).
    pub(crate) fn of(pid: u32, own: u32) -> Caller {
        match pid {
            0 => Caller::Kernel,
            p if p == own => Caller::Own,
            p => Caller::Process(p),
        }
    }
}

/// A request was pending when a reader finished `served`'s; `next` is the
/// request it read then. Another caller's request had been waiting behind
/// ours: backlog, and a parked reader is wanted. The same caller's next
/// request (it was quicker than the reader), the kernel's, or ours is not.
pub(crate) fn waited_behind(served: Caller, next: Caller) -> bool {
    matches!((served, next), (Caller::Process(a), Caller::Process(b)) if a != b)
}

/// The pool's shape, fixed when it starts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Policy {
    pub threads: usize,
    /// Readers that stay reading while one caller at a time is served.
    pub awake: usize,
    /// Readers that stay reading while several callers send requests.
    pub several_awake: usize,
    /// One reader instead of `awake` while the kernel sends requests of
    /// its own (`LoneReaders::Auto`).
    pub adaptive: bool,
    /// How long a sighting of two callers, or of a kernel request, lasts.
    pub idle_us: u64,
    /// A reader left alone for a lone caller spins for its next request.
    pub spin: bool,
    /// Readers keep to a CPU each while several callers send requests.
    pub spread: bool,
}

/// What the pool saw, in µs since it started.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seen {
    pub now: u64,
    /// When two callers were last seen one after the other (or a request
    /// was about to wait for a commit).
    pub last_multi: u64,
    /// When the kernel last sent a request of its own.
    pub last_kernel: u64,
}

/// What a reader does once it has replied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A request is pending and a reader is parked: remember the caller
    /// just served, to tell at the next request whether it waited behind.
    Note,
    /// Go back to reading.
    Read,
    /// Poll for the next request for the spin's length, then read.
    Spin,
    /// Park until woken or the patrol ends.
    Park,
}

impl Policy {
    /// Readers that never park.
    pub(crate) fn fewest_awake(&self) -> usize {
        if self.adaptive {
            1
        } else {
            self.awake
        }
    }

    /// Spares exist, so readers may park.
    pub(crate) fn gate(&self) -> bool {
        self.threads > self.fewest_awake()
    }

    /// Callers must be told apart (for parking or for keeping to CPUs).
    pub(crate) fn tracks(&self) -> bool {
        self.gate() || self.spread
    }

    /// Have two callers been seen in a row within `idle_us`?
    pub(crate) fn several(&self, s: Seen) -> bool {
        s.now.saturating_sub(s.last_multi) < self.idle_us
    }

    /// Readers that stay reading for a lone caller now.
    pub(crate) fn awake_now(&self, s: Seen) -> usize {
        if self.adaptive && s.now.saturating_sub(s.last_kernel) < self.idle_us {
            1
        } else {
            self.awake
        }
    }

    /// After reader `index` replied. `queued`: a reader is parked and a
    /// request is already pending (only asked when the pool may park).
    /// Returns the step, and with `spread` whether the reader should keep
    /// to its CPU (`None`: leave it where it is).
    pub(crate) fn after(&self, index: usize, s: Seen, queued: bool) -> (Step, Option<bool>) {
        let several = self.several(s);
        let follow = self.spread.then_some(several);
        if !self.gate() {
            // Nobody parks; a lone thread spins for whoever sends next.
            let step = if self.spin { Step::Spin } else { Step::Read };
            return (step, follow);
        }
        if queued {
            return (Step::Note, None);
        }
        let awake = if several {
            self.several_awake
        } else {
            self.awake_now(s)
        };
        let step = if index >= awake {
            Step::Park
        } else if !several && awake == 1 && self.spin {
            Step::Spin
        } else {
            Step::Read
        };
        (step, follow)
    }
}

/// When a spin is worth trying: after a window of polls of which more than
/// half caught nothing, the next `skip` are skipped, `BACKOFF_MIN` at
/// first and doubling up to `BACKOFF_MAX` while windows keep missing; a
/// window that mostly caught something starts over at the minimum. The
/// /dev/fuse readers judge every poll alone (a window of 1); the io_uring
/// queues judge 64 at a time (`POLL_WINDOW`), since their misses come in runs even while a
/// caller is served well.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Backoff {
    window: u32,
    skip: u32,
    next: u32,
    polls: u32,
    misses: u32,
}

impl Backoff {
    pub(crate) const fn new(window: u32) -> Backoff {
        Backoff {
            window,
            skip: 0,
            next: BACKOFF_MIN,
            polls: 0,
            misses: 0,
        }
    }

    /// Whether to poll this time; counts a skipped one.
    pub(crate) fn try_spin(&mut self) -> bool {
        if self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        true
    }

    /// A poll caught a request (`hit`) or nothing.
    pub(crate) fn record(&mut self, hit: bool) {
        self.polls += 1;
        self.misses += u32::from(!hit);
        if self.polls < self.window.max(1) {
            return;
        }
        if 2 * self.misses > self.polls {
            self.skip = self.next;
            self.next = (self.next * 2).min(BACKOFF_MAX);
        } else {
            self.next = BACKOFF_MIN;
        }
        (self.polls, self.misses) = (0, 0);
        debug_assert!(self.skip <= BACKOFF_MAX && self.next <= BACKOFF_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Step::*;

    const IDLE: u64 = 10_000;

    fn pool(threads: usize, awake: usize, adaptive: bool, spin: bool) -> Policy {
        Policy {
            threads,
            awake,
            several_awake: 2,
            adaptive,
            idle_us: IDLE,
            spin,
            spread: false,
        }
    }

    /// `now`, and how long ago two callers and the kernel were last seen.
    fn seen(now: u64, multi_ago: u64, kernel_ago: u64) -> Seen {
        Seen {
            now,
            last_multi: now - multi_ago,
            last_kernel: now - kernel_ago,
        }
    }

    #[test]
    fn callers_are_told_apart() {
        assert_eq!(Caller::of(0, 0), Caller::Kernel);
        assert_eq!(Caller::of(0, 5), Caller::Kernel);
        assert_eq!(Caller::of(5, 5), Caller::Own);
        assert_eq!(Caller::of(7, 5), Caller::Process(7));
        assert_eq!(Caller::of(7, 0), Caller::Process(7));
        let (p7, p8) = (Caller::Process(7), Caller::Process(8));
        for (served, next, backlog) in [
            (p7, p8, true),
            (p7, p7, false),
            (p7, Caller::Kernel, false),
            (p7, Caller::Own, false),
            (Caller::Kernel, p8, false),
            (Caller::Own, p8, false),
        ] {
            assert_eq!(
                waited_behind(served, next),
                backlog,
                "{served:?} then {next:?}"
            );
        }
    }

    #[test]
    fn what_a_reader_does_after_a_reply() {
        let long = 100 * IDLE;
        // (policy, reader index, seen, queued) → step
        let rows: &[(Policy, usize, Seen, bool, Step)] = &[
            // One thread: nobody parks; it spins after every reply if it may.
            (
                pool(1, 1, false, true),
                0,
                seen(long, long, long),
                false,
                Spin,
            ),
            (pool(1, 1, false, false), 0, seen(long, 0, 0), false, Read),
            (pool(1, 1, false, true), 0, seen(long, 0, 0), true, Spin),
            // Two readers both awake (fixed 2 of 2): nobody parks, no spin.
            (
                pool(2, 2, false, false),
                1,
                seen(long, long, long),
                false,
                Read,
            ),
            // Fixed 1 of 2, lone caller: the first spins, the spare parks.
            (
                pool(2, 1, false, true),
                0,
                seen(long, long, long),
                false,
                Spin,
            ),
            (
                pool(2, 1, false, true),
                1,
                seen(long, long, long),
                false,
                Park,
            ),
            // ... but a request queued while a reader is parked: note it.
            (
                pool(2, 1, false, true),
                1,
                seen(long, long, long),
                true,
                Note,
            ),
            // Two callers seen within IDLE: both readers stay, nobody spins.
            (
                pool(2, 1, false, true),
                1,
                seen(long, IDLE - 1, long),
                false,
                Read,
            ),
            (
                pool(2, 1, false, true),
                0,
                seen(long, IDLE - 1, long),
                false,
                Read,
            ),
            // ... and IDLE after the sighting the spare parks again.
            (
                pool(2, 1, false, true),
                1,
                seen(long, IDLE, long),
                false,
                Park,
            ),
            // Several callers on 3 threads, two per CPU: the third parks.
            (pool(3, 1, false, true), 2, seen(long, 0, long), false, Park),
            // Auto on 2 threads, only callers: two awake, neither spins.
            (
                pool(2, 2, true, true),
                0,
                seen(long, long, long),
                false,
                Read,
            ),
            (
                pool(2, 2, true, true),
                1,
                seen(long, long, long),
                false,
                Read,
            ),
            // Auto, the kernel sent one of its own within IDLE: one reader,
            // which spins; the second parks.
            (
                pool(2, 2, true, true),
                0,
                seen(long, long, IDLE - 1),
                false,
                Spin,
            ),
            (
                pool(2, 2, true, true),
                1,
                seen(long, long, IDLE - 1),
                false,
                Park,
            ),
            // Auto, IDLE after the kernel's last: two again.
            (
                pool(2, 2, true, true),
                1,
                seen(long, long, IDLE),
                false,
                Read,
            ),
            // Auto on 3 threads, only callers: the third is a spare.
            (
                pool(3, 2, true, true),
                2,
                seen(long, long, long),
                false,
                Park,
            ),
        ];
        for (i, &(p, index, s, queued, want)) in rows.iter().enumerate() {
            assert_eq!(
                p.after(index, s, queued).0,
                want,
                "row {i}: {p:?} reader {index} {s:?}"
            );
        }
    }

    #[test]
    fn readers_follow_the_callers_to_a_cpu_each_only_with_spread() {
        let mut p = pool(2, 2, true, true);
        assert_eq!(p.after(0, seen(IDLE, 0, IDLE), false).1, None);
        p.spread = true;
        assert_eq!(p.after(0, seen(IDLE, 0, IDLE), false).1, Some(true));
        assert_eq!(p.after(0, seen(IDLE, IDLE, IDLE), false).1, Some(false));
        // A queued request decides nothing about CPUs.
        assert_eq!(p.after(1, seen(IDLE, IDLE, 0), true), (Note, None));
        // A pool that never parks still follows.
        let one = Policy {
            spread: true,
            ..pool(1, 1, false, false)
        };
        assert_eq!(one.after(0, seen(IDLE, 0, IDLE), false), (Read, Some(true)));
        assert!(one.tracks() && !one.gate());
    }

    #[test]
    fn spares_exist_only_beyond_the_readers_that_never_park() {
        assert!(!pool(1, 1, false, true).gate());
        assert!(!pool(2, 2, false, true).gate());
        assert!(pool(2, 2, true, true).gate(), "auto may drop to one");
        assert!(pool(3, 2, false, true).gate());
        assert!(!pool(2, 2, false, true).tracks());
    }

    /// Runs `polls` (true: a hit) through a back-off and returns, for each
    /// request, whether it spun.
    fn spins(b: &mut Backoff, polls: &[bool]) -> Vec<bool> {
        let mut out = Vec::new();
        let mut polls = polls.iter();
        while let Some(&hit) = polls.clone().next() {
            let spun = b.try_spin();
            out.push(spun);
            if spun {
                b.record(hit);
                polls.next();
            }
        }
        out
    }

    #[test]
    fn a_spin_that_misses_skips_the_next_requests_doubling() {
        let mut b = Backoff::new(1);
        // A miss, then 8 skipped, a miss, 16 skipped, then a hit.
        let got = spins(&mut b, &[false, false, true]);
        let mut want = vec![true];
        want.extend([false; BACKOFF_MIN as usize]);
        want.push(true);
        want.extend(vec![false; 2 * BACKOFF_MIN as usize]);
        want.push(true);
        assert_eq!(got, want);
        // The hit started the back-off over: a miss skips 8 again.
        b.record(false);
        assert_eq!(b.skip, BACKOFF_MIN);
        // Misses in a row stop doubling at the maximum.
        for _ in 0..20 {
            while !b.try_spin() {}
            b.record(false);
        }
        assert_eq!(b.skip, BACKOFF_MAX);
    }

    #[test]
    fn a_window_backs_off_only_when_most_of_it_missed() {
        let mut b = Backoff::new(4);
        // 2 of 4 missed: no back-off.
        for hit in [false, true, false, true] {
            assert!(b.try_spin());
            b.record(hit);
        }
        assert!(b.try_spin());
        // 3 of 4 missed: skip 8.
        for hit in [false, false, true] {
            b.record(hit);
            assert!(b.try_spin());
        }
        b.record(false);
        assert_eq!((b.skip, b.next), (BACKOFF_MIN, 2 * BACKOFF_MIN));
    }
}
