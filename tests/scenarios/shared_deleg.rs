//! Delegated directories (docs/design.md §15): a directory one mount
//! alone changes is applied in that mount and committed in batches;
//! another mount's first look, or its first change, takes it back; a
//! holder that dies loses no more than its last batch, and leaves the
//! volume consistent.

use churnfs_shared::SharedFs;
use churnfs_tests::shared::{sim_config_delegated, Cluster};
use churnfs_tests::CTX;
use churnfs_vfs::{EngineError, Ino};
use std::time::Duration;

fn dir(m: &SharedFs, name: &str) -> Ino {
    m.mkdir(CTX, Ino::ROOT, name.as_bytes(), 0o755)
        .expect("mkdir")
        .ino
}

/// A spool's cycle: create, write, close, unlink.
fn cycle(m: &SharedFs, d: Ino, name: &str) {
    let (a, _) = m.create(CTX, d, name.as_bytes(), 0o644).expect("create");
    m.write(a.ino, 0, b"one spool file", false).expect("write");
    m.release(a.ino).expect("close");
    m.unlink(d, name.as_bytes()).expect("unlink");
}

/// The names in `d` as a listing gives them (directory order).
fn in_listing_order(m: &SharedFs, d: Ino) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    m.readdir(d, 0, false, &mut |e| {
        if e.name != b"." && e.name != b".." {
            v.push(e.name.to_vec());
        }
        true
    })
    .expect("readdir");
    v
}

fn names(m: &SharedFs, d: Ino) -> Vec<String> {
    let mut v: Vec<String> = in_listing_order(m, d)
        .iter()
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect();
    v.sort();
    v
}

/// Waits (up to 10 s) until `m` no longer holds `d`'s delegation (its
/// thread drops the image just after the commit that ended it, which
/// another mount may see first); whether it let go.
fn given_back(m: &SharedFs, d: Ino) -> bool {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while m.delegated().contains(&d) && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
    !m.delegated().contains(&d)
}

/// Creates `names` in `d` on `m`, each with `data`, and closes them.
fn files(m: &SharedFs, d: Ino, names: impl Iterator<Item = String>, data: &[u8]) {
    for n in names {
        let (f, _) = m.create(CTX, d, n.as_bytes(), 0o644).expect("create");
        m.write(f.ino, 0, data, false).expect("write");
        m.release(f.ino).expect("close");
    }
}

/// Slow batches: what the holder applied stays in its image until a
/// recall, an fsync or unmount (the test says when).
fn held_config() -> churnfs_shared::SharedConfig {
    churnfs_shared::SharedConfig {
        delegation_flush: Duration::from_secs(3600),
        ..sim_config_delegated()
    }
}

/// As `held_config`, with room in an image for every file born in these
/// tests (with 512 keys, the oldest would go to the engine at a batch).
fn roomy_config() -> churnfs_shared::SharedConfig {
    churnfs_shared::SharedConfig {
        delegation_keys_max: 4096,
        ..held_config()
    }
}

#[test]
fn files_created_and_removed_in_a_delegated_directory_never_reach_the_engine() {
    let c = Cluster::new(1, held_config());
    let m = &c.mounts[0];
    let d = dir(m, "spool");
    cycle(m, d, "first");
    assert!(
        m.delegated().contains(&d),
        "the directory was not delegated"
    );
    let before = c.stat(0, "kv_commits");
    for i in 0..500 {
        cycle(m, d, &format!("f{i}"));
    }
    let commits = c.stat(0, "kv_commits") - before;
    // Inode numbers come 7 at a time in the simulation: one commit per 7
    // creates is the counter's; none is the files'.
    assert!(
        commits <= 500 / 7 + 2,
        "{commits} engine commits for 500 cycles in a delegated directory"
    );
    // Two operations a cycle commit to the image (create, unlink); the
    // close leaves the data for the batch, and the unlink drops it.
    let local = c.stat(0, "delegation_local_ops");
    assert!(local >= 1000, "{local} operations answered from the image");
    let deferred = c.stat(0, "delegation_deferred_closes");
    assert!(
        deferred >= 500,
        "{deferred} closes left their data for the batch"
    );
    assert!(names(m, d).is_empty());
    m.shutdown().expect("unmount");
    c.fsck();
}

