//! rename and renameat2: moves, overwrites, the refusals, NOREPLACE and
//! EXCHANGE, each checked again after a clean remount and by fsck.

use churnfs_engine::{EngineError, FileKind, Ino, RenameFlags};
use churnfs_tests::{assert_err, Fs};

const PLAIN: RenameFlags = RenameFlags {
    noreplace: false,
    exchange: false,
};
const NOREPLACE: RenameFlags = RenameFlags {
    noreplace: true,
    exchange: false,
};
const EXCHANGE: RenameFlags = RenameFlags {
    noreplace: false,
    exchange: true,
};

fn nlink(fs: &Fs, ino: Ino) -> u32 {
    fs.e().getattr(ino).unwrap().nlink
}

fn names(fs: &Fs, dir: Ino) -> Vec<Vec<u8>> {
    fs.names(dir).into_iter().map(|n| n.0).collect()
}

#[test]
fn plain_rename_of_files_and_directories() {
    let mut fs = Fs::new();
    let p1 = fs.mkdir(Ino::ROOT, b"p1");
    let p2 = fs.mkdir(Ino::ROOT, b"p2");
    let f = fs.mkfile(p1, b"f", b"contents");
    let d = fs.mkdir(p1, b"d");
    fs.mkfile(d, b"inside", b"deep");
    fs.e().fsync().unwrap();
    fs.age(p1, 1000);
    fs.age(p2, 1000);

    fs.e().rename(p1, b"f", p1, b"g", PLAIN).unwrap();
    assert_err!(fs.e().lookup(p1, b"f"), EngineError::NotFound);
    assert_eq!(fs.ino(p1, b"g").unwrap(), f);
    assert!(fs.e().getattr(p1).unwrap().mtime.sec > 1000);
    fs.e().rename(p1, b"g", p2, b"h", PLAIN).unwrap();
    assert!(fs.e().getattr(p2).unwrap().mtime.sec > 1000);
    fs.e().rename(p1, b"d", p2, b"d2", PLAIN).unwrap();

    for round in 0..2 {
        assert_eq!(names(&fs, p1), Vec::<Vec<u8>>::new(), "round {round}");
        assert_eq!(names(&fs, p2), vec![b"d2".to_vec(), b"h".to_vec()]);
        assert_eq!(fs.ino(p2, b"h").unwrap(), f);
        assert_eq!(fs.read_all(f), b"contents");
        assert_eq!(fs.ino(p2, b"d2").unwrap(), d);
        assert_eq!(fs.ino(d, b"..").unwrap(), p2, "`..` follows the move");
        assert_eq!(fs.read_all(fs.ino(d, b"inside").unwrap()), b"deep");
        assert_eq!(nlink(&fs, p1), 2);
        assert_eq!(nlink(&fs, p2), 3);
        assert_eq!(nlink(&fs, f), 1);
        fs.remount();
        fs.fsck();
    }
}

#[test]
fn rename_over_a_file_replaces_it() {
    let mut fs = Fs::new();
    let a = fs.mkfile(Ino::ROOT, b"a", b"new");
    let b = fs.mkfile(Ino::ROOT, b"b", b"old");
    let c = fs.mkfile(Ino::ROOT, b"c", b"open target");
    fs.e().fsync().unwrap();
    fs.e()
        .rename(Ino::ROOT, b"a", Ino::ROOT, b"b", PLAIN)
        .unwrap();
    assert_eq!(fs.ino(Ino::ROOT, b"b").unwrap(), a);
    assert_err!(fs.e().getattr(b), EngineError::NotFound);
    // The replaced file stays readable through an open handle.
    fs.e().open(c).unwrap();
    fs.e()
        .rename(Ino::ROOT, b"b", Ino::ROOT, b"c", PLAIN)
        .unwrap();
    assert_eq!(fs.e().getattr(c).unwrap().nlink, 0);
    assert_eq!(fs.e().read(c, 0, 100).unwrap(), b"open target");
    fs.e().release(c).unwrap();
    assert_err!(fs.e().getattr(c), EngineError::NotFound);
    assert_eq!(names(&fs, Ino::ROOT), vec![b"c".to_vec()]);
    assert_eq!(fs.e().getattr(Ino::ROOT).unwrap().nlink, 2);
    fs.remount();
    assert_eq!(fs.ino(Ino::ROOT, b"c").unwrap(), a);
    assert_eq!(fs.read_all(a), b"new");
    assert_eq!(names(&fs, Ino::ROOT), vec![b"c".to_vec()]);
    fs.fsck();
}

