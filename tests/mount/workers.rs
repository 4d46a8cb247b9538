//! Worker threads (crates/fuse/src/workers.rs): while one caller at a time
//! sends requests, two threads (one once the kernel sends requests of its
//! own) go on reading and the spares
//! beyond them park; a second caller's request queued behind the
//! first wakes one; a request that waits for a commit (fsync) wakes one so
//! that others are served meanwhile; while several callers send
//! requests, each reader keeps to a CPU of its own.

use crate::support::{daemon_threads, stat_of, Mount};
use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Stats missing names in `dir` from this thread until a spare parks.
fn serial_until_parked(m: &Mount, dir: &Path, n: &mut u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for _ in 0..500 {
            assert!(fs::metadata(dir.join(format!("miss-{n}"))).is_err());
            *n += 1;
        }
        if stat_of(m, "workers_parked") == 1 {
            return;
        }
        assert!(Instant::now() < deadline, "the spare never parked");
    }
}

#[test]
fn one_caller_leaves_the_spare_parked_and_a_second_wakes_it() {
    // Three threads: two stay reading for one caller, the third is a spare.
    let m = Mount::new("threads=3");
    let dir = m.path("d");
    fs::create_dir(&dir).unwrap();
    let mut n = 0;
    serial_until_parked(&m, &dir, &mut n);
    // One caller: its requests never queue behind each other.
    let wakes = stat_of(&m, "worker_wakes");
    for _ in 0..5_000 {
        assert!(fs::metadata(dir.join(format!("miss-{n}"))).is_err());
        n += 1;
    }
    assert_eq!(stat_of(&m, "worker_backlogs"), 0);
    assert_eq!(stat_of(&m, "worker_wakes"), wakes);

    // Two callers at once: a request of one waits behind the other's.
    let deadline = Instant::now() + Duration::from_secs(30);
    std::thread::scope(|s| {
        for t in 0..2 {
            let (m, dir) = (&m, &dir);
            s.spawn(move || {
                let mut i = 0u64;
                while stat_of(m, "worker_backlogs") == 0 && Instant::now() < deadline {
                    for _ in 0..500 {
                        assert!(fs::metadata(dir.join(format!("par-{t}-{i}"))).is_err());
                        i += 1;
                    }
                }
            });
        }
    });
    assert!(stat_of(&m, "worker_backlogs") > 0, "no backlog seen");
    assert!(
        stat_of(&m, "worker_wakes") > wakes,
        "the spare was not woken"
    );
}

#[test]
fn a_request_waiting_for_a_commit_wakes_the_spare() {
    let m = Mount::new("threads=3");
    let dir = m.path("d");
    fs::create_dir(&dir).unwrap();
    let mut f = fs::File::create(dir.join("f")).unwrap();
    let mut n = 0;
    // A parked spare may be back reading for a moment (its patrol); try a
    // few times.
    for attempt in 0.. {
        serial_until_parked(&m, &dir, &mut n);
        let wakes = stat_of(&m, "worker_wakes");
        f.write_all(b"x").unwrap();
        f.sync_all().unwrap();
        if stat_of(&m, "worker_wakes") > wakes {
            break;
        }
        assert!(attempt < 20, "fsync never woke the parked spare");
    }
}

/// One caller stats `before` missing names, pauses past the workers' idle
/// time, stats `after` more; then nobody may have parked.
fn alone_nobody_parks(m: &Mount, before: u64, after: u64) {
    for i in 0..before {
        assert!(fs::metadata(m.path(&format!("miss-{i}"))).is_err());
    }
    std::thread::sleep(Duration::from_millis(50));
    for i in 0..after {
        assert!(fs::metadata(m.path(&format!("again-{i}"))).is_err());
    }
    assert_eq!(stat_of(m, "worker_parks"), 0);
    assert_eq!(stat_of(m, "workers_parked"), 0);
}

#[test]
fn for_one_caller_two_readers_stay_awake_and_a_third_parks() {
    let m = Mount::new("threads=3");
    let dir = m.path("d");
    fs::create_dir(&dir).unwrap();
    let mut n = 0;
    serial_until_parked(&m, &dir, &mut n);
    for _ in 0..20 {
        for _ in 0..500 {
            assert!(fs::metadata(dir.join(format!("miss-{n}"))).is_err());
            n += 1;
        }
        assert!(stat_of(&m, "workers_parked") <= 1, "an awake reader parked");
    }
    assert_eq!(stat_of(&m, "worker_spin_hits"), 0, "two readers never spin");
}

#[test]
fn the_kernels_own_requests_leave_one_reader() {
    // Only a caller's requests: two readers stay awake, neither spins.
    let m = Mount::new("threads=2");
    alone_nobody_parks(&m, 5_000, 5_000);
    assert_eq!(stat_of(&m, "worker_spin_hits"), 0, "two readers never spin");

    // Every close of a file sends a RELEASE on the kernel's own behalf
    // (pid 0): one reader stays, the other parks.
    let dir = m.path("d");
    fs::create_dir(&dir).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = 0u64;
    while stat_of(&m, "worker_parks") == 0 {
        for _ in 0..200 {
            fs::File::create(dir.join(format!("f-{n}"))).unwrap();
            n += 1;
        }
        assert!(Instant::now() < deadline, "nobody parked after {n} closes");
    }
    assert!(stat_of(&m, "workers_parked") <= 1);
}