#[test]
fn another_mount_reading_a_delegated_directory_takes_it_back_and_sees_every_change() {
    let c = Cluster::new(2, held_config());
    let (a, b) = (&c.mounts[0], &c.mounts[1]);
    let d = dir(a, "d");
    for i in 0..20 {
        let (f, _) = a
            .create(CTX, d, format!("f{i}").as_bytes(), 0o644)
            .expect("create");
        a.write(f.ino, 0, format!("data {i}").as_bytes(), false)
            .expect("write");
        a.release(f.ino).expect("close");
    }
    a.unlink(d, b"f3").expect("unlink");
    assert!(a.delegated().contains(&d));
    // A lookup on the other mount (no listing first) recalls it.
    let f7 = b
        .lookup(d, b"f7")
        .expect("lookup of a file the holder made");
    assert_eq!(b.read(f7.ino, 0, 64).expect("read"), b"data 7");
    assert!(matches!(b.lookup(d, b"f3"), Err(EngineError::NotFound)));
    // The holder's thread drops its image just after the commit that
    // ended the delegation, which b may see first.
    assert!(given_back(a, d), "the delegation was not given back");
    assert_eq!(c.stat(0, "delegations_recalled"), 1);
    assert_eq!(names(b, d).len(), 19);
    c.fsck();
}

#[test]
fn a_create_on_another_mount_conflicts_with_a_name_the_holder_has_not_committed() {
    let c = Cluster::new(2, held_config());
    let (a, b) = (&c.mounts[0], &c.mounts[1]);
    let d = dir(a, "d");
    a.create(CTX, d, b"x", 0o644).expect("create");
    a.create(CTX, d, b"y", 0o644).expect("create");
    assert!(a.delegated().contains(&d));
    // b's create reads nothing of the directory first: its commit finds
    // the delegation, recalls it, and runs again on what a committed.
    assert!(matches!(
        b.create(CTX, d, b"x", 0o644),
        Err(EngineError::Exists)
    ));
    b.create(CTX, d, b"z", 0o644).expect("create");
    assert_eq!(names(a, d), vec!["x", "y", "z"]);
    c.fsck();
}

#[test]
fn fsync_commits_a_delegated_directorys_batch() {
    let mut c = Cluster::new(2, held_config());
    c.may_crash = true;
    let a = c.mounts[0].clone();
    let d = dir(&a, "d");
    let (kept, _) = a.create(CTX, d, b"kept", 0o644).expect("create");
    a.write(kept.ino, 0, b"synced", false).expect("write");
    a.release(kept.ino).expect("close");
    churnfs_vfs::Backend::fsync(&*a, kept.ino).expect("fsync");
    a.create(CTX, d, b"lost", 0o644).expect("create");
    assert!(a.delegated().contains(&d));
    // The holder dies: its delegation goes with its lease, and with it
    // the batch it had not committed; the volume stays consistent.
    drop(a);
    c.crash(0);
    let b = &c.mounts[1];
    assert_eq!(names(b, d), vec!["kept"]);
    let k = b.lookup(d, b"kept").expect("lookup");
    assert_eq!(b.read(k.ino, 0, 64).expect("read"), b"synced");
    c.settle();
    c.fsck();
}

