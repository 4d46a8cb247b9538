//! kill -9 of the daemon during a truncate storm (W3's pattern: two
//! threads, each on its own 4 KiB file, shrink it one byte at a time to 1 byte
//! and extend it back to 4 KiB): after each kill the store must pass fsck, and
//! every file must hold a state the storm gave it: a prefix of what it held
//! when the round began, or, once it had been shrunk to 1 byte and extended,
//! its first byte followed by zeros. Stale bytes showing through an extension,
//! a torn mix of the two, or a size outside 1..=4096 fail the test.

use crate::support::Mount;
use std::fs;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const ROUNDS: u32 = 6;
const FILES: usize = 2;
const FULL: u64 = 4096;

fn pattern(file: usize) -> Vec<u8> {
    (0..FULL as usize)
        .map(|i| 1 + ((i * 7 + file * 13) % 251) as u8)
        .collect()
}

/// Is `got` a state the storm could leave in a file that held `base`?
fn reachable(base: &[u8], got: &[u8]) -> bool {
    let n = got.len();
    if n == 0 || n as u64 > FULL || got[0] != base[0] {
        return false;
    }
    let prefix = n <= base.len() && got == &base[..n];
    let regrown = got[1..].iter().all(|&b| b == 0);
    prefix || regrown
}

#[test]
fn kill9_during_a_truncate_storm_leaves_sizes_it_was_given() {
    let seed = std::process::id() as u64;
    let mut m = Mount::new("commit_interval_ms=20");
    fs::create_dir(m.path("storm")).unwrap();
    for f in 0..FILES {
        let p = m.path("storm").join(format!("t{f}"));
        fs::write(&p, pattern(f)).unwrap();
        fs::File::open(&p).unwrap().sync_all().unwrap();
    }
    let total = Arc::new(AtomicU64::new(0));
    for round in 0..ROUNDS {
        let bases: Vec<Vec<u8>> = (0..FILES)
            .map(|f| fs::read(m.path("storm").join(format!("t{f}"))).unwrap())
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..FILES)
            .map(|f| {
                let p = m.path("storm").join(format!("t{f}"));
                let (stop, total) = (stop.clone(), total.clone());
                let start = bases[f].len() as u64;
                std::thread::spawn(move || {
                    let Ok(file) = fs::OpenOptions::new().write(true).open(&p) else {
                        return;
                    };
                    let sizes = (1..start)
                        .rev()
                        .chain((2..=FULL).chain((1..FULL).rev()).cycle());
                    for s in sizes {
                        if stop.load(Ordering::Relaxed) || file.set_len(s).is_err() {
                            return; // stopped, or the daemon is gone
                        }
                        total.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(
            40 + (seed.wrapping_mul(31).wrapping_add(round as u64 * 97)) % 250,
        ));
        m.kill9();
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        m.assert_fsck_clean();
        m.start();
        for (f, base) in bases.iter().enumerate() {
            let got = fs::read(m.path("storm").join(format!("t{f}"))).unwrap();
            println!("round {round}: t{f} {} → {} bytes", base.len(), got.len());
            assert!(
                reachable(base, &got),
                "round {round}: file t{f} holds {} bytes that no truncate of the storm gave it \
                 (first bytes {:?})",
                got.len(),
                &got[..got.len().min(8)]
            );
        }
    }
    let n = total.load(Ordering::Relaxed);
    println!("{n} truncates in {ROUNDS} rounds");
    assert!(
        n > ROUNDS as u64 * 100,
        "only {n} truncates in {ROUNDS} rounds: the storm did not run"
    );
    m.unmount();
    m.assert_fsck_clean();
}

#[test]
fn the_reachability_check_refuses_what_the_storm_cannot_leave() {
    let base = pattern(0);
    assert!(reachable(&base, &base[..100]));
    let mut regrown = vec![0u8; 300];
    regrown[0] = base[0];
    assert!(reachable(&base, &regrown));
    let mut torn = base[..300].to_vec();
    torn[200] = 0;
    assert!(!reachable(&base, &torn), "a torn mix");
    assert!(!reachable(&base, &[]), "size 0 was never given");
    let mut stale = regrown.clone();
    stale[299] = base[299];
    assert!(!reachable(&base, &stale), "stale bytes after an extension");
}
