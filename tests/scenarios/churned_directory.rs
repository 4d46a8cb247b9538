//! A directory that has seen churn between two commits carries no trace of
//! it: names created and removed leave no pending state (which readdir
//! would have to walk), and a listing returns exactly the live names, in
//! pages, with the same entries as a fresh directory of the same size.

use churnfs_engine::Ino;
use churnfs_tests::Fs;

#[test]
fn churn_between_commits_leaves_no_pending_names() {
    let fs = Fs::new();
    let churned = fs.mkdir(Ino::ROOT, b"churned");
    let fresh = fs.mkdir(Ino::ROOT, b"fresh");
    for i in 0..200u32 {
        fs.mkfile(churned, format!("live{i}").as_bytes(), b"x");
        fs.mkfile(fresh, format!("live{i}").as_bytes(), b"x");
    }
    let dirty = fs.stat("dirty_items");
    for i in 0..5_000u32 {
        let name = format!("churn{i}");
        fs.mkfile(churned, name.as_bytes(), b"payload");
        fs.e().unlink(churned, name.as_bytes()).unwrap();
    }
    // Only the 200 + 200 live names and the two directories are pending.
    assert_eq!(fs.stat("pending_dentries"), 402);
    // Nor do the churned files' dirty items stay behind to count toward
    // `dirty_items_max` (and make commits that write nothing of them).
    assert_eq!(fs.stat("dirty_items"), dirty);
    assert_eq!(fs.stat("dirty_items_commits"), 0);
    // Nor inodes: a file created and freed between commits leaves memory at
    // once (only the 400 live files, two directories and the root remain).
    fs.e().getattr(Ino::ROOT).unwrap();
    assert!(
        fs.stat("icache_inodes") <= 403,
        "{} inodes cached",
        fs.stat("icache_inodes")
    );
    for per_call in [1, 7, 128, 129, 1000] {
        let a: Vec<_> = fs
            .list(churned, false, per_call)
            .into_iter()
            .map(|e| e.name)
            .collect();
        let b: Vec<_> = fs
            .list(fresh, false, per_call)
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(a.len(), 200, "per_call {per_call}");
        let mut a_sorted = a.clone();
        a_sorted.sort();
        let mut b_sorted = b.clone();
        b_sorted.sort();
        assert_eq!(a_sorted, b_sorted, "per_call {per_call}");
        assert_eq!(a, b, "listing order of the same names differs");
    }
    fs.fsck();
}