#[test]
fn a_directory_too_large_for_an_image_is_not_delegated() {
    let c = Cluster::new(1, held_config());
    let m = &c.mounts[0];
    let d = dir(m, "big");
    // 512 keys in all: one directory may hold 64.
    for i in 0..100 {
        m.create(CTX, d, format!("f{i:03}").as_bytes(), 0o644)
            .expect("create");
    }
    assert!(
        !m.delegated().contains(&d),
        "a directory past the bound is held"
    );
    assert_eq!(names(m, d).len(), 100);
    m.shutdown().expect("unmount");
    c.fsck();
}

/// Files that existed before their directory was delegated: their
/// removal is applied in the holder and their frees go with the batch,
/// not one commit each.
#[test]
fn removing_a_delegated_directory_ends_its_delegation_in_the_same_commit() {
    let c = Cluster::new(2, roomy_config());
    let (a, b) = (&c.mounts[0], &c.mounts[1]);
    let top = dir(a, "top");
    let d = a.mkdir(CTX, top, b"d", 0o755).expect("mkdir").ino;
    // Files committed in an earlier batch, then removed in the pending
    // one, with a spool cycle that never reaches the engine.
    files(a, d, (0..10).map(|i| format!("f{i}")), b"some bytes");
    churnfs_vfs::Backend::fsync(&**a, d).expect("fsync");
    for i in 0..10 {
        a.unlink(d, format!("f{i}").as_bytes()).expect("unlink");
    }
    cycle(a, d, "spool");
    assert!(
        a.delegated().contains(&d),
        "the directory was not delegated"
    );
    // The parent given back (a lookup on the other mount): the removal
    // touches one delegation, the removed directory's.
    assert!(matches!(b.lookup(top, b"x"), Err(EngineError::NotFound)));
    assert!(given_back(a, top));
    let before = c.stat(0, "kv_commits");
    a.rmdir(top, b"d").expect("rmdir");
    assert_eq!(
        c.stat(0, "kv_commits") - before,
        1,
        "the batch, the removal and the end take one commit"
    );
    assert!(!a.delegated().contains(&d));
    assert!(matches!(a.lookup(top, b"d"), Err(EngineError::NotFound)));
    assert!(matches!(b.lookup(top, b"d"), Err(EngineError::NotFound)));
    // A name made there meanwhile keeps the directory, delegated or not.
    let e = dir(a, "e");
    cycle(a, e, "first");
    let (kept, _) = a.create(CTX, e, b"kept", 0o644).expect("create");
    a.release(kept.ino).expect("close");
    assert!(a.delegated().contains(&e));
    assert!(matches!(
        a.rmdir(Ino::ROOT, b"e"),
        Err(EngineError::NotEmpty)
    ));
    assert_eq!(names(b, e), ["kept"]);
    c.settle();
    c.fsck();
}

#[test]
fn removing_files_from_before_the_delegation_goes_in_batches() {
    let c = Cluster::new(2, held_config());
    let (a, b) = (&c.mounts[0], &c.mounts[1]);
    let d = dir(b, "tree");
    files(
        b,
        d,
        (0..40).map(|i| format!("f{i:02}")),
        b"made on the other mount",
    );
    churnfs_vfs::Backend::fsync(&**b, d).expect("fsync");
    let before = c.stat(0, "kv_commits");
    for i in 0..40 {
        a.unlink(d, format!("f{i:02}").as_bytes()).expect("unlink");
    }
    assert!(a.delegated().contains(&d));
    assert_eq!(c.stat(0, "delegation_deferred_frees"), 40);
    let commits = c.stat(0, "kv_commits") - before;
    // One to take the directory (b gave it back), at most two batches.
    assert!(commits <= 4, "{commits} commits for 40 unlinks");
    assert!(names(b, d).is_empty(), "b still sees names a removed");
    c.settle();
    c.fsck();
}

