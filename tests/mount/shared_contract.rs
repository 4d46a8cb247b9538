//! The shared-mode consistency contract (README, docs/design.md §15),
//! clause by clause, with two real mounts of one volume on a 3-member
//! etcd cluster. "After the TTL" is checked after the TTL and a margin
//! (the watch usually makes it sooner; nothing here depends on that).

use crate::support::{churnfs, eventually, stat_of, Mount, Volume};
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

const TTL_MS: u64 = 400;
/// The TTL, and a margin for a loaded machine.
const AFTER_TTL: Duration = Duration::from_millis(TTL_MS + 600);

fn opts() -> String {
    format!("entry_ttl_ms={TTL_MS},attr_ttl_ms={TTL_MS},negative_ttl_ms={TTL_MS}")
}

fn read(p: &Path) -> Vec<u8> {
    fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

#[test]
fn every_clause_of_the_contract_holds_between_two_mounts() {
    let vol = Volume::new(3);
    let a = vol.mount(&opts());
    let b = vol.mount(&opts());

    creates_and_removes_are_seen_after_the_ttl(&a, &b);
    a_name_missing_on_one_mount_appears_after_the_negative_ttl(&a, &b);
    data_is_seen_at_once_after_close_and_open(&a, &b);
    attributes_are_seen_after_the_ttl(&a, &b);
    renames_are_atomic_within_and_across_directories(&a, &b);
    link_counts_and_times_behave_as_on_a_local_mount(&a, &b);
    permissions_are_checked_on_the_other_mount(&a, &b);
    inode_numbers_are_unique_across_mounts(&a, &b);
    an_unlinked_file_stays_readable_where_it_is_open(&a, &b);

    drop(a);
    drop(b);
    vol.assert_fsck_clean();
}

fn creates_and_removes_are_seen_after_the_ttl(a: &Mount, b: &Mount) {
    fs::write(a.path("made-on-a"), b"hello").unwrap();
    fs::create_dir(a.path("dir-on-a")).unwrap();
    std::thread::sleep(AFTER_TTL);
    assert_eq!(read(&b.path("made-on-a")), b"hello");
    assert!(b.path("dir-on-a").is_dir());
    let names: Vec<String> = fs::read_dir(b.path(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names.contains(&"made-on-a".to_string()),
        "readdir on b: {names:?}"
    );
    fs::remove_file(b.path("made-on-a")).unwrap();
    fs::remove_dir(b.path("dir-on-a")).unwrap();
    std::thread::sleep(AFTER_TTL);
    assert!(
        fs::metadata(a.path("made-on-a")).is_err(),
        "removed on b, still on a"
    );
    assert!(fs::metadata(a.path("dir-on-a")).is_err());
}

fn a_name_missing_on_one_mount_appears_after_the_negative_ttl(a: &Mount, b: &Mount) {
    // b caches the name as missing.
    assert!(fs::metadata(b.path("late")).is_err());
    fs::write(a.path("late"), b"now").unwrap();
    std::thread::sleep(AFTER_TTL);
    assert_eq!(read(&b.path("late")), b"now");
    fs::remove_file(a.path("late")).unwrap();
}

fn data_is_seen_at_once_after_close_and_open(a: &Mount, b: &Mount) {
    fs::write(a.path("doc"), vec![b'1'; 10_000]).unwrap();
    std::thread::sleep(AFTER_TTL);
    // b reads it: its kernel now caches the pages.
    assert_eq!(read(&b.path("doc")), vec![b'1'; 10_000]);
    // a rewrites it, same size, and closes: b's next open sees the new
    // bytes at once, with no wait.
    {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .open(a.path("doc"))
            .unwrap();
        f.write_all(&vec![b'2'; 10_000]).unwrap();
    }
    assert_eq!(
        read(&b.path("doc")),
        vec![b'2'; 10_000],
        "stale pages after open"
    );
    // A longer file: the size is new at open too.
    fs::write(a.path("doc"), vec![b'3'; 200_000]).unwrap();
    let mut f = fs::File::open(b.path("doc")).unwrap();
    let mut got = Vec::new();
    f.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), 200_000, "stale size after open");
    assert!(got.iter().all(|c| *c == b'3'));
    // Large data, over several chunks.
    let big: Vec<u8> = (0..9_000_000u32).map(|i| (i % 251) as u8).collect();
    fs::write(a.path("big"), &big).unwrap();
    assert!(read(&b.path("big")) == big, "9 MB file differs on b");
    // An overwrite in the middle, from b, seen by a.
    {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .open(b.path("big"))
            .unwrap();
        f.seek(SeekFrom::Start(4_194_000)).unwrap();
        f.write_all(&[7u8; 1000]).unwrap();
    }
    let got = read(&a.path("big"));
    assert_eq!(&got[4_194_000..4_195_000], &[7u8; 1000]);
    assert_eq!(&got[..4_194_000], &big[..4_194_000]);
    assert_eq!(&got[4_195_000..], &big[4_195_000..]);
    // A truncate from a, seen by b at open.
    fs::OpenOptions::new()
        .write(true)
        .open(a.path("big"))
        .unwrap()
        .set_len(5_000_000)
        .unwrap();
    assert_eq!(read(&b.path("big")).len(), 5_000_000);
    fs::remove_file(a.path("big")).unwrap();
    fs::remove_file(a.path("doc")).unwrap();
}

