//! Hard links: link counts through every name, data shared and kept while
//! any name remains, and the inode gone with the last one.

use churnfs_engine::{EngineError, Ino};
use churnfs_tests::{assert_err, keys_of, Fs};

#[test]
fn link_counts_and_shared_data() {
    let mut fs = Fs::new();
    let d = fs.mkdir(Ino::ROOT, b"d");
    let f = fs.mkfile(Ino::ROOT, b"f", b"shared");
    fs.age(f, 1000);
    let a = fs.e().link(f, Ino::ROOT, b"f2").unwrap();
    fs.e().forget(f, 1);
    assert_eq!(a.ino, f);
    assert_eq!(a.nlink, 2);
    assert!(a.ctime.sec > 1000, "link changes the inode's ctime");
    fs.e().link(f, d, b"f3").unwrap();
    fs.e().forget(f, 1);
    assert_err!(fs.e().link(f, d, b"f3"), EngineError::Exists);
    assert_err!(fs.e().link(f, f, b"x"), EngineError::NotDir);
    for round in 0..2 {
        assert_eq!(fs.e().getattr(f).unwrap().nlink, 3, "round {round}");
        for (dir, name) in [(Ino::ROOT, &b"f"[..]), (Ino::ROOT, b"f2"), (d, b"f3")] {
            assert_eq!(fs.ino(dir, name).unwrap(), f);
        }
        assert_eq!(fs.read_all(f), b"shared");
        // Directories count names, not inodes.
        assert_eq!(fs.e().getattr(d).unwrap().nlink, 2);
        assert_eq!(fs.names(Ino::ROOT).len(), 3);
        fs.remount();
        fs.fsck();
    }
    // A write through one name is seen through every other.
    let via = fs.ino(d, b"f3").unwrap();
    fs.e().open(via).unwrap();
    fs.e().write(via, 6, b" and changed").unwrap();
    fs.e().release(via).unwrap();
    assert_eq!(
        fs.read_all(fs.ino(Ino::ROOT, b"f2").unwrap()),
        b"shared and changed"
    );
}

#[test]
fn unlinking_one_name_keeps_the_data() {
    let mut fs = Fs::new();
    let d = fs.mkdir(Ino::ROOT, b"d");
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let f = fs.mkfile(Ino::ROOT, b"f", &big);
    fs.e().link(f, d, b"g").unwrap();
    fs.e().forget(f, 1);
    fs.e().fsync().unwrap();
    fs.e().unlink(Ino::ROOT, b"f").unwrap();
    assert_eq!(fs.e().getattr(f).unwrap().nlink, 1);
    assert_err!(fs.e().lookup(Ino::ROOT, b"f"), EngineError::NotFound);
    assert_eq!(fs.read_all(fs.ino(d, b"g").unwrap()), big);
    fs.remount();
    assert_eq!(fs.e().getattr(f).unwrap().nlink, 1);
    assert_eq!(fs.read_all(f), big);
    fs.fsck();
    // The last name takes the inode with it, data and all.
    fs.e().unlink(d, b"g").unwrap();
    assert_err!(fs.e().getattr(f), EngineError::NotFound);
    fs.e().fsync().unwrap();
    assert_eq!(keys_of(&fs.store, f), vec![]);
    fs.remount();
    assert_err!(fs.e().getattr(f), EngineError::NotFound);
    fs.fsck();
}

#[test]
fn links_of_a_file_created_in_the_same_commit() {
    let mut fs = Fs::new();
    let f = fs.mkfile(Ino::ROOT, b"a", b"x");
    for i in 0..20 {
        fs.e()
            .link(f, Ino::ROOT, format!("l{i}").as_bytes())
            .unwrap();
        fs.e().forget(f, 1);
    }
    for i in (0..20).step_by(2) {
        fs.e()
            .unlink(Ino::ROOT, format!("l{i}").as_bytes())
            .unwrap();
    }
    assert_eq!(fs.e().getattr(f).unwrap().nlink, 11);
    fs.remount();
    assert_eq!(fs.e().getattr(f).unwrap().nlink, 11);
    assert_eq!(fs.names(Ino::ROOT).len(), 11);
    fs.fsck();
}