/// A batch of removals is bounded by the engine's writes and, apart, its
/// conditions (one guard a file), not by their sum: files from before (two
/// writes and a guard each) go 48 to a batch, not 32.
#[test]
fn a_batch_of_removals_fills_the_engines_writes() {
    // An image with room for the directory's names.
    let cfg = churnfs_shared::SharedConfig {
        delegation_keys_max: 65_536,
        ..held_config()
    };
    let c = Cluster::new(2, cfg);
    let (a, b) = (&c.mounts[0], &c.mounts[1]);
    let d = dir(b, "tree");
    const FILES: usize = 960;
    files(b, d, (0..FILES).map(|i| format!("f{i:03}")), b"x");
    churnfs_vfs::Backend::fsync(&**b, d).expect("fsync");
    let before = c.stat(0, "kv_commits");
    for i in 0..FILES {
        a.unlink(d, format!("f{i:03}").as_bytes()).expect("unlink");
    }
    churnfs_vfs::Backend::fsync(&**a, d).expect("fsync");
    assert_eq!(c.stat(0, "delegation_deferred_frees"), FILES as u64);
    let commits = c.stat(0, "kv_commits") - before;
    assert!(
        commits <= (FILES / 40 + 2) as u64,
        "{commits} commits for {FILES} unlinks"
    );
    assert!(names(b, d).is_empty(), "b still sees names a removed");
    c.settle();
    c.fsck();
}

/// The files of a tree born under its directory's delegation, removed in
/// listing order (what `rm -rf` does): neighbouring names removed go to
/// the engine as one range deletion, so a batch holds about one file per
/// write (the file's record), where it held one per two.
#[test]
fn removed_neighbours_go_as_one_range_and_a_batch_holds_a_file_a_write() {
    let cfg = churnfs_shared::SharedConfig {
        delegation_keys_max: 65_536,
        ..held_config()
    };
    let c = Cluster::new(2, cfg);
    let (a, b) = (&c.mounts[0], &c.mounts[1]);
    let top = dir(a, "top");
    let d = a.mkdir(CTX, top, b"d", 0o755).expect("mkdir").ino;
    const FILES: usize = 400;
    files(a, d, (0..FILES).map(|i| format!("f{i:03}")), b"x");
    churnfs_vfs::Backend::fsync(&**a, d).expect("fsync");
    assert!(a.delegated().contains(&d), "the tree was not delegated");
    // The parent given back (the other mount looks in it): the rmdir ends
    // one delegation, the tree's, with its last batch.
    assert!(matches!(b.lookup(top, b"x"), Err(EngineError::NotFound)));
    assert!(given_back(a, top));
    let before = c.stat(0, "kv_commits");
    for n in in_listing_order(a, d) {
        a.unlink(d, &n).expect("unlink");
    }
    a.rmdir(top, b"d").expect("rmdir");
    let commits = c.stat(0, "kv_commits") - before;
    // Two writes a file (no ranges) would take 8 batches of 96, and the
    // removal.
    assert!(
        commits <= (FILES / 100 + 1) as u64,
        "{commits} commits for {FILES} unlinks and the rmdir"
    );
    assert!(matches!(b.lookup(top, b"d"), Err(EngineError::NotFound)));
    assert!(names(b, top).is_empty());
    c.settle();
    c.fsck();
}

