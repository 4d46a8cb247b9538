//! A failed background worker of the store (fjall) is survived: the
//! database is opened again and the mount goes on (docs/design.md §10).

use crate::support::{stat_of, Mount};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Every `tables` directory under `dir`.
fn table_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "tables") {
                out.push(p.clone());
            }
            table_dirs(&p, out);
        }
    }
}

fn content(i: usize) -> Vec<u8> {
    vec![(i % 251) as u8; 8192]
}

#[test]
fn a_store_flush_that_fails_is_survived_and_loses_nothing() {
    let mut m = Mount::new("");
    fs::create_dir(m.path("d")).unwrap();
    let mut dirs = Vec::new();
    table_dirs(&m.store.join("db"), &mut dirs);
    assert!(!dirs.is_empty(), "no tables directory in the store");
    // The next tables' names are taken, so the memtable's flush fails with
    // EEXIST (what fjall's worker met under W1 on 2026-11-26).
    for d in &dirs {
        let next = fs::read_dir(d)
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
            .max()
            .map_or(0, |m| m + 1);
        for id in next..next + 64 {
            fs::write(d.join(id.to_string()), b"").unwrap();
        }
    }
    // 8 KiB blocks stay in the memtable (8 MiB): write until it is flushed.
    let t = Instant::now();
    let mut n = 0;
    while stat_of(&m, "store_reopens") == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no reopen after {n} files"
        );
        for _ in 0..200 {
            fs::write(m.path(&format!("d/f{n}")), content(n)).unwrap();
            n += 1;
        }
        fs::File::open(m.path("d")).unwrap().sync_all().unwrap();
    }
    for _ in 0..200 {
        fs::write(m.path(&format!("d/f{n}")), content(n)).unwrap();
        n += 1;
    }
    fs::File::open(m.path("d")).unwrap().sync_all().unwrap();
    assert_eq!(stat_of(&m, "store_reopens"), 1);
    let check = |m: &Mount| {
        for i in (0..n).step_by(37).chain([n - 1]) {
            assert_eq!(
                fs::read(m.path(&format!("d/f{i}"))).unwrap(),
                content(i),
                "f{i}"
            );
        }
        assert_eq!(fs::read_dir(m.path("d")).unwrap().count(), n);
    };
    check(&m);
    m.unmount();
    m.assert_fsck_clean();
    m.start();
    check(&m);
    m.unmount();
}