/// `Cpus_allowed_list` of each /dev/fuse reader (`churnfs-devN`).
fn readers_cpus(m: &Mount) -> Vec<String> {
    let mut v: Vec<(String, String)> = daemon_threads(m)
        .into_iter()
        .filter(|(comm, _)| comm.starts_with("churnfs-dev"))
        .map(|(comm, task)| {
            let status = fs::read_to_string(task.join("status")).unwrap_or_default();
            let list = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .unwrap_or("")
                .trim()
                .to_string();
            (comm, list)
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, list)| list).collect()
}

#[test]
fn several_callers_keep_each_reader_to_a_cpu_of_its_own() {
    let several_cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) > 1;
    let m = Mount::new("threads=2");
    let dir = m.path("d");
    fs::create_dir(&dir).unwrap();
    // The daemon's own CPUs, as one caller finds the readers.
    for i in 0..2_000 {
        assert!(fs::metadata(dir.join(format!("alone-{i}"))).is_err());
    }
    std::thread::sleep(Duration::from_millis(50));
    for i in 0..100 {
        assert!(fs::metadata(dir.join(format!("again-{i}"))).is_err());
    }
    let alone = readers_cpus(&m);
    assert_eq!(alone.len(), 2, "{alone:?}");
    assert_eq!(stat_of(&m, "workers_spread"), 0);

    // Two callers at once until both readers have served them. This
    // thread watches, so that neither caller pauses to ask; both stop
    // together, within a request of each other (a caller left alone is one
    // caller, whose readers go back to every CPU after `IDLE`).
    let deadline = Instant::now() + Duration::from_secs(30);
    let want = if several_cpus { 2 } else { 0 };
    let stop = AtomicBool::new(false);
    let sent = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..2 {
            let (dir, stop, sent) = (&dir, &stop, &sent);
            s.spawn(move || {
                let mut i = 0u64;
                while !stop.load(Relaxed) {
                    assert!(fs::metadata(dir.join(format!("par-{t}-{i}"))).is_err());
                    i += 1;
                    sent.fetch_add(1, Relaxed);
                }
            });
        }
        while (sent.load(Relaxed) < 40_000 || stat_of(&m, "workers_spread") < want)
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Relaxed);
    });
    let together = readers_cpus(&m);
    if several_cpus {
        assert_eq!(stat_of(&m, "workers_spread"), 2);
        // One CPU each, not the same one.
        assert!(
            together.iter().all(|l| l.parse::<usize>().is_ok()),
            "{together:?}"
        );
        assert_ne!(together[0], together[1]);
    } else {
        assert_eq!(stat_of(&m, "worker_spread_moves"), 0);
        assert_eq!(together, alone);
    }

    // One caller again: each reader may run anywhere after its next request.
    std::thread::sleep(Duration::from_millis(50));
    let mut i = 0;
    while stat_of(&m, "workers_spread") > 0 {
        for _ in 0..100 {
            assert!(fs::metadata(dir.join(format!("after-{i}"))).is_err());
            i += 1;
        }
        assert!(Instant::now() < deadline + Duration::from_secs(30));
    }
    assert_eq!(readers_cpus(&m), alone);
}

#[test]
fn one_thread_never_parks() {
    alone_nobody_parks(&Mount::new("threads=1"), 2_000, 100);
}

/// The scheduling policy (field 41 of /proc/PID/task/TID/stat) of each of
/// the daemon's threads that serve requests, once `want` of them run.
fn serving_policies(m: &Mount, want: usize) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut found = Vec::new();
        for (comm, task) in daemon_threads(m) {
            if !comm.starts_with("churnfs-dev") && !comm.starts_with("churnfs-ring") {
                continue;
            }
            let stat = fs::read_to_string(task.join("stat")).unwrap_or_default();
            // Fields after the command's closing parenthesis start at 3.
            let after = &stat[stat.rfind(')').expect("stat has a comm") + 1..];
            let policy = after.split_whitespace().nth(41 - 3).expect("policy field");
            found.push(policy.parse().unwrap());
        }
        if found.len() >= want {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{} serving threads after 30 s, want {want}",
            found.len()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn serving_threads_run_as_sched_batch() {
    const SCHED_BATCH: u32 = 3;
    let m = Mount::new("threads=2");
    // A reader counts itself after its policy is set: wait for both, so
    // that none is read between its start and that call.
    let deadline = Instant::now() + Duration::from_secs(30);
    while stat_of(&m, "sched_batch_threads") + stat_of(&m, "sched_batch_refused") < 2 {
        assert!(
            Instant::now() < deadline,
            "the readers never set their policy"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(stat_of(&m, "sched_batch_refused"), 0);
    let policies = serving_policies(&m, 2);
    assert!(policies.iter().all(|&p| p == SCHED_BATCH), "{policies:?}");
    assert_eq!(stat_of(&m, "sched_batch_threads"), policies.len() as u64);
}

#[test]
fn the_store_works_on_half_the_cores() {
    // fjall's background workers, named `fjall:worker`: half the cores, at
    // least one (docs/design.md §10).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let want = churnfs_engine::store_workers(cores);
    let m = Mount::new("");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = daemon_threads(&m)
            .iter()
            .filter(|(comm, _)| comm.starts_with("fjall:worker"))
            .count();
        if n >= want {
            assert_eq!(n, want, "{cores} cores");
            return;
        }
        assert!(Instant::now() < deadline, "{n} store workers after 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}