/// A name put between removed neighbours in the same batch (a create in
/// the image; a link to a file from elsewhere, which goes to the engine
/// with the batch) splits their range: the engine refuses a commit that
/// puts a key a range of it deletes, and the names on either side stay
/// removed.
#[test]
fn a_name_put_among_removed_neighbours_splits_their_range() {
    let c = Cluster::new(2, roomy_config());
    let (a, b) = (&c.mounts[0], &c.mounts[1]);
    // A file in a directory the other mount holds, to be linked in.
    let e = dir(b, "e");
    files(b, e, std::iter::once("x".to_string()), b"moved");
    let d = dir(a, "d");
    files(a, d, (0..40).map(|i| format!("f{i:02}")), b"x");
    churnfs_vfs::Backend::fsync(&**a, d).expect("fsync");
    let listed = in_listing_order(a, d);
    let removed = &listed[5..25];
    for n in removed {
        a.unlink(d, n).expect("unlink");
    }
    // Names whose place in the directory is inside the removed run, apart
    // from each other (removed names between them).
    let between = |lo: &[u8], hi: &[u8]| {
        let hash = churnfs_shared::schema::dir_hash;
        let (lo, hi) = (hash(lo), hash(hi));
        (0..)
            .map(|i| format!("n{i}"))
            .find(|n| (lo + 1..hi).contains(&hash(n.as_bytes())))
            .expect("a name")
    };
    let made = between(&listed[8], &listed[12]);
    let moved = between(&listed[16], &listed[20]);
    let (f, _) = a.create(CTX, d, made.as_bytes(), 0o644).expect("create");
    a.release(f.ino).expect("close");
    let x = a.lookup(e, b"x").expect("lookup").ino;
    a.link(x, d, moved.as_bytes()).expect("link");
    churnfs_vfs::Backend::fsync(&**a, d).expect("fsync");
    let mut want: Vec<String> = listed
        .iter()
        .filter(|n| !removed.contains(n))
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .chain([made, moved])
        .collect();
    want.sort();
    assert_eq!(names(b, d), want);
    c.settle();
    c.fsck();
}

/// A file whose free waits in a batch while another mount, which had it
/// open, writes to it: the batch's condition on the record fails, the
/// free is worked out again from the record as it is now (its data in
/// objects, which the delete queue then removes), and nothing leaks.
#[test]
fn a_free_waiting_in_a_batch_follows_a_write_from_another_mount() {
    let c = Cluster::new(2, held_config());
    let (a, b) = (&c.mounts[0], &c.mounts[1]);
    let d = dir(a, "d");
    let (f, _) = a.create(CTX, d, b"f", 0o644).expect("create");
    a.write(f.ino, 0, b"small", false).expect("write");
    a.release(f.ino).expect("close");
    // b opens the file (taking the directory back from a).
    let bf = b.lookup(d, b"f").expect("lookup");
    b.open(bf.ino).expect("open");
    std::thread::sleep(Duration::from_millis(20));
    // a removes it: a takes the directory again, the free waits.
    a.unlink(d, b"f").expect("unlink");
    assert_eq!(c.stat(0, "delegation_deferred_frees"), 1);
    // b writes through its handle past the inline size: objects.
    let data = vec![7u8; 64 * 1024];
    b.write(bf.ino, 0, &data, false).expect("write");
    b.release(bf.ino).expect("close");
    churnfs_vfs::Backend::fsync(&**a, d).expect("fsync");
    assert!(c.stat(0, "delegation_guard_rechecks") >= 1);
    assert!(matches!(b.lookup(d, b"f"), Err(EngineError::NotFound)));
    c.settle();
    let r = c.fsck();
    assert_eq!(r.unreferenced_objects, 0, "the file's objects leaked");
}