#[test]
fn rename_over_an_empty_directory_replaces_it() {
    let mut fs = Fs::new();
    let d1 = fs.mkdir(Ino::ROOT, b"d1");
    fs.mkfile(d1, b"kept", b"k");
    let d2 = fs.mkdir(Ino::ROOT, b"d2");
    let p = fs.mkdir(Ino::ROOT, b"p");
    let d3 = fs.mkdir(p, b"d3");
    assert_eq!(nlink(&fs, Ino::ROOT), 5);
    fs.e()
        .rename(Ino::ROOT, b"d1", Ino::ROOT, b"d2", PLAIN)
        .unwrap();
    assert_eq!(fs.ino(Ino::ROOT, b"d2").unwrap(), d1);
    assert_err!(fs.e().getattr(d2), EngineError::NotFound);
    assert_eq!(nlink(&fs, Ino::ROOT), 4);
    // Across directories: the target's parent loses the replaced directory,
    // the source's parent loses the moved one, the target's parent gains it.
    fs.e().rename(Ino::ROOT, b"d2", p, b"d3", PLAIN).unwrap();
    assert_err!(fs.e().getattr(d3), EngineError::NotFound);
    for _ in 0..2 {
        assert_eq!(nlink(&fs, Ino::ROOT), 3);
        assert_eq!(nlink(&fs, p), 3);
        assert_eq!(fs.ino(p, b"d3").unwrap(), d1);
        assert_eq!(fs.ino(d1, b"..").unwrap(), p);
        assert_eq!(names(&fs, d1), vec![b"kept".to_vec()]);
        assert_eq!(names(&fs, Ino::ROOT), vec![b"p".to_vec()]);
        fs.remount();
        fs.fsck();
    }
}

#[test]
fn refusals_leave_everything_in_place() {
    let mut fs = Fs::new();
    let a = fs.mkdir(Ino::ROOT, b"a");
    let b = fs.mkdir(a, b"b");
    let c = fs.mkdir(b, b"c");
    let full = fs.mkdir(Ino::ROOT, b"full");
    fs.mkfile(full, b"x", b"");
    let f = fs.mkfile(Ino::ROOT, b"f", b"file");
    let before = |fs: &Fs| {
        (
            names(fs, Ino::ROOT),
            names(fs, a),
            nlink(fs, Ino::ROOT),
            nlink(fs, a),
            nlink(fs, full),
        )
    };
    let start = before(&fs);
    assert_err!(
        fs.e().rename(Ino::ROOT, b"a", Ino::ROOT, b"full", PLAIN),
        EngineError::NotEmpty
    );
    assert_err!(
        fs.e().rename(Ino::ROOT, b"f", Ino::ROOT, b"a", PLAIN),
        EngineError::IsDir
    );
    assert_err!(
        fs.e().rename(Ino::ROOT, b"a", Ino::ROOT, b"f", PLAIN),
        EngineError::NotDir
    );
    assert_err!(
        fs.e().rename(Ino::ROOT, b"a", c, b"a", PLAIN),
        EngineError::Invalid(_)
    );
    assert_err!(
        fs.e().rename(Ino::ROOT, b"a", a, b"self", PLAIN),
        EngineError::Invalid(_)
    );
    assert_err!(
        fs.e().rename(a, b"b", c, b"b", PLAIN),
        EngineError::Invalid(_)
    );
    assert_err!(
        fs.e().rename(Ino::ROOT, b"missing", a, b"m", PLAIN),
        EngineError::NotFound
    );
    assert_err!(fs.e().rename(f, b"x", a, b"m", PLAIN), EngineError::NotDir);
    assert_err!(
        fs.e()
            .rename(Ino::ROOT, b"f", Ino::ROOT, b"full", NOREPLACE),
        EngineError::Exists
    );
    assert_err!(
        fs.e().rename(
            Ino::ROOT,
            b"f",
            Ino::ROOT,
            b"a",
            RenameFlags {
                noreplace: true,
                exchange: true
            }
        ),
        EngineError::Invalid(_)
    );
    assert_err!(
        fs.e().rename(Ino::ROOT, b"f", Ino::ROOT, b"nope", EXCHANGE),
        EngineError::NotFound
    );
    assert_err!(
        fs.e().rename(Ino::ROOT, b"a", c, b"x", EXCHANGE),
        EngineError::NotFound
    );
    fs.mkfile(c, b"leaf", b"");
    assert_err!(
        fs.e().rename(Ino::ROOT, b"a", c, b"leaf", EXCHANGE),
        EngineError::Invalid(_)
    );
    assert_eq!(before(&fs), start);
    assert_eq!(fs.ino(b, b"..").unwrap(), a);
    // NOREPLACE onto a free name moves.
    fs.e().rename(Ino::ROOT, b"f", a, b"g", NOREPLACE).unwrap();
    assert_eq!(fs.ino(a, b"g").unwrap(), f);
    // Renaming a name onto itself, or onto another name of the same inode, is a no-op.
    fs.e().rename(a, b"g", a, b"g", PLAIN).unwrap();
    fs.e().link(f, a, b"g2").unwrap();
    fs.e().forget(f, 1);
    fs.e().rename(a, b"g", a, b"g2", PLAIN).unwrap();
    assert_eq!(
        names(&fs, a),
        vec![b"b".to_vec(), b"g".to_vec(), b"g2".to_vec()]
    );
    assert_eq!(nlink(&fs, f), 2);
    fs.remount();
    assert_eq!(
        names(&fs, a),
        vec![b"b".to_vec(), b"g".to_vec(), b"g2".to_vec()]
    );
    fs.fsck();
}

