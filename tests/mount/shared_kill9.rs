//! A mount dies (kill -9) holding 10,000 files unlinked while open: once
//! its session's lease expires, the other mount reclaims them in bounded
//! batches, and fsck finds the volume clean with nothing left of the dead
//! session.

use crate::support::{churnfs, eventually, stat_of, Volume};
use std::fs;
use std::time::{Duration, Instant};

const HELD: usize = 10_000;
const THREADS: usize = 8;

/// Lets this process hold `n` descriptors (the hard limit allowing).
fn allow_fds(n: u64) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: reads and sets this process's own limit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur = n.min(r.rlim_max);
        libc::setrlimit(libc::RLIMIT_NOFILE, &r);
    }
    assert!(
        r.rlim_cur >= n,
        "the hard limit allows only {} descriptors",
        r.rlim_max
    );
}

#[test]
fn a_dead_mounts_open_unlinked_files_are_reclaimed_by_another() {
    allow_fds(HELD as u64 + 1000);
    let vol = Volume::new(3);
    let mut a = vol.mount("");
    let b = vol.mount("");
    fs::create_dir(a.path("held")).unwrap();
    let start = Instant::now();
    let handles: Vec<Vec<fs::File>> = std::thread::scope(|s| {
        let ts: Vec<_> = (0..THREADS)
            .map(|t| {
                // A directory each: the kernel serializes creates and
                // unlinks within one directory.
                let dir = a.path("held").join(format!("t{t}"));
                fs::create_dir(&dir).unwrap();
                s.spawn(move || {
                    (0..HELD / THREADS)
                        .map(|i| {
                            let p = dir.join(format!("t{t}-{i}"));
                            let f = fs::File::create(&p).unwrap();
                            fs::remove_file(&p).unwrap();
                            f
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        ts.into_iter().map(|t| t.join().unwrap()).collect()
    });
    println!(
        "{HELD} files made and unlinked while open in {:?}",
        start.elapsed()
    );
    assert_eq!(stat_of(&a, "unlinked_inodes"), HELD as u64);
    // The threads' directories are delegated to `a`: what it did in the
    // last flush interval is in its image only, and a kill loses it (the
    // durability contract). fsync of a directory commits its image, so
    // every one of the 10,000 is in the engine before the kill.
    for t in 0..THREADS {
        let dir = fs::File::open(a.path("held").join(format!("t{t}"))).unwrap();
        dir.sync_all().unwrap();
    }
    a.kill9();
    drop(handles);
    let dead = Instant::now();
    // The lease (3 s) runs out, b's watch sees the session end, and b
    // reclaims the 10,000 inodes in batches.
    assert!(
        eventually(Duration::from_secs(90), || stat_of(&b, "reclaimed_inodes")
            >= HELD as u64),
        "b reclaimed {} of {HELD} inodes",
        stat_of(&b, "reclaimed_inodes")
    );
    println!(
        "reclaimed {HELD} inodes {:?} after the kill",
        dead.elapsed()
    );
    // The session's registration goes after its last batch (and its
    // delete queue): a moment later.
    assert!(
        eventually(Duration::from_secs(30), || stat_of(
            &b,
            "sessions_reclaimed"
        ) == 1),
        "b reclaimed {} sessions",
        stat_of(&b, "sessions_reclaimed")
    );
    let report = vol.assert_fsck_clean();
    assert!(
        report.contains("0 open-unlinked") && report.contains("0 ended and not yet reclaimed"),
        "fsck: {report}"
    );
    // The directories are empty and usable from b.
    for t in 0..THREADS {
        let d = b.path("held").join(format!("t{t}"));
        assert_eq!(fs::read_dir(&d).unwrap().count(), 0);
        fs::remove_dir(d).unwrap();
    }
    fs::remove_dir(b.path("held")).unwrap();
    let out = churnfs(&["stats", b.mnt.to_str().unwrap()]);
    assert!(out.status.success());
}
