//! Zero-message opens: where the kernel checks permissions (`allow_other`),
//! the daemon answers the first OPEN, OPENDIR and CREATE with ENOSYS and the
//! kernel opens files and directories without asking from then on. Files then
//! live by the kernel's lookup count: data of a file unlinked while open stays
//! readable until the close, and the inode is freed after it. Truncating
//! opens, exclusive creates and directory listings after changes behave as
//! before. On a private mount the daemon checks the access mode at OPEN, so
//! opens keep their messages there.

use crate::support::{stat_of, Mount};
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::time::{Duration, Instant};

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn where_the_kernel_checks_permissions_opens_send_no_request() {
    let mut m = Mount::new("allow_other");
    fs::create_dir(m.path("d")).unwrap();
    fs::write(m.path("d/a"), b"first").unwrap();
    for _ in 0..50 {
        assert_eq!(fs::read(m.path("d/a")).unwrap(), b"first");
        assert_eq!(names(&m.path("d")), ["a"]);
    }
    for i in 0..20 {
        fs::write(m.path(&format!("d/f{i}")), b"x").unwrap();
    }
    // At most the one OPEN and OPENDIR that made the kernel stop, and the
    // one CREATE that made it create with MKNOD.
    assert!(stat_of(&m, "op_open") <= 1, "opens went on being sent");
    assert!(
        stat_of(&m, "op_opendir") <= 1,
        "opendirs went on being sent"
    );
    assert!(stat_of(&m, "op_create") <= 1, "creates went on being sent");
    assert_eq!(stat_of(&m, "op_release"), 0);
    assert!(stat_of(&m, "op_mknod") >= 21);

    // Listings follow changes although the kernel now caches them.
    fs::remove_file(m.path("d/a")).unwrap();
    fs::write(m.path("d/b"), b"").unwrap();
    let listed = names(&m.path("d"));
    assert!(listed.contains(&"b".to_string()) && !listed.contains(&"a".to_string()));
    assert_eq!(listed.len(), 21);

    // O_TRUNC empties an existing file; O_EXCL refuses one.
    fs::write(m.path("d/t"), b"0123456789").unwrap();
    drop(
        fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(m.path("d/t"))
            .unwrap(),
    );
    assert_eq!(fs::metadata(m.path("d/t")).unwrap().len(), 0);
    let e = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(m.path("d/t"))
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);

    // A file unlinked while open keeps its data until the close; then the
    // kernel's FORGET frees it.
    let freed_before = stat_of(&m, "unlinked_freed");
    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.path("d/held"))
        .unwrap();
    f.write_all(&vec![7u8; 200_000]).unwrap();
    fs::remove_file(m.path("d/held")).unwrap();
    assert!(
        stat_of(&m, "unlinked_inodes") >= 1,
        "open-unlinked inode not held"
    );
    f.seek(SeekFrom::Start(0)).unwrap();
    let mut back = Vec::new();
    f.read_to_end(&mut back).unwrap();
    assert_eq!(back.len(), 200_000);
    assert!(back.iter().all(|&b| b == 7));
    drop(f);
    let start = Instant::now();
    while stat_of(&m, "unlinked_inodes") > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the unlinked inode was not freed after its close"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(stat_of(&m, "unlinked_freed") > freed_before);
    m.unmount();
    m.assert_fsck_clean();
}

#[test]
fn where_the_daemon_checks_permissions_opens_are_asked() {
    let m = Mount::new("");
    fs::write(m.path("a"), b"x").unwrap();
    for _ in 0..5 {
        assert_eq!(fs::read(m.path("a")).unwrap(), b"x");
    }
    assert!(stat_of(&m, "op_open") >= 5);
    assert!(stat_of(&m, "op_release") >= 5);
    drop(m);
}