fn attributes_are_seen_after_the_ttl(a: &Mount, b: &Mount) {
    fs::write(a.path("modes"), b"x").unwrap();
    std::thread::sleep(AFTER_TTL);
    assert_eq!(fs::metadata(b.path("modes")).unwrap().mode() & 0o777, 0o644);
    fs::set_permissions(a.path("modes"), fs::Permissions::from_mode(0o600)).unwrap();
    std::thread::sleep(AFTER_TTL);
    assert_eq!(fs::metadata(b.path("modes")).unwrap().mode() & 0o777, 0o600);
    fs::remove_file(a.path("modes")).unwrap();
}

fn renames_are_atomic_within_and_across_directories(a: &Mount, b: &Mount) {
    fs::create_dir_all(a.path("r1/sub")).unwrap();
    fs::create_dir(a.path("r2")).unwrap();
    fs::write(a.path("r1/x"), b"X").unwrap();
    fs::write(a.path("r1/y"), b"Y").unwrap();
    fs::write(a.path("r1/sub/deep"), b"D").unwrap();
    // Replace y with x in one step.
    fs::rename(a.path("r1/x"), a.path("r1/y")).unwrap();
    // Move a directory to another parent.
    fs::rename(a.path("r1/sub"), a.path("r2/sub")).unwrap();
    std::thread::sleep(AFTER_TTL);
    assert!(fs::metadata(b.path("r1/x")).is_err());
    assert_eq!(read(&b.path("r1/y")), b"X");
    assert_eq!(read(&b.path("r2/sub/deep")), b"D");
    assert!(fs::metadata(b.path("r1/sub")).is_err());
    // Link counts of the parents follow the moved directory.
    assert_eq!(fs::metadata(b.path("r1")).unwrap().nlink(), 2);
    assert_eq!(fs::metadata(b.path("r2")).unwrap().nlink(), 3);
    // A directory cannot move under itself, from either mount.
    assert!(fs::rename(b.path("r2"), b.path("r2/sub/r2")).is_err());
    fs::remove_dir_all(b.path("r1")).unwrap();
    fs::remove_dir_all(b.path("r2")).unwrap();
}

fn link_counts_and_times_behave_as_on_a_local_mount(a: &Mount, b: &Mount) {
    fs::write(a.path("orig"), b"o").unwrap();
    fs::hard_link(a.path("orig"), a.path("alias")).unwrap();
    std::thread::sleep(AFTER_TTL);
    let m = fs::metadata(b.path("alias")).unwrap();
    assert_eq!(m.nlink(), 2);
    assert_eq!(m.ino(), fs::metadata(b.path("orig")).unwrap().ino());
    fs::remove_file(b.path("orig")).unwrap();
    std::thread::sleep(AFTER_TTL);
    assert_eq!(fs::metadata(a.path("alias")).unwrap().nlink(), 1);
    // A write on a moves mtime forward, as b sees after open.
    let before = fs::metadata(a.path("alias")).unwrap().mtime_nsec();
    let before_s = fs::metadata(a.path("alias")).unwrap().mtime();
    std::thread::sleep(Duration::from_millis(20));
    fs::write(a.path("alias"), b"newer").unwrap();
    fs::File::open(b.path("alias")).unwrap();
    let m = fs::metadata(b.path("alias")).unwrap();
    assert!(
        (m.mtime(), m.mtime_nsec()) > (before_s, before),
        "mtime did not move"
    );
    // A create in a directory moves the directory's mtime, on b too.
    let d0 = fs::metadata(a.path("")).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    fs::write(b.path("another"), b"").unwrap();
    std::thread::sleep(AFTER_TTL);
    let d1 = fs::metadata(a.path("")).unwrap();
    assert!((d1.mtime(), d1.mtime_nsec()) > (d0.mtime(), d0.mtime_nsec()));
    fs::remove_file(a.path("alias")).unwrap();
    fs::remove_file(a.path("another")).unwrap();
}