#[test]
fn files_born_in_a_delegated_directory_stay_its_own_across_batches_until_they_are_named_elsewhere()
{
    let c = Cluster::new(2, roomy_config());
    let (a, b) = (&c.mounts[0], &c.mounts[1]);
    let d = dir(a, "d");
    let e = dir(a, "e");
    let body = |i: usize, n: usize| -> Vec<u8> { (0..n).map(|k| (k * 3 + i) as u8).collect() };
    let mut inos = Vec::new();
    for i in 0..12 {
        let (f, _) = a
            .create(CTX, d, format!("f{i}").as_bytes(), 0o644)
            .expect("create");
        a.write(f.ino, 0, &body(i, 5_000), false).expect("write");
        a.release(f.ino).expect("close");
        inos.push(f.ino);
    }
    // The batch goes to the engine, with the files' data.
    churnfs_vfs::Backend::fsync(&**a, d).expect("fsync of the directory");
    assert_eq!(c.stat(0, "objects_put"), 12);
    // (The delegation thread lists recalls meanwhile: scans are not
    // counted here.)
    let (reads, commits) = (c.stat(0, "kv_reads"), c.stat(0, "kv_commits"));
    // Opened again, read, appended to and closed: the image answers, the
    // appended data waits for the next batch.
    for (i, f) in inos.iter().enumerate() {
        a.open(*f).expect("open");
        assert_eq!(a.read(*f, 0, 20_000).expect("read"), body(i, 5_000));
        a.write(*f, 5_000, &body(i + 100, 1_000), false)
            .expect("append");
        a.release(*f).expect("close");
    }
    // Removing a file born here with its data queues the free in the batch.
    for i in 0..3 {
        a.unlink(d, format!("f{i}").as_bytes()).expect("unlink");
    }
    assert_eq!(c.stat(0, "kv_reads"), reads, "an open read the engine");
    assert_eq!(
        c.stat(0, "kv_commits"),
        commits,
        "a change went to the engine alone"
    );
    assert_eq!(
        c.stat(0, "objects_put"),
        12,
        "an append was uploaded at its close"
    );
    // A second name in another directory hands the file to the engine,
    // with its data: the other mount reads it there without a recall.
    a.link(inos[5], e, b"five").expect("link");
    assert!(a.delegated().contains(&d));
    let five = b.lookup(e, b"five").expect("lookup of the link");
    let mut want = body(5, 5_000);
    want.extend(body(105, 1_000));
    assert_eq!(b.read(five.ino, 0, 20_000).expect("read"), want);
    assert!(
        a.delegated().contains(&d),
        "reading a linked file recalled its first directory"
    );
    // A second name in another directory delegated here too (tar's hard
    // links): the file goes to the engine first, both stay delegated.
    let g = dir(a, "g");
    let (gf, _) = a.create(CTX, g, b"own", 0o644).expect("create in g");
    a.release(gf.ino).expect("close");
    assert!(a.delegated().contains(&g));
    a.link(inos[6], g, b"six")
        .expect("link into a delegated directory");
    assert!(a.delegated().contains(&d) && a.delegated().contains(&g));
    assert_eq!(a.getattr(inos[6]).expect("getattr").nlink, 2);
    // The other mount takes the directory back and sees every change.
    for i in 0..12 {
        let got = b.lookup(d, format!("f{i}").as_bytes());
        if i < 3 {
            assert!(
                matches!(got, Err(EngineError::NotFound)),
                "f{i} still named"
            );
            continue;
        }
        let f = got.expect("lookup");
        if i == 6 {
            assert_eq!(f.nlink, 2);
            let six = b.lookup(g, b"six").expect("lookup of the second name");
            assert_eq!(six.ino, f.ino);
        }
        let mut want = body(i, 5_000);
        want.extend(body(i + 100, 1_000));
        assert_eq!(b.read(f.ino, 0, 20_000).expect("read"), want, "f{i}");
    }
    assert!(!a.delegated().contains(&d));
    c.settle();
    c.fsck();
}

