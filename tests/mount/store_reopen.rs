//! A failed background worker of the store (fjall) is survived: the
//! database is opened again and the mount goes on (docs/design.md §10).

use crate::support::{stat_of, Mount};
use churnfs_engine::store::occupy_next_table_names;
use std::fs;
use std::time::{Duration, Instant};

fn content(i: usize) -> Vec<u8> {
    vec![(i % 251) as u8; 8192]
}

#[test]
fn a_store_flush_that_fails_is_survived_and_loses_nothing() {
    let mut m = Mount::new("");
    fs::create_dir(m.path("d")).unwrap();
    // The next tables' names are taken, so the memtable's flush fails with
    // EEXIST (what fjall's worker met under W1 on 2026-11-26).
    let taken = occupy_next_table_names(&m.store.join("db"), 64).unwrap();
    assert!(!taken.is_empty(), "no tables directory in the store");
    assert_eq!(stat_of(&m, "store_reopens"), 0);
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
    // The reopen removed the files in the way (tables made since, some still
    // being written, take a few of their names again).
    assert!(
        taken.iter().any(|p| !p.exists()),
        "every file in the way is still there"
    );
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