fn permissions_are_checked_on_the_other_mount(a: &Mount, b: &Mount) {
    fs::write(a.path("secret"), b"s").unwrap();
    fs::set_permissions(a.path("secret"), fs::Permissions::from_mode(0o600)).unwrap();
    std::thread::sleep(AFTER_TTL);
    let p = b.path("secret");
    // The mounts are private to root: nobody is refused by the kernel
    // before the daemon; root itself passes.
    assert_eq!(read(&p), b"s");
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "cat"])
        .arg(&p)
        .output()
        .expect("setpriv");
    assert!(!out.status.success(), "nobody read a 0600 file of root");
    fs::remove_file(a.path("secret")).unwrap();
}

fn inode_numbers_are_unique_across_mounts(a: &Mount, b: &Mount) {
    let mut inos = std::collections::BTreeSet::new();
    for i in 0..50 {
        fs::write(a.path(&format!("ua{i}")), b"").unwrap();
        fs::write(b.path(&format!("ub{i}")), b"").unwrap();
    }
    std::thread::sleep(AFTER_TTL);
    for i in 0..50 {
        assert!(inos.insert(fs::metadata(a.path(&format!("ua{i}"))).unwrap().ino()));
        assert!(inos.insert(fs::metadata(a.path(&format!("ub{i}"))).unwrap().ino()));
    }
    for i in 0..50 {
        fs::remove_file(a.path(&format!("ua{i}"))).unwrap();
        fs::remove_file(a.path(&format!("ub{i}"))).unwrap();
    }
}

fn an_unlinked_file_stays_readable_where_it_is_open(a: &Mount, b: &Mount) {
    let mut f = fs::OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(true)
        .open(a.path("scratch"))
        .unwrap();
    f.write_all(&vec![5u8; 100_000]).unwrap();
    fs::remove_file(a.path("scratch")).unwrap();
    std::thread::sleep(AFTER_TTL);
    assert!(fs::metadata(b.path("scratch")).is_err());
    f.write_all(b"more").unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    let mut got = Vec::new();
    f.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), 100_004);
    let held = crate::support::stat_of(a, "unlinked_inodes");
    assert_eq!(
        held, 1,
        "the open-unlinked file is recorded for a's session"
    );
    drop(f);
    assert!(
        eventually(Duration::from_secs(10), || crate::support::stat_of(
            a,
            "unlinked_freed"
        ) >= 1),
        "the open-unlinked file was not freed after its last close"
    );
    let out = churnfs(&["stats", a.mnt.to_str().unwrap()]);
    assert!(out.status.success());
}

/// Each mount follows the volume's changes: with TTLs of a minute, what
/// another mount changed is seen long before they run out.
#[test]
fn the_watch_ends_staleness_long_before_the_ttl() {
    let vol = Volume::new(3);
    let long = "entry_ttl_ms=60000,attr_ttl_ms=60000,negative_ttl_ms=60000";
    let a = vol.mount(long);
    let b = vol.mount(long);
    fs::write(a.path("watched"), b"1").unwrap();
    fs::create_dir(a.path("d")).unwrap();
    // b's kernel caches the file's attributes, the name, and a missing
    // name, each for a minute.
    assert_eq!(
        fs::metadata(b.path("watched")).unwrap().mode() & 0o777,
        0o644
    );
    assert!(fs::metadata(b.path("d/later")).is_err());
    fs::set_permissions(a.path("watched"), fs::Permissions::from_mode(0o640)).unwrap();
    fs::write(a.path("d/later"), b"2").unwrap();
    fs::rename(a.path("watched"), a.path("moved")).unwrap();
    let limit = Duration::from_secs(10);
    assert!(
        eventually(limit, || fs::metadata(b.path("d/later")).is_ok()),
        "a name made on a stayed missing on b"
    );
    assert!(
        eventually(limit, || fs::metadata(b.path("watched")).is_err()),
        "a name renamed away on a stayed on b"
    );
    assert!(
        eventually(limit, || fs::metadata(b.path("moved"))
            .map(|m| m.mode() & 0o777 == 0o640)
            .unwrap_or(false)),
        "b kept the old mode"
    );
    assert!(
        stat_of(&b, "kernel_inval_entries") > 0,
        "no entry was invalidated"
    );
    drop(a);
    drop(b);
    vol.assert_fsck_clean();
}