#[test]
fn a_file_born_in_a_delegated_directory_and_cut_frees_only_what_it_cut() {
    let c = Cluster::new(2, roomy_config());
    let (a, b) = (&c.mounts[0], &c.mounts[1]);
    let d = dir(a, "d");
    const MB: u64 = 1 << 20;
    let (f, _) = a.create(CTX, d, b"big", 0o644).expect("create");
    // Over several chunks (4 MiB each): uploaded at its close.
    for i in 0..10 {
        a.write(f.ino, i * MB, &vec![i as u8 + 1; MB as usize], false)
            .expect("write");
    }
    a.release(f.ino).expect("close");
    churnfs_vfs::Backend::fsync(&**a, d).expect("fsync of the directory");
    // Cut to 5 MiB (chunk 2 to the delete queue, chunk 1 holed past the
    // end), then grown again by a write past the cut.
    let size = |n: u64| churnfs_vfs::SetAttr {
        size: Some(n),
        ..churnfs_vfs::SetAttr::default()
    };
    a.open(f.ino).expect("open");
    a.setattr(f.ino, size(5 * MB)).expect("truncate");
    // Past chunk 2, which only the extension reaches.
    a.write(f.ino, 13 * MB, &vec![0xEE; MB as usize], false)
        .expect("write past the cut");
    a.release(f.ino).expect("close");
    churnfs_vfs::Backend::fsync(&**a, d).expect("fsync of the directory");
    // The delete queue frees what the cut left, in the engine.
    c.settle();
    let mut want = Vec::new();
    for i in 0..5 {
        want.extend(vec![i as u8 + 1; MB as usize]);
    }
    want.extend(vec![0u8; 8 * MB as usize]);
    want.extend(vec![0xEE; MB as usize]);
    assert_eq!(a.read(f.ino, 0, (14 * MB) as u32).expect("read here"), want);
    let on_b = b.lookup(d, b"big").expect("lookup");
    assert_eq!(
        b.read(on_b.ino, 0, (14 * MB) as u32).expect("read there"),
        want
    );
    c.settle();
    c.fsck();
}

#[test]
fn data_closed_in_a_delegated_directory_goes_with_the_batch_and_a_file_removed_first_never_uploads()
{
    let c = Cluster::new(2, held_config());
    let (a, b) = (&c.mounts[0], &c.mounts[1]);
    let d = dir(a, "d");
    let e = dir(a, "e");
    // Past the inline limit (4,096 bytes): each file's data is an object.
    let body = |i: usize| -> Vec<u8> { (0..5_000).map(|n| (n * 7 + i) as u8).collect() };
    let mut inos = Vec::new();
    for i in 0..20 {
        let (f, _) = a
            .create(CTX, d, format!("f{i}").as_bytes(), 0o644)
            .expect("create");
        a.write(f.ino, 0, &body(i), false).expect("write");
        a.release(f.ino).expect("close");
        inos.push(f.ino);
    }
    assert!(a.delegated().contains(&d));
    assert_eq!(
        c.stat(0, "objects_put"),
        0,
        "a close in a delegated directory uploaded its data"
    );
    assert_eq!(c.stat(0, "delegation_deferred_closes"), 20);
    // Read back on this mount from the buffer, before any upload.
    assert_eq!(a.read(inos[4], 0, 20_000).expect("read"), body(4));
    for i in 10..20 {
        a.unlink(d, format!("f{i}").as_bytes()).expect("unlink");
    }
    // A move out of the directory takes the file's data along.
    a.rename(d, b"f0", e, b"moved", Default::default())
        .expect("rename");
    let dh = a.lookup(Ino::ROOT, b"d").expect("lookup d");
    churnfs_vfs::Backend::fsync(&**a, dh.ino).expect("fsync of the directory");
    // The ten files left: one object each; the ten removed: none.
    assert_eq!(c.stat(0, "objects_put"), 10);
    // The other mount takes the directory back and reads every byte.
    for i in 1..10 {
        let f = b.lookup(d, format!("f{i}").as_bytes()).expect("lookup");
        assert_eq!(b.read(f.ino, 0, 20_000).expect("read"), body(i), "f{i}");
    }
    for i in 10..20 {
        assert!(matches!(
            b.lookup(d, format!("f{i}").as_bytes()),
            Err(EngineError::NotFound)
        ));
    }
    let m = b.lookup(e, b"moved").expect("lookup of the moved file");
    assert_eq!(b.read(m.ino, 0, 20_000).expect("read"), body(0));
    c.settle();
    c.fsck();
}