#[test]
fn exchange_swaps_a_file_and_a_directory_across_directories() {
    let mut fs = Fs::new();
    let p1 = fs.mkdir(Ino::ROOT, b"p1");
    let p2 = fs.mkdir(Ino::ROOT, b"p2");
    let f = fs.mkfile(p1, b"one", b"file data");
    let d = fs.mkdir(p2, b"two");
    fs.mkfile(d, b"child", b"c");
    fs.e().fsync().unwrap();
    assert_eq!((nlink(&fs, p1), nlink(&fs, p2)), (2, 3));
    fs.e().rename(p1, b"one", p2, b"two", EXCHANGE).unwrap();
    for round in 0..2 {
        assert_eq!(fs.ino(p1, b"one").unwrap(), d, "round {round}");
        assert_eq!(fs.ino(p2, b"two").unwrap(), f);
        assert_eq!(fs.ino(d, b"..").unwrap(), p1);
        assert_eq!(nlink(&fs, p1), 3, "p1 gained a subdirectory");
        assert_eq!(nlink(&fs, p2), 2, "p2 lost its subdirectory");
        assert_eq!(nlink(&fs, d), 2);
        assert_eq!(nlink(&fs, f), 1);
        assert_eq!(fs.read_all(f), b"file data");
        assert_eq!(names(&fs, d), vec![b"child".to_vec()]);
        let kinds: Vec<_> = fs.names(p1).into_iter().map(|n| n.2).collect();
        assert_eq!(kinds, vec![FileKind::Directory]);
        fs.remount();
        fs.fsck();
    }
    // And back again, in the same directory this time.
    fs.e().rename(p1, b"one", p2, b"two", EXCHANGE).unwrap();
    fs.e().rename(p1, b"one", p1, b"one", EXCHANGE).unwrap();
    fs.mkfile(p1, b"other", b"o");
    fs.e().rename(p1, b"one", p1, b"other", EXCHANGE).unwrap();
    assert_eq!(fs.read_all(fs.ino(p1, b"one").unwrap()), b"o");
    assert_eq!(fs.read_all(fs.ino(p1, b"other").unwrap()), b"file data");
    assert_eq!(fs.ino(d, b"..").unwrap(), p2);
    fs.remount();
    assert_eq!((nlink(&fs, p1), nlink(&fs, p2)), (2, 3));
    fs.fsck();
}

/// Renames while more inodes are pinned (dirty) than the inode cache holds,
/// so every inode the rename loads is a candidate for eviction.
#[test]
fn rename_under_inode_cache_pressure() {
    let mut fs = Fs::new();
    let a = fs.mkdir(Ino::ROOT, b"a");
    let b = fs.mkdir(Ino::ROOT, b"b");
    let x = fs.mkfile(a, b"x", b"data");
    let sub = fs.mkdir(a, b"sub");
    fs.mkfile(b, b"victim", b"v");
    fs.remount();
    let pinned = fs.cfg.inodes_max + 8;
    for i in 0..pinned {
        fs.mkfile(Ino::ROOT, format!("pin{i}").as_bytes(), b"");
    }
    fs.e().rename(a, b"x", b, b"x", PLAIN).unwrap();
    assert_err!(
        fs.e().rename(a, b"sub", b, b"victim", PLAIN),
        EngineError::NotDir
    );
    fs.e().rename(a, b"sub", b, b"sub", PLAIN).unwrap();
    for round in 0..2 {
        assert_eq!(names(&fs, a), Vec::<Vec<u8>>::new(), "round {round}");
        assert_eq!(
            names(&fs, b),
            vec![b"sub".to_vec(), b"victim".to_vec(), b"x".to_vec()]
        );
        assert_eq!(nlink(&fs, a), 2);
        assert_eq!(nlink(&fs, b), 3);
        assert_eq!(fs.ino(sub, b"..").unwrap(), b);
        assert_eq!(fs.read_all(x), b"data");
        fs.remount();
        fs.fsck();
    }
}