/// A batch the delegation thread reaches late (a loaded machine, a slow
/// store) names objects uploaded more than half the upload window ago:
/// it stores them again and commits, rather than give up what it holds.
#[test]
fn a_late_batch_stores_its_objects_again_and_loses_nothing() {
    let cfg = churnfs_shared::SharedConfig {
        file_flush_bytes: 64 * 1024,
        ..held_config()
    };
    let c = Cluster::with_upload_window(2, cfg, churnfs_shared::schema::UPLOAD_WINDOW_MIN_MS);
    let (a, b) = (&c.mounts[0], &c.mounts[1]);
    let d = dir(a, "d");
    cycle(a, d, "first");
    assert!(a.delegated().contains(&d));
    let data: Vec<u8> = (0..300_000u32).map(|n| (n * 31 % 251) as u8).collect();
    let (f, _) = a.create(CTX, d, b"f", 0o644).expect("create");
    for (i, piece) in data.chunks(32 * 1024).enumerate() {
        a.write(f.ino, (i * 32 * 1024) as u64, piece, false)
            .expect("write");
    }
    let put = c.stat(0, "objects_put");
    assert!(put > 0, "no write flushed while the file was open");
    // Past half the 1 s window, the batch still unsent.
    std::thread::sleep(Duration::from_millis(700));
    a.release(f.ino).expect("close");
    churnfs_vfs::Backend::fsync(&**a, d).expect("fsync of the directory");
    assert!(
        c.stat(0, "upload_refreshes") > 0,
        "nothing was stored again"
    );
    assert_eq!(c.stat(0, "delegations_lost"), 0);
    let g = b.lookup(d, b"f").expect("lookup on the other mount");
    assert_eq!(b.read(g.ino, 0, 400_000).expect("read"), data);
    c.settle();
    c.fsck();
}

/// Lookups of a listing's names in its order (an `rm -rf`, a `find`), on
/// a mount that has none of their records: read ahead, a request per
/// `READ_AHEAD` names instead of one per name, and the attributes right.
#[test]
fn lookups_that_walk_a_directory_in_its_order_read_its_records_ahead() {
    let c = Cluster::new(2, held_config());
    let (a, b) = (&c.mounts[0], &c.mounts[1]);
    let d = dir(b, "walked");
    for i in 0..300 {
        let (f, _) = b
            .create(CTX, d, format!("f{i:03}").as_bytes(), 0o644)
            .expect("create");
        b.write(f.ino, 0, &vec![b'w'; i % 50], false)
            .expect("write");
        b.release(f.ino).expect("close");
    }
    churnfs_vfs::Backend::fsync(&**b, d).expect("fsync");
    let listed = in_listing_order(a, d);
    assert_eq!(listed.len(), 300);
    let scans = c.stat(0, "kv_scans");
    for name in &listed {
        let attr = a.lookup(d, name).expect("lookup");
        let i: usize = String::from_utf8_lossy(&name[1..]).parse().expect("name");
        assert_eq!(attr.size, (i % 50) as u64, "size of {}", i);
    }
    let scans = c.stat(0, "kv_scans") - scans;
    let ahead = c.stat(0, "icache_readaheads");
    assert!(ahead >= 4, "{ahead} read-aheads for 300 lookups in order");
    assert!(
        scans <= 2 + 2 * ahead,
        "{scans} engine scans for 300 lookups with {ahead} read-aheads"
    );
    assert!(c.stat(0, "icache_readahead_records") >= 290);
    // Out of order, no read-ahead: the names are looked up one by one.
    let e = dir(b, "random");
    for i in 0..40 {
        let (f, _) = b
            .create(CTX, e, format!("g{i}").as_bytes(), 0o644)
            .expect("create");
        b.release(f.ino).expect("close");
    }
    churnfs_vfs::Backend::fsync(&**b, e).expect("fsync");
    let mut names = in_listing_order(a, e);
    names.reverse();
    for n in &names {
        a.lookup(e, n).expect("lookup");
    }
    assert_eq!(c.stat(0, "icache_readaheads"), ahead);
}
